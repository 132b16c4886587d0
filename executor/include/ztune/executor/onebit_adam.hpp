#pragma once
// 1-bit Adam (Tang et al. 2021, ICML, Algorithm 1; DeepSpeed
// deepspeed/runtime/fp16/onebit/adam.py with NcclBackend.compressed_allreduce)
// for ZeRO stage 0 data parallelism, over the parameter store's flat buffers.
//
// Warm-up (0-based steps < freeze_step): plain AdamW on the gradients the store
// all-reduced, exactly as the store's own optimizer does.
// Compression (later steps): the store skips the gradient all-reduce; the
// variance is frozen; every rank updates the shared momentum with its LOCAL
// gradient (×dp: the store's gradients are sums whose total over ranks is the
// batch gradient), then the momentum is averaged by a compressed all-reduce:
//   1. worker: per destination chunk j, compress m_j + worker_error_j to signs
//      plus one fp32 scale (kernels/onebit.hpp), keeping the error;
//   2. all-to-all: rank j receives every rank's chunk j (on send/recv pairs:
//      the Communicator has no all-to-all);
//   3. server: average the dp decompressed chunks, add the server error,
//      compress again to signs plus one scale;
//   4. all-gather of the servers' signs and scales; every rank decompresses the
//      same momentum.
// The update is then p ← p − lr·(m/(1−β1^t) / (√(v/(1−β2^T)) + ε) + λ·p) with T =
// freeze_step (v frozen with its bias correction). Global-norm clipping needs
// the reduced gradient, so it applies during warm-up only (gradients_local()).
//
// Wire bytes per rank and compressed step: (dp−1)/dp of both the all-to-all and
// the all-gather of (chunk/8 + 4)·dp bytes, against 2(dp−1)/dp·4Ψ for the fp32
// all-reduce of the CPU backend (the cost model's onebit_adam.hpp).
// States live in host memory (host_optimizer); device pointers are staged
// through it, so the class serves every backend (the CUDA one at a copy's cost).
#include <cstddef>
#include <iosfwd>
#include <vector>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/communicator.hpp"
#include "ztune/kernels/adamw.hpp"
#include "ztune/kernels/thread_pool.hpp"

namespace ztune::executor {

class OnebitAdam {
 public:
  /// `n` parameters in the flat buffers, `freeze_step` warm-up steps.
  OnebitAdam(std::size_t n, int freeze_step, Communicator& dp, Backend& backend, kernels::ThreadPool& pool);

  /// Whether 0-based step `step` is in the compression phase (needs dp > 1).
  [[nodiscard]] bool compressing(int step) const { return step >= freeze_step_ && dp_.size() > 1; }
  /// One optimizer step on params[n] with grads[n] (reduced in warm-up, local after).
  void step(float* params, const float* grads, const kernels::AdamWParams& h, int step);

  [[nodiscard]] std::size_t chunk() const { return chunk_; }
  void write_state(std::ostream& out) const;
  void read_state(std::istream& in);
  [[nodiscard]] std::size_t state_floats() const;

 private:
  void compressed_average();
  std::size_t n_;
  int freeze_step_;
  Communicator& dp_;
  Backend& be_;
  kernels::ThreadPool& pool_;
  std::size_t chunk_ = 0;    // elements per server chunk (a multiple of 32)
  std::size_t payload_ = 0;  // floats per chunk message: 1 scale + chunk/32 words of sign bits
  Buffer m_, v_, worker_error_, server_error_, params_, grads_;
  std::vector<float> send_, recv_, server_payload_, gathered_, average_;
};

}  // namespace ztune::executor
