#include "ztune/kernels/attention.hpp"

#include <cmath>
#include <limits>

#include <Eigen/Core>

#include "per_head.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::kernels::cpu {
namespace {

using detail::ConstStrided;
using detail::for_each_head;
using detail::RowMat;
using detail::Strided;
using Square = Eigen::Map<RowMat>;
using ConstSquare = Eigen::Map<const RowMat>;

}  // namespace

void attention_forward(float* out, float* att, const float* qkv, int b, int t, int c, int nh, ThreadPool* pool) {
  const int hd = c / nh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const long row = 3L * c;
  for_each_head(b, nh, pool, [&](int bi, int h) {
    const float* base = qkv + static_cast<long>(bi) * t * row + static_cast<long>(h) * hd;
    ConstStrided q(base, t, hd, Eigen::OuterStride<>(row));
    ConstStrided k(base + c, t, hd, Eigen::OuterStride<>(row));
    ConstStrided v(base + 2L * c, t, hd, Eigen::OuterStride<>(row));
    Square p(att + (static_cast<long>(bi) * nh + h) * t * t, t, t);
    p.noalias() = (q * k.transpose()) * scale;
    for (int i = 0; i < t; ++i) {
      float mx = -std::numeric_limits<float>::infinity();
      for (int j = 0; j <= i; ++j) mx = std::max(mx, p(i, j));
      float sum = 0.0f;
      for (int j = 0; j <= i; ++j) {
        p(i, j) = std::exp(p(i, j) - mx);
        sum += p(i, j);
      }
      const float inv = 1.0f / sum;
      for (int j = 0; j <= i; ++j) p(i, j) *= inv;
      for (int j = i + 1; j < t; ++j) p(i, j) = 0.0f;
    }
    Strided o(out + static_cast<long>(bi) * t * c + static_cast<long>(h) * hd, t, hd, Eigen::OuterStride<>(c));
    o.noalias() = p * v;
  });
}

// With P the probabilities and dP = dO·Vᵀ: dS = P ∘ (dP − rowsum(P ∘ dP)) (softmax
// backward; masked entries have P = 0 so dS = 0 there), dQ = dS·K/√hd, dK = dSᵀ·Q/√hd,
// dV = Pᵀ·dO.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* att, int b, int t, int c,
                        int nh, ThreadPool* pool) {
  const int hd = c / nh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const long row = 3L * c;
  for_each_head(b, nh, pool, [&](int bi, int h) {
    const long off = static_cast<long>(bi) * t * row + static_cast<long>(h) * hd;
    ConstStrided q(qkv + off, t, hd, Eigen::OuterStride<>(row));
    ConstStrided k(qkv + off + c, t, hd, Eigen::OuterStride<>(row));
    ConstStrided v(qkv + off + 2L * c, t, hd, Eigen::OuterStride<>(row));
    Strided dq(dqkv + off, t, hd, Eigen::OuterStride<>(row));
    Strided dk(dqkv + off + c, t, hd, Eigen::OuterStride<>(row));
    Strided dv(dqkv + off + 2L * c, t, hd, Eigen::OuterStride<>(row));
    ConstSquare p(att + (static_cast<long>(bi) * nh + h) * t * t, t, t);
    ConstStrided dout_h(dout + static_cast<long>(bi) * t * c + static_cast<long>(h) * hd, t, hd,
                        Eigen::OuterStride<>(c));
    RowMat ds = dout_h * v.transpose();
    for (int i = 0; i < t; ++i) {
      float dot = 0.0f;
      for (int j = 0; j <= i; ++j) dot += p(i, j) * ds(i, j);
      for (int j = 0; j <= i; ++j) ds(i, j) = p(i, j) * (ds(i, j) - dot);
      for (int j = i + 1; j < t; ++j) ds(i, j) = 0.0f;
    }
    dv.noalias() += p.transpose() * dout_h;
    dq.noalias() += (ds * k) * scale;
    dk.noalias() += (ds.transpose() * q) * scale;
  });
}

}  // namespace ztune::kernels::cpu
