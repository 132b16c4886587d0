// Overflow check and unscale (see loss_scale.hpp). isfinite on the fp32 value:
// the 16-bit types' inf/NaN convert to fp32 inf/NaN.
#include "common.cuh"
#include "ztune/kernels/cuda/loss_scale.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;

template <typename T, bool kScale>
__global__ void unscale_check_kernel(T* x, float inv_scale, int* found_inf, long n) {
  bool bad = false;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    const float v = to_f32(x[i]);
    bad = bad || !isfinite(v);
    if (kScale) x[i] = from_f32<T>(v * inv_scale);
  }
  if (__syncthreads_or(bad ? 1 : 0) && threadIdx.x == 0) *found_inf = 1;  // a benign race: every writer writes 1
}

}  // namespace

template <typename T>
void check_finite(int* found_inf, const T* x, long n, cudaStream_t stream) {
  detail::NvtxRange range("check_finite");
  ZT_REQUIRE(n >= 0 && found_inf != nullptr, "check_finite: need n >= 0 and a flag");
  if (n == 0) return;
  // check_finite never writes x: the const_cast only shares the kernel body.
  unscale_check_kernel<T, false><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(const_cast<T*>(x), 1.0f,
                                                                                         found_inf, n);
  ZT_CHECK_LAUNCH("unscale_check_kernel<check>");
}

template <typename T>
void unscale_check_finite(T* x, float inv_scale, int* found_inf, long n, cudaStream_t stream) {
  detail::NvtxRange range("unscale_check_finite");
  ZT_REQUIRE(n >= 0 && found_inf != nullptr, "unscale_check_finite: need n >= 0 and a flag");
  if (n == 0) return;
  unscale_check_kernel<T, true><<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(x, inv_scale, found_inf, n);
  ZT_CHECK_LAUNCH("unscale_check_kernel<unscale>");
}

#define ZT_INSTANTIATE(T)                                                  \
  template void check_finite<T>(int*, const T*, long, cudaStream_t);       \
  template void unscale_check_finite<T>(T*, float, int*, long, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
