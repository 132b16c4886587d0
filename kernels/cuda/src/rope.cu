// Rotary position embedding (Su et al. 2021, RoFormer eq. 34; "rotate half" layout
// as HF Llama) on the device. Same layout and semantics as the CPU reference
// kernels/src/rope_cpu.cpp: RoPE works in place in both directions (backward turns
// by −angle, the rotation's transpose). Storage T ∈ {float, __half, __nv_bfloat16},
// arithmetic fp32.
//
// The RoPE angle has one definition shared with rope_cpu.cpp (and HF Llama's fp32
// inv_freq and t·inv_freq): inv_freq_i = fp32(θ^(−2i/rot_dims)), evaluated on the host in
// double exactly as the CPU reference does and passed to the kernel as a table, so
// both sides hold the same bits; angle = fp32(float(p)·inv_freq_i), one rounded
// multiply (__fmul_rn: never contracted); cos/sin by sincosf (≤ 2 ulp, full range
// reduction for large angles). What remains between GPU and CPU is a few fp32 ulps.
#include <cmath>
#include <string>

#include "common.cuh"
#include "ztune/kernels/cuda/rope.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;
constexpr int kMaxHalfHeadDim = 256;  // hd ≤ 512: the table below is a 1 KiB kernel argument

struct InverseFrequencies {
  float v[kMaxHalfHeadDim];
};

InverseFrequencies inverse_frequencies(int rot_dims, float theta) {
  InverseFrequencies f{};
  for (int i = 0; i < rot_dims / 2; ++i)
    f.v[i] = static_cast<float>(std::pow(static_cast<double>(theta), -2.0 * i / rot_dims));
  return f;
}

// One thread per rotated pair (i, i + rot_dims/2) of one head (hd apart) of one
// row; sign = +1 turns by +angle (forward), −1 by −angle (backward).
template <typename T>
__global__ void rope_kernel(T* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd, int half,
                            InverseFrequencies f, float sign) {
  const long total = static_cast<long>(n) * heads * half;
  for (long idx = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(idx % half);
    const long head_index = idx / half;
    const int h = static_cast<int>(head_index % heads);
    const long r = head_index / heads;
    const float angle = __fmul_rn(static_cast<float>(positions[r]), f.v[i]);
    float s, c;
    sincosf(angle, &s, &c);
    s *= sign;
    T* p = x + r * row_stride + static_cast<long>(h) * hd;
    const float a = to_f32(p[i]), b = to_f32(p[i + half]);
    p[i] = from_f32<T>(a * c - b * s);
    p[i + half] = from_f32<T>(b * c + a * s);
  }
}

template <typename T>
void launch_rope(const char* who, T* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd,
                 float theta, int rot_dims, float sign, cudaStream_t stream) {
  if (rot_dims == 0) rot_dims = hd;
  ZT_REQUIRE(n >= 0 && heads >= 0 && hd > 0 && rot_dims > 0 && rot_dims <= hd && rot_dims % 2 == 0,
             std::string(who) + ": need n, heads >= 0 and even rotary dims in (0, hd]");
  ZT_REQUIRE(rot_dims / 2 <= kMaxHalfHeadDim, std::string(who) + ": rotary dims above 512 are not supported");
  ZT_REQUIRE(static_cast<long>(heads) * hd <= row_stride, std::string(who) + ": heads·hd exceed the row stride");
  const long total = static_cast<long>(n) * heads * (rot_dims / 2);
  if (total == 0) return;
  rope_kernel<T><<<detail::grid_for(total, kThreads), kThreads, 0, stream>>>(
      x, positions, n, row_stride, heads, hd, rot_dims / 2, inverse_frequencies(rot_dims, theta), sign);
  ZT_CHECK_LAUNCH("rope_kernel");
}

}  // namespace

template <typename T>
void rope_forward(T* x, const std::int32_t* positions, int n, int row_stride, int heads, int hd, float theta,
                  int rot_dims, cudaStream_t stream) {
  detail::NvtxRange range("rope_forward");
  launch_rope("rope_forward", x, positions, n, row_stride, heads, hd, theta, rot_dims, 1.0f, stream);
}

template <typename T>
void rope_backward(T* dx, const std::int32_t* positions, int n, int row_stride, int heads, int hd, float theta,
                   int rot_dims, cudaStream_t stream) {
  detail::NvtxRange range("rope_backward");
  launch_rope("rope_backward", dx, positions, n, row_stride, heads, hd, theta, rot_dims, -1.0f, stream);
}

#define ZT_INSTANTIATE(T)                                                                                         \
  template void rope_forward<T>(T*, const std::int32_t*, int, int, int, int, float, int, cudaStream_t);          \
  template void rope_backward<T>(T*, const std::int32_t*, int, int, int, int, float, int, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
