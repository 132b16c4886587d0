#pragma once
// Fused multi-tensor AdamW on fp32 master weights (apex's multi_tensor_adam; the
// update is kernels/adamw.hpp's, term for term). One launch updates up to
// kAdamWTensorsPerLaunch tensors (more are split over launches): master, m, v in
// fp32; the gradient in fp32 or the 16-bit compute type, multiplied by
// grad_scale first (1/loss_scale: unscaling folded into the update, as apex does);
// and the 16-bit copy of the parameters the forward pass reads is written from
// the new master (param may be null: fp32 training reads the master itself).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include "ztune/kernels/adamw.hpp"

namespace ztune::kernels::cuda {

inline constexpr int kAdamWTensorsPerLaunch = 24;

template <typename G, typename P>
struct AdamWTensor {
  float* master = nullptr;  // fp32 master weights [n]
  float* m = nullptr;       // first moment [n]
  float* v = nullptr;       // second moment [n]
  const G* grad = nullptr;  // gradient [n]
  P* param = nullptr;       // compute-precision copy [n], or null
  long n = 0;
};

/// Instantiated for (G, P) ∈ {(float, float), (float, __nv_bfloat16), (float, __half),
/// (__nv_bfloat16, __nv_bfloat16), (__half, __half)}. `tensors` is a host array.
template <typename G, typename P>
void adamw_multi_tensor(const AdamWTensor<G, P>* tensors, int count, const AdamWParams& h, float grad_scale,
                        cudaStream_t stream);

}  // namespace ztune::kernels::cuda
