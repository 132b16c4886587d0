#include "ztune/kernels/attention.hpp"

#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "per_head.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::kernels::cpu {
namespace {

using Square = Eigen::Map<RowMat>;
using ConstSquare = Eigen::Map<const RowMat>;

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int b, int t, int c, int nh, ThreadPool* pool,
                       int window) {
  const float scale = detail::score_scale(c, nh);
  for_each_head(b, nh, pool, [&](int bi, int h) {
    const detail::ConstHeadQkv x(qkv, bi, h, t, c, nh);
    Square p(att + (static_cast<long>(bi) * nh + h) * t * t, t, t);
    p.noalias() = (x.q * x.k.transpose()) * scale;
    for (int i = 0; i < t; ++i) (void)detail::causal_softmax_row(&p(i, 0), i, t, detail::window_start(i, window));
    detail::head_rows<Strided>(out, bi, h, t, c, nh).noalias() = p * x.v;
  });
}

// With P the probabilities and dP = dO·Vᵀ: dS = P ∘ (dP − rowsum(P ∘ dP)) (softmax
// backward; masked entries — above the diagonal and before a sliding window —
// have P = 0 so dS = 0 there), dQ = dS·K/√hd, dK = dSᵀ·Q/√hd, dV = Pᵀ·dO. The
// window needs nothing here: it lives in the saved P.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int b, int t, int c,
                        int nh, ThreadPool* pool, int /*window*/) {
  const float scale = detail::score_scale(c, nh);
  for_each_head(b, nh, pool, [&](int bi, int h) {
    const detail::ConstHeadQkv x(qkv, bi, h, t, c, nh);
    detail::MutableHeadQkv dx(dqkv, bi, h, t, c, nh);
    ConstSquare p(att + (static_cast<long>(bi) * nh + h) * t * t, t, t);
    const auto dout_h = detail::head_rows<ConstStrided>(dout, bi, h, t, c, nh);
    RowMat ds = dout_h * x.v.transpose();
    for (int i = 0; i < t; ++i) {
      float dot = 0.0f;
      for (int j = 0; j <= i; ++j) dot += p(i, j) * ds(i, j);
      for (int j = 0; j <= i; ++j) ds(i, j) = p(i, j) * (ds(i, j) - dot);
      for (int j = i + 1; j < t; ++j) ds(i, j) = 0.0f;
    }
    dx.v.noalias() += p.transpose() * dout_h;
    dx.q.noalias() += (ds * x.k) * scale;
    dx.k.noalias() += (ds.transpose() * x.q) * scale;
  });
}

}  // namespace ztune::kernels::cpu
