#pragma once
// Where the simulator gets every operation's duration. The production source
// (ModelCostSource) forwards to model/op_costs.hpp, the one source of truth
// for kernel and collective times; tests give hand-set durations whose answer
// is known in closed form.
#include <cstdint>

namespace ztune::sim {

/// One transformer layer, one micro-batch, one GPU (its tensor-parallel share).
struct LayerTimes {
  double forward_s = 0;
  double backward_s = 0;
  double recompute_s = 0;     // 0 without recomputation
  double tp_forward_s = 0;    // link time of the forward TP collectives (0 when tp = 1)
  double tp_backward_s = 0;   // backward collectives the compute waits for
  // Backward collectives Megatron issues asynchronously beside the weight-
  // gradient GEMMs, and the compute window they run beside (the part of the
  // weight-gradient GEMMs they hide behind: min(async, window) × the
  // profile's tp_overlap, as the analytical model counts it).
  double tp_backward_async_s = 0;
  double tp_backward_window_s = 0;
  double tp_recompute_s = 0;  // collectives repeated by full recomputation
  // Context parallelism: the ring's exchanges not hidden behind the attention
  // blocks (op_costs.hpp LayerCost::cp_*), per pass; 0 when cp = 1. The
  // overlap happens inside the attention kernel, so the graph carries only
  // the exposed part, on the compute stream.
  double cp_forward_s = 0;
  double cp_backward_s = 0;
  double cp_recompute_s = 0;
  // DeepSpeed-Ulysses: the all-to-alls of Q, K, V and the output (op_costs.hpp
  // LayerCost::ulysses_*), per pass; blocking, so on the compute stream. 0
  // when ulysses = 1.
  double ulysses_forward_s = 0;
  double ulysses_backward_s = 0;
  double ulysses_recompute_s = 0;
  // Host dispatch slower than the GPU: the pass takes max(GPU, host) and the
  // excess is waiting (0 when the GPU is the slower).
  double forward_overhead_s = 0;
  double backward_overhead_s = 0;
  double recompute_overhead_s = 0;
  // ZeRO-R CPU checkpointing: one blocking copy of the layer's checkpoint to
  // the host after its forward, and one back before its recomputation (each
  // half of time_model.hpp cpu_checkpoint_copy_time); 0 without it.
  double checkpoint_copy_s = 0;
  double params = 0;          // parameters on this GPU (tensor-parallel share), before ZeRO partitioning
  // ZeRO-3 with a regathering engine and full recomputation: the share of the
  // layer's parameters the backward gathers again after the recomputation
  // released them (op_costs.hpp zero3_backward_regather_share); 0 otherwise.
  double regather_share = 0;
  double largest_module_params = 0;  // its largest weight matrix (FC1; fused gate+up with SwiGLU)
  // Activation bytes of one micro-batch kept from forward to backward, and the
  // extra bytes the recomputation re-materialises before the layer's backward
  // (Korthikanti et al. 2022, Table 2); extra is 0 without recomputation.
  double stored_activation_bytes = 0;
  double recompute_extra_bytes = 0;
  // What a model chunk keeps of each micro-batch beside its layers' bytes,
  // from the chunk's forward to the start of its backward (the executor's
  // output of the chunk, memory_model.hpp stage_output_bytes; 0 for engines).
  double chunk_output_bytes = 0;
  // Megatron's block method (plan.recompute_num_layers): only the first
  // block_layers layers of each model chunk are recomputed; the chunk's other
  // layers skip the recomputation and keep the recompute-free activations
  // (stored + extra). 0: every layer as above.
  int block_layers = 0;
};

/// The embedding (first virtual stage) and LM head + loss (last virtual stage).
struct EdgeTimes {
  double embedding_forward_s = 0;
  double embedding_backward_s = 0;
  double head_forward_s = 0;
  double head_backward_s = 0;
  double embedding_tp_s = 0;        // vocab-parallel embedding collective, forward
  double head_tp_forward_s = 0;     // head input gather and loss all-reduces, forward
  double head_tp_backward_s = 0;    // head input-gradient collective, backward
  double embedding_params = 0;     // on one GPU of the first stage (tensor-parallel share)
  double head_params = 0;          // on one GPU of the last stage (0 when tied; the copy is not counted)
};

enum class DpCollective : std::uint8_t { all_reduce, reduce_scatter, all_gather };

class CostSource {
 public:
  virtual ~CostSource() = default;
  [[nodiscard]] virtual LayerTimes layer() const = 0;
  [[nodiscard]] virtual EdgeTimes edges() const = 0;
  /// One activation (or its gradient) sent between neighbouring stages.
  [[nodiscard]] virtual double p2p_s(bool crosses_nodes) const = 0;
  [[nodiscard]] virtual double p2p_bytes() const = 0;
  /// Fixed host cost per micro-batch (schedule, data, loss) and per step
  /// (loss-scale check, gradient norm, optimizer launch).
  [[nodiscard]] virtual double microbatch_overhead_s() const = 0;
  [[nodiscard]] virtual double step_overhead_s() const = 0;
  /// Work on a stage's stream after its backward of each micro-batch, before
  /// the gradient goes to the previous stage: DeepSpeed's BF16_Optimizer
  /// folding the micro-batch's bf16 gradients into fp32 (op_costs.hpp
  /// bf16_grad_accumulation_time; its pipeline engine runs it inside the
  /// BackwardPass instruction, before SendGrad). Default: none.
  [[nodiscard]] virtual double gradient_fold_s() const { return 0; }
  /// Tied embeddings split over the first and last stage: all-reduce of the
  /// word-embedding gradient between them once per step (0 when not needed).
  [[nodiscard]] virtual double embedding_sync_s() const = 0;
  /// One data-parallel collective of `bytes` (nccl-tests S) over the dp group.
  [[nodiscard]] virtual double dp_collective_s(DpCollective kind, double bytes) const = 0;
  /// PCIe copy of `bytes` between this GPU and the host, one direction.
  [[nodiscard]] virtual double pcie_s(double bytes) const = 0;
  /// This GPU's share of the node's NVMe bandwidth for `bytes`.
  [[nodiscard]] virtual double nvme_s(double bytes) const = 0;
  /// Adam over `params` parameters on the GPU.
  [[nodiscard]] virtual double gpu_optimizer_s(double params) const = 0;
  /// CPU Adam over `params` parameters, this GPU's share of the host.
  [[nodiscard]] virtual double host_optimizer_s(double params) const = 0;
  /// Bytes of one gradient element as reduced (16-bit: 2; fp32: 4).
  [[nodiscard]] virtual double grad_bytes_per_param() const = 0;
  /// Bytes of one parameter as gathered (16-bit: 2; fp32: 4).
  [[nodiscard]] virtual double param_bytes_per_param() const = 0;
  /// Bytes of optimizer state per parameter moved to and from NVMe (fp32
  /// master, momentum, variance: K = 12 in the ZeRO paper's accounting).
  [[nodiscard]] virtual double optimizer_state_bytes_per_param() const = 0;

  // Plan features with their own communication (defaults: none of them, i.e.
  // plain ZeRO-3 collectives and no 1-bit Adam; ModelCostSource overrides).

  /// One ZeRO-3 gather of `params` 16-bit parameters before a forward (or a
  /// backward) use. Default: a 16-bit all-gather over the dp group.
  [[nodiscard]] virtual double zero3_gather_s(double params, bool /*backward*/) const {
    return dp_collective_s(DpCollective::all_gather, params * param_bytes_per_param());
  }
  /// Bytes a ZeRO-3 gather of `params` parameters moves (nccl-tests S).
  [[nodiscard]] virtual double zero3_gather_bytes(double params, bool /*backward*/) const {
    return params * param_bytes_per_param();
  }
  /// The ZeRO-3 reduction of one gradient bucket of `bytes` 16-bit bytes.
  /// Default: a reduce-scatter over the dp group.
  [[nodiscard]] virtual double zero3_reduce_s(double bytes) const {
    return dp_collective_s(DpCollective::reduce_scatter, bytes);
  }
  /// Hybrid sharding: the all-reduce across replicas of the partition a
  /// ZeRO-3 reduce-scatter of a gradient bucket of `bytes` leaves (op_costs
  /// hybrid_replica_allreduce_time). Default: 0, no hybrid sharding.
  [[nodiscard]] virtual double replica_reduce_s(double /*bytes*/) const { return 0; }
  /// Whether it follows every micro-batch's reduce-scatter (FSDP) or only the
  /// last one's, at the accumulation boundary (MiCS).
  [[nodiscard]] virtual bool replica_reduce_every_microbatch() const { return false; }
  /// Whether ZeRO-3 gathers module by module with the next one prefetched
  /// whatever its size (FSDP; time_model.hpp zero3_can_prefetch), rather than
  /// within DeepSpeed's prefetch bucket and live-parameter bounds.
  [[nodiscard]] virtual bool prefetches_next_module() const { return false; }
  /// 1-bit Adam's compression phase for `params` parameters of a stage: the
  /// compressed momentum exchange (link time) and its compression kernels.
  /// Both 0 when the plan does not use 1-bit Adam (or dp is 1).
  [[nodiscard]] virtual double onebit_exchange_s(double /*params*/) const { return 0; }
  [[nodiscard]] virtual double onebit_kernels_s(double /*params*/) const { return 0; }

  /// The share of an overlapped transfer that the compute stream still pays
  /// (kernel interference, stream synchronisation: what a schedule does not
  /// show). The analytical model hides min(link, window) × overlap of a
  /// transfer (time_model.hpp exposed()); the simulator hides it physically
  /// and charges this share, 1 − the profile's overlap factor, as a stall on
  /// the compute stream, so the two agree when the window is long. Default:
  /// ideal overlap (hand-set test costs).
  [[nodiscard]] virtual double dp_overlap_loss() const { return 0; }      // bucketed gradient reduction
  [[nodiscard]] virtual double zero3_overlap_loss() const { return 0; }   // ZeRO-3 prefetched gathers
  [[nodiscard]] virtual double offload_overlap_loss() const { return 0; } // offload copies behind backward
};

}  // namespace ztune::sim
