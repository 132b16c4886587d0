#include "ztune/kernels/gelu.hpp"

#include <cmath>

namespace ztune::kernels::cpu {
namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654f;  // √(2/π)
constexpr float kCubic = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* inp, long n) {
  for (long i = 0; i < n; ++i) {
    const float x = inp[i];
    out[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kCubic * x * x * x)));
  }
}

void gelu_backward(float* dinp, const float* inp, const float* dout, long n) {
  for (long i = 0; i < n; ++i) {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    const float t = std::tanh(u);
    const float sech2 = 1.0f - t * t;
    const float grad = 0.5f * (1.0f + t) + 0.5f * x * sech2 * kSqrt2OverPi * (1.0f + 3.0f * kCubic * x * x);
    dinp[i] += grad * dout[i];
  }
}

}  // namespace ztune::kernels::cpu
