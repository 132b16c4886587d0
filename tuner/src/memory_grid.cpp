#include "ztune/tuner/memory_grid.hpp"

#include <utility>
#include <vector>

#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/hf_import.hpp"
#include "ztune/model/memory_model.hpp"

namespace ztune {
namespace {

struct Offloads {
  OffloadTarget optimizer, params;
};

/// The (optimizer, parameters) offloads the grid shows for a stage: DeepSpeed's
/// table's rows and ZeRO-Infinity's NVMe ones; the plan rules drop the rest.
std::vector<Offloads> offloads_for(int stage) {
  using O = OffloadTarget;
  if (stage == 0) return {{O::none, O::none}};
  if (stage < 3) return {{O::none, O::none}, {O::cpu, O::none}};
  return {{O::none, O::none}, {O::cpu, O::none}, {O::cpu, O::cpu}, {O::nvme, O::none}, {O::nvme, O::nvme}};
}

void add_deepspeed(MemoryGridRow& row, const MemoryGrid& g) {
  if (row.dp_shard > 0) {
    row.no_deepspeed_why = "DeepSpeed's estimators shard ZeRO-3 over every GPU (none counts MiCS's groups)";
    return;
  }
  if (!g.states.fp32()) {
    row.no_deepspeed_why = "DeepSpeed's estimators count fp32 optimizer states";
    return;
  }
  if (row.precision == Precision::fp32) {
    row.no_deepspeed_why = "DeepSpeed's estimators assume 16-bit mixed precision";
    return;
  }
  if (row.zero_stage < 2) {
    row.no_deepspeed_why = "DeepSpeed estimates stages 2 and 3 only";
    return;
  }
  if (row.offload_optimizer == OffloadTarget::nvme || row.offload_params == OffloadTarget::nvme) {
    row.no_deepspeed_why = "DeepSpeed's estimators count CPU offload only";
    return;
  }
  const bool opt_cpu = row.offload_optimizer == OffloadTarget::cpu;
  if (row.zero_stage == 2) {
    row.deepspeed = deepspeed_zero2_estimate(g.params, g.gpus_per_node, g.nodes, opt_cpu);
    row.deepspeed_no_init = row.deepspeed;
    return;
  }
  const bool params_cpu = row.offload_params == OffloadTarget::cpu;
  row.deepspeed = deepspeed_zero3_estimate(g.params, g.largest.params, g.gpus_per_node, g.nodes, opt_cpu, params_cpu,
                                           /*zero_init=*/true);
  row.deepspeed_no_init = deepspeed_zero3_estimate(g.params, g.largest.params, g.gpus_per_node, g.nodes, opt_cpu,
                                                   params_cpu, /*zero_init=*/false);
}

}  // namespace

double model_state_gpu_bytes(const MemoryPrediction& mp) {
  return mp.line(MemLine::params) + mp.line(MemLine::grads) + mp.line(MemLine::optimizer) +
         mp.line(MemLine::comm_buckets) + mp.line(MemLine::zero3_gathered);
}

MemoryGrid memory_grid(const Transformer& m, const Cluster& c, const std::vector<Precision>& precisions,
                       bool cluster_rules, const OptimizerDtypes& states, int dp_shard) {
  MemoryGrid g;
  g.dp_shard = dp_shard;
  g.params = m.total_params();
  g.states = states;
  // A Hugging Face Llama-family model keeps q/k/v and gate/up apart (GPT-2,
  // GPT-NeoX and MPT fuse QKV as Megatron does, and their MLPs are not gated).
  g.largest = deepspeed_largest_module(m, imported_from_hf_config(m) && m.activation == Activation::swiglu);
  g.nodes = c.nodes;
  g.gpus_per_node = c.node.gpus;
  g.gpus = c.total_devices();
  g.capacities = cluster_rules;
  const HardwareProfile no_profile{};  // memory reads it only for 1-bit Adam and ZeRO++, not in the grid
  // Each stage over every GPU, then (with a shard group) the stage-3 rows
  // again, hybrid-sharded.
  std::vector<std::pair<int, int>> stages{{0, 0}, {1, 0}, {2, 0}, {3, 0}};  // (stage, shard group)
  if (dp_shard > 0) stages.emplace_back(3, dp_shard);
  for (Precision prec : precisions) {
    for (const auto& [stage, shard] : stages) {
      for (const Offloads& o : offloads_for(stage)) {
        Plan p;
        p.dp = g.gpus;
        p.micro_batch = 1;
        p.grad_accum = 1;
        p.global_batch = g.gpus;
        p.zero_stage = stage;
        p.dp_shard = shard;
        p.offload_optimizer = o.optimizer;
        p.offload_params = o.params;
        p.precision = prec;
        // fp32 training's master is its parameters (the plan rules hold it to fp32).
        p.master_dtype = prec == Precision::fp32 ? Precision::fp32 : states.master;
        p.moments_dtype = states.moments;
        p.param_remainders = states.remainders;
        if (cluster_rules ? check_plan(p, m, c).has_value() : check_plan_shape(p, m).has_value()) continue;
        // The 16-bit rows' states as their plans keep them (a master of their own dtype is their parameters).
        if (prec != Precision::fp32) g.states = optimizer_dtypes(p);
        MemoryGridRow row;
        row.zero_stage = p.zero_stage;
        row.dp_shard = p.dp_shard;
        row.offload_optimizer = o.optimizer;
        row.offload_params = o.params;
        row.precision = prec;
        row.ztune = predict_memory(m, p, c, no_profile);
        row.ztune_gpu_bytes = model_state_gpu_bytes(row.ztune);
        add_deepspeed(row, g);
        g.rows.push_back(std::move(row));
      }
    }
  }
  return g;
}

}  // namespace ztune
