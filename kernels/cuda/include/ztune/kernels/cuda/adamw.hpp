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
#include "ztune/kernels/multi_tensor.hpp"

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

/// Elements per row of adamw_chunked's chunk table (build_chunk_table's `chunk`).
inline constexpr long kAdamWChunkElems = 16384;

/// All tensors in one launch (issue 24 item 3): one block per row of the chunk
/// table (kernels/multi_tensor.hpp, rows of at most kAdamWChunkElems), reading
/// `tensors` and `chunks` from device memory, so the list has no length limit.
/// Same update and instantiations as adamw_multi_tensor. Compiled for sm_80 and
/// sm_90; never yet run on a GPU (tests/gpu/test_gpu_adamw.cpp checks it there).
template <typename G, typename P>
void adamw_chunked(const AdamWTensor<G, P>* tensors, const TensorChunk* chunks, int chunk_count,
                   const AdamWParams& h, float grad_scale, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
