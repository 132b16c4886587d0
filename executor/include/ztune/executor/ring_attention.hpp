#pragma once
// Context parallelism's attention (Megatron-Core's context parallelism; Liu et
// al. 2023, "Ring Attention with Blockwise Transformers"): each sequence of T
// tokens is cut into 2·cp chunks of T/(2cp) and cp rank r holds chunks r and
// 2cp−1−r (load-balanced under the causal mask), so its L = T/cp rows are
//   rows [0, L/2)   → positions r·L/2 + i,
//   rows [L/2, L)   → positions (2cp−1−r)·L/2 + (i − L/2).
// Causal attention of the local queries against every rank's keys runs in cp
// steps over the cp group: step s computes the block of the K/V chunk of rank
// r − s while that chunk is sent on to rank r + 1 and the next one arrives
// from r − 1 (asynchronous, launched before the block's compute). The blocks
// merge in the online-softmax manner (running max and sum; Milakov & Gimelshein
// 2018), so the output and the log-sum-exp are those of one softmax over all
// keys. Backward rotates K/V again with their dK/dV accumulators: the
// accumulator of a chunk visits every rank and arrives home after the last
// block (cp exchanges of dK/dV, cp − 1 of K/V).
//
// Two kernels, as without context parallelism (kernels/attention.hpp):
// standard keeps the probabilities, att[B, NH, L, T] by the key's global
// position (row i is softmax over keys ≤ its position, zero elsewhere — the
// rows the single-rank kernel would keep for these queries); flash keeps only
// lse[B, NH, L] and recomputes the probabilities in backward from it and
// D_i = dO_i·O_i (FlashAttention-2's backward, Dao 2023).
//
// CPU backend only (host pointers; plain loops, timed as attention). qkv is the
// dense [B, L, 3C] projection (grouped-query heads already repeated); C = NH·hd
// local channels. Backward accumulates into dqkv (+=, kernels/conventions.hpp).
#include <cstddef>
#include <vector>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/communicator.hpp"

namespace ztune::executor {

/// Global position of local row `i` (0 ≤ i < seq_len/cp) of a sequence on cp
/// rank `cp_rank`: chunk cp_rank for the first half, chunk 2cp−1−cp_rank for the second.
[[nodiscard]] int context_parallel_position(int i, int seq_len, int cp, int cp_rank);

class RingAttention {
 public:
  /// `cp`: the context-parallel group (its size is the plan's cp); b sequences
  /// of seq_len tokens, this rank's seq_len/cp rows each; c = nh·hd channels.
  RingAttention(Communicator& cp, Backend& backend, int b, int seq_len, int c, int nh, bool flash);

  /// Floats of the state backward reads: B·NH·L·T probabilities, or B·NH·L lse.
  [[nodiscard]] std::size_t state_elems() const;
  /// out[B, L, C] = causal attention of the local queries over all ranks' keys.
  void forward(float* out, float* state, const float* qkv);
  /// dqkv[B, L, 3C] += ∂L/∂qkv (local Q, and this rank's K and V after their round trip).
  void backward(float* dqkv, const float* dout, const float* qkv, const float* out, const float* state);

 private:
  // One block: local queries against the K/V chunk `kv` [B, L, 2C] of rank `src`.
  void forward_block(const float* qkv, const float* kv, int src, float* acc, float* row_max, float* row_sum,
                     float* probs);
  void backward_block(const float* qkv, const float* dout, const float* kv, int src, const float* state,
                      const float* delta, float* dq, float* dkv);
  // The cp group's ring step: send `send` to rank + 1, receive `recv` from rank − 1.
  void exchange_start(const float* send, float* recv, std::size_t n, int tag, std::vector<RequestPtr>& reqs);
  [[nodiscard]] int position(int src, int i) const { return positions_[static_cast<std::size_t>(src) * L_ + i]; }

  Communicator& cp_;
  Backend& be_;
  int B_, T_, L_, C_, NH_, hd_, P_, rank_;
  bool flash_;
  float scale_;
  std::vector<int> positions_;  // positions_[src·L + i]: global position of rank src's local row i
};

}  // namespace ztune::executor
