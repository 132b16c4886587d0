#include "ztune/simulator/model_cost_source.hpp"

#include <algorithm>

#include "ztune/model/memory_model.hpp"
#include "ztune/model/onebit_adam.hpp"
#include "ztune/model/zeropp.hpp"
#include "ztune/model/time_model.hpp"

namespace ztune::sim {

ModelCostSource::ModelCostSource(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw)
    : plan_(p), cluster_(c), hw_(hw), layout_(place_groups(p, c)) {
  const LayerCost lc = layer_cost(m, p, c, hw);
  layer_.forward_s = lc.fwd_s;
  layer_.backward_s = lc.bwd_s;
  layer_.recompute_s = lc.recompute_s;
  layer_.tp_forward_s = lc.tp_fwd_s;
  layer_.tp_backward_s = lc.tp_bwd_s;
  layer_.tp_backward_async_s = lc.tp_bwd_async_s;
  // time_model.cpp hides min(async, window) × tp_overlap of them; the
  // simulator runs them beside a compute window of exactly that length, so
  // what it hides is the same (the profile's overlap factor is fitted to it).
  layer_.tp_backward_window_s = std::min(lc.tp_bwd_async_s, lc.tp_bwd_window_s) * hw.engine.tp_overlap;
  layer_.tp_recompute_s = lc.tp_recompute_s;
  layer_.cp_forward_s = lc.cp_fwd_s;
  layer_.cp_backward_s = lc.cp_bwd_s;
  layer_.cp_recompute_s = lc.cp_recompute_s;
  layer_.ulysses_forward_s = lc.ulysses_fwd_s;
  layer_.ulysses_backward_s = lc.ulysses_bwd_s;
  layer_.ulysses_recompute_s = lc.ulysses_recompute_s;
  // A pass takes max(GPU time with its blocking collectives, host dispatch)
  // (op_costs LayerCost::host_*); the simulator waits out the excess.
  const double tp_bwd = lc.tp_bwd_s + exposed(lc.tp_bwd_async_s, lc.tp_bwd_window_s, hw.engine.tp_overlap);
  layer_.forward_overhead_s = std::max(0.0, lc.host_fwd_s - (lc.fwd_s + lc.tp_fwd_s));
  layer_.backward_overhead_s = std::max(0.0, lc.host_bwd_s - (lc.bwd_s + tp_bwd));
  layer_.recompute_overhead_s = std::max(0.0, lc.host_recompute_s - (lc.recompute_s + lc.tp_recompute_s));
  layer_.checkpoint_copy_s = cpu_checkpoint_copy_time(m, p, c, hw) / 2;
  microbatch_overhead_s_ = hw.engine.microbatch_overhead_s;
  gradient_fold_s_ = bf16_grad_accumulation_time(m, p, c, hw);
  // The bytes each gradient bucket moves per parameter: the analytical model's
  // count (gradient_reduce_bytes): 16-bit, fp32 where the engine reduces an
  // fp32 buffer, and 4 for fp32 plans, whose ranks (ztune's CPU executor:
  // MPI_FLOAT buckets) reduce fp32 gradients.
  grad_bytes_ = gradient_reduce_bytes(p, hw.engine);
  // Parameters gathered (ZeRO-1/2's all-gather, ZeRO-3's gathers) and copied
  // back from the host in the storage precision (FP8 linear weights with
  // fp8_param_gather), as dp_sync_cost counts them.
  param_bytes_ = param_gather_bytes_per_param(m, p);
  step_overhead_s_ = hw.engine.step_overhead_s;
  layer_.params = m.params_per_layer() / p.tp;
  layer_.regather_share = zero3_backward_regather_share(m, p, hw);
  layer_.largest_module_params = m.largest_module_params() / p.tp;
  layer_.stored_activation_bytes = stored_activation_bytes(m, p, c, hw, p.recompute);
  layer_.chunk_output_bytes = stage_output_bytes(m, p, c, hw);
  if (p.recompute != Recompute::none)
    layer_.recompute_extra_bytes =
        stored_activation_bytes(m, p, c, hw, Recompute::none) - layer_.stored_activation_bytes;
  if (p.recompute == Recompute::full) layer_.block_layers = p.recompute_num_layers;

  const EdgeCost e = edge_cost(m, p, c, hw);
  edges_.embedding_forward_s = e.embedding_fwd_s;
  edges_.embedding_backward_s = e.embedding_bwd_s;
  edges_.head_forward_s = e.head_fwd_s;
  edges_.head_backward_s = e.head_bwd_s;
  edges_.embedding_tp_s = e.embedding_tp_s;
  // op_costs gives the head's collectives as one figure for forward and
  // backward; half is placed in each pass (what op_costs lacks: the split).
  edges_.head_tp_forward_s = e.head_tp_s / 2;
  edges_.head_tp_backward_s = e.head_tp_s / 2;
  // Parameters per GPU at the pipeline ends, as op_costs' stage_params counts them.
  const StageEdgeParams edge_params = stage_edge_params(m, p);
  edges_.embedding_params = edge_params.embedding;
  edges_.head_params = edge_params.head;

  p2p_ = pipeline_p2p(m, p, c, hw);
  if (p.pp > 1) {
    // pipeline_p2p times the send at the plan's worst boundary; the
    // simulator places each boundary, with the same all-gather on top.
    const double extra = p2p_.time_s - p2p_time(p2p_.bytes, layout_.pp_crosses_nodes, c, hw);
    p2p_intra_s_ = p2p_time(p2p_.bytes, false, c, hw) + extra;
    p2p_inter_s_ = p2p_time(p2p_.bytes, true, c, hw) + extra;
  }
  embedding_sync_s_ = dp_sync_cost(m, p, c, hw).embedding_sync_s;
  optimizer_ = optimizer_cost(m, p, c, hw);
  const double params = stage_params(m, p);
  optimizer_params_ = p.zero_stage >= 1 ? params / p.shard_group() : params;
  stage_params_ = params;
  if (p.onebit_adam && p.dp_cp() > 1) {
    const OnebitAdamCost ob = onebit_adam_cost(m, p, c, hw);
    onebit_exchange_s_ = ob.compressed_s;
    onebit_kernels_s_ = ob.compress_kernels_s;
  }
}

double ModelCostSource::zero3_gather_s(double params, bool backward) const {
  // Hybrid sharding: the gathers run in the shard group (vocab/collective place_groups).
  if (plan_.hybrid_sharded())
    return collective_time(Collective::all_gather, params * param_bytes_per_param(), layout_.shard, cluster_, hw_);
  if (!plan_.zeropp) return CostSource::zero3_gather_s(params, backward);
  if (backward) {
    // hpZ: the secondary partition lives inside the node.
    const GroupPlacement node{layout_.dp.per_node, layout_.dp.per_node};
    return collective_time(Collective::all_gather, params * param_bytes_per_param(), node, cluster_, hw_);
  }
  return collective_time(Collective::all_gather, zeropp_weight_wire_bytes(plan_, hw_.engine) * params, layout_.dp, cluster_,
                         hw_) +
         zeropp_weight_quantize_time(params, params / plan_.dp_cp(), cluster_, hw_);
}

double ModelCostSource::zero3_gather_bytes(double params, bool backward) const {
  if (!plan_.zeropp || backward) return CostSource::zero3_gather_bytes(params, backward);
  return zeropp_weight_wire_bytes(plan_, hw_.engine) * params;
}

double ModelCostSource::zero3_reduce_s(double bytes) const {
  // Hybrid sharding: the reduce-scatter in the shard group; the replicas'
  // all-reduce is its own op (replica_reduce_s).
  if (plan_.hybrid_sharded()) return collective_time(Collective::reduce_scatter, bytes, layout_.shard, cluster_, hw_);
  if (!plan_.zeropp) return CostSource::zero3_reduce_s(bytes);
  return zeropp_gradient_reduce_time(bytes, plan_, cluster_, hw_);
}

double ModelCostSource::replica_reduce_s(double bytes) const {
  return hybrid_replica_allreduce_time(bytes, plan_, cluster_, hw_);
}

bool ModelCostSource::replica_reduce_every_microbatch() const { return hybrid_reduces_every_microbatch(hw_); }

bool ModelCostSource::prefetches_next_module() const { return hw_.engine.zero3_gather == GatherUnit::module; }

// onebit_adam_cost times the most loaded stage; other stages scale with their
// parameters (the exchange is bandwidth-bound, the kernels memory-bound).
double ModelCostSource::onebit_exchange_s(double params) const {
  return stage_params_ > 0 ? onebit_exchange_s_ * params / stage_params_ : 0.0;
}

double ModelCostSource::onebit_kernels_s(double params) const {
  return stage_params_ > 0 ? onebit_kernels_s_ * params / stage_params_ : 0.0;
}

double ModelCostSource::p2p_s(bool crosses_nodes) const { return crosses_nodes ? p2p_inter_s_ : p2p_intra_s_; }

double ModelCostSource::dp_collective_s(DpCollective kind, double bytes) const {
  const Collective k = kind == DpCollective::all_reduce      ? Collective::all_reduce
                       : kind == DpCollective::reduce_scatter ? Collective::reduce_scatter
                                                              : Collective::all_gather;
  return collective_time(k, bytes, layout_.dp, cluster_, hw_);
}

double ModelCostSource::pcie_s(double bytes) const { return pcie_copy_time(bytes, cluster_, hw_); }

// op_costs times NVMe per node; the node's GPUs in use share it (as
// optimizer_cost charges it: bytes × GPUs per node in use).
double ModelCostSource::nvme_s(double bytes) const {
  return nvme_copy_time(bytes * gpus_per_node_in_use(plan_, cluster_), cluster_, hw_);
}

// op_costs times the optimizer for the whole partition of the most loaded
// stage; the step is linear in parameters (memory-bound on the GPU, the host's
// Adam rate on the CPU), so other partitions scale. (op_costs has no
// per-parameter-count entry point.)
double ModelCostSource::gpu_optimizer_s(double params) const {
  return optimizer_params_ > 0 ? optimizer_.gpu_step_s * params / optimizer_params_ : 0.0;
}

double ModelCostSource::host_optimizer_s(double params) const {
  return optimizer_params_ > 0 ? optimizer_.host_step_s * params / optimizer_params_ : 0.0;
}

}  // namespace ztune::sim
