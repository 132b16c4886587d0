// The unfused attention's memory-bound pieces (see attention.hpp): head
// (un)permutation and the causal softmax forward/backward, one warp per row.
#include "common.cuh"
#include "ztune/kernels/cuda/attention.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::ceil_div;
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;

template <typename T>
__global__ void to_heads_kernel(T* dst, const T* src, long src_stride, int b, int t, int nh, int hd) {
  const long total = static_cast<long>(b) * nh * t * hd;
  for (long k = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; k < total; k += static_cast<long>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(k % hd);
    const long r = k / hd;  // (bi·nh + h)·t + i
    const int i = static_cast<int>(r % t);
    const long bh = r / t;
    const int h = static_cast<int>(bh % nh), bi = static_cast<int>(bh / nh);
    dst[k] = src[(static_cast<long>(bi) * t + i) * src_stride + static_cast<long>(h) * hd + d];
  }
}

template <typename T>
__global__ void from_heads_kernel(T* dst, long dst_stride, const T* src, int b, int t, int nh, int hd,
                                  bool accumulate) {
  const long total = static_cast<long>(b) * nh * t * hd;
  for (long k = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; k < total; k += static_cast<long>(gridDim.x) * blockDim.x) {
    const int d = static_cast<int>(k % hd);
    const long r = k / hd;
    const int i = static_cast<int>(r % t);
    const long bh = r / t;
    const int h = static_cast<int>(bh % nh), bi = static_cast<int>(bh / nh);
    T* p = dst + (static_cast<long>(bi) * t + i) * dst_stride + static_cast<long>(h) * hd + d;
    *p = accumulate ? from_f32<T>(to_f32(*p) + to_f32(src[k])) : src[k];
  }
}

// Row r = (bh·t + i) of att: softmax over j ≤ i, zeros after.
template <typename T>
__global__ void causal_softmax_forward_kernel(T* att, long rows, int t) {
  const long r = blockIdx.x * static_cast<long>(kWarps) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (r >= rows) return;
  const int i = static_cast<int>(r % t);
  T* row = att + r * t;
  float m = -INFINITY;
  for (int j = lane; j <= i; j += 32) m = fmaxf(m, to_f32(row[j]));
  m = detail::warp_max(m);
  float s = 0.0f;
  for (int j = lane; j <= i; j += 32) s += expf(to_f32(row[j]) - m);
  s = detail::warp_sum(s);
  const float inv = 1.0f / s;
  for (int j = lane; j < t; j += 32) row[j] = from_f32<T>(j <= i ? expf(to_f32(row[j]) - m) * inv : 0.0f);
}

template <typename T>
__global__ void causal_softmax_backward_kernel(T* datt, const T* att, long rows, int t) {
  const long r = blockIdx.x * static_cast<long>(kWarps) + threadIdx.x / 32;
  const int lane = static_cast<int>(threadIdx.x % 32);
  if (r >= rows) return;
  const int i = static_cast<int>(r % t);
  T* d = datt + r * t;
  const T* p = att + r * t;
  float dot = 0.0f;
  for (int j = lane; j <= i; j += 32) dot += to_f32(p[j]) * to_f32(d[j]);
  dot = detail::warp_sum(dot);
  for (int j = lane; j < t; j += 32) d[j] = from_f32<T>(j <= i ? to_f32(p[j]) * (to_f32(d[j]) - dot) : 0.0f);
}

}  // namespace

template <typename T>
void to_heads(T* dst, const T* src, long src_stride, int b, int t, int nh, int hd, cudaStream_t stream) {
  detail::NvtxRange range("to_heads");
  ZT_REQUIRE(b > 0 && t > 0 && nh > 0 && hd > 0 && src_stride >= static_cast<long>(nh) * hd,
             "to_heads: bad shape");
  const long total = static_cast<long>(b) * nh * t * hd;
  to_heads_kernel<<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(dst, src, src_stride, b, t, nh, hd);
  ZT_CHECK_LAUNCH("to_heads_kernel");
}

template <typename T>
void from_heads(T* dst, long dst_stride, const T* src, int b, int t, int nh, int hd, bool accumulate,
                cudaStream_t stream) {
  detail::NvtxRange range("from_heads");
  ZT_REQUIRE(b > 0 && t > 0 && nh > 0 && hd > 0 && dst_stride >= static_cast<long>(nh) * hd,
             "from_heads: bad shape");
  const long total = static_cast<long>(b) * nh * t * hd;
  from_heads_kernel<<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(dst, dst_stride, src, b, t, nh, hd,
                                                                                accumulate);
  ZT_CHECK_LAUNCH("from_heads_kernel");
}

template <typename T>
void causal_softmax_forward(T* att, int bh, int t, cudaStream_t stream) {
  detail::NvtxRange range("causal_softmax_forward");
  ZT_REQUIRE(bh > 0 && t > 0, "causal_softmax_forward: bad shape");
  const long rows = static_cast<long>(bh) * t;
  causal_softmax_forward_kernel<<<static_cast<unsigned>(ceil_div(rows, kWarps)), kThreads, 0, stream>>>(att, rows, t);
  ZT_CHECK_LAUNCH("causal_softmax_forward_kernel");
}

template <typename T>
void causal_softmax_backward(T* datt, const T* att, int bh, int t, cudaStream_t stream) {
  detail::NvtxRange range("causal_softmax_backward");
  ZT_REQUIRE(bh > 0 && t > 0, "causal_softmax_backward: bad shape");
  const long rows = static_cast<long>(bh) * t;
  causal_softmax_backward_kernel<<<static_cast<unsigned>(ceil_div(rows, kWarps)), kThreads, 0, stream>>>(datt, att,
                                                                                                         rows, t);
  ZT_CHECK_LAUNCH("causal_softmax_backward_kernel");
}

#define ZT_INSTANTIATE(T)                                                                         \
  template void to_heads<T>(T*, const T*, long, int, int, int, int, cudaStream_t);                \
  template void from_heads<T>(T*, long, const T*, int, int, int, int, bool, cudaStream_t);        \
  template void causal_softmax_forward<T>(T*, int, int, cudaStream_t);                            \
  template void causal_softmax_backward<T>(T*, const T*, int, int, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
