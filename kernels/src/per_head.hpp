#pragma once
// Shared by the dense and block-sparse CPU attention references: row-major
// Eigen views over strided q/k/v slices, and the loop over (batch, head).
#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "ztune/kernels/thread_pool.hpp"

namespace ztune::kernels::cpu::detail {

using RowMat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Strided = Eigen::Map<RowMat, 0, Eigen::OuterStride<>>;
using ConstStrided = Eigen::Map<const RowMat, 0, Eigen::OuterStride<>>;

/// One head's Q, K and V rows [T, hd] inside qkv[B, T, 3C] (row stride 3C).
template <typename Map, typename Ptr>
struct HeadQkv {
  Map q, k, v;
  HeadQkv(Ptr qkv, int bi, int h, int t, int c, int nh)
      : q(at(qkv, bi, h, t, c, nh, 0), t, c / nh, Eigen::OuterStride<>(3L * c)),
        k(at(qkv, bi, h, t, c, nh, 1), t, c / nh, Eigen::OuterStride<>(3L * c)),
        v(at(qkv, bi, h, t, c, nh, 2), t, c / nh, Eigen::OuterStride<>(3L * c)) {}
  static Ptr at(Ptr qkv, int bi, int h, int t, int c, int nh, int part) {
    return qkv + static_cast<long>(bi) * t * 3L * c + static_cast<long>(part) * c + static_cast<long>(h) * (c / nh);
  }
};
using ConstHeadQkv = HeadQkv<ConstStrided, const float*>;
using MutableHeadQkv = HeadQkv<Strided, float*>;

/// One head's rows [T, hd] of an out-shaped tensor x[B, T, C] (row stride C).
template <typename Map, typename Ptr>
Map head_rows(Ptr x, int bi, int h, int t, int c, int nh) {
  return Map(x + static_cast<long>(bi) * t * c + static_cast<long>(h) * (c / nh), t, c / nh, Eigen::OuterStride<>(c));
}

/// 1/√hd, the scores' scale.
inline float score_scale(int c, int nh) { return 1.0f / std::sqrt(static_cast<float>(c / nh)); }

/// Softmax in place over p[first..last] of a score row whose other entries
/// (before `first`: outside a sliding window; after `last`: the causal mask, up
/// to `width`) are masked (set to 0); returns log Σ_first≤j≤last exp(p_j), the
/// row's log-sum-exp (the max subtracted first for range, Milakov & Gimelshein 2018).
inline float causal_softmax_row(float* p, int last, int width, int first = 0) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int j = first; j <= last; ++j) mx = std::max(mx, p[j]);
  float sum = 0.0f;
  for (int j = first; j <= last; ++j) {
    p[j] = std::exp(p[j] - mx);
    sum += p[j];
  }
  const float inv = 1.0f / sum;
  for (int j = 0; j < first; ++j) p[j] = 0.0f;
  for (int j = first; j <= last; ++j) p[j] *= inv;
  for (int j = last + 1; j < width; ++j) p[j] = 0.0f;
  return mx + std::log(sum);
}

/// The first key row i attends: 0, or i − window + 1 within a sliding window.
inline int window_start(int i, int window) { return window > 0 ? std::max(0, i - window + 1) : 0; }

/// Runs body(batch, head) for every head, spread over the pool (heads are independent).
template <typename Body>
void for_each_head(int b, int nh, ThreadPool* pool, Body body) {
  const int heads = b * nh;
  auto slice = [&](int part, int parts) {
    auto [h0, h1] = split_range(heads, part, parts);
    for (auto h = h0; h < h1; ++h) body(static_cast<int>(h / nh), static_cast<int>(h % nh));
  };
  if (pool == nullptr) {
    slice(0, 1);
  } else {
    pool->run(pool->size(), slice);
  }
}

}  // namespace ztune::kernels::cpu::detail

namespace ztune::kernels::cpu {
using detail::ConstStrided;
using detail::for_each_head;
using detail::RowMat;
using detail::Strided;
}  // namespace ztune::kernels::cpu
