#pragma once
// Device helpers shared by the kernels: fp32 loads/stores of the three storage
// types, warp and block reductions, CEIL_DIV, an NVTX range for launchers, and the
// explicit-instantiation lists. Arithmetic is fp32 for every storage type; only
// loads and stores convert (llm.c's "floatX" convention). Nothing here needs more
// than sm_70 (the fp16 path must build for V100 with a CUDA 12 toolkit); bf16
// conversions are emulated by cuda_bf16.h below sm_80.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cfloat>
#include <cstdint>

#include "ztune/kernels/cuda/check.hpp"

namespace ztune::kernels::cuda::detail {

template <typename A, typename B>
constexpr A ceil_div(A a, B b) {
  return (a + static_cast<A>(b) - 1) / static_cast<A>(b);
}

__device__ __forceinline__ float to_f32(float x) { return x; }
__device__ __forceinline__ float to_f32(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_f32(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T from_f32(float x);
template <>
__device__ __forceinline__ float from_f32<float>(float x) { return x; }
template <>
__device__ __forceinline__ __half from_f32<__half>(float x) { return __float2half_rn(x); }
template <>
__device__ __forceinline__ __nv_bfloat16 from_f32<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

__device__ __forceinline__ float warp_sum(float v) {
  for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}

/// Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread
/// gets the result. `scratch` holds 32 floats of shared memory.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  v = warp_sum(v);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -FLT_MAX;
  return warp_max(v);
}

/// An NVTX range named after the launcher (visible in Nsight Systems; a no-op without a tool).
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

/// Grid-stride 1-D launch size: enough blocks to fill the device, capped for huge n.
inline unsigned grid_for(long n, int threads) {
  const long blocks = ceil_div(n, static_cast<long>(threads));
  return static_cast<unsigned>(blocks < 65535L * 16 ? (blocks > 0 ? blocks : 1) : 65535L * 16);
}

}  // namespace ztune::kernels::cuda::detail

// Explicit instantiation for the three storage types.
#define ZT_FOR_EACH_DTYPE(MACRO) \
  MACRO(float)                   \
  MACRO(__half)                  \
  MACRO(__nv_bfloat16)
