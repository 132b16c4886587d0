// Embedding lookup (see embedding.hpp): one thread per output element.
#include "common.cuh"
#include "ztune/kernels/cuda/embedding.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;

template <typename T>
__global__ void embedding_forward_kernel(T* out, const std::int32_t* ids, const T* table, int n, int c,
                                         int row_begin, int rows) {
  const long total = static_cast<long>(n) * c;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = i / c;
    const int col = static_cast<int>(i % c);
    const int local = ids[row] - row_begin;
    out[i] = (local >= 0 && local < rows) ? table[static_cast<long>(local) * c + col] : from_f32<T>(0.0f);
  }
}

template <typename T>
__global__ void embedding_backward_kernel(float* dtable, const T* dout, const std::int32_t* ids, int n, int c,
                                          int row_begin, int rows) {
  const long total = static_cast<long>(n) * c;
  for (long i = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<long>(gridDim.x) * blockDim.x) {
    const long row = i / c;
    const int col = static_cast<int>(i % c);
    const int local = ids[row] - row_begin;
    if (local >= 0 && local < rows) atomicAdd(dtable + static_cast<long>(local) * c + col, to_f32(dout[i]));
  }
}

}  // namespace

template <typename T>
void embedding_forward(T* out, const std::int32_t* ids, const T* table, int n, int c, int row_begin, int rows,
                       cudaStream_t stream) {
  detail::NvtxRange range("embedding_forward");
  ZT_REQUIRE(n >= 0 && c > 0 && rows >= 0, "embedding_forward: need n >= 0, c > 0, rows >= 0");
  const long total = static_cast<long>(n) * c;
  if (total == 0) return;
  embedding_forward_kernel<<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(out, ids, table, n, c,
                                                                                         row_begin, rows);
  ZT_CHECK_LAUNCH("embedding_forward_kernel");
}

template <typename T>
void embedding_backward(float* dtable, const T* dout, const std::int32_t* ids, int n, int c, int row_begin, int rows,
                        cudaStream_t stream) {
  detail::NvtxRange range("embedding_backward");
  ZT_REQUIRE(n >= 0 && c > 0 && rows >= 0, "embedding_backward: need n >= 0, c > 0, rows >= 0");
  const long total = static_cast<long>(n) * c;
  if (total == 0) return;
  embedding_backward_kernel<<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(dtable, dout, ids, n, c,
                                                                                          row_begin, rows);
  ZT_CHECK_LAUNCH("embedding_backward_kernel");
}

#define ZT_INSTANTIATE(T)                                                                                  \
  template void embedding_forward<T>(T*, const std::int32_t*, const T*, int, int, int, int, cudaStream_t); \
  template void embedding_backward<T>(float*, const T*, const std::int32_t*, int, int, int, int, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
