// Fused causal attention in the FlashAttention manner (see attention.hpp).
// One thread owns one query row (forward, dQ) or one key row (dK/dV); a block of
// kRows threads shares tiles of kTile rows of the other operand in shared memory,
// where every thread reads the same element at once (a broadcast, no bank
// conflicts). A thread's own row lives in shared memory padded to HD + 1 floats so
// the 32 threads of a warp hit 32 different banks. The online softmax (Milakov &
// Gimelshein 2018) keeps a running max m and sum l per row: when a score exceeds m,
// l and the output accumulator are rescaled by exp(m_old − m_new).
#include "common.cuh"
#include "ztune/kernels/cuda/attention.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::ceil_div;
using detail::from_f32;
using detail::to_f32;
constexpr int kRows = 32;  // threads per block = rows owned per block
constexpr int kTile = 32;  // rows of the other operand per shared-memory tile

// Row r of head h of the Q (part 0), K (1) or V (2) block of qkv for batch bi.
template <typename T>
__device__ __forceinline__ const T* qkv_row(const T* qkv, int bi, int r, int part, int t, int c, int h, int hd) {
  return qkv + (static_cast<long>(bi) * t + r) * 3L * c + static_cast<long>(part) * c + static_cast<long>(h) * hd;
}

// Loads rows [r0, r0 + rows) of head h of a [B,T,row_stride]-strided tensor into
// dst[rows][ld] (zeros past t), cooperatively over the block.
template <typename T, int HD>
__device__ void load_rows(float* dst, int ld, const T* base, long row_stride, int r0, int rows, int t) {
  for (int idx = static_cast<int>(threadIdx.x); idx < rows * HD; idx += static_cast<int>(blockDim.x)) {
    const int r = idx / HD, d = idx % HD;
    dst[r * ld + d] = (r0 + r < t) ? to_f32(base[static_cast<long>(r0 + r) * row_stride + d]) : 0.0f;
  }
}

template <typename T, int HD>
__global__ void __launch_bounds__(kRows) flash_forward_kernel(T* out, float* lse, const T* qkv, int t, int c, int nh,
                                                              float scale) {
  extern __shared__ float smem[];
  float* q_own = smem;                     // [kRows][HD + 1]
  float* k_tile = q_own + kRows * (HD + 1);  // [kTile][HD]
  float* v_tile = k_tile + kTile * HD;       // [kTile][HD]
  const int bh = static_cast<int>(blockIdx.y), bi = bh / nh, h = bh % nh;
  const int q0 = static_cast<int>(blockIdx.x) * kRows, tid = static_cast<int>(threadIdx.x), i = q0 + tid;
  const long stride = 3L * c;
  load_rows<T, HD>(q_own, HD + 1, qkv_row(qkv, bi, 0, 0, t, c, h, HD), stride, q0, kRows, t);

  float o[HD];
#pragma unroll
  for (int d = 0; d < HD; ++d) o[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  const float* q = q_own + tid * (HD + 1);
  const int last_key = min(t, q0 + kRows) - 1;  // the block's last row sees keys up to itself
  for (int k0 = 0; k0 <= last_key; k0 += kTile) {
    __syncthreads();  // the previous tile is consumed (and q_own is loaded, first time round)
    load_rows<T, HD>(k_tile, HD, qkv_row(qkv, bi, 0, 1, t, c, h, HD), stride, k0, kTile, t);
    load_rows<T, HD>(v_tile, HD, qkv_row(qkv, bi, 0, 2, t, c, h, HD), stride, k0, kTile, t);
    __syncthreads();
    if (i >= t) continue;
    const int keys = min(kTile, i - k0 + 1);  // causal: keys j ≤ i only
    for (int jj = 0; jj < keys; ++jj) {
      const float* k = k_tile + jj * HD;
      float s = 0.0f;
#pragma unroll
      for (int d = 0; d < HD; ++d) s += q[d] * k[d];
      s *= scale;
      if (s > m) {
        const float corr = expf(m - s);  // exp(−inf) = 0 on the first key
        l *= corr;
#pragma unroll
        for (int d = 0; d < HD; ++d) o[d] *= corr;
        m = s;
      }
      const float p = expf(s - m);
      l += p;
      const float* v = v_tile + jj * HD;
#pragma unroll
      for (int d = 0; d < HD; ++d) o[d] += p * v[d];
    }
  }
  if (i >= t) return;
  const float inv = 1.0f / l;
  T* o_row = out + (static_cast<long>(bi) * t + i) * c + static_cast<long>(h) * HD;
#pragma unroll
  for (int d = 0; d < HD; ++d) o_row[d] = from_f32<T>(o[d] * inv);
  lse[static_cast<long>(bh) * t + i] = m + logf(l);
}

// D_i = Σ_d dO_id·O_id per (batch·head, row) (FA-2, Alg. 2 line 4).
template <typename T>
__global__ void flash_delta_kernel(float* delta, const T* dout, const T* out, int b, int t, int c, int nh, int hd) {
  const long rows = static_cast<long>(b) * nh * t;
  for (long idx = blockIdx.x * static_cast<long>(blockDim.x) + threadIdx.x; idx < rows;
       idx += static_cast<long>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(idx % t);
    const int bh = static_cast<int>(idx / t), bi = bh / nh, h = bh % nh;
    const long off = (static_cast<long>(bi) * t + i) * c + static_cast<long>(h) * hd;
    float s = 0.0f;
    for (int d = 0; d < hd; ++d) s += to_f32(dout[off + d]) * to_f32(out[off + d]);
    delta[idx] = s;
  }
}

// dK_j = scale·Σ_{i≥j} dS_ij·Q_i, dV_j = Σ_{i≥j} P_ij·dO_i with P_ij = exp(s_ij − lse_i),
// dS_ij = P_ij·(dO_i·V_j − D_i). One thread per key row j.
template <typename T, int HD>
__global__ void __launch_bounds__(kRows) flash_dkdv_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                           const float* delta, int t, int c, int nh, float scale) {
  extern __shared__ float smem[];
  float* k_own = smem;                        // [kRows][HD + 1]
  float* v_own = k_own + kRows * (HD + 1);    // [kRows][HD + 1]
  float* q_tile = v_own + kRows * (HD + 1);   // [kTile][HD]
  float* do_tile = q_tile + kTile * HD;       // [kTile][HD]
  float* lse_tile = do_tile + kTile * HD;     // [kTile]
  float* delta_tile = lse_tile + kTile;       // [kTile]
  const int bh = static_cast<int>(blockIdx.y), bi = bh / nh, h = bh % nh;
  const int k0 = static_cast<int>(blockIdx.x) * kRows, tid = static_cast<int>(threadIdx.x), j = k0 + tid;
  const long stride = 3L * c;
  load_rows<T, HD>(k_own, HD + 1, qkv_row(qkv, bi, 0, 1, t, c, h, HD), stride, k0, kRows, t);
  load_rows<T, HD>(v_own, HD + 1, qkv_row(qkv, bi, 0, 2, t, c, h, HD), stride, k0, kRows, t);
  float dk[HD], dv[HD];
#pragma unroll
  for (int d = 0; d < HD; ++d) dk[d] = dv[d] = 0.0f;
  const float* k = k_own + tid * (HD + 1);
  const float* v = v_own + tid * (HD + 1);
  const T* dout_head = dout + static_cast<long>(bi) * t * c + static_cast<long>(h) * HD;
  for (int q0 = k0; q0 < t; q0 += kTile) {  // queries before k0 see none of these keys
    __syncthreads();
    load_rows<T, HD>(q_tile, HD, qkv_row(qkv, bi, 0, 0, t, c, h, HD), stride, q0, kTile, t);
    load_rows<T, HD>(do_tile, HD, dout_head, c, q0, kTile, t);
    if (tid < kTile) {
      const bool in = q0 + tid < t;
      lse_tile[tid] = in ? lse[static_cast<long>(bh) * t + q0 + tid] : 0.0f;
      delta_tile[tid] = in ? delta[static_cast<long>(bh) * t + q0 + tid] : 0.0f;
    }
    __syncthreads();
    if (j >= t) continue;
    const int first = max(0, j - q0);  // causal: queries i ≥ j only
    const int last = min(kTile, t - q0);
    for (int ii = first; ii < last; ++ii) {
      const float* q = q_tile + ii * HD;
      const float* g = do_tile + ii * HD;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < HD; ++d) {
        s += q[d] * k[d];
        dp += g[d] * v[d];
      }
      const float p = expf(s * scale - lse_tile[ii]);
      const float ds = p * (dp - delta_tile[ii]) * scale;
#pragma unroll
      for (int d = 0; d < HD; ++d) {
        dv[d] += p * g[d];
        dk[d] += ds * q[d];
      }
    }
  }
  if (j >= t) return;
  T* dk_row = dqkv + (static_cast<long>(bi) * t + j) * stride + c + static_cast<long>(h) * HD;
  T* dv_row = dk_row + c;
#pragma unroll
  for (int d = 0; d < HD; ++d) {
    dk_row[d] = from_f32<T>(to_f32(dk_row[d]) + dk[d]);
    dv_row[d] = from_f32<T>(to_f32(dv_row[d]) + dv[d]);
  }
}

// dQ_i = scale·Σ_{j≤i} dS_ij·K_j. One thread per query row i.
template <typename T, int HD>
__global__ void __launch_bounds__(kRows) flash_dq_kernel(T* dqkv, const T* dout, const T* qkv, const float* lse,
                                                         const float* delta, int t, int c, int nh, float scale) {
  extern __shared__ float smem[];
  float* q_own = smem;                       // [kRows][HD + 1]
  float* do_own = q_own + kRows * (HD + 1);  // [kRows][HD + 1]
  float* k_tile = do_own + kRows * (HD + 1); // [kTile][HD]
  float* v_tile = k_tile + kTile * HD;       // [kTile][HD]
  const int bh = static_cast<int>(blockIdx.y), bi = bh / nh, h = bh % nh;
  const int q0 = static_cast<int>(blockIdx.x) * kRows, tid = static_cast<int>(threadIdx.x), i = q0 + tid;
  const long stride = 3L * c;
  load_rows<T, HD>(q_own, HD + 1, qkv_row(qkv, bi, 0, 0, t, c, h, HD), stride, q0, kRows, t);
  load_rows<T, HD>(do_own, HD + 1, dout + static_cast<long>(bi) * t * c + static_cast<long>(h) * HD, c, q0, kRows, t);
  const float row_lse = i < t ? lse[static_cast<long>(bh) * t + i] : 0.0f;
  const float row_delta = i < t ? delta[static_cast<long>(bh) * t + i] : 0.0f;
  float dq[HD];
#pragma unroll
  for (int d = 0; d < HD; ++d) dq[d] = 0.0f;
  const float* q = q_own + tid * (HD + 1);
  const float* g = do_own + tid * (HD + 1);
  const int last_key = min(t, q0 + kRows) - 1;
  for (int k0 = 0; k0 <= last_key; k0 += kTile) {
    __syncthreads();
    load_rows<T, HD>(k_tile, HD, qkv_row(qkv, bi, 0, 1, t, c, h, HD), stride, k0, kTile, t);
    load_rows<T, HD>(v_tile, HD, qkv_row(qkv, bi, 0, 2, t, c, h, HD), stride, k0, kTile, t);
    __syncthreads();
    if (i >= t) continue;
    const int keys = min(kTile, i - k0 + 1);
    for (int jj = 0; jj < keys; ++jj) {
      const float* k = k_tile + jj * HD;
      const float* v = v_tile + jj * HD;
      float s = 0.0f, dp = 0.0f;
#pragma unroll
      for (int d = 0; d < HD; ++d) {
        s += q[d] * k[d];
        dp += g[d] * v[d];
      }
      const float p = expf(s * scale - row_lse);
      const float ds = p * (dp - row_delta) * scale;
#pragma unroll
      for (int d = 0; d < HD; ++d) dq[d] += ds * k[d];
    }
  }
  if (i >= t) return;
  T* dq_row = dqkv + (static_cast<long>(bi) * t + i) * stride + static_cast<long>(h) * HD;
#pragma unroll
  for (int d = 0; d < HD; ++d) dq_row[d] = from_f32<T>(to_f32(dq_row[d]) + dq[d]);
}

template <typename Kernel>
void allow_smem(Kernel kernel, std::size_t bytes) {
  ZT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
}

constexpr std::size_t own_tile_bytes(int hd, int extra) {
  return sizeof(float) * (2u * kRows * (hd + 1) + 2u * kTile * hd + static_cast<unsigned>(extra));
}

void check_shape(const char* who, int b, int t, int c, int nh) {
  ZT_REQUIRE(b > 0 && t > 0 && nh > 0 && c % nh == 0, std::string(who) + ": need b, t, nh > 0 and nh | c");
  const int hd = c / nh;
  ZT_REQUIRE(hd == 64 || hd == 128, std::string(who) + ": head dimension " + std::to_string(hd) +
                                        " not built (flash attention supports 64 and 128)");
}

template <typename T, int HD>
void forward_hd(T* out, float* lse, const T* qkv, int b, int t, int c, int nh, cudaStream_t stream) {
  const std::size_t smem = sizeof(float) * (kRows * (HD + 1) + 2 * kTile * HD);
  allow_smem(flash_forward_kernel<T, HD>, smem);
  const dim3 grid(static_cast<unsigned>(ceil_div(t, kRows)), static_cast<unsigned>(b * nh));
  flash_forward_kernel<T, HD><<<grid, kRows, smem, stream>>>(out, lse, qkv, t, c, nh, 1.0f / sqrtf(float(HD)));
  ZT_CHECK_LAUNCH("flash_forward_kernel");
}

template <typename T, int HD>
void backward_hd(T* dqkv, const float* delta, const T* dout, const T* qkv, const float* lse, int b, int t, int c,
                 int nh, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(t, kRows)), static_cast<unsigned>(b * nh));
  const float scale = 1.0f / sqrtf(float(HD));
  const std::size_t smem_kv = own_tile_bytes(HD, 2 * kTile);
  allow_smem(flash_dkdv_kernel<T, HD>, smem_kv);
  flash_dkdv_kernel<T, HD><<<grid, kRows, smem_kv, stream>>>(dqkv, dout, qkv, lse, delta, t, c, nh, scale);
  ZT_CHECK_LAUNCH("flash_dkdv_kernel");
  const std::size_t smem_q = own_tile_bytes(HD, 0);
  allow_smem(flash_dq_kernel<T, HD>, smem_q);
  flash_dq_kernel<T, HD><<<grid, kRows, smem_q, stream>>>(dqkv, dout, qkv, lse, delta, t, c, nh, scale);
  ZT_CHECK_LAUNCH("flash_dq_kernel");
}

}  // namespace

template <typename T>
void flash_attention_forward(T* out, float* lse, const T* qkv, int b, int t, int c, int nh, cudaStream_t stream) {
  detail::NvtxRange range("flash_attention_forward");
  check_shape("flash_attention_forward", b, t, c, nh);
  if (c / nh == 64) {
    forward_hd<T, 64>(out, lse, qkv, b, t, c, nh, stream);
  } else {
    forward_hd<T, 128>(out, lse, qkv, b, t, c, nh, stream);
  }
}

template <typename T>
void flash_attention_backward(T* dqkv, float* delta, const T* dout, const T* qkv, const T* out, const float* lse,
                              int b, int t, int c, int nh, cudaStream_t stream) {
  detail::NvtxRange range("flash_attention_backward");
  check_shape("flash_attention_backward", b, t, c, nh);
  const long rows = static_cast<long>(b) * nh * t;
  flash_delta_kernel<<<detail::grid_for(rows, 256), 256, 0, stream>>>(delta, dout, out, b, t, c, nh, c / nh);
  ZT_CHECK_LAUNCH("flash_delta_kernel");
  if (c / nh == 64) {
    backward_hd<T, 64>(dqkv, delta, dout, qkv, lse, b, t, c, nh, stream);
  } else {
    backward_hd<T, 128>(dqkv, delta, dout, qkv, lse, b, t, c, nh, stream);
  }
}

#define ZT_INSTANTIATE(T)                                                                                       \
  template void flash_attention_forward<T>(T*, float*, const T*, int, int, int, int, cudaStream_t);            \
  template void flash_attention_backward<T>(T*, float*, const T*, const T*, const T*, const float*, int, int, int, \
                                            int, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE)
#undef ZT_INSTANTIATE

}  // namespace ztune::kernels::cuda
