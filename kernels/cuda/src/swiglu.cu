// SwiGLU (see swiglu.hpp), grid-stride, fp32 arithmetic.
#include "common.cuh"
#include "ztune/kernels/cuda/swiglu.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }


template <typename T>
__global__ void swiglu_forward_kernel(T* out, const T* inp, int n, int f) {
  const long total = static_cast<long>(n) * f;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < total; i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = i / f, col = i % f;
    const float a = to_f32(inp[row * 2 * f + col]), b = to_f32(inp[row * 2 * f + f + col]);
    out[i] = from_f32<T>(a * sigmoid(a) * b);
  }
}

// silu'(a) = σ(a)(1 + a(1 − σ(a))).
template <typename T>
__global__ void swiglu_backward_kernel(T* dinp, const T* inp, const T* dout, int n, int f) {
  const long total = static_cast<long>(n) * f;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < total; i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = i / f, col = i % f;
    const long ia = row * 2 * f + col, ib = ia + f;
    const float a = to_f32(inp[ia]), b = to_f32(inp[ib]), g = to_f32(dout[i]);
    const float s = sigmoid(a);
    dinp[ia] = from_f32<T>(to_f32(dinp[ia]) + g * b * s * (1.0f + a * (1.0f - s)));
    dinp[ib] = from_f32<T>(to_f32(dinp[ib]) + g * a * s);
  }
}

}  // namespace

template <typename T>
void swiglu_forward(T* out, const T* inp, int n, int f, cudaStream_t stream) {
  detail::NvtxRange range("swiglu_forward");
  ZT_REQUIRE(n >= 0 && f > 0, "swiglu_forward: need n >= 0 and f > 0");
  const long total = static_cast<long>(n) * f;
  if (total == 0) return;
  swiglu_forward_kernel<<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(out, inp, n, f);
  ZT_CHECK_LAUNCH("swiglu_forward_kernel");
}

template <typename T>
void swiglu_backward(T* dinp, const T* inp, const T* dout, int n, int f, cudaStream_t stream) {
  detail::NvtxRange range("swiglu_backward");
  ZT_REQUIRE(n >= 0 && f > 0, "swiglu_backward: need n >= 0 and f > 0");
  const long total = static_cast<long>(n) * f;
  if (total == 0) return;
  swiglu_backward_kernel<<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(dinp, inp, dout, n, f);
  ZT_CHECK_LAUNCH("swiglu_backward_kernel");
}

#define ZT_INSTANTIATE(T)                                                           \
  template void swiglu_forward<T>(T*, const T*, int, int, cudaStream_t);            \
  template void swiglu_backward<T>(T*, const T*, const T*, int, int, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
