#include "ztune/kernels/sparse_attention.hpp"

#include <cassert>
#include <cmath>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "per_head.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::kernels::cpu {
namespace {

using Block = Eigen::Map<RowMat>;
using ConstBlock = Eigen::Map<const RowMat>;

// Key column j of block cb is visible to query row i of block rb (causal).
bool visible(int rb, int i, int cb, int j, int blk) { return cb * blk + j <= rb * blk + i; }

std::size_t block_offset(int bi, int h, int nh, int nnz, int k, int blk) {
  return ((static_cast<std::size_t>(bi) * static_cast<std::size_t>(nh) + static_cast<std::size_t>(h)) *
              static_cast<std::size_t>(nnz) +
          static_cast<std::size_t>(k)) *
         static_cast<std::size_t>(blk) * static_cast<std::size_t>(blk);
}

}  // namespace

void sparse_attention_forward(float* out, float* att, const float* qkv, int b, int t, int c, int nh,
                              const BlockLayout& layout, ThreadPool* pool) {
  const int blk = layout.block;
  assert(layout.blocks * blk == t);
  const int hd = c / nh;
  const int nnz = layout.nnz();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const long row = 3L * c;
  for_each_head(b, nh, pool, [&](int bi, int h) {
    const float* base = qkv + static_cast<long>(bi) * t * row + static_cast<long>(h) * hd;
    float* obase = out + static_cast<long>(bi) * t * c + static_cast<long>(h) * hd;
    std::vector<float> mx(static_cast<std::size_t>(blk)), sum(static_cast<std::size_t>(blk));
    for (int rb = 0; rb < layout.blocks; ++rb) {
      const int k0 = layout.row_ptr[static_cast<std::size_t>(rb)], k1 = layout.row_ptr[static_cast<std::size_t>(rb) + 1];
      ConstStrided q(base + static_cast<long>(rb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
      std::fill(mx.begin(), mx.end(), -std::numeric_limits<float>::infinity());
      std::fill(sum.begin(), sum.end(), 0.0f);
      // SDD: scores of each non-zero block, masked, with the row maxima.
      for (int k = k0; k < k1; ++k) {
        const int cb = layout.cols[static_cast<std::size_t>(k)];
        ConstStrided key(base + c + static_cast<long>(cb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
        Block s(att + block_offset(bi, h, nh, nnz, k, blk), blk, blk);
        s.noalias() = (q * key.transpose()) * scale;
        for (int i = 0; i < blk; ++i)
          for (int j = 0; j < blk; ++j) {
            if (!visible(rb, i, cb, j, blk)) continue;
            mx[static_cast<std::size_t>(i)] = std::max(mx[static_cast<std::size_t>(i)], s(i, j));
          }
      }
      // Block-sparse softmax over the row's blocks.
      for (int k = k0; k < k1; ++k) {
        const int cb = layout.cols[static_cast<std::size_t>(k)];
        Block s(att + block_offset(bi, h, nh, nnz, k, blk), blk, blk);
        for (int i = 0; i < blk; ++i)
          for (int j = 0; j < blk; ++j) {
            if (!visible(rb, i, cb, j, blk)) {
              s(i, j) = 0.0f;
              continue;
            }
            s(i, j) = std::exp(s(i, j) - mx[static_cast<std::size_t>(i)]);
            sum[static_cast<std::size_t>(i)] += s(i, j);
          }
      }
      Strided o(obase + static_cast<long>(rb) * blk * c, blk, hd, Eigen::OuterStride<>(c));
      o.setZero();
      for (int k = k0; k < k1; ++k) {
        const int cb = layout.cols[static_cast<std::size_t>(k)];
        Block p(att + block_offset(bi, h, nh, nnz, k, blk), blk, blk);
        for (int i = 0; i < blk; ++i) {
          const float s = sum[static_cast<std::size_t>(i)];
          p.row(i) *= s > 0.0f ? 1.0f / s : 0.0f;
        }
        // DSD: out_R += P_RC · V_C.
        ConstStrided v(base + 2L * c + static_cast<long>(cb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
        o.noalias() += p * v;
      }
    }
  });
}

// Per row block R, with P_k the saved probabilities of its blocks and
// dP_k = dO_R·V_Cᵀ: dS_k = P_k ∘ (dP_k − rowsum_k(P_k ∘ dP_k)) (softmax backward
// over the whole row; masked entries have P = 0), dQ_R += dS_k·K_C/√hd,
// dK_C += dS_kᵀ·Q_R/√hd, dV_C += P_kᵀ·dO_R.
void sparse_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int b, int t,
                               int c, int nh, const BlockLayout& layout, ThreadPool* pool) {
  const int blk = layout.block;
  assert(layout.blocks * blk == t);
  const int hd = c / nh;
  const int nnz = layout.nnz();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const long row = 3L * c;
  for_each_head(b, nh, pool, [&](int bi, int h) {
    const long off = static_cast<long>(bi) * t * row + static_cast<long>(h) * hd;
    const float* dobase = dout + static_cast<long>(bi) * t * c + static_cast<long>(h) * hd;
    std::vector<RowMat> ds;
    Eigen::VectorXf dot(blk);
    for (int rb = 0; rb < layout.blocks; ++rb) {
      const int k0 = layout.row_ptr[static_cast<std::size_t>(rb)], k1 = layout.row_ptr[static_cast<std::size_t>(rb) + 1];
      ConstStrided q(qkv + off + static_cast<long>(rb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
      Strided dq(dqkv + off + static_cast<long>(rb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
      ConstStrided dout_r(dobase + static_cast<long>(rb) * blk * c, blk, hd, Eigen::OuterStride<>(c));
      ds.assign(static_cast<std::size_t>(k1 - k0), RowMat());
      dot.setZero();
      for (int k = k0; k < k1; ++k) {
        const int cb = layout.cols[static_cast<std::size_t>(k)];
        ConstStrided v(qkv + off + 2L * c + static_cast<long>(cb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
        ConstBlock p(att + block_offset(bi, h, nh, nnz, k, blk), blk, blk);
        RowMat& d = ds[static_cast<std::size_t>(k - k0)];
        d = dout_r * v.transpose();
        dot += p.cwiseProduct(d).rowwise().sum();
      }
      for (int k = k0; k < k1; ++k) {
        const int cb = layout.cols[static_cast<std::size_t>(k)];
        ConstBlock p(att + block_offset(bi, h, nh, nnz, k, blk), blk, blk);
        RowMat& d = ds[static_cast<std::size_t>(k - k0)];
        d = p.cwiseProduct(d - dot.replicate(1, blk));
        ConstStrided key(qkv + off + c + static_cast<long>(cb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
        Strided dk(dqkv + off + c + static_cast<long>(cb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
        Strided dv(dqkv + off + 2L * c + static_cast<long>(cb) * blk * row, blk, hd, Eigen::OuterStride<>(row));
        dq.noalias() += (d * key) * scale;
        dk.noalias() += (d.transpose() * q) * scale;
        dv.noalias() += p.transpose() * dout_r;
      }
    }
  });
}

}  // namespace ztune::kernels::cpu
