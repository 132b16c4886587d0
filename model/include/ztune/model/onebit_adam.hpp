#pragma once
// 1-bit Adam in the cost model (Tang et al. 2021, "1-bit Adam: Communication
// Efficient Large-Scale Training with Adam's Convergence Speed", ICML;
// DeepSpeed deepspeed/runtime/fp16/onebit/adam.py and its NCCL backend's
// compressed_allreduce).
//
// Two phases. Warm-up (the first freeze_step steps): plain Adam, gradients
// all-reduced as the engine stores them, overlapped with backward as usual.
// Compression (every later step): the variance is frozen; each rank updates its
// momentum from its LOCAL gradient (no gradient all-reduce), adds its error
// feedback, and sends the signs (1 bit per element) plus one fp32 scale per
// chunk through an all-to-all; each rank, as "server" of one chunk, averages
// the n chunks it received, compresses again with its own server error, and an
// all-gather returns the signs to everyone. The exchange runs in the optimizer
// step, after backward, so nothing hides it.
//
// Volume (nccl-tests bytes each rank sends): all-reduce 2(n−1)/n·bΨ with b
// bytes per gradient element, compressed all-to-all + all-gather
// 2·(n−1)/n·Ψ/8: a ratio of 1/(8b), i.e. 1/16 against 16-bit gradients (1/32
// against the CPU backend's fp32). Over a run whose first fraction w of steps
// is warm-up the average volume is w + (1−w)/16 of Adam's, a reduction of
// 1/(w + (1−w)/16) (the paper's "up to 5×" with w ≈ 15–20%).
//
// What predict_time() reports for a plan with onebit_adam: ONE iteration of
// the COMPRESSION phase (the steady state the run spends (1−w) of its steps
// in). onebit_adam_phases() gives the warm-up iteration and the run average.
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

/// Per-step communication and extra work of 1-bit Adam for the most loaded
/// stage's data-parallel group (zero when dp is 1 or onebit_adam is off, except
/// the warm-up all-reduce, which is plain data parallelism's).
struct OnebitAdamCost {
  double warmup_allreduce_s = 0;   // link time of the warm-up phase's gradient all-reduce (bucketed)
  double compressed_s = 0;         // link time of the all-to-all + all-gather of signs and scales
  double compress_kernels_s = 0;   // error compensation, sign packing, server average, unpacking (HBM-bound)
  double warmup_bytes = 0;         // nccl-tests S of the warm-up all-reduce: b·Ψ
  double compressed_bytes = 0;     // S of the all-to-all plus S of the all-gather: 2·(Ψ/8 + 4·n scale bytes)
  double warmup_wire_bytes = 0;    // bytes one rank sends per step in warm-up: 2(n−1)/n·b·Ψ
  double compressed_wire_bytes = 0;  // bytes one rank sends per compressed step: 2·(n−1)/n·(Ψ/8 + 4n)
  double error_feedback_bytes = 0;   // fp32 worker error (Ψ) + server error (Ψ/n) per GPU
  double sign_buffer_bytes = 0;      // packed signs sent, received and gathered: 3·Ψ/8
};
[[nodiscard]] OnebitAdamCost onebit_adam_cost(const Transformer& m, const Plan& p, const Cluster& c,
                                              const HardwareProfile& hw);

/// The two phases of a 1-bit Adam run and their average.
struct OnebitAdamPhases {
  double warmup_iteration_s = 0;      // one step of the warm-up (plain Adam)
  double compressed_iteration_s = 0;  // one step of the compression phase (what predict_time reports)
  double run_steps = 0;               // train_tokens / (global_batch · s); 0 when the model states no budget
  double warmup_fraction = 0;         // w = min(1, freeze_step / run_steps); 0 when run_steps is 0
  double average_iteration_s = 0;     // w·warm-up + (1−w)·compressed
  double volume_ratio = 0;            // compressed/warm-up bytes per step sent by one rank (≈ 1/16)
  double average_volume_reduction = 0;  // 1 / (w + (1−w)·volume_ratio): the run's saving in volume
};
[[nodiscard]] OnebitAdamPhases onebit_adam_phases(const Transformer& m, const Plan& p, const Cluster& c,
                                                  const HardwareProfile& hw);

}  // namespace ztune
