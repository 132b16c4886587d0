#pragma once
// AdamW (Loshchilov & Hutter 2019, Algorithm 2; Kingma & Ba 2015 bias correction),
// the reference update every optimizer path (device, partitioned, host offload)
// must reproduce:
//   m ← β1·m + (1−β1)·g;  v ← β2·v + (1−β2)·g²
//   p ← p − lr·( m/(1−β1^t) / (√(v/(1−β2^t)) + ε) + λ·p )
// with step t >= 1. Updates n elements in place.
namespace ztune::kernels {

struct AdamWParams {
  float lr = 1e-3f;
  float beta1 = 0.9f;
  float beta2 = 0.95f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
  int step = 1;  // t, 1-based
};

namespace cpu {
void adamw_update(float* param, const float* grad, float* m, float* v, long n, const AdamWParams& h);
}  // namespace cpu

}  // namespace ztune::kernels
