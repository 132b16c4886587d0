// SwiGLU, CPU reference (Shazeer 2020, "GLU Variants Improve Transformer", eq. 6
// with β = 1, i.e. Swish₁ = SiLU; Llama's MLP): out = silu(gate)·up with
// silu(a) = a·σ(a). inp [n, 2f] = [gate | up]; out [n, f]. Forward writes,
// backward accumulates (conventions.hpp).
#include <cmath>

#include "ztune/kernels/swiglu.hpp"

namespace ztune::kernels::cpu {
namespace {
double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }
}  // namespace

void swiglu_forward(float* out, const float* inp, int n, int f) {
  for (int i = 0; i < n; ++i) {
    const float* gate = inp + static_cast<long>(i) * 2 * f;
    const float* up = gate + f;
    float* o = out + static_cast<long>(i) * f;
    for (int j = 0; j < f; ++j) {
      const double a = gate[j];
      o[j] = static_cast<float>(a * sigmoid(a) * up[j]);
    }
  }
}

// silu'(a) = σ(a) + a·σ(a)(1 − σ(a)) = σ(a)(1 + a(1 − σ(a))).
void swiglu_backward(float* dinp, const float* inp, const float* dout, int n, int f) {
  for (int i = 0; i < n; ++i) {
    const float* gate = inp + static_cast<long>(i) * 2 * f;
    const float* up = gate + f;
    const float* g = dout + static_cast<long>(i) * f;
    float* dgate = dinp + static_cast<long>(i) * 2 * f;
    float* dup = dgate + f;
    for (int j = 0; j < f; ++j) {
      const double a = gate[j], s = sigmoid(a);
      dgate[j] += static_cast<float>(static_cast<double>(g[j]) * up[j] * s * (1.0 + a * (1.0 - s)));
      dup[j] += static_cast<float>(g[j] * a * s);
    }
  }
}

}  // namespace ztune::kernels::cpu
