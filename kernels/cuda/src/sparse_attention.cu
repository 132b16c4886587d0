// Block-sparse causal attention (see sparse_attention.hpp), the simple form: one
// thread block per (batch, head, row block R) in three phases separated by
// __syncthreads(), each a flat loop over the phase's independent outputs:
//   forward   S_k = Q_R·K_Cᵀ/√hd into att (masked → 0), row softmax over the row's
//             blocks in place, O_R = Σ_k P_k·V_C;
//   backward  (dq kernel, per R) dP_k = dO_R·V_Cᵀ into the workspace,
//             dS_k = P_k ∘ (dP_k − rowsum(P∘dP)), dQ_R += Σ_k dS_k·K_C/√hd;
//             (dkv kernel, per key block C) dK_C += Σ_k dS_kᵀ·Q_R/√hd and
//             dV_C += Σ_k P_kᵀ·dO_R over the blocks k of column C, so every
//             output row has one writer and no atomics are needed.
// Formulas as the CPU reference (softmax backward: Bridle 1990; the block form of
// DeepSpeed Sparse Attention).
#include <cmath>
#include <string>

#include "common.cuh"
#include "ztune/kernels/cuda/sparse_attention.hpp"

namespace ztune::kernels::cuda {
namespace {
using detail::from_f32;
using detail::to_f32;
constexpr int kThreads = 256;

struct Shape {
  int t, c, nh, hd;
  long row;  // 3C: the stride of qkv rows
  float scale;
};

__device__ __forceinline__ bool visible(int rb, int i, int cb, int j, int blk) { return cb * blk + j <= rb * blk + i; }

__device__ __forceinline__ long att_offset(long bh, int nnz, int k, int blk) {
  return (bh * nnz + k) * static_cast<long>(blk) * blk;
}

template <typename T>
__global__ void sparse_forward_kernel(T* out, float* att, const T* qkv, const DeviceBlockLayout layout, const Shape s) {
  const int nb = layout.blocks, blk = layout.block;
  const int rb = static_cast<int>(blockIdx.x % nb);
  const long bh = blockIdx.x / nb;  // bi·NH + h
  const int bi = static_cast<int>(bh / s.nh), h = static_cast<int>(bh % s.nh);
  const int k0 = layout.row_ptr[rb], k1 = layout.row_ptr[rb + 1];
  const T* base = qkv + static_cast<long>(bi) * s.t * s.row + static_cast<long>(h) * s.hd;
  float* att_row = att + att_offset(bh, layout.nnz, k0, blk);  // the row's blocks are contiguous
  const long entries = static_cast<long>(k1 - k0) * blk * blk;

  // Scores of the row's blocks (SDD), masked entries 0.
  for (long e = threadIdx.x; e < entries; e += blockDim.x) {
    const int k = k0 + static_cast<int>(e / (blk * blk));
    const int i = static_cast<int>(e / blk % blk), j = static_cast<int>(e % blk);
    const int cb = layout.cols[k];
    float v = 0.0f;
    if (visible(rb, i, cb, j, blk)) {
      const T* q = base + static_cast<long>(rb * blk + i) * s.row;
      const T* key = base + s.c + static_cast<long>(cb * blk + j) * s.row;
      for (int d = 0; d < s.hd; ++d) v += to_f32(q[d]) * to_f32(key[d]);
      v *= s.scale;
    }
    att_row[e] = v;
  }
  __syncthreads();
  // Softmax of each query row over all of its visible entries.
  for (int i = static_cast<int>(threadIdx.x); i < blk; i += static_cast<int>(blockDim.x)) {
    float mx = -INFINITY, sum = 0.0f;
    for (int k = k0; k < k1; ++k) {
      const int cb = layout.cols[k];
      const float* p = att_row + (static_cast<long>(k - k0) * blk + i) * blk;
      for (int j = 0; j < blk; ++j)
        if (visible(rb, i, cb, j, blk)) mx = fmaxf(mx, p[j]);
    }
    for (int k = k0; k < k1; ++k) {
      const int cb = layout.cols[k];
      float* p = att_row + (static_cast<long>(k - k0) * blk + i) * blk;
      for (int j = 0; j < blk; ++j) {
        p[j] = visible(rb, i, cb, j, blk) ? expf(p[j] - mx) : 0.0f;
        sum += p[j];
      }
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int k = k0; k < k1; ++k) {
      float* p = att_row + (static_cast<long>(k - k0) * blk + i) * blk;
      for (int j = 0; j < blk; ++j) p[j] *= inv;
    }
  }
  __syncthreads();
  // O_R = Σ_k P_k·V_C (DSD), one output element per iteration.
  T* obase = out + static_cast<long>(bi) * s.t * s.c + static_cast<long>(h) * s.hd;
  for (long e = threadIdx.x; e < static_cast<long>(blk) * s.hd; e += blockDim.x) {
    const int i = static_cast<int>(e / s.hd), d = static_cast<int>(e % s.hd);
    float acc = 0.0f;
    for (int k = k0; k < k1; ++k) {
      const int cb = layout.cols[k];
      const float* p = att_row + (static_cast<long>(k - k0) * blk + i) * blk;
      const T* v = base + 2L * s.c + static_cast<long>(cb) * blk * s.row + d;
      for (int j = 0; j < blk; ++j) acc += p[j] * to_f32(v[j * s.row]);
    }
    obase[static_cast<long>(rb * blk + i) * s.c + d] = from_f32<T>(acc);
  }
}

template <typename T>
__global__ void sparse_backward_dq_kernel(T* dqkv, float* ds, const T* dout, const T* qkv, const float* att,
                                          const DeviceBlockLayout layout, const Shape s) {
  const int nb = layout.blocks, blk = layout.block;
  const int rb = static_cast<int>(blockIdx.x % nb);
  const long bh = blockIdx.x / nb;
  const int bi = static_cast<int>(bh / s.nh), h = static_cast<int>(bh % s.nh);
  const int k0 = layout.row_ptr[rb], k1 = layout.row_ptr[rb + 1];
  const long off = static_cast<long>(bi) * s.t * s.row + static_cast<long>(h) * s.hd;
  const T* dobase = dout + static_cast<long>(bi) * s.t * s.c + static_cast<long>(h) * s.hd;
  const float* p_row = att + att_offset(bh, layout.nnz, k0, blk);
  float* ds_row = ds + att_offset(bh, layout.nnz, k0, blk);
  const long entries = static_cast<long>(k1 - k0) * blk * blk;

  // dP_k = dO_R·V_Cᵀ.
  for (long e = threadIdx.x; e < entries; e += blockDim.x) {
    const int k = k0 + static_cast<int>(e / (blk * blk));
    const int i = static_cast<int>(e / blk % blk), j = static_cast<int>(e % blk);
    const int cb = layout.cols[k];
    const T* dorow = dobase + static_cast<long>(rb * blk + i) * s.c;
    const T* v = qkv + off + 2L * s.c + static_cast<long>(cb * blk + j) * s.row;
    float acc = 0.0f;
    for (int d = 0; d < s.hd; ++d) acc += to_f32(dorow[d]) * to_f32(v[d]);
    ds_row[e] = acc;
  }
  __syncthreads();
  // dS = P ∘ (dP − rowsum(P ∘ dP)); masked entries have P = 0.
  for (int i = static_cast<int>(threadIdx.x); i < blk; i += static_cast<int>(blockDim.x)) {
    float dot = 0.0f;
    for (int k = 0; k < k1 - k0; ++k)
      for (int j = 0; j < blk; ++j) {
        const long e = (static_cast<long>(k) * blk + i) * blk + j;
        dot += p_row[e] * ds_row[e];
      }
    for (int k = 0; k < k1 - k0; ++k)
      for (int j = 0; j < blk; ++j) {
        const long e = (static_cast<long>(k) * blk + i) * blk + j;
        ds_row[e] = p_row[e] * (ds_row[e] - dot);
      }
  }
  __syncthreads();
  // dQ_R += Σ_k dS_k·K_C/√hd.
  for (long e = threadIdx.x; e < static_cast<long>(blk) * s.hd; e += blockDim.x) {
    const int i = static_cast<int>(e / s.hd), d = static_cast<int>(e % s.hd);
    float acc = 0.0f;
    for (int k = k0; k < k1; ++k) {
      const int cb = layout.cols[k];
      const float* dsr = ds_row + (static_cast<long>(k - k0) * blk + i) * blk;
      const T* key = qkv + off + s.c + static_cast<long>(cb) * blk * s.row + d;
      for (int j = 0; j < blk; ++j) acc += dsr[j] * to_f32(key[j * s.row]);
    }
    T* dq = dqkv + off + static_cast<long>(rb * blk + i) * s.row + d;
    *dq = from_f32<T>(to_f32(*dq) + acc * s.scale);
  }
}

template <typename T>
__global__ void sparse_backward_dkv_kernel(T* dqkv, const float* ds, const T* dout, const T* qkv, const float* att,
                                           const DeviceBlockLayout layout, const Shape s) {
  const int nb = layout.blocks, blk = layout.block;
  const int cb = static_cast<int>(blockIdx.x % nb);
  const long bh = blockIdx.x / nb;
  const int bi = static_cast<int>(bh / s.nh), h = static_cast<int>(bh % s.nh);
  const long off = static_cast<long>(bi) * s.t * s.row + static_cast<long>(h) * s.hd;
  const T* dobase = dout + static_cast<long>(bi) * s.t * s.c + static_cast<long>(h) * s.hd;
  for (long e = threadIdx.x; e < static_cast<long>(blk) * s.hd; e += blockDim.x) {
    const int j = static_cast<int>(e / s.hd), d = static_cast<int>(e % s.hd);
    float dk = 0.0f, dv = 0.0f;
    // The blocks of column C: scan the CSR rows (causal layouts have C <= R).
    for (int rb = cb; rb < nb; ++rb)
      for (int k = layout.row_ptr[rb]; k < layout.row_ptr[rb + 1]; ++k) {
        if (layout.cols[k] != cb) continue;
        const long blk_off = att_offset(bh, layout.nnz, k, blk);
        const T* q = qkv + off + static_cast<long>(rb) * blk * s.row + d;
        const T* dorow = dobase + static_cast<long>(rb) * blk * s.c + d;
        for (int i = 0; i < blk; ++i) {
          const long e_ij = blk_off + static_cast<long>(i) * blk + j;
          dk += ds[e_ij] * to_f32(q[i * s.row]);
          dv += att[e_ij] * to_f32(dorow[static_cast<long>(i) * s.c]);
        }
      }
    T* dkp = dqkv + off + s.c + static_cast<long>(cb * blk + j) * s.row + d;
    T* dvp = dkp + s.c;
    *dkp = from_f32<T>(to_f32(*dkp) + dk * s.scale);
    *dvp = from_f32<T>(to_f32(*dvp) + dv);
  }
}

Shape shape_of(int t, int c, int nh) {
  const int hd = c / nh;
  return Shape{t, c, nh, hd, 3L * c, 1.0f / std::sqrt(static_cast<float>(hd))};
}

void check_shapes(const char* who, int b, int t, int c, int nh, const DeviceBlockLayout& layout) {
  ZT_REQUIRE(b > 0 && t > 0 && c > 0 && nh > 0 && c % nh == 0, std::string(who) + ": need b, t, c, nh > 0 and nh | c");
  ZT_REQUIRE(layout.block > 0 && layout.blocks * layout.block == t,
             std::string(who) + ": the layout's blocks must tile the sequence (blocks·block == t)");
  ZT_REQUIRE(layout.row_ptr != nullptr && layout.cols != nullptr && layout.nnz > 0,
             std::string(who) + ": the layout needs device row_ptr and cols");
  ZT_REQUIRE(static_cast<long>(b) * nh * layout.blocks < (1L << 31), std::string(who) + ": grid too large");
}

}  // namespace

std::size_t sparse_attention_att_elems(int b, int nh, const DeviceBlockLayout& layout) {
  return static_cast<std::size_t>(b) * static_cast<std::size_t>(nh) * static_cast<std::size_t>(layout.nnz) *
         static_cast<std::size_t>(layout.block) * static_cast<std::size_t>(layout.block);
}

template <typename T>
void sparse_attention_forward(T* out, float* att, const T* qkv, int b, int t, int c, int nh,
                              const DeviceBlockLayout& layout, cudaStream_t stream) {
  detail::NvtxRange range("sparse_attention_forward");
  check_shapes("sparse_attention_forward", b, t, c, nh, layout);
  ZT_REQUIRE(out != nullptr && att != nullptr && qkv != nullptr, "sparse_attention_forward: null pointer");
  const auto grid = static_cast<unsigned>(static_cast<long>(b) * nh * layout.blocks);  // one block per (b, h, R)
  sparse_forward_kernel<T><<<grid, kThreads, 0, stream>>>(out, att, qkv, layout, shape_of(t, c, nh));
  ZT_CHECK_LAUNCH("sparse_forward_kernel");
}

template <typename T>
void sparse_attention_backward(T* dqkv, float* workspace, const T* dout, const T* qkv, const float* att, int b, int t,
                               int c, int nh, const DeviceBlockLayout& layout, cudaStream_t stream) {
  detail::NvtxRange range("sparse_attention_backward");
  check_shapes("sparse_attention_backward", b, t, c, nh, layout);
  ZT_REQUIRE(dqkv != nullptr && workspace != nullptr && dout != nullptr && qkv != nullptr && att != nullptr,
             "sparse_attention_backward: null pointer");
  const auto grid = static_cast<unsigned>(static_cast<long>(b) * nh * layout.blocks);  // one block per (b, h, R)
  const Shape s = shape_of(t, c, nh);
  sparse_backward_dq_kernel<T><<<grid, kThreads, 0, stream>>>(dqkv, workspace, dout, qkv, att, layout, s);
  ZT_CHECK_LAUNCH("sparse_backward_dq_kernel");
  sparse_backward_dkv_kernel<T><<<grid, kThreads, 0, stream>>>(dqkv, workspace, dout, qkv, att, layout, s);
  ZT_CHECK_LAUNCH("sparse_backward_dkv_kernel");
}

#define ZT_INSTANTIATE_SPARSE(T)                                                                               \
  template void sparse_attention_forward<T>(T*, float*, const T*, int, int, int, int, const DeviceBlockLayout&, \
                                            cudaStream_t);                                                     \
  template void sparse_attention_backward<T>(T*, float*, const T*, const T*, const float*, int, int, int, int,  \
                                             const DeviceBlockLayout&, cudaStream_t);
ZT_FOR_EACH_DTYPE(ZT_INSTANTIATE_SPARSE)
#undef ZT_INSTANTIATE_SPARSE

}  // namespace ztune::kernels::cuda
