#pragma once
// The analytical time model: one iteration of the plan as a sum of named parts
// (prediction.hpp's TimePart), built from op_costs.hpp's per-operation costs.
//
// Pipeline: the steady state runs m micro-batches through the slowest stage
// (with equal stages the last one, which also holds the LM head; with uneven
// ones the stage whose layers and edge take longest); the fill and drain add
// the other stages' times: the bubble (p−1)/v stage-times with equal stages
// (GPipe and 1F1B: v = 1; Narayanan et al. 2021).
// Communication is exposed unless the plan and the profile say it overlaps:
// TP backward collectives Megatron issues async hide behind the wgrad GEMMs
// (profile tp_overlap), DP bucketed reduction behind the last backward
// (overlap_comm × dp_overlap), ZeRO-3 gathers behind compute with prefetch,
// offload transfers behind backward / the host optimizer step.
#include <optional>

#include "ztune/model/prediction.hpp"

namespace ztune {

/// Per-micro-batch times on the slowest stage (seconds), exposed parts.
struct MicrobatchTimes {
  double forward = 0;       // layers + edge (embedding / head) forward compute
  double backward = 0;
  double recompute = 0;
  double tp_comm = 0;       // exposed tensor-parallel collectives
  double pp_comm = 0;       // exposed pipeline sends/receives
  double cp_comm = 0;       // exposed context-parallel ring exchanges (op_costs.hpp LayerCost::cp_*)
  double ulysses_comm = 0;  // DeepSpeed-Ulysses all-to-alls (op_costs.hpp LayerCost::ulysses_*), all exposed
  double dp_comm = 0;       // exposed per-micro-batch reductions (ZeRO 2/3)
  double zero3_gather = 0;  // exposed ZeRO-3 all-gathers
  double offload = 0;       // exposed parameter fetches from host/NVMe
  double overhead = 0;      // host dispatch the GPU waits on + the fixed per-micro-batch cost
  double layers_only = 0;   // the same micro-batch on a stage without embedding/head (bubble unit)
  double fill_drain = 0;    // pipeline fill and drain, plus the one send the steady state already holds:
                            // (p−1)/v·layers_only with equal stages; uneven: the critical path through the
                            // stages beyond m × the slowest (time_model.cpp uneven_fill_drain)
  double pp_send = 0;       // one pipeline send (activation or gradient) at one stage boundary
  double tp_backward_link = 0;  // TP collectives' link time in the backward window (backward + recompute),
                                // before link sharing: what the step's DP reduction can slow (link_sharing)
  [[nodiscard]] double total() const {
    return forward + backward + recompute + tp_comm + pp_comm + cp_comm + ulysses_comm + dp_comm + zero3_gather + offload + overhead;
  }
};
/// CPU ranks beyond a node's cores time-share them (MPI ranks oversubscribed
/// on a CPU cluster, as local-cpu's 8 ranks on 2 cores): the cluster as one
/// rank of `p` sees it, per-rank compute, memory, copy and shared-memory link
/// rates scaled by cores / ranks on the node (and cpu_cores raised to the ranks,
/// so applying it twice changes nothing). nullopt when nothing is shared (GPU
/// clusters; ranks ≤ cores). Every time prediction goes through it.
[[nodiscard]] std::optional<Cluster> oversubscribed_view(const Plan& p, const Cluster& c);
/// ZeRO-R CPU checkpointing (plan.cpu_checkpointing): the blocking copies of
/// one layer's checkpoint, one micro-batch, to the host after its forward and
/// back before its recomputation (PCIe both ways); 0 without it.
[[nodiscard]] double cpu_checkpoint_copy_time(const Transformer& m, const Plan& p, const Cluster& c,
                                              const HardwareProfile& hw);

/// Whether ZeRO-3 can fetch the next module while one computes. DeepSpeed:
/// prefetching on (stage3_prefetch_bucket_size > 0) and two of the largest
/// modules within stage3_max_live_parameters; otherwise every gather (and,
/// with parameter offload, every fetch from the host) waits in line: nothing
/// of it overlaps (the simulator's graph_builder prefetch_depth says the
/// same). An engine that gathers per module (EngineProfile zero3_gather
/// "module": FSDP's backward_prefetch, FSDP2's implicit prefetch of the next
/// block) prefetches one module ahead whatever its size: it has no such knobs.
[[nodiscard]] bool zero3_can_prefetch(const Transformer& m, const Plan& p, const HardwareProfile& hw);

/// Compute per step on rank 0 (the first pipeline stage's first GPU) by the
/// executor's operation kinds (a run record's ops_rank0), so a run can be
/// compared operation by operation. The LM head's GEMM counts as gemm, the rest
/// of the head, the embedding and the on-device optimizer as memory_bound.
struct ComputeByKind {
  double gemm = 0;
  double attention = 0;
  double memory_bound = 0;
  double host_adam = 0;  // the offloaded optimizer step
};
[[nodiscard]] ComputeByKind compute_by_kind_rank0(const Transformer& m, const Plan& p, const Cluster& c,
                                                  const HardwareProfile& hw);

/// With a memo that serves m, c and hw, the layer and edge costs come from it
/// (layer_cost_memo.hpp); the result is the same.
[[nodiscard]] MicrobatchTimes microbatch_times(const Transformer& m, const Plan& p, const Cluster& c,
                                               const HardwareProfile& hw, LayerCostMemo* memo = nullptr);

/// Link sharing between a blocking tensor-parallel collective and the
/// overlapped data-parallel traffic (ZeRO-3 gathers, gradient reductions) that
/// runs beside it on the same fabric level. NCCL runs the two groups'
/// collectives concurrently on their own streams and they split the link:
/// while the background traffic is on it, the TP collective moves at half
/// rate (two flows, processor sharing). With the link busy `background_s` of
/// a `window_s` pass, the fraction of TP time that meets it is
/// ρ = min(1, background/window), and the TP time grows by ρ: t·(1 + ρ).
/// Returns ρ (0 without a window). The simulator puts both on one link
/// resource (graph_builder.cpp), so it sees the same contention, queued.
[[nodiscard]] inline double link_sharing(double background_s, double window_s) {
  if (window_s <= 0 || background_s <= 0) return 0;
  return background_s < window_s ? background_s / window_s : 1.0;
}

/// Whether the plan's tensor-parallel and data-parallel groups use the same
/// fabric level (both inside a node or both across nodes), and so share it.
[[nodiscard]] bool tp_shares_dp_link(const Plan& p, const Cluster& c);

/// Communication time `link_s` of which up to `window_s` × `overlap` hides behind compute.
[[nodiscard]] inline double exposed(double link_s, double window_s, double overlap) {
  const double hidden = (link_s < window_s ? link_s : window_s) * overlap;
  return link_s - hidden;
}

}  // namespace ztune
