#include "ztune/kernels/layernorm.hpp"

#include <cmath>

namespace ztune::kernels::cpu {

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                       const float* bias, int n, int c, float eps) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<long>(i) * c;
    float m = 0.0f;
    for (int j = 0; j < c; ++j) m += x[j];
    m /= static_cast<float>(c);
    float v = 0.0f;
    for (int j = 0; j < c; ++j) v += (x[j] - m) * (x[j] - m);
    v /= static_cast<float>(c);
    const float s = 1.0f / std::sqrt(v + eps);
    float* o = out + static_cast<long>(i) * c;
    for (int j = 0; j < c; ++j) o[j] = (x[j] - m) * s * weight[j] + bias[j];
    mean[i] = m;
    rstd[i] = s;
  }
}

// dx̂ = dout·w; dx = rstd·(dx̂ − mean(dx̂) − x̂·mean(dx̂·x̂)).
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int n, int c) {
  for (int i = 0; i < n; ++i) {
    const float* x = inp + static_cast<long>(i) * c;
    const float* g = dout + static_cast<long>(i) * c;
    float* dx = dinp + static_cast<long>(i) * c;
    const float m = mean[i], s = rstd[i];
    float dnorm_mean = 0.0f, dnorm_norm_mean = 0.0f;
    for (int j = 0; j < c; ++j) {
      const float xhat = (x[j] - m) * s;
      const float dnorm = weight[j] * g[j];
      dnorm_mean += dnorm;
      dnorm_norm_mean += dnorm * xhat;
    }
    dnorm_mean /= static_cast<float>(c);
    dnorm_norm_mean /= static_cast<float>(c);
    for (int j = 0; j < c; ++j) {
      const float xhat = (x[j] - m) * s;
      const float dnorm = weight[j] * g[j];
      dbias[j] += g[j];
      dweight[j] += xhat * g[j];
      dx[j] += (dnorm - dnorm_mean - xhat * dnorm_norm_mean) * s;
    }
  }
}

}  // namespace ztune::kernels::cpu
