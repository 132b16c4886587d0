// Data parallelism, ZeRO, the optimizer step and offload copies: the
// per-iteration costs outside the transformer layer (op_costs.hpp's last
// section). Split from op_costs.cpp, which keeps the kernels and the layer
// (collectives: collective_costs.cpp; FP8: fp8_costs.cpp).
#include <algorithm>
#include <cmath>

#include "ztune/model/cpu_executor_costs.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/time_model.hpp"
#include "ztune/model/zeropp.hpp"

namespace ztune {

StageEdgeParams stage_edge_params(const Transformer& m, const Plan& p) {
  const double word = static_cast<double>(m.vocab) * m.hidden / p.tp;
  const double positions = m.embedding_params() - static_cast<double>(m.vocab) * m.hidden;
  const double final_norm = m.head_params() - (m.tied_embeddings ? 0.0 : static_cast<double>(m.vocab) * m.hidden);
  return {word + positions, final_norm + (m.tied_embeddings ? (p.pp > 1 ? word : 0.0) : word)};
}

double stage_params(const Transformer& m, const Plan& p) {
  const double layer = m.params_per_layer() / p.tp;
  const auto [embedding, head] = stage_edge_params(m, p);
  if (p.pp == 1) return m.layers * layer + embedding + head;
  // The largest stage: an end stage with its edge, or a middle one (uneven stages).
  const double first = stage_layer_count(p, m.layers, 0) * layer + embedding;
  const double last = stage_layer_count(p, m.layers, p.pp - 1) * layer + head;
  return std::max({first, last, max_middle_stage_layers(p, m.layers) * layer});
}

DpSyncCost dp_sync_cost(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  DpSyncCost d;
  const GroupLayout l = place_groups(p, c);
  if (p.pp > 1 && m.tied_embeddings) {
    // Megatron keeps a copy of the word embedding on the last stage for the LM
    // head and all-reduces the two gradients once per step.
    const double word = static_cast<double>(m.vocab) * m.hidden / p.tp * 2.0;
    d.embedding_sync_s =
        collective_time(Collective::all_reduce, word, GroupPlacement{2, l.pp_crosses_nodes ? 1 : 2}, c, hw);
  }
  const double params = stage_params(m, p);
  // Gradients leave the backward in reduce buckets with dp 1 too (to the host
  // with optimizer offload).
  d.buckets = std::max(1, static_cast<int>(std::ceil(params / p.reduce_bucket_elems)));
  // FSDP reduce-scatters each module's gradients as its backward ends.
  if (p.zero_stage == 3 && hw.engine.zero3_gather == GatherUnit::module) d.buckets = zero3_gathers_per_pass(m, p, hw);
  if (p.dp_cp() <= 1) return d;  // the gradients reduce over dp × cp (l.dp)
  const double gbytes = gradient_reduce_bytes(p, hw.engine) * params;  // the engine's reduction dtype
  const double pbytes = param_gather_bytes_per_param(m, p) * params;  // parameters as gathered
  const double bucket = gbytes / d.buckets;
  const double per_bucket_ar = collective_time(Collective::all_reduce, bucket, l.dp, c, hw);
  const double per_bucket_rs = collective_time(Collective::reduce_scatter, bucket, l.dp, c, hw);
  // Hybrid sharding (ZeRO-3 only, check_plan_shape): reduce-scatter in the
  // shard group, then all-reduce of the bucket's partition across replicas.
  const bool hybrid = p.hybrid_sharded();
  const double hybrid_rs = hybrid ? collective_time(Collective::reduce_scatter, bucket, l.shard, c, hw) : 0.0;
  const double hybrid_ar = hybrid_replica_allreduce_time(bucket, p, c, hw);
  const int ag_buckets = std::max(1, static_cast<int>(std::ceil(params / p.allgather_bucket_elems)));
  const double param_ag = ag_buckets * collective_time(Collective::all_gather, pbytes / ag_buckets, l.dp, c, hw);
  switch (p.zero_stage) {
    case 0:
      d.per_step_s = d.buckets * per_bucket_ar;
      d.bytes_per_step = gbytes;
      break;
    case 1:
      // reduce_scatter false: each bucket all-reduced whole (DeepSpeed's
      // stage 1 before March 2020, 1.5× data parallelism's traffic with the
      // parameters' all-gather).
      d.per_step_s = d.buckets * (p.reduce_scatter ? per_bucket_rs : per_bucket_ar);
      d.param_allgather_s = param_ag;
      d.bytes_per_step = gbytes + pbytes;
      break;
    case 2:
      d.per_microbatch_s = d.buckets * (p.reduce_scatter ? per_bucket_rs : per_bucket_ar);
      d.bytes_per_microbatch = gbytes;
      d.param_allgather_s = param_ag;
      d.bytes_per_step = gbytes * p.grad_accum + pbytes;
      break;
    default:
      if (p.zero3_held_through_step()) {
        // ZeRO-3 under a pipeline: the whole accumulated gradients are
        // reduce-scattered once, in the stage's last backward (with hybrid
        // sharding in the shard group, then all-reduced across replicas); the
        // parameters' one gather per step is zero3_gather_cost's.
        d.per_step_s = d.buckets * (hybrid ? hybrid_rs + hybrid_ar : per_bucket_rs);
        d.replica_allreduce_s = hybrid ? d.buckets * hybrid_ar : 0.0;
        d.replica_bytes = hybrid ? gbytes / p.shard_group() : 0.0;
        d.bytes_per_step = gbytes + d.replica_bytes;
        break;
      }
      if (p.zeropp) {
        // ZeRO++ qgZ: int4 hierarchical all-to-all instead of the reduce-scatter.
        d.per_microbatch_s = d.buckets * zeropp_gradient_reduce_time(bucket, p, c, hw);
        d.bytes_per_microbatch = zeropp_grad_wire_bytes(p, hw.engine) * params;
      } else if (hybrid) {
        d.per_microbatch_s = d.buckets * hybrid_rs;
        d.bytes_per_microbatch = gbytes;
        d.replica_bytes = gbytes / p.shard_group();
        d.replica_allreduce_s = d.buckets * hybrid_ar;
        // FSDP reduces each module across replicas as its backward ends
        // (HYBRID_SHARD: reduce-scatter then all-reduce per module); MiCS and
        // ztune's executor all-reduce the accumulated partitions once, at the
        // accumulation boundary.
        d.replica_per_microbatch = hybrid_reduces_every_microbatch(hw);
        if (d.replica_per_microbatch) {
          d.per_microbatch_s += d.replica_allreduce_s;
          d.bytes_per_microbatch += d.replica_bytes;
          d.bytes_per_step = d.bytes_per_microbatch * p.grad_accum;
        } else {
          d.per_step_s = d.replica_allreduce_s;
          d.bytes_per_step = d.bytes_per_microbatch * p.grad_accum + d.replica_bytes;
        }
        break;
      } else {
        d.per_microbatch_s = d.buckets * per_bucket_rs;
        d.bytes_per_microbatch = gbytes;
      }
      d.bytes_per_step = d.bytes_per_microbatch * p.grad_accum;
      break;
  }
  return d;
}

bool bf16_optimizer_runs(const Plan& p, const EngineProfile& e) {
  return e.bf16_pipeline_fp32_accumulation && deepspeed_runs_bf16_optimizer(p.precision, p.pp, p.zero_stage);
}

double gradient_reduce_bytes(const Plan& p, const EngineProfile& e) {
  // A dtype the plan states is what the engine is told to move (Megatron-LM
  // --grad-reduce-in-bf16, DeepSpeed communication_data_type, which its
  // allreduce_bucket casts each bucket to, FSDP reduce_dtype).
  if (p.grad_reduce_dtype) return bytes_of(*p.grad_reduce_dtype);
  if (p.precision == Precision::bf16 && (e.bf16_reduce_fp32 || bf16_optimizer_runs(p, e))) return 4.0;
  if (p.precision == Precision::fp16 && e.fp16_reduce_fp32) return 4.0;
  return bytes_of(storage_precision(p));  // the stored gradients (ztune's executor's too: issue 24)
}

int parameter_tensors_per_layer(const Transformer& m) {
  const int norms = 2 * (m.norm == NormKind::layernorm ? 2 : 1);
  const int linears = 4;
  const int biases = m.bias ? 4 : (m.qkv_bias ? 1 : 0);
  return norms + linears + biases;
}

int stage_parameter_tensors(const Transformer& m, const Plan& p) {
  const int embedding = 1 + (m.position == PositionEmbedding::learned ? 1 : 0);
  const int final_norm = m.norm == NormKind::layernorm ? 2 : 1;
  const int per_layer = parameter_tensors_per_layer(m);
  if (p.pp == 1) return m.layers * per_layer + embedding + final_norm + (m.tied_embeddings ? 0 : 1);
  const int head = final_norm + 1;  // an untied output layer, or the tied embedding's copy
  int most = 0;
  for (int i = 0; i < p.pp; ++i)
    most = std::max(most, stage_layer_count(p, m.layers, i) * per_layer + (i == 0 ? embedding : 0) +
                              (i == p.pp - 1 ? head : 0));
  return most;
}

double bf16_grad_accumulation_time(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  if (!bf16_optimizer_runs(p, hw.engine)) return 0;
  const double params = stage_params(m, p);
  const int tensors = stage_parameter_tensors(m, p);  // a pipeline's (bf16_optimizer_runs needs pp > 1)
  const double gpu = memory_bound_time(18.0 * params, c.node.gpu, hw, 2 * tensors);
  const double host = 2.0 * tensors * hw.engine.host_op_s;
  return std::max(gpu, host);
}

double hybrid_replica_allreduce_time(double bucket_bytes, const Plan& p, const Cluster& c,
                                     const HardwareProfile& hw) {
  if (!p.hybrid_sharded()) return 0;
  return collective_time(Collective::all_reduce, bucket_bytes / p.shard_group(), place_groups(p, c).replica, c, hw);
}

bool hybrid_reduces_every_microbatch(const HardwareProfile& hw) { return hw.engine.zero3_gather == GatherUnit::module; }

int zero3_gathers_per_pass(const Transformer& m, const Plan& p, const HardwareProfile& hw) {
  const double params = stage_params(m, p);
  // FSDP wraps each transformer block (and the embedding/head) as one module:
  // one all-gather per block and pass, whatever its size.
  if (hw.engine.zero3_gather == GatherUnit::module) return max_stage_layers(p, m.layers) + 1;
  // DeepSpeed: layer by layer in prefetch buckets; one gather per layer at least.
  const double per_layer = m.params_per_layer() / p.tp;
  const double bucket_elems = std::max(std::min(p.prefetch_bucket_elems, params), per_layer);
  return std::max(1, static_cast<int>(std::ceil(params / bucket_elems)));
}

double zero3_backward_regather_share(const Transformer& m, const Plan& p, const HardwareProfile& hw) {
  if (p.zero_stage != 3 || p.recompute != Recompute::full || !hw.engine.zero3_recompute_regathers) return 0;
  // Megatron's block in forward order (QKV, output, FC1, FC2), this GPU's
  // tensor-parallel shares.
  const std::array<double, 4> weights = m.block_weight_params();
  double later = 0;  // Σ_{j>i} p_j
  double released = 0;
  double total = 0;
  for (auto i = weights.size(); i-- > 0;) {
    const double w = weights[i] / p.tp;
    if (w > p.param_persistence_threshold) {
      total += w;
      if (2.0 * later >= p.max_reuse_distance) released += w;
    }
    later += w;
  }
  return total > 0 ? released / total : 0.0;
}

Zero3GatherCost zero3_gather_cost(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  Zero3GatherCost z;
  if (p.zero_stage != 3 || p.dp_cp() <= 1) return z;
  const GroupLayout l = place_groups(p, c);
  const double params = stage_params(m, p);
  const double stored = bytes_of(storage_precision(p)) * params;  // as stored
  z.bytes_per_pass = stored;
  const int gathers = zero3_gathers_per_pass(m, p, hw);
  z.gathers = gathers;
  // The gathers run in the shard group: all of dp × cp, or dp_shard ranks
  // with hybrid sharding (usually inside a node, at its bandwidth).
  z.fwd_s = gathers * collective_time(Collective::all_gather, z.bytes_per_pass / gathers, l.shard, c, hw);
  // The backward window: one pass (with a regathering engine and full
  // recomputation, the recomputation's), plus what that released again.
  // Megatron's block method regathers only for the layers it recomputes.
  const double recomputed = recomputed_layer_fraction(p, m.layers);
  const double backward_passes = 1.0 + zero3_backward_regather_share(m, p, hw) * recomputed;
  // ZeRO-3 under a pipeline holds the gathered parameters to the last
  // backward: nothing is gathered again.
  z.bwd_s = p.zero3_held_through_step() ? 0.0 : backward_passes * z.fwd_s;
  if (p.zeropp) {
    // ZeRO++: forward gathers int8 weights over the whole group (qwZ) with
    // their quantize/dequantize kernels; backward gathers 16-bit weights from
    // the node-local secondary partition (hpZ), inside the node.
    const double q = zeropp_weight_wire_bytes(p, hw.engine) * params;
    z.bytes_per_pass = q;
    z.fwd_s = gathers * collective_time(Collective::all_gather, q / gathers, l.dp, c, hw) +
              zeropp_weight_quantize_time(params, params / p.dp, c, hw);
    const GroupPlacement node{l.dp.per_node, l.dp.per_node};
    z.bwd_s = backward_passes * gathers * collective_time(Collective::all_gather, stored / gathers, node, c, hw);
  }
  return z;
}

double pcie_copy_time(double bytes, const Cluster& c, const HardwareProfile& hw) {
  if (bytes <= 0) return 0;
  return bytes / (c.node.pcie_bandwidth_gbps * 1e9 * hw.pcie_efficiency);
}

double nvme_copy_time(double bytes, const Cluster& c, const HardwareProfile& hw) {
  if (bytes <= 0 || c.node.nvme_bandwidth_gbps <= 0) return 0;
  return bytes / (c.node.nvme_bandwidth_gbps * 1e9 * hw.nvme_efficiency);
}

OptimizerCost optimizer_cost(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  OptimizerCost o;
  const double params = stage_params(m, p);
  const double part = p.zero_stage >= 1 ? params / p.shard_group() : params;  // the GPU's optimizer partition
  const int gpn = gpus_per_node_in_use(p, c);
  const double eb = bytes_of(storage_precision(p));  // parameters and gradients as stored
  if (p.offload_params != OffloadTarget::none) {
    // Each micro-batch fetches the GPU's partition (16-bit, or as the engine
    // stores it) for forward and backward.
    // From NVMe the reads and the host→device copies are pipelined module by
    // module (ZeRO-Infinity's overlap-centric design, Rajbhandari et al. 2021
    // §6.2: the NVMe→CPU read of one parameter beside the CPU→GPU copy of the
    // previous), so the slower of the two bounds the fetch, as in the simulator.
    // A regathering engine fetches again what its recomputation released
    // (zero3_backward_regather_share), as it gathers it again.
    const double fetch = (2.0 + zero3_backward_regather_share(m, p, hw) * recomputed_layer_fraction(p, m.layers)) *
                         (eb * params / p.shard_group());
    o.zero3_param_fetch_s = pcie_copy_time(fetch, c, hw);
    if (p.offload_params == OffloadTarget::nvme)
      o.zero3_param_fetch_s = std::max(o.zero3_param_fetch_s, nvme_copy_time(fetch * gpn, c, hw));
  }
  if (p.offload_optimizer == OffloadTarget::none) {
    // Fused multi-tensor Adam: read fp32 master, m, v and the gradient (16 B),
    // write master, m, v (12 B) and the 16-bit copy (2 B), plus the unscale /
    // norm pass over the gradient (8 B): 38 bytes per parameter; states kept
    // in 16 bits (adam_state_bytes' K below 12) are read and written at their
    // width. ztune's executor training fp32 (Backend::adamw_fused, its
    // parameters the masters) writes no 16-bit copy and reads its gradient
    // once for the norm: 16 + 12 + 4 = 32; with 16-bit storage it keeps
    // masters and writes the copies as the engines do, unless the master is
    // the parameters: the engines' bf16 ones (OptimizerDtypes::in_params), the
    // executor's any 16-bit ones of the master's dtype (executor_state_bytes).
    const OptimizerDtypes states = optimizer_dtypes_kept(p, c, hw);
    // In place: the parameters are read and written as the master, and no 16-bit copy (in the 14) is written.
    const double states_rw = states.in_params ? 2.0 * (bytes_of(states.master) + 2.0 * bytes_of(states.moments)) - 2.0
                                      : 2.0 * adam_state_bytes(states);
    // ztune's CPU executor instead: fp32 AdamW, its gradient-norm pass and
    // (ZeRO 2/3) the per-micro-batch accumulation of reduced pieces
    // (cpu_executor_costs.hpp). 1-bit Adam keeps the fused count: its CPU path
    // is a separate optimizer.
    o.gpu_step_s = c.device_kind == DeviceKind::cpu && !p.onebit_adam
                       ? cpu_work_time(cpu_optimizer_work(m, p, params), c.node.gpu, hw)
                       : memory_bound_time(((hw.engine.executor && p.precision == Precision::fp32 ? 8.0 : 14.0) +
                                                states_rw) * part, c.node.gpu, hw, 4);
    // Transformer Engine's FP8 weight copies are refreshed from the updated
    // weights once a step (fp8_weight_cast_bytes), beside the step's kernels.
    if (const double cast = fp8_weight_cast_bytes(m, p, hw.engine.fp8); cast > 0)
      o.gpu_step_s += memory_bound_time(cast, c.node.gpu, hw);
    return o;
  }
  // CPU Adam: the node's rate is shared by its GPUs' partitions.
  o.host_step_s = part / (c.node.cpu_adam_gparams_per_s * 1e9 / gpn);
  // Gradients come down once per micro-batch from stage 2 (reduce-scattered
  // partitions), once per step for stage 1; updated 16-bit parameters go up
  // (fp32 ones from an engine storing fp32).
  const double grad_copies = p.zero_stage >= 2 ? p.grad_accum : 1.0;
  o.pcie_grads_s = grad_copies * pcie_copy_time(eb * part, c, hw);
  o.pcie_params_s = pcie_copy_time(eb * part, c, hw);
  if (p.offload_optimizer == OffloadTarget::nvme) {
    // fp32 master, m, v read and written once per step; the node's NVMe is shared.
    o.nvme_s = nvme_copy_time(2.0 * adam_state_bytes(optimizer_dtypes(p)) * part * gpn, c, hw);
  }
  return o;
}

}  // namespace ztune
