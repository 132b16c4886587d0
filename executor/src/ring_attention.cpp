#include "ztune/executor/ring_attention.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <utility>

namespace ztune::executor {

namespace {

constexpr int kTagBase = 64;  // the cp group carries nothing else; distinct tags per step keep messages apart

}  // namespace

int context_parallel_position(int i, int seq_len, int cp, int cp_rank) {
  const int half = seq_len / (2 * cp);
  return i < half ? cp_rank * half + i : (2 * cp - 1 - cp_rank) * half + (i - half);
}

RingAttention::RingAttention(Communicator& cp, Backend& backend, int b, int seq_len, int c, int nh, bool flash)
    : cp_(cp), be_(backend), B_(b), T_(seq_len), C_(c), NH_(nh), P_(cp.size()), rank_(cp.rank()), flash_(flash) {
  if (P_ < 2 || seq_len % (2 * P_) != 0 || c % nh != 0)
    throw std::logic_error("ring attention needs cp >= 2 with 2·cp dividing the sequence (check_plan_shape)");
  L_ = T_ / P_;
  hd_ = C_ / NH_;
  scale_ = 1.0f / std::sqrt(static_cast<float>(hd_));
  positions_.resize(static_cast<std::size_t>(P_) * static_cast<std::size_t>(L_));
  for (int src = 0; src < P_; ++src)
    for (int i = 0; i < L_; ++i)
      positions_[static_cast<std::size_t>(src) * L_ + i] = context_parallel_position(i, T_, P_, src);
}

std::size_t RingAttention::state_elems() const {
  const std::size_t rows = static_cast<std::size_t>(B_) * NH_ * L_;
  return flash_ ? rows : rows * static_cast<std::size_t>(T_);
}

void RingAttention::exchange_start(const float* send, float* recv, std::size_t n, int tag,
                                   std::vector<RequestPtr>& reqs) {
  const int next = (rank_ + 1) % P_, prev = (rank_ + P_ - 1) % P_;
  reqs.push_back(cp_.recv_async(recv, n, prev, kTagBase + tag));
  reqs.push_back(cp_.send_async(send, n, next, kTagBase + tag));
}

void RingAttention::forward_block(const float* qkv, const float* kv, int src, float* acc, float* row_max,
                                  float* row_sum, float* probs) {
  std::vector<float> s(static_cast<std::size_t>(L_));
  std::vector<char> valid(static_cast<std::size_t>(L_));
  const auto c3 = static_cast<std::size_t>(3 * C_), c2 = static_cast<std::size_t>(2 * C_);
  for (int b = 0; b < B_; ++b) {
    for (int h = 0; h < NH_; ++h) {
      for (int i = 0; i < L_; ++i) {
        const int qp = position(rank_, i);
        const std::size_t qrow = static_cast<std::size_t>(b) * L_ + i;
        const float* q = qkv + qrow * c3 + static_cast<std::size_t>(h) * hd_;
        float block_max = -std::numeric_limits<float>::infinity();
        bool any = false;
        for (int j = 0; j < L_; ++j) {
          const bool ok = position(src, j) <= qp;
          valid[static_cast<std::size_t>(j)] = ok ? 1 : 0;
          // A flash kernel skips the masked pairs; the standard (unfused) path
          // computes the whole block and masks it.
          if (!ok && flash_) continue;
          const float* k = kv + (static_cast<std::size_t>(b) * L_ + j) * c2 + static_cast<std::size_t>(h) * hd_;
          float dot = 0;
          for (int d = 0; d < hd_; ++d) dot += q[d] * k[d];
          s[static_cast<std::size_t>(j)] = dot * scale_;
          if (ok) {
            block_max = std::max(block_max, s[static_cast<std::size_t>(j)]);
            any = true;
          }
        }
        if (!any) continue;
        const std::size_t r = (static_cast<std::size_t>(b) * NH_ + h) * L_ + i;
        const float m_old = row_max[r];
        const float m_new = std::max(m_old, block_max);
        const float alpha = std::isinf(m_old) ? 0.0f : std::exp(m_old - m_new);
        float* o = acc + qrow * static_cast<std::size_t>(C_) + static_cast<std::size_t>(h) * hd_;
        row_sum[r] *= alpha;
        for (int d = 0; d < hd_; ++d) o[d] *= alpha;
        for (int j = 0; j < L_; ++j) {
          if (!valid[static_cast<std::size_t>(j)]) continue;
          const float e = std::exp(s[static_cast<std::size_t>(j)] - m_new);
          row_sum[r] += e;
          const float* v =
              kv + (static_cast<std::size_t>(b) * L_ + j) * c2 + static_cast<std::size_t>(C_ + h * hd_);
          for (int d = 0; d < hd_; ++d) o[d] += e * v[d];
          if (probs != nullptr) probs[r * static_cast<std::size_t>(T_) + position(src, j)] = s[static_cast<std::size_t>(j)];
        }
        row_max[r] = m_new;
      }
    }
  }
}

void RingAttention::forward(float* out, float* state, const float* qkv) {
  const std::size_t rows = static_cast<std::size_t>(B_) * L_;
  const std::size_t n = rows * static_cast<std::size_t>(2 * C_);
  Buffer cur = be_.allocate(n, MemCategory::workspace), next = be_.allocate(n, MemCategory::workspace);
  for (std::size_t row = 0; row < rows; ++row)
    std::copy_n(qkv + row * 3 * C_ + C_, 2 * C_, cur.data() + row * 2 * C_);  // this rank's K | V
  Buffer acc = be_.allocate(rows * C_, MemCategory::workspace);
  const std::size_t qrows = static_cast<std::size_t>(B_) * NH_ * L_;
  Buffer row_max = be_.allocate(qrows, MemCategory::workspace), row_sum = be_.allocate(qrows, MemCategory::workspace);
  std::fill_n(row_max.data(), qrows, -std::numeric_limits<float>::infinity());
  float* probs = flash_ ? nullptr : state;
  if (probs != nullptr) std::fill_n(probs, state_elems(), 0.0f);
  for (int s = 0; s < P_; ++s) {
    const int src = (rank_ - s + P_) % P_;
    std::vector<RequestPtr> reqs;
    if (s + 1 < P_) exchange_start(cur.data(), next.data(), n, s, reqs);  // the next chunk moves during this block
    {
      ScopedOp timer(be_.ops(), OpKind::attention);
      forward_block(qkv, cur.data(), src, acc.data(), row_max.data(), row_sum.data(), probs);
    }
    for (auto& r : reqs) r->wait();
    std::swap(cur, next);
  }
  ScopedOp timer(be_.ops(), OpKind::attention);
  // out = acc / Σ; lse = max + log Σ; the standard kernel's probabilities exp(s − lse).
  for (int b = 0; b < B_; ++b)
    for (int h = 0; h < NH_; ++h)
      for (int i = 0; i < L_; ++i) {
        const std::size_t r = (static_cast<std::size_t>(b) * NH_ + h) * L_ + i;
        const float lse = row_max.data()[r] + std::log(row_sum.data()[r]);
        const float inv = 1.0f / row_sum.data()[r];
        const std::size_t qrow = static_cast<std::size_t>(b) * L_ + i;
        float* o = out + qrow * C_ + static_cast<std::size_t>(h) * hd_;
        const float* a = acc.data() + qrow * C_ + static_cast<std::size_t>(h) * hd_;
        for (int d = 0; d < hd_; ++d) o[d] = a[d] * inv;
        if (flash_) {
          state[r] = lse;
          continue;
        }
        const int qp = position(rank_, i);
        float* p = state + r * static_cast<std::size_t>(T_);
        for (int kp = 0; kp < T_; ++kp) p[kp] = kp <= qp ? std::exp(p[kp] - lse) : 0.0f;
      }
}

void RingAttention::backward_block(const float* qkv, const float* dout, const float* kv, int src, const float* state,
                                   const float* delta, float* dq, float* dkv) {
  const auto c3 = static_cast<std::size_t>(3 * C_), c2 = static_cast<std::size_t>(2 * C_);
  for (int b = 0; b < B_; ++b) {
    for (int h = 0; h < NH_; ++h) {
      for (int i = 0; i < L_; ++i) {
        const int qp = position(rank_, i);
        const std::size_t qrow = static_cast<std::size_t>(b) * L_ + i;
        const std::size_t r = (static_cast<std::size_t>(b) * NH_ + h) * L_ + i;
        const float* q = qkv + qrow * c3 + static_cast<std::size_t>(h) * hd_;
        const float* dO = dout + qrow * C_ + static_cast<std::size_t>(h) * hd_;
        float* dQ = dq + qrow * C_ + static_cast<std::size_t>(h) * hd_;
        for (int j = 0; j < L_; ++j) {
          const int kp = position(src, j);
          if (kp > qp) continue;  // masked: probability 0, no gradient
          const std::size_t krow = static_cast<std::size_t>(b) * L_ + j;
          const float* k = kv + krow * c2 + static_cast<std::size_t>(h) * hd_;
          const float* v = kv + krow * c2 + static_cast<std::size_t>(C_ + h * hd_);
          float p = 0;
          if (flash_) {
            float dot = 0;
            for (int d = 0; d < hd_; ++d) dot += q[d] * k[d];
            p = std::exp(dot * scale_ - state[r]);  // recomputed from the log-sum-exp
          } else {
            p = state[r * static_cast<std::size_t>(T_) + kp];
          }
          float dp = 0;
          for (int d = 0; d < hd_; ++d) dp += dO[d] * v[d];
          const float ds = p * (dp - delta[r]) * scale_;
          float* dK = dkv + krow * c2 + static_cast<std::size_t>(h) * hd_;
          float* dV = dkv + krow * c2 + static_cast<std::size_t>(C_ + h * hd_);
          for (int d = 0; d < hd_; ++d) {
            dV[d] += p * dO[d];
            dQ[d] += ds * k[d];
            dK[d] += ds * q[d];
          }
        }
      }
    }
  }
}

void RingAttention::backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* state) {
  const std::size_t rows = static_cast<std::size_t>(B_) * L_;
  const std::size_t n = rows * static_cast<std::size_t>(2 * C_);
  Buffer cur = be_.allocate(n, MemCategory::workspace), next = be_.allocate(n, MemCategory::workspace);
  Buffer dcur = be_.allocate(n, MemCategory::workspace), dnext = be_.allocate(n, MemCategory::workspace);
  for (std::size_t row = 0; row < rows; ++row)
    std::copy_n(qkv + row * 3 * C_ + C_, 2 * C_, cur.data() + row * 2 * C_);
  Buffer dq = be_.allocate(rows * C_, MemCategory::workspace);
  const std::size_t qrows = static_cast<std::size_t>(B_) * NH_ * L_;
  Buffer delta = be_.allocate(qrows, MemCategory::workspace);
  {
    ScopedOp timer(be_.ops(), OpKind::attention);
    // D_i = dO_i · O_i per head: the softmax gradient's row term.
    for (int b = 0; b < B_; ++b)
      for (int h = 0; h < NH_; ++h)
        for (int i = 0; i < L_; ++i) {
          const std::size_t qrow = static_cast<std::size_t>(b) * L_ + i;
          const float* o = out + qrow * C_ + static_cast<std::size_t>(h) * hd_;
          const float* d_o = dout + qrow * C_ + static_cast<std::size_t>(h) * hd_;
          float sum = 0;
          for (int d = 0; d < hd_; ++d) sum += o[d] * d_o[d];
          delta.data()[(static_cast<std::size_t>(b) * NH_ + h) * L_ + i] = sum;
        }
  }
  for (int s = 0; s < P_; ++s) {
    const int src = (rank_ - s + P_) % P_;
    std::vector<RequestPtr> reqs;
    if (s + 1 < P_) exchange_start(cur.data(), next.data(), n, 2 * s, reqs);
    {
      ScopedOp timer(be_.ops(), OpKind::attention);
      backward_block(qkv, dout, cur.data(), src, state, delta.data(), dq.data(), dcur.data());
    }
    // The chunk's dK/dV follow it to the next rank; after the last block they
    // arrive at their owner (the chunk of rank r + 1 − cp = r + 1 goes home).
    exchange_start(dcur.data(), dnext.data(), n, 2 * s + 1, reqs);
    for (auto& r : reqs) r->wait();
    std::swap(cur, next);
    std::swap(dcur, dnext);  // dnext (what was sent) is overwritten by the next receive
  }
  ScopedOp timer(be_.ops(), OpKind::attention);
  for (std::size_t row = 0; row < rows; ++row) {
    float* d = dqkv + row * 3 * C_;
    const float* dq_row = dq.data() + row * C_;
    const float* dkv_row = dcur.data() + row * 2 * C_;
    for (int j = 0; j < C_; ++j) d[j] += dq_row[j];
    for (int j = 0; j < 2 * C_; ++j) d[C_ + j] += dkv_row[j];
  }
}

}  // namespace ztune::executor
