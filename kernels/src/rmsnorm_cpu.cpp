// RMSNorm, CPU reference (Zhang & Sennrich 2019, "Root Mean Square Layer
// Normalization", eq. 4; Llama's norm): ȳ = x / RMS(x) · w, RMS(x) = sqrt(mean(x²) + eps).
// Unlike LayerNorm there is no re-centring and no bias. Forward writes, backward
// accumulates (conventions.hpp). Reductions over a row and over rows accumulate in
// double so the reference is more accurate than the fp32 kernels it checks.
#include <cmath>

#include "ztune/kernels/layernorm.hpp"

namespace ztune::kernels::cpu {

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int n, int c, float eps) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<long>(i) * c;
    double sum_sq = 0.0;
    for (int j = 0; j < c; ++j) sum_sq += static_cast<double>(x[j]) * x[j];
    const double s = 1.0 / std::sqrt(sum_sq / c + static_cast<double>(eps));
    float* o = out + static_cast<long>(i) * c;
    for (int j = 0; j < c; ++j) o[j] = static_cast<float>(x[j] * s * weight[j]);
    rstd[i] = static_cast<float>(s);
  }
}

// With x̂ = x·rstd and dx̂ = dout·w, ∂rstd/∂x_j = −rstd³·x_j/c, so
// dx_j = rstd·dx̂_j − rstd·x̂_j·mean_k(dx̂_k·x̂_k): LayerNorm's backward without the
// mean(dx̂) term that re-centring adds.
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int n, int c) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<long>(i) * c;
    const float* g = dout + static_cast<long>(i) * c;
    float* dx = dinp + static_cast<long>(i) * c;
    const double s = rstd[i];
    double mean_dxhat_xhat = 0.0;
    for (int j = 0; j < c; ++j) mean_dxhat_xhat += static_cast<double>(g[j]) * weight[j] * (x[j] * s);
    mean_dxhat_xhat /= c;
    for (int j = 0; j < c; ++j) {
      const double xhat = x[j] * s;
      dweight[j] += static_cast<float>(g[j] * xhat);
      dx[j] += static_cast<float>(s * (static_cast<double>(g[j]) * weight[j] - xhat * mean_dxhat_xhat));
    }
  }
}

}  // namespace ztune::kernels::cpu
