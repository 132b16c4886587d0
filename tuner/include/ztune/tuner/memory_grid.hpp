#pragma once
// `ztune memory`: the model-state memory of one model on N GPUs for every ZeRO
// stage × offload × precision a plan can take, in ztune's accounting
// (memory_model.hpp) beside DeepSpeed's own estimators (deepspeed_estimate.hpp)
// where they apply: the grid DeepSpeed users know from
// estimate_zero{2,3}_model_states_mem_needs_all_cold. Pure data parallelism
// (dp = N, tp = pp = 1, micro-batch 1); activations, workspace, logits, the CUDA
// context and fragmentation are left out, as DeepSpeed's estimators leave them.
#include <optional>
#include <string>
#include <vector>

#include "ztune/vocab/cluster.hpp"
#include "ztune/model/deepspeed_estimate.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

struct MemoryGridRow {
  int zero_stage = 0;
  int dp_shard = 0;  // ZeRO-3 sharded inside groups of this many GPUs (hybrid sharding); 0: over all of them
  OffloadTarget offload_optimizer = OffloadTarget::none;
  OffloadTarget offload_params = OffloadTarget::none;
  Precision precision = Precision::bf16;
  MemoryPrediction ztune;  // the whole prediction of the row's plan (capacities from the cluster)
  /// ztune's model states per GPU: parameters, gradients, optimizer states, the
  /// communication buckets and ZeRO-3's gathered parameters.
  double ztune_gpu_bytes = 0;
  /// DeepSpeed's estimate, with zero.Init (zero_init = 1) and without (stage 3
  /// only differs on the host); empty where DeepSpeed has no estimator for the row.
  std::optional<DeepSpeedEstimate> deepspeed, deepspeed_no_init;
  std::string no_deepspeed_why;  // why `deepspeed` is empty
  /// Whether the model states alone fit the GPU (activations and the rest come on top).
  [[nodiscard]] bool states_fit_gpu() const { return ztune_gpu_bytes <= ztune.gpu_capacity_bytes; }
};

struct MemoryGrid {
  double params = 0;     // Ψ
  /// The optimizer's state dtypes of every 16-bit row (an fp32 row's master is
  /// its parameters; its moments are these).
  OptimizerDtypes states;
  LargestModule largest;  // DeepSpeed's largest layer
  int gpus = 0, nodes = 0, gpus_per_node = 0;
  int dp_shard = 0;  // the stage-3 rows' shard group (0: every GPU)
  bool capacities = false;  // the cluster's capacities are real (a --cluster was given)
  std::vector<MemoryGridRow> rows;
};

/// The model-state lines of ztune's prediction that the grid counts per GPU.
[[nodiscard]] double model_state_gpu_bytes(const MemoryPrediction& mp);

/// The grid for `m` on `c` (its nodes × node.gpus devices, all of them data
/// parallel), one row per (stage, offload) the plan rules accept for each of
/// `precisions`, in stage order: stage 0; 1 and 2 without and with CPU optimizer
/// offload; 3 without offload, with the optimizer on CPU or NVMe, and with the
/// parameters there too. `cluster_rules`: apply check_plan's cluster rules (NVMe
/// present, the precision supported); false for a cluster standing in for
/// "N GPUs" without capacities, where only the plan-shape rules apply.
/// `states`: the optimizer's state dtypes (Plan::master_dtype, moments_dtype,
/// param_remainders; fp32 by default); rows the plan rules refuse them in (the
/// offloaded ones, remainders outside bf16, a 16-bit master of fp32 training)
/// are left out, and DeepSpeed's estimators, which count fp32 states, say so.
/// `dp_shard` > 0: after the stage-3 rows, the same rows sharded inside
/// groups of that many GPUs and replicated across the groups (FSDP
/// HYBRID_SHARD, DeepSpeed MiCS; Plan::dp_shard), which DeepSpeed's
/// estimators do not count; a group the plan rules refuse adds no row (the
/// caller checks it first).
[[nodiscard]] MemoryGrid memory_grid(const Transformer& m, const Cluster& c, const std::vector<Precision>& precisions,
                                     bool cluster_rules, const OptimizerDtypes& states = {}, int dp_shard = 0);

}  // namespace ztune
