// GELU (see gelu.hpp), grid-stride, fp32 arithmetic.
#include "common.cuh"
#include "ztune/kernels/cuda/gelu.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;
constexpr float kGeluScale = 0.7978845608028654f;  // √(2/π)

__device__ __forceinline__ float gelu(float x) {
  const float cube = 0.044715f * x * x * x;
  return 0.5f * x * (1.0f + tanhf(kGeluScale * (x + cube)));
}
// d/dx ½x(1 + tanh u), u = √(2/π)(x + 0.044715x³).
__device__ __forceinline__ float gelu_grad(float x) {
  const float u = kGeluScale * (x + 0.044715f * x * x * x);
  const float th = tanhf(u);
  const float sech2 = 1.0f - th * th;
  return 0.5f * (1.0f + th) + 0.5f * x * sech2 * kGeluScale * (1.0f + 3.0f * 0.044715f * x * x);
}

template <typename T>
__global__ void gelu_forward_kernel(T* out, const T* inp, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x)
    out[i] = from_f32<T>(gelu(to_f32(inp[i])));
}

template <typename T>
__global__ void gelu_backward_kernel(T* dinp, const T* inp, const T* dout, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x)
    dinp[i] = from_f32<T>(to_f32(dinp[i]) + gelu_grad(to_f32(inp[i])) * to_f32(dout[i]));
}

}  // namespace

template <typename T>
void gelu_forward(T* out, const T* inp, long n, cudaStream_t stream) {
  detail::NvtxRange range("gelu_forward");
  ZT_REQUIRE(n >= 0, "gelu_forward: n must be >= 0");
  if (n == 0) return;
  gelu_forward_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(out, inp, n);
  ZT_CHECK_LAUNCH("gelu_forward_kernel");
}

template <typename T>
void gelu_backward(T* dinp, const T* inp, const T* dout, long n, cudaStream_t stream) {
  detail::NvtxRange range("gelu_backward");
  ZT_REQUIRE(n >= 0, "gelu_backward: n must be >= 0");
  ZT_REQUIRE(dinp != dout, "gelu_backward: dinp accumulates and must not alias dout");
  if (n == 0) return;
  gelu_backward_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(dinp, inp, dout, n);
  ZT_CHECK_LAUNCH("gelu_backward_kernel");
}

#define ZT_INSTANTIATE(T)                                                     \
  template void gelu_forward<T>(T*, const T*, long, cudaStream_t);            \
  template void gelu_backward<T>(T*, const T*, const T*, long, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
