#pragma once
// The memory of ztune's own executor, line by line (private to model/src):
// predict_memory (memory_model.cpp) uses these for plans that run on the
// executor's layout; the engines' accounting stays in memory_model.cpp. Each
// definition's comment (executor_memory.cpp) names the executor code it
// follows.
#include "ztune/model/memory_model.hpp"

namespace ztune {

/// One layer's stored activations per micro-batch, in bytes, under
/// recomputation `r`; `density` is the sparse attention's share of the scores.
[[nodiscard]] double layer_activation_bytes_executor(const Transformer& m, const Plan& p, Recompute r,
                                                     double density);

/// The dtype the executor keeps gradients in: the plan's reduce dtype, else its storage.
[[nodiscard]] Precision executor_grad_precision(const Plan& p);

/// Whether the executor's step updates 16-bit parameters in place as their own
/// master: a master dtype that is theirs (executor/optimizer_states.hpp
/// params_are_master), fp16 or bf16; fp32 parameters are their master anyway.
[[nodiscard]] bool executor_updates_16bit_in_place(const Plan& p);

/// Parameters, gradients and optimizer states of `psi` parameters, partitioned as the ZeRO stage says.
[[nodiscard]] ModelStateBytes executor_state_bytes(double psi, const Plan& p);
/// Host bytes of ztune's executor's 1-bit Adam on one rank of `psi` parameters
/// and `dp` data-parallel ranks (executor/onebit_adam.cpp, which keeps them in
/// host memory on every backend): momentum and worker error over dp chunks of
/// ⌈psi/dp⌉ rounded up to 32, variance, the server error of one chunk (fp32),
/// and the fp32 staging copies of the parameters and gradients.
[[nodiscard]] double executor_onebit_host_bytes(double psi, int dp);

/// The CUDA backend's attention scratch beyond what the executor tracks, in bytes.
[[nodiscard]] double executor_cuda_scratch(const Transformer& m, const Plan& p);

/// What the backward's largest moment holds beside these (freed before it).
struct BackwardFreed {
  double stored = 0;   // the activations stored at the backward's start
  double working = 0;  // of which a recomputed layer, re-materialised in its backward
  double logits = 0;   // the last stage's logits (one micro-batch's), freed after the loss's backward
  double output = 0;   // the stage's output, freed when the layers' backward begins
};

/// What the executor's backward holds beyond the stored activations, the
/// logits and the buckets at its largest moment, in bytes (the workspace line).
[[nodiscard]] double executor_backward_workspace(const Transformer& m, const Plan& p, bool first, bool last,
                                                 double density, bool gpu, const BackwardFreed& freed);

}  // namespace ztune
