// Softmax cross-entropy (see cross_entropy.hpp). Row statistics: one block of
// 512 threads per row (a 50k vocabulary is ~100 elements per thread).
#include "common.cuh"
#include "ztune/kernels/cuda/cross_entropy.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kRowThreads = 512;
constexpr int kThreads = 256;

template <typename T>
__device__ float row_max_of(const T* l, int v, float* scratch) {
  float m = -INFINITY;
  for (int j = static_cast<int>(threadIdx.x); j < v; j += static_cast<int>(blockDim.x)) m = fmaxf(m, to_f32(l[j]));
  return detail::block_max(m, scratch);
}

template <typename T>
__device__ float row_sumexp_of(const T* l, int v, float m, float* scratch) {
  float s = 0.0f;
  for (int j = static_cast<int>(threadIdx.x); j < v; j += static_cast<int>(blockDim.x)) s += expf(to_f32(l[j]) - m);
  return detail::block_sum(s, scratch);
}

template <typename T>
__global__ void row_max_kernel(float* row_max, const T* logits, int v) {
  __shared__ float scratch[32];
  const float m = row_max_of(logits + static_cast<long>(blockIdx.x) * v, v, scratch);
  if (threadIdx.x == 0) row_max[blockIdx.x] = m;
}

template <typename T>
__global__ void row_sumexp_kernel(float* row_sum, const T* logits, const float* row_max, int v) {
  __shared__ float scratch[32];
  const float s = row_sumexp_of(logits + static_cast<long>(blockIdx.x) * v, v, row_max[blockIdx.x], scratch);
  if (threadIdx.x == 0) row_sum[blockIdx.x] = s;
}

template <typename T>
__global__ void target_logit_kernel(float* tl, const T* logits, const std::int32_t* targets, int n, int v,
                                    int vocab_begin) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i >= n) return;
  const int j = targets[i] - vocab_begin;
  tl[i] = (j >= 0 && j < v) ? to_f32(logits[static_cast<long>(i) * v + j]) : 0.0f;
}

__global__ void loss_kernel(float* losses, const float* row_max, const float* row_sum, const float* tl, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) losses[i] = logf(row_sum[i]) + row_max[i] - tl[i];
}

template <typename T>
__global__ void backward_kernel(T* dlogits, const T* logits, const float* row_max, const float* row_sum,
                                const std::int32_t* targets, const float* dloss, int n, int v, int vocab_begin) {
  const long total = static_cast<long>(n) * v;
  for (long k = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; k < total; k += static_cast<long>(gridDim.x) * blockDim.x) {
    const long i = k / v;
    const int j = static_cast<int>(k % v);
    const float p = expf(to_f32(logits[k]) - row_max[i]) / row_sum[i];
    const float onehot = (j == targets[i] - vocab_begin) ? 1.0f : 0.0f;
    dlogits[k] = from_f32<T>(to_f32(dlogits[k]) + dloss[i] * (p - onehot));
  }
}

template <typename T>
__global__ void fused_kernel(float* losses, T* dlogits, const T* logits, const std::int32_t* targets, float dloss,
                             int v) {
  __shared__ float scratch[32];
  const long off = static_cast<long>(blockIdx.x) * v;
  const float m = row_max_of(logits + off, v, scratch);
  const float s = row_sumexp_of(logits + off, v, m, scratch);
  const int target = targets[blockIdx.x];
  // Every thread reads the target logit before any thread overwrites the row.
  const float target_logit = to_f32(logits[off + target]);
  __syncthreads();
  if (threadIdx.x == 0) losses[blockIdx.x] = logf(s) + m - target_logit;
  const float inv = 1.0f / s;
  for (int j = static_cast<int>(threadIdx.x); j < v; j += static_cast<int>(blockDim.x)) {
    const float p = expf(to_f32(logits[off + j]) - m) * inv;
    dlogits[off + j] = from_f32<T>(dloss * (p - (j == target ? 1.0f : 0.0f)));
  }
}

}  // namespace

template <typename T>
void ce_row_max(float* row_max, const T* logits, int n, int v, cudaStream_t stream) {
  detail::NvtxRange range("ce_row_max");
  ZT_REQUIRE(n >= 0 && v > 0, "ce_row_max: need n >= 0 and v > 0");
  if (n == 0) return;
  row_max_kernel<<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(row_max, logits, v);
  ZT_CHECK_LAUNCH("row_max_kernel");
}

template <typename T>
void ce_row_sumexp(float* row_sum, const T* logits, const float* row_max, int n, int v, cudaStream_t stream) {
  detail::NvtxRange range("ce_row_sumexp");
  ZT_REQUIRE(n >= 0 && v > 0, "ce_row_sumexp: need n >= 0 and v > 0");
  if (n == 0) return;
  row_sumexp_kernel<<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(row_sum, logits, row_max, v);
  ZT_CHECK_LAUNCH("row_sumexp_kernel");
}

template <typename T>
void ce_target_logit(float* target_logit, const T* logits, const std::int32_t* targets, int n, int v, int vocab_begin,
                     cudaStream_t stream) {
  detail::NvtxRange range("ce_target_logit");
  ZT_REQUIRE(n >= 0 && v > 0, "ce_target_logit: need n >= 0 and v > 0");
  if (n == 0) return;
  target_logit_kernel<<<detail::ceil_div(static_cast<unsigned>(n), kThreads), kThreads, 0, stream>>>(
      target_logit, logits, targets, n, v, vocab_begin);
  ZT_CHECK_LAUNCH("target_logit_kernel");
}

void ce_loss(float* losses, const float* row_max, const float* row_sum, const float* target_logit, int n,
             cudaStream_t stream) {
  detail::NvtxRange range("ce_loss");
  ZT_REQUIRE(n >= 0, "ce_loss: need n >= 0");
  if (n == 0) return;
  loss_kernel<<<detail::ceil_div(static_cast<unsigned>(n), kThreads), kThreads, 0, stream>>>(losses, row_max, row_sum,
                                                                                              target_logit, n);
  ZT_CHECK_LAUNCH("loss_kernel");
}

template <typename T>
void ce_backward(T* dlogits, const T* logits, const float* row_max, const float* row_sum, const std::int32_t* targets,
                 const float* dloss, int n, int v, int vocab_begin, cudaStream_t stream) {
  detail::NvtxRange range("ce_backward");
  ZT_REQUIRE(n >= 0 && v > 0, "ce_backward: need n >= 0 and v > 0");
  ZT_REQUIRE(dlogits != logits, "ce_backward: dlogits accumulates and must not alias logits");
  const long total = static_cast<long>(n) * v;
  if (total == 0) return;
  backward_kernel<<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(dlogits, logits, row_max, row_sum,
                                                                              targets, dloss, n, v, vocab_begin);
  ZT_CHECK_LAUNCH("ce backward_kernel");
}

template <typename T>
void ce_fused_forward_backward(float* losses, T* dlogits, const T* logits, const std::int32_t* targets, float dloss,
                               int n, int v, cudaStream_t stream) {
  detail::NvtxRange range("ce_fused_forward_backward");
  ZT_REQUIRE(n >= 0 && v > 0, "ce_fused_forward_backward: need n >= 0 and v > 0");
  if (n == 0) return;
  fused_kernel<<<static_cast<unsigned>(n), kRowThreads, 0, stream>>>(losses, dlogits, logits, targets, dloss, v);
  ZT_CHECK_LAUNCH("ce fused_kernel");
}

#define ZT_INSTANTIATE(T)                                                                                      \
  template void ce_row_max<T>(float*, const T*, int, int, cudaStream_t);                                       \
  template void ce_row_sumexp<T>(float*, const T*, const float*, int, int, cudaStream_t);                      \
  template void ce_target_logit<T>(float*, const T*, const std::int32_t*, int, int, int, cudaStream_t);        \
  template void ce_backward<T>(T*, const T*, const float*, const float*, const std::int32_t*, const float*, int, \
                               int, int, cudaStream_t);                                                        \
  template void ce_fused_forward_backward<T>(float*, T*, const T*, const std::int32_t*, float, int, int, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
