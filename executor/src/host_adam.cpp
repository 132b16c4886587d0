#include "ztune/executor/host_adam.hpp"

#include <cmath>

#include <Eigen/Core>

namespace ztune::executor {

void host_adamw(float* param, const float* grad, float* m, float* v, std::size_t n, const kernels::AdamWParams& h,
                kernels::ThreadPool& pool) {
  const float bc1 = 1.0f - std::pow(h.beta1, static_cast<float>(h.step));
  const float bc2 = 1.0f - std::pow(h.beta2, static_cast<float>(h.step));
  // Chunks of at least 64K elements: below that a thread costs more than it saves.
  const int parts = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(pool.size()), n / 65536 + 1));
  pool.run(parts, [&](int part, int total) {
    auto [b, e] = kernels::split_range(static_cast<std::int64_t>(n), part, total);
    const auto len = static_cast<Eigen::Index>(e - b);
    Eigen::Map<Eigen::ArrayXf> p(param + b, len), mm(m + b, len), vv(v + b, len);
    Eigen::Map<const Eigen::ArrayXf> g(grad + b, len);
    mm = h.beta1 * mm + (1.0f - h.beta1) * g;
    vv = h.beta2 * vv + (1.0f - h.beta2) * g * g;
    p -= h.lr * ((mm / bc1) / ((vv / bc2).sqrt() + h.eps) + h.weight_decay * p);
  });
}

}  // namespace ztune::executor
