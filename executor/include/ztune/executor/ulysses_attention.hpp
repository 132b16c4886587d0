#pragma once
// DeepSpeed-Ulysses' attention (Jacobs et al. 2023, "DeepSpeed Ulysses", §3;
// deepspeed/sequence/layer.py DistributedAttention): each sequence of T tokens
// is split over the u ranks of the Ulysses group, rank r holding the
// contiguous rows [r·L, (r+1)·L), L = T/u, for every layer outside attention.
// Before attention one all-to-all turns this rank's Q, K and V, [B, L, all NH
// heads], into [B, T, NH/u heads] — rank j receives heads [j·NH/u, (j+1)·NH/u)
// of every rank's rows, in sequence order — and the local causal kernel
// (standard or flash, kernels/attention.hpp) runs on the whole sequence of its
// heads. A second all-to-all sends each rank's output rows back to their
// owner, [B, T, NH/u] → [B, L, NH]. Backward runs the transposes: dO to the
// heads' owners, the kernel's backward, dQ/dK/dV back to the rows' owners.
//
// CPU backend only (host pointers; the copies are plain loops). qkv is the
// dense [B, L, 3C] projection (Q | K | V blocks of C = NH·hd channels,
// grouped-query heads already repeated); backward accumulates into dqkv (+=,
// kernels/conventions.hpp). The state backward reads is the kernel's (the
// probabilities [B, NH/u, T, T] or the log-sum-exp [B, NH/u, T]) followed by
// the gathered qkv [B, T, 3C/u] and output [B, T, C/u] of this rank's heads.
#include <cstddef>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/communicator.hpp"

namespace ztune::executor {

class UlyssesAttention {
 public:
  /// `group`: the Ulysses group (its size u divides nh); b sequences of
  /// seq_len tokens, seq_len/u rows each on this rank; c = nh·hd channels.
  /// `window` > 0: sliding-window attention (the kernel's).
  UlyssesAttention(Communicator& group, Backend& backend, int b, int seq_len, int c, int nh, bool flash,
                   int window = 0);

  /// Floats of the state backward reads (see the file comment).
  [[nodiscard]] std::size_t state_elems() const;
  /// out[B, L, C] = causal attention of this rank's rows over the whole sequence.
  void forward(float* out, float* state, const float* qkv);
  /// dqkv[B, L, 3C] += ∂L/∂qkv of this rank's rows.
  void backward(float* dqkv, const float* dout, const float* state);

  /// The forward all-to-all alone (public for tests): qkv[B, L, 3C] → full[B, T, 3C/u].
  void scatter_heads(const float* qkv, float* full);

 private:
  [[nodiscard]] std::size_t kernel_state_elems() const;

  Communicator& group_;
  Backend& be_;
  int B_, T_, L_, C_, NH_, U_, Cu_, NHu_, rank_;
  bool flash_;
  int window_;
};

}  // namespace ztune::executor
