#include "ztune/executor/ulysses_attention.hpp"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace ztune::executor {

UlyssesAttention::UlyssesAttention(Communicator& group, Backend& backend, int b, int seq_len, int c, int nh,
                                   bool flash, int window)
    : group_(group), be_(backend), B_(b), T_(seq_len), C_(c), NH_(nh), U_(group.size()), rank_(group.rank()),
      flash_(flash), window_(window) {
  if (U_ < 1 || nh % U_ != 0 || seq_len % U_ != 0 || c % nh != 0)
    throw std::logic_error("Ulysses needs its ranks to divide the heads and the sequence (check_plan_shape)");
  L_ = T_ / U_;
  NHu_ = NH_ / U_;
  Cu_ = C_ / U_;
}

std::size_t UlyssesAttention::kernel_state_elems() const {
  return Backend::attention_state_elems(B_, T_, NHu_, flash_);
}

std::size_t UlyssesAttention::state_elems() const {
  return kernel_state_elems() + static_cast<std::size_t>(B_) * T_ * 4 * Cu_;
}

void UlyssesAttention::scatter_heads(const float* qkv, float* full) {
  // Block j of the send buffer: [B, L, 3, Cu], heads j's Q, K, V channels of this rank's rows.
  const auto cu = static_cast<std::size_t>(Cu_), c = static_cast<std::size_t>(C_);
  const std::size_t block = static_cast<std::size_t>(B_) * L_ * 3 * cu;
  std::vector<float> send(block * U_), recv(block * U_);
  for (int j = 0; j < U_; ++j)
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < L_; ++i) {
        const float* row = qkv + (static_cast<std::size_t>(b) * L_ + i) * 3 * c;
        float* dst = send.data() + j * block + (static_cast<std::size_t>(b) * L_ + i) * 3 * cu;
        for (int part = 0; part < 3; ++part) std::copy_n(row + part * c + j * cu, cu, dst + part * cu);
      }
  group_.all_to_all(send.data(), recv.data(), block);
  // Block j of the receive buffer: rank j's rows [j·L, (j+1)·L) of this rank's heads.
  for (int j = 0; j < U_; ++j)
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < L_; ++i)
        std::copy_n(recv.data() + j * block + (static_cast<std::size_t>(b) * L_ + i) * 3 * cu, 3 * cu,
                    full + (static_cast<std::size_t>(b) * T_ + j * L_ + i) * 3 * cu);
}

void UlyssesAttention::forward(float* out, float* state, const float* qkv) {
  const auto cu = static_cast<std::size_t>(Cu_), c = static_cast<std::size_t>(C_);
  float* kstate = state;
  float* full = state + kernel_state_elems();
  float* full_out = full + static_cast<std::size_t>(B_) * T_ * 3 * cu;
  scatter_heads(qkv, full);
  be_.attention_forward(full_out, kstate, full, B_, T_, Cu_, NHu_, flash_, window_);
  // Back to the rows' owners: block j = rows [j·L, (j+1)·L) of this rank's heads.
  const std::size_t block = static_cast<std::size_t>(B_) * L_ * cu;
  std::vector<float> send(block * U_), recv(block * U_);
  for (int j = 0; j < U_; ++j)
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < L_; ++i)
        std::copy_n(full_out + (static_cast<std::size_t>(b) * T_ + j * L_ + i) * cu, cu,
                    send.data() + j * block + (static_cast<std::size_t>(b) * L_ + i) * cu);
  group_.all_to_all(send.data(), recv.data(), block);
  for (int j = 0; j < U_; ++j)
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < L_; ++i)
        std::copy_n(recv.data() + j * block + (static_cast<std::size_t>(b) * L_ + i) * cu, cu,
                    out + (static_cast<std::size_t>(b) * L_ + i) * c + j * cu);
}

void UlyssesAttention::backward(float* dqkv, const float* dout, const float* state) {
  const auto cu = static_cast<std::size_t>(Cu_), c = static_cast<std::size_t>(C_);
  const float* kstate = state;
  const float* full = state + kernel_state_elems();
  const float* full_out = full + static_cast<std::size_t>(B_) * T_ * 3 * cu;
  // dO to the heads' owners (the transpose of the output all-to-all).
  const std::size_t oblock = static_cast<std::size_t>(B_) * L_ * cu;
  std::vector<float> send(oblock * U_), recv(oblock * U_);
  for (int j = 0; j < U_; ++j)
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < L_; ++i)
        std::copy_n(dout + (static_cast<std::size_t>(b) * L_ + i) * c + j * cu, cu,
                    send.data() + j * oblock + (static_cast<std::size_t>(b) * L_ + i) * cu);
  group_.all_to_all(send.data(), recv.data(), oblock);
  std::vector<float> dfull_out(static_cast<std::size_t>(B_) * T_ * cu);
  for (int j = 0; j < U_; ++j)
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < L_; ++i)
        std::copy_n(recv.data() + j * oblock + (static_cast<std::size_t>(b) * L_ + i) * cu, cu,
                    dfull_out.data() + (static_cast<std::size_t>(b) * T_ + j * L_ + i) * cu);
  std::vector<float> dfull(static_cast<std::size_t>(B_) * T_ * 3 * cu, 0.0f);
  be_.attention_backward(dfull.data(), dfull_out.data(), full, full_out, kstate, B_, T_, Cu_, NHu_, flash_, window_);
  // dQ, dK, dV back to the rows' owners (the transpose of the forward all-to-all).
  const std::size_t block = static_cast<std::size_t>(B_) * L_ * 3 * cu;
  std::vector<float> s2(block * U_), r2(block * U_);
  for (int j = 0; j < U_; ++j)
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < L_; ++i)
        std::copy_n(dfull.data() + (static_cast<std::size_t>(b) * T_ + j * L_ + i) * 3 * cu, 3 * cu,
                    s2.data() + j * block + (static_cast<std::size_t>(b) * L_ + i) * 3 * cu);
  group_.all_to_all(s2.data(), r2.data(), block);
  for (int j = 0; j < U_; ++j)
    for (int b = 0; b < B_; ++b)
      for (int i = 0; i < L_; ++i) {
        const float* src = r2.data() + j * block + (static_cast<std::size_t>(b) * L_ + i) * 3 * cu;
        float* row = dqkv + (static_cast<std::size_t>(b) * L_ + i) * 3 * c;
        for (int part = 0; part < 3; ++part)
          for (std::size_t x = 0; x < cu; ++x) row[part * c + j * cu + x] += src[part * cu + x];
      }
}

}  // namespace ztune::executor
