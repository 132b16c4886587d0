#pragma once
// Dynamic loss scaling for fp16 training (Micikevicius et al. 2018, §3.2), with
// DeepSpeed's rules and defaults (deepspeed/runtime/fp16/loss_scaler.py,
// DynamicLossScaler.update_scale; ds_config "fp16": initial_scale_power 16,
// loss_scale_window 1000, hysteresis 2, min_loss_scale 1):
//  - an overflowing step is skipped; the scale is divided by `factor` only once
//    `hysteresis` overflows have been seen (each overflow before that spends one);
//  - after `window` steps since the last overflow the scale is multiplied by
//    `factor` (and the hysteresis budget restored);
//  - an overflow at the minimum scale is an error (DeepSpeed's
//    raise_error_at_min_scale): training cannot continue meaningfully.
// bf16 and fp32 training use no scaling (scale 1, never skip), as DeepSpeed.
//
//   DynamicLossScaler s;                     // scale 65536
//   loss·s.scale() → backward → overflow = any non-finite gradient
//   if (s.update(overflow)) optimizer step with gradients × 1/scale_used
#include <cstdint>
#include <stdexcept>

namespace ztune::executor {

struct LossScaleConfig {
  int initial_scale_power = 16;  // initial scale 2^16
  int window = 1000;             // clean steps before growing
  int hysteresis = 2;            // overflows tolerated before shrinking (DeepSpeed's delayed_shift)
  bool consecutive_hysteresis = false;  // restore the budget after every clean step
  float min_scale = 1.0f;
  float factor = 2.0f;
};

class LossScaleAtMinimum : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(const LossScaleConfig& config = {});

  [[nodiscard]] float scale() const { return scale_; }
  /// Records this step's overflow flag and updates the scale for the next step.
  /// Returns true when the step's update must be applied, false when it is skipped.
  /// Throws LossScaleAtMinimum on an overflow at the minimum scale.
  bool update(bool overflow);

  [[nodiscard]] long steps() const { return iter_; }
  [[nodiscard]] long skipped_steps() const { return skipped_; }
  [[nodiscard]] int hysteresis_left() const { return hysteresis_left_; }

  /// What a checkpoint keeps so that a resumed fp16 run goes on as the
  /// uninterrupted one (its scale, when it next grows, and the skipped steps
  /// Adam's bias correction discounts).
  struct State {
    float scale = 0;
    std::int64_t iter = 0, last_overflow_iter = -1, skipped = 0;
    std::int32_t hysteresis_left = 0;
  };
  [[nodiscard]] State state() const;
  /// Throws std::invalid_argument for a state this configuration cannot reach.
  void restore(const State& s);

 private:
  LossScaleConfig config_;
  float scale_;
  long iter_ = 0;
  long last_overflow_iter_ = -1;
  long skipped_ = 0;
  int hysteresis_left_;
};

}  // namespace ztune::executor
