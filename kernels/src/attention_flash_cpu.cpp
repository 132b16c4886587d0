// Causal attention in the FlashAttention manner on the CPU (Dao et al. 2022, Alg. 1-2;
// Dao 2023 §3): the same out as attention_forward, but only lse[B,NH,T] is kept for
// backward, which recomputes P_ij = exp(s_ij − lse_i) from q, k and lse.
//
// Query rows go in tiles. A tile's scores against the keys it can see (j < the tile's
// last row + 1: the causal range, nothing past it is computed) are one Eigen GEMM into a
// scratch of rows×keys floats; the whole visible row fits, so the softmax is exact
// (no online rescaling). The scratch lives while a thread works on one head and is
// freed after: extra memory is kTileForward·T floats per thread in forward and
// 2·kTileBackward·T = the same in backward (P and dP side by side), never B·NH·T².
// Forward writes out and lse; backward accumulates (+=) into dqkv (conventions.hpp).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include <Eigen/Core>

#include "per_head.hpp"
#include "ztune/kernels/attention.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::kernels::cpu {
namespace {

using Scratch = Eigen::Map<RowMat>;  // [rows, keys], contiguous

constexpr int kTileForward = 64;   // query rows per tile: scratch kTileForward·T floats
constexpr int kTileBackward = 32;  // two buffers (P, dP): 2·kTileBackward·T = the forward's scratch

}  // namespace

void flash_attention_forward(float* out, float* lse, const float* qkv, int b, int t, int c, int nh, ThreadPool* pool,
                             int window) {
  const float scale = detail::score_scale(c, nh);
  for_each_head(b, nh, pool, [&](int bi, int h) {
    const detail::ConstHeadQkv x(qkv, bi, h, t, c, nh);
    auto o = detail::head_rows<Strided>(out, bi, h, t, c, nh);
    float* lse_h = lse + (static_cast<long>(bi) * nh + h) * t;
    std::vector<float> scratch(static_cast<std::size_t>(std::min(kTileForward, t)) * static_cast<std::size_t>(t));
    for (int i0 = 0; i0 < t; i0 += kTileForward) {
      const int rows = std::min(kTileForward, t - i0);
      const int keys = i0 + rows;  // causal: the tile's last row sees keys 0..i0+rows−1
      Scratch p(scratch.data(), rows, keys);
      p.noalias() = (x.q.middleRows(i0, rows) * x.k.topRows(keys).transpose()) * scale;
      // Row i = i0 + r attends to j ≤ i; lse as the CUDA kernel's m + logf(l).
      for (int r = 0; r < rows; ++r)
        lse_h[i0 + r] = detail::causal_softmax_row(&p(r, 0), i0 + r, keys, detail::window_start(i0 + r, window));
      o.middleRows(i0, rows).noalias() = p * x.v.topRows(keys);
    }
  });
}

// Per tile of query rows (FA-2 Alg. 2 with the loops swapped: rows outside, all visible
// keys at once): P = exp(S − lse), dP = dO·Vᵀ, D_i = dO_i·O_i (= rowsum(P∘dP)),
// dS = P∘(dP − D) (0 above the diagonal), dV += Pᵀ·dO, dQ += dS·K/√hd, dK += dSᵀ·Q/√hd.
void flash_attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* lse,
                              int b, int t, int c, int nh, ThreadPool* pool, int window) {
  const float scale = detail::score_scale(c, nh);
  for_each_head(b, nh, pool, [&](int bi, int h) {
    const detail::ConstHeadQkv x(qkv, bi, h, t, c, nh);
    detail::MutableHeadQkv d(dqkv, bi, h, t, c, nh);
    const auto o = detail::head_rows<ConstStrided>(out, bi, h, t, c, nh);
    const auto dout_h = detail::head_rows<ConstStrided>(dout, bi, h, t, c, nh);
    const float* lse_h = lse + (static_cast<long>(bi) * nh + h) * t;
    const std::size_t tile = static_cast<std::size_t>(std::min(kTileBackward, t)) * static_cast<std::size_t>(t);
    std::vector<float> scratch(2 * tile);
    for (int i0 = 0; i0 < t; i0 += kTileBackward) {
      const int rows = std::min(kTileBackward, t - i0);
      const int keys = i0 + rows;
      const auto q_tile = x.q.middleRows(i0, rows);
      const auto do_tile = dout_h.middleRows(i0, rows);
      Scratch p(scratch.data(), rows, keys);
      Scratch ds(scratch.data() + tile, rows, keys);
      p.noalias() = (q_tile * x.k.topRows(keys).transpose()) * scale;
      ds.noalias() = do_tile * x.v.topRows(keys).transpose();  // dP
      for (int r = 0; r < rows; ++r) {
        const int last = i0 + r;
        const float row_lse = lse_h[last];
        const float delta = do_tile.row(r).dot(o.row(last));
        const int first = detail::window_start(last, window);
        for (int j = 0; j < first; ++j) {
          p(r, j) = 0.0f;
          ds(r, j) = 0.0f;
        }
        for (int j = first; j <= last; ++j) {
          p(r, j) = std::exp(p(r, j) - row_lse);
          ds(r, j) = p(r, j) * (ds(r, j) - delta);
        }
        for (int j = last + 1; j < keys; ++j) {
          p(r, j) = 0.0f;
          ds(r, j) = 0.0f;
        }
      }
      d.v.topRows(keys).noalias() += p.transpose() * do_tile;
      d.q.middleRows(i0, rows).noalias() += (ds * x.k.topRows(keys)) * scale;
      d.k.topRows(keys).noalias() += (ds.transpose() * q_tile) * scale;
    }
  });
}

}  // namespace ztune::kernels::cpu
