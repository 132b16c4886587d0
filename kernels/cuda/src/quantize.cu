// Symmetric group quantize-dequantize (see quantize.hpp): one thread block per
// group finds max|x|, then every thread rounds its elements to the group's grid.
#include "common.cuh"
#include "ztune/kernels/cuda/quantize.hpp"

namespace ztune::kernels::cuda {
namespace {
constexpr int kThreads = 256;

template <typename T>
__global__ void quantize_dequantize_kernel(T* x, long n, float levels, long group) {
  __shared__ float scratch[32];
  const long begin = static_cast<long>(blockIdx.x) * group;
  const long end = min(n, begin + group);
  float m = 0.0f;
  for (long i = begin + threadIdx.x; i < end; i += blockDim.x) m = fmaxf(m, fabsf(detail::to_f32(x[i])));
  const float max_abs = detail::block_max(m, scratch);
  if (max_abs == 0.0f) return;
  const float scale = max_abs / levels;
  for (long i = begin + threadIdx.x; i < end; i += blockDim.x)
    x[i] = detail::from_f32<T>(scale * rintf(detail::to_f32(x[i]) / scale));
}

}  // namespace

template <typename T>
void quantize_dequantize(T* x, long n, int bits, long group, cudaStream_t stream) {
  detail::NvtxRange range("quantize_dequantize");
  ZT_REQUIRE(bits >= 2 && bits <= 16, "quantize_dequantize: bits must be in [2, 16]");
  ZT_REQUIRE(group > 0, "quantize_dequantize: group must be positive");
  if (n <= 0) return;
  ZT_REQUIRE(x != nullptr, "quantize_dequantize: null pointer");
  const long groups = detail::ceil_div(n, group);
  ZT_REQUIRE(groups < (1L << 31), "quantize_dequantize: too many groups for one launch");
  const float levels = static_cast<float>((1 << (bits - 1)) - 1);
  quantize_dequantize_kernel<T><<<static_cast<unsigned>(groups), kThreads, 0, stream>>>(x, n, levels, group);
  ZT_CHECK_LAUNCH("quantize_dequantize_kernel");
}

#define ZT_INSTANTIATE(T) template void quantize_dequantize<T>(T*, long, int, long, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
