// Memory-bound kernels (see elementwise.hpp): grid-stride loops, fp32 arithmetic.
#include "common.cuh"
#include "ztune/kernels/cuda/elementwise.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::ceil_div;
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;

template <typename T>
__global__ void add_kernel(T* out, const T* a, const T* b, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x)
    out[i] = from_f32<T>(to_f32(a[i]) + to_f32(b[i]));
}

template <typename T>
__global__ void scale_kernel(T* x, float s, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x)
    x[i] = from_f32<T>(to_f32(x[i]) * s);
}

template <typename T>
__global__ void bias_residual_kernel(T* out, const T* x, const T* bias, const T* residual, long n, int c) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    float v = to_f32(x[i]);
    if (bias != nullptr) v += to_f32(bias[i % c]);
    if (residual != nullptr) v += to_f32(residual[i]);
    out[i] = from_f32<T>(v);
  }
}

// Column sums: block (32, 8) covers 32 columns; each of the 8 rows of threads sums a
// strided subset of the rows, then shared memory adds the 8 partials. One block per
// 32 columns (grid.x) and per row chunk (grid.y), atomics only across grid.y chunks.
template <typename T>
__global__ void bias_backward_kernel(float* dbias, const T* dout, int n, int c, int rows_per_chunk) {
  __shared__ float partial[8][33];
  const int col = static_cast<int>(blockIdx.x) * 32 + static_cast<int>(threadIdx.x);
  const int row0 = static_cast<int>(blockIdx.y) * rows_per_chunk;
  const int row1 = min(n, row0 + rows_per_chunk);
  float s = 0.0f;
  if (col < c)
    for (int r = row0 + static_cast<int>(threadIdx.y); r < row1; r += 8) s += to_f32(dout[static_cast<long>(r) * c + col]);
  partial[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || col >= c) return;
  float total = 0.0f;
  for (int k = 0; k < 8; ++k) total += partial[k][threadIdx.x];
  if (gridDim.y == 1) {
    dbias[col] += total;
  } else {
    atomicAdd(dbias + col, total);
  }
}

template <typename T>
__global__ void sum_squares_kernel(double* result, const T* x, long n) {
  __shared__ float scratch[32];
  float s = 0.0f;  // per-thread partial of at most a few thousand terms: fp32 is enough here
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x) {
    const float v = to_f32(x[i]);
    s += v * v;
  }
  s = detail::block_sum(s, scratch);
  if (threadIdx.x == 0) atomicAdd(result, static_cast<double>(s));  // double atomics: sm_60+
}

template <typename From, typename To>
__global__ void cast_kernel(To* out, const From* in, long n) {
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < n; i += static_cast<long>(gridDim.x) * blockDim.x)
    out[i] = from_f32<To>(to_f32(in[i]));
}

}  // namespace

template <typename T>
void add(T* out, const T* a, const T* b, long n, cudaStream_t stream) {
  detail::NvtxRange range("add");
  ZT_REQUIRE(n >= 0, "add: n must be >= 0");
  if (n == 0) return;
  add_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(out, a, b, n);
  ZT_CHECK_LAUNCH("add_kernel");
}

template <typename T>
void accumulate(T* dst, const T* src, long n, cudaStream_t stream) {
  detail::NvtxRange range("accumulate");
  ZT_REQUIRE(n >= 0, "accumulate: n must be >= 0");
  if (n == 0) return;
  add_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(dst, dst, src, n);
  ZT_CHECK_LAUNCH("add_kernel (accumulate)");
}

template <typename T>
void scale(T* x, float s, long n, cudaStream_t stream) {
  detail::NvtxRange range("scale");
  ZT_REQUIRE(n >= 0, "scale: n must be >= 0");
  if (n == 0) return;
  scale_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(x, s, n);
  ZT_CHECK_LAUNCH("scale_kernel");
}

template <typename T>
void add_bias(T* x, const T* bias, int n, int c, cudaStream_t stream) {
  bias_residual_forward<T>(x, x, bias, nullptr, n, c, stream);
}

template <typename T>
void bias_residual_forward(T* out, const T* x, const T* bias, const T* residual, int n, int c, cudaStream_t stream) {
  detail::NvtxRange range("bias_residual_forward");
  ZT_REQUIRE(n >= 0 && c > 0, "bias_residual_forward: need n >= 0 and c > 0");
  const long total = static_cast<long>(n) * c;
  if (total == 0) return;
  bias_residual_kernel<<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(out, x, bias, residual, total, c);
  ZT_CHECK_LAUNCH("bias_residual_kernel");
}

template <typename T>
void bias_backward(float* dbias, const T* dout, int n, int c, cudaStream_t stream) {
  detail::NvtxRange range("bias_backward");
  ZT_REQUIRE(n >= 0 && c > 0, "bias_backward: need n >= 0 and c > 0");
  if (n == 0) return;
  const int col_blocks = ceil_div(c, 32);
  // Enough row chunks to give the device ~4 blocks per SM-ish without tiny chunks.
  const int chunks = max(1, min(ceil_div(n, 256), ceil_div(1024, col_blocks)));
  const int rows_per_chunk = ceil_div(n, chunks);
  const dim3 grid(static_cast<unsigned>(col_blocks), static_cast<unsigned>(ceil_div(n, rows_per_chunk)));
  bias_backward_kernel<<<grid, dim3(32, 8), 0, stream>>>(dbias, dout, n, c, rows_per_chunk);
  ZT_CHECK_LAUNCH("bias_backward_kernel");
}

template <typename T>
void sum_squares(double* result, const T* x, long n, cudaStream_t stream) {
  detail::NvtxRange range("sum_squares");
  ZT_REQUIRE(n >= 0, "sum_squares: n must be >= 0");
  if (n == 0) return;
  const unsigned blocks = min(detail::grid_for(n, kThreads), 2048u);
  sum_squares_kernel<<<blocks, kThreads, 0, stream>>>(result, x, n);
  ZT_CHECK_LAUNCH("sum_squares_kernel");
}

template <typename From, typename To>
void cast(To* out, const From* in, long n, cudaStream_t stream) {
  detail::NvtxRange range("cast");
  ZT_REQUIRE(n >= 0, "cast: n must be >= 0");
  if (n == 0) return;
  cast_kernel<<<detail::grid_for(n, kThreads), kThreads, 0, stream>>>(out, in, n);
  ZT_CHECK_LAUNCH("cast_kernel");
}

#define ZT_INSTANTIATE(T)                                                                              \
  template void add<T>(T*, const T*, const T*, long, cudaStream_t);                                    \
  template void accumulate<T>(T*, const T*, long, cudaStream_t);                                       \
  template void scale<T>(T*, float, long, cudaStream_t);                                               \
  template void add_bias<T>(T*, const T*, int, int, cudaStream_t);                                     \
  template void bias_residual_forward<T>(T*, const T*, const T*, const T*, int, int, cudaStream_t);    \
  template void bias_backward<T>(float*, const T*, int, int, cudaStream_t);                            \
  template void sum_squares<T>(double*, const T*, long, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE
template void cast<float, float>(float*, const float*, long, cudaStream_t);
template void cast<float, __half>(__half*, const float*, long, cudaStream_t);
template void cast<float, __nv_bfloat16>(__nv_bfloat16*, const float*, long, cudaStream_t);
template void cast<__half, float>(float*, const __half*, long, cudaStream_t);
template void cast<__nv_bfloat16, float>(float*, const __nv_bfloat16*, long, cudaStream_t);

}  // namespace ztune::kernels::cuda
