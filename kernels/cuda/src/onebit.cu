// 1-bit compression with error feedback (see onebit.hpp). One thread block per
// chunk; each thread owns whole bytes (8 consecutive elements), so both passes
// touch the same elements from the same thread and the packed byte needs no
// atomics.
#include "common.cuh"
#include "ztune/kernels/cuda/onebit.hpp"

namespace ztune::kernels::cuda {
namespace {
constexpr int kThreads = 256;

__global__ void onebit_compress_kernel(std::uint8_t* bits, float* scales, float* error, const float* x, long n,
                                       long chunk) {
  __shared__ float scratch[32];
  const long begin = static_cast<long>(blockIdx.x) * chunk;
  const long len = min(chunk, n - begin);
  const long bytes = (len + 7) / 8;
  // Pass 1: c = x + error, kept in error until the scale is known (as the CPU does).
  double sq = 0;
  for (long byte = threadIdx.x; byte < bytes; byte += blockDim.x) {
    const long end = min(len, 8 * byte + 8);
    for (long i = begin + 8 * byte; i < begin + end; ++i) {
      const float c = x[i] + error[i];
      error[i] = c;
      sq += static_cast<double>(c) * c;
    }
  }
  const float total = detail::block_sum(static_cast<float>(sq), scratch);
  const float scale = sqrtf(total / static_cast<float>(len));
  if (threadIdx.x == 0) scales[blockIdx.x] = scale;
  // Pass 2: signs into bits, error = c − scale·sign(c).
  for (long byte = threadIdx.x; byte < bytes; byte += blockDim.x) {
    const long end = min(len, 8 * byte + 8);
    unsigned packed = 0;
    for (long i = 8 * byte; i < end; ++i) {
      const float c = error[begin + i];
      const bool positive = c >= 0.0f;
      if (positive) packed |= 1u << (i % 8);
      error[begin + i] = positive ? c - scale : c + scale;
    }
    bits[begin / 8 + byte] = static_cast<std::uint8_t>(packed);
  }
}

__global__ void onebit_decompress_add_kernel(float* out, const std::uint8_t* bits, const float* scales, float weight,
                                             long n, long chunk) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const float v = weight * scales[i / chunk];
    out[i] += ((bits[i / 8] >> (i % 8)) & 1u) != 0 ? v : -v;
  }
}

}  // namespace

void onebit_compress(std::uint8_t* bits, float* scales, float* error, const float* x, long n, long chunk,
                     cudaStream_t stream) {
  detail::NvtxRange range("onebit_compress");
  ZT_REQUIRE(n >= 0, "onebit_compress: n must be non-negative");
  ZT_REQUIRE(chunk > 0 && chunk % 8 == 0, "onebit_compress: chunk must be a positive multiple of 8");
  if (n == 0) return;
  ZT_REQUIRE(bits != nullptr && scales != nullptr && error != nullptr && x != nullptr,
             "onebit_compress: null pointer");
  const long chunks = detail::ceil_div(n, chunk);
  ZT_REQUIRE(chunks < (1L << 31), "onebit_compress: too many chunks for one launch");
  onebit_compress_kernel<<<static_cast<unsigned>(chunks), kThreads, 0, stream>>>(bits, scales, error, x, n, chunk);
  ZT_CHECK_LAUNCH("onebit_compress_kernel");
}

void onebit_decompress_add(float* out, const std::uint8_t* bits, const float* scales, float weight, long n,
                           long chunk, cudaStream_t stream) {
  detail::NvtxRange range("onebit_decompress_add");
  ZT_REQUIRE(n >= 0, "onebit_decompress_add: n must be non-negative");
  ZT_REQUIRE(chunk > 0 && chunk % 8 == 0, "onebit_decompress_add: chunk must be a positive multiple of 8");
  if (n == 0) return;
  ZT_REQUIRE(out != nullptr && bits != nullptr && scales != nullptr, "onebit_decompress_add: null pointer");
  onebit_decompress_add_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(out, bits, scales, weight, n,
                                                                                      chunk);
  ZT_CHECK_LAUNCH("onebit_decompress_add_kernel");
}

}  // namespace ztune::kernels::cuda
