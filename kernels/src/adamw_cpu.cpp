#include "ztune/kernels/adamw.hpp"

#include <cmath>

namespace ztune::kernels::cpu {

void adamw_update(float* param, const float* grad, float* m, float* v, long n, const AdamWParams& h) {
  const float bc1 = 1.0f - std::pow(h.beta1, static_cast<float>(h.step));
  const float bc2 = 1.0f - std::pow(h.beta2, static_cast<float>(h.step));
  for (long i = 0; i < n; ++i) {
    const float g = grad[i];
    m[i] = h.beta1 * m[i] + (1.0f - h.beta1) * g;
    v[i] = h.beta2 * v[i] + (1.0f - h.beta2) * g * g;
    const float mhat = m[i] / bc1;
    const float vhat = v[i] / bc2;
    param[i] -= h.lr * (mhat / (std::sqrt(vhat) + h.eps) + h.weight_decay * param[i]);
  }
}

}  // namespace ztune::kernels::cpu
