// Grouped-query head repetition (Ainslie et al. 2023; HF repeat_kv) on the device.
// Same layout and semantics as the CPU reference kernels/src/kv_repeat_cpu.cpp:
// forward writes, backward accumulates (+=). Storage T ∈ {float, __half,
// __nv_bfloat16}, arithmetic fp32.
#include "common.cuh"
#include "ztune/kernels/cuda/kv_repeat.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;

// One thread per output element: out [n, 3·nh·hd] = [Q | K repeated | V repeated].
template <typename T>
__global__ void kv_repeat_forward_kernel(T* out, const T* inp, int n, int nh, int kv, int hd) {
  const long q_cols = static_cast<long>(nh) * hd, out_row = 3 * q_cols, in_row = static_cast<long>(nh + 2 * kv) * hd;
  const long total = static_cast<long>(n) * out_row;
  const int group = nh / kv;
  for (long idx = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long>(gridDim.x) * blockDim.x) {
    const long r = idx / out_row, col = idx % out_row;
    const long part = col / q_cols, within = col % q_cols;  // part 0 Q, 1 K, 2 V
    long src = within;
    if (part > 0) {
      const long h = within / hd, d = within % hd;
      src = q_cols + (part - 1) * kv * hd + (h / group) * hd + d;
    }
    out[idx] = inp[r * in_row + src];
  }
}

// One thread per input element: a K/V element sums the nh/kv query heads' gradients
// that read it (no atomics), then adds once to dinp.
template <typename T>
__global__ void kv_repeat_backward_kernel(T* dinp, const T* dout, int n, int nh, int kv, int hd) {
  const long q_cols = static_cast<long>(nh) * hd, kv_cols = static_cast<long>(kv) * hd;
  const long out_row = 3 * q_cols, in_row = q_cols + 2 * kv_cols;
  const long total = static_cast<long>(n) * in_row;
  const int group = nh / kv;
  for (long idx = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long>(gridDim.x) * blockDim.x) {
    const long r = idx / in_row, col = idx % in_row;
    const T* g = dout + r * out_row;
    float sum = 0.0f;
    if (col < q_cols) {
      sum = to_f32(g[col]);
    } else {
      const long part = (col - q_cols) / kv_cols, within = (col - q_cols) % kv_cols;  // part 0 K, 1 V
      const long j = within / hd, d = within % hd;
      const T* src = g + (part + 1) * q_cols + j * group * hd + d;
      for (int k = 0; k < group; ++k) sum += to_f32(src[static_cast<long>(k) * hd]);
    }
    dinp[idx] = from_f32<T>(to_f32(dinp[idx]) + sum);
  }
}

}  // namespace

template <typename T>
void kv_repeat_forward(T* out, const T* inp, int n, int nh, int kv, int hd, cudaStream_t stream) {
  detail::NvtxRange range("kv_repeat_forward");
  ZT_REQUIRE(n >= 0 && nh > 0 && kv > 0 && hd > 0 && nh % kv == 0,
             "kv_repeat_forward: need n >= 0, positive nh, kv, hd and kv dividing nh");
  const long total = static_cast<long>(n) * 3 * nh * hd;
  if (total == 0) return;
  kv_repeat_forward_kernel<T><<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(out, inp, n, nh, kv, hd);
  ZT_CHECK_LAUNCH("kv_repeat_forward_kernel");
}

template <typename T>
void kv_repeat_backward(T* dinp, const T* dout, int n, int nh, int kv, int hd, cudaStream_t stream) {
  detail::NvtxRange range("kv_repeat_backward");
  ZT_REQUIRE(n >= 0 && nh > 0 && kv > 0 && hd > 0 && nh % kv == 0,
             "kv_repeat_backward: need n >= 0, positive nh, kv, hd and kv dividing nh");
  ZT_REQUIRE(static_cast<const void*>(dinp) != static_cast<const void*>(dout),
             "kv_repeat_backward: dinp accumulates and must not alias dout");
  const long total = static_cast<long>(n) * (nh + 2 * kv) * hd;
  if (total == 0) return;
  kv_repeat_backward_kernel<T><<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(dinp, dout, n, nh, kv, hd);
  ZT_CHECK_LAUNCH("kv_repeat_backward_kernel");
}

#define ZT_INSTANTIATE(T)                                                                \
  template void kv_repeat_forward<T>(T*, const T*, int, int, int, int, cudaStream_t);   \
  template void kv_repeat_backward<T>(T*, const T*, int, int, int, int, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
