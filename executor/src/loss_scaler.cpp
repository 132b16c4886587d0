#include "ztune/executor/loss_scaler.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace ztune::executor {

DynamicLossScaler::DynamicLossScaler(const LossScaleConfig& config)
    : config_(config),
      scale_(std::ldexp(1.0f, config.initial_scale_power)),
      hysteresis_left_(config.hysteresis) {
  if (config.window < 1 || config.hysteresis < 1 || !(config.min_scale > 0) || !(config.factor > 1))
    throw std::invalid_argument("DynamicLossScaler: need window >= 1, hysteresis >= 1, min_scale > 0, factor > 1");
}

// DeepSpeed's DynamicLossScaler.update_scale, branch for branch.
bool DynamicLossScaler::update(bool overflow) {
  if (overflow) {
    if (config_.hysteresis == 1 || hysteresis_left_ == 1) {
      if (scale_ == config_.min_scale)
        throw LossScaleAtMinimum("loss scale overflow at the minimum scale " + std::to_string(config_.min_scale) +
                                 " (step " + std::to_string(iter_) + "): the gradients are not finite at any scale");
      scale_ = std::max(scale_ / config_.factor, config_.min_scale);
    } else {
      --hysteresis_left_;
    }
    last_overflow_iter_ = iter_;
    ++skipped_;
  } else {
    if (config_.consecutive_hysteresis) hysteresis_left_ = config_.hysteresis;
    if ((iter_ - last_overflow_iter_) % config_.window == 0) {
      if (!config_.consecutive_hysteresis) hysteresis_left_ = config_.hysteresis;
      scale_ *= config_.factor;
    }
  }
  ++iter_;
  return !overflow;
}

DynamicLossScaler::State DynamicLossScaler::state() const {
  return {scale_, iter_, last_overflow_iter_, skipped_, hysteresis_left_};
}

void DynamicLossScaler::restore(const State& s) {
  if (!(s.scale >= config_.min_scale) || !std::isfinite(s.scale) || s.iter < 0 || s.skipped < 0 ||
      s.skipped > s.iter || s.last_overflow_iter < -1 || s.last_overflow_iter >= s.iter || s.hysteresis_left < 1 ||
      s.hysteresis_left > config_.hysteresis)
    throw std::invalid_argument("loss scaler state out of range (scale " + std::to_string(s.scale) + ", step " +
                                std::to_string(s.iter) + ", skipped " + std::to_string(s.skipped) + ")");
  scale_ = s.scale;
  iter_ = static_cast<long>(s.iter);
  last_overflow_iter_ = static_cast<long>(s.last_overflow_iter);
  skipped_ = static_cast<long>(s.skipped);
  hysteresis_left_ = s.hysteresis_left;
}

}  // namespace ztune::executor
