#pragma once
// Fused multi-tensor AdamW (apex's multi_tensor_adam; the update is
// kernels/adamw.hpp's, term for term) on fp32 master weights and moments, or
// (adamw_chunked) on 16-bit ones. One launch updates up to
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

/// One tensor's states: master weights M and moments S are fp32 unless the
/// plan keeps them in 16 bits (Plan::master_dtype, moments_dtype: NeMo's
/// distributed_fused_adam dtype, Megatron-Core's precision-aware optimizer);
/// they are read widened and written rounded to nearest even, the arithmetic
/// fp32 either way.
template <typename G, typename P, typename M = float, typename S = float>
struct AdamWTensor {
  M* master = nullptr;      // master weights [n]
  S* m = nullptr;           // first moment [n]
  S* v = nullptr;           // second moment [n]
  const G* grad = nullptr;  // gradient [n]
  P* param = nullptr;       // compute-precision copy [n] (from the master as stored), or null
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
/// Same update as adamw_multi_tensor. Instantiated for its (G, P) with fp32
/// states, and for 16-bit states: P = H ∈ {__nv_bfloat16, __half} with G, M
/// and S each float or H (M and S not both float), and fp32 training's 16-bit
/// moments (G = P = M = float, S = H); vocab/executor_support.hpp
/// adam_states_native states the same set. Compiled for sm_80 and sm_90;
/// never yet run on a GPU (tests/gpu/test_gpu_adamw.cpp checks it there).
template <typename G, typename P, typename M = float, typename S = float>
void adamw_chunked(const AdamWTensor<G, P, M, S>* tensors, const TensorChunk* chunks, int chunk_count,
                   const AdamWParams& h, float grad_scale, cudaStream_t stream);

}  // namespace ztune::kernels::cuda
