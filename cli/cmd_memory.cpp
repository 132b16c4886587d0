// ztune memory --model M --gpus N [--nodes K] [--cluster C]: the model-state
// memory grid (ZeRO stage × offload × precision) in the ZeRO paper's accounting beside
// DeepSpeed's own estimators (tuner/memory_grid.hpp), per GPU and per node.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "plan_flags.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/memory_grid.hpp"

namespace ztune::cli {
namespace {


struct MemoryFlags {
  std::string model;
  std::string cluster;
  int gpus = 0;
  int nodes = 0;
  int seq = 0;
  std::string precision = "all";
  std::string master_dtype = "fp32", moments_dtype = "fp32";
  bool param_remainders = false;
  int dp_shard = 0;
  bool json = false;
};

/// The devices the grid is for: --cluster's nodes (its GPUs, capacities and
/// rules), reshaped by --gpus/--nodes; without --cluster, N GPUs on K nodes of
/// no particular kind (no capacities: nothing is said to fit or not).
Cluster grid_cluster(const MemoryFlags& f) {
  if (f.cluster.empty()) {
    const int nodes = f.nodes > 0 ? f.nodes : 1;
    const int gpus = f.gpus > 0 ? f.gpus : nodes;  // DeepSpeed's defaults: 1 node of 1 GPU
    if (gpus % nodes != 0)
      throw InputError("--gpus: " + std::to_string(gpus) + " GPUs do not divide over " + std::to_string(nodes) +
                       " nodes; expected a multiple of --nodes");
    Cluster c;
    c.name = std::to_string(gpus) + " GPUs";
    c.nodes = nodes;
    c.node.gpus = gpus / nodes;
    if (c.node.gpus > kMaxNodeGpus)
      throw InputError("--gpus: " + std::to_string(c.node.gpus) + " GPUs per node; expected at most " +
                       std::to_string(kMaxNodeGpus) + " (--nodes spreads them)");
    return c;
  }
  Cluster c = load_cluster(f.cluster);
  const int per_node = c.node.gpus;
  if (f.gpus == 0) {
    if (f.nodes > 0) c.nodes = f.nodes;
    return c;
  }
  const int nodes = f.nodes > 0 ? f.nodes : (f.gpus + per_node - 1) / per_node;
  if (nodes > kMaxClusterNodes)
    throw InputError("--gpus: " + std::to_string(f.gpus) + " GPUs need " + std::to_string(nodes) + " nodes of " +
                     c.name + " (" + std::to_string(per_node) + " GPUs each); expected at most " +
                     std::to_string(kMaxClusterNodes) + " nodes");
  if (f.gpus % nodes != 0 || f.gpus / nodes > per_node)
    throw InputError("--gpus: " + std::to_string(f.gpus) + " GPUs on " + std::to_string(nodes) + " nodes of " +
                     c.name + " (" + std::to_string(per_node) + " GPUs each): expected the same count on every " +
                     "node, at most " + std::to_string(per_node));
  c.nodes = nodes;
  c.node.gpus = f.gpus / nodes;  // the GPUs in use on each node
  return c;
}

std::vector<Precision> grid_precisions(const MemoryFlags& f, const Cluster& c, bool have_cluster) {
  if (f.precision == "all") {
    // Mixed precision as the cluster trains it (bf16 and fp16 keep the same
    // bytes), and fp32; a CPU cluster's default is fp32 already.
    const Precision mixed = have_cluster && default_precision(c) != Precision::fp32 ? default_precision(c)
                                                                                   : Precision::bf16;
    if (have_cluster && c.device_kind == DeviceKind::cpu) return {Precision::fp32};
    return {mixed, Precision::fp32};
  }
  return {*precision_of(f.precision)};
}

std::string offload_text(const MemoryGridRow& r) {
  if (r.offload_optimizer == OffloadTarget::none && r.offload_params == OffloadTarget::none) return "none";
  if (r.offload_params == OffloadTarget::none) return "optimizer→" + to_string(r.offload_optimizer);
  if (r.offload_optimizer == r.offload_params) return "optimizer+params→" + to_string(r.offload_params);
  return "optimizer→" + to_string(r.offload_optimizer) + " params→" + to_string(r.offload_params);
}

std::string precision_text(Precision p, bool have_cluster) {
  if (p == Precision::fp32) return "fp32";
  return have_cluster ? to_string(p) + " mixed" : "16-bit mixed";
}

std::string in_unit(double bytes, const ByteUnit& u) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2f", bytes / u.bytes);
  return b;
}

/// The largest figure of the table, which picks its unit.
double largest_figure(const MemoryGrid& g) {
  double most = 0;
  for (const auto& r : g.rows) {
    most = std::max({most, r.ztune_gpu_bytes, r.ztune.host_bytes_per_node, r.ztune.nvme_bytes_per_node});
    if (r.deepspeed)
      most = std::max({most, r.deepspeed->gpu_bytes,
                       r.deepspeed->host_bytes_per_node});
  }
  return most;
}

/// What overflows ("GPU", "host", "NVMe"), or "yes".
std::string fits_text(const MemoryGridRow& r) {
  // The GPU check here is the model states alone, as the grid counts them:
  // activations and the rest come on top (ztune predict).
  std::string no;
  auto add = [&](const char* what) { no += (no.empty() ? "" : "+") + std::string(what); };
  if (!r.states_fit_gpu()) add("GPU");
  if (!r.ztune.fits_host) add("host");
  if (!r.ztune.fits_nvme) add("NVMe");
  return no.empty() ? "yes" : "no: " + no;
}

/// A whole byte count as a JSON integer while a double holds it exactly (2^53),
/// else as the double.
nlohmann::json byte_count(double bytes) {
  if (std::fabs(bytes) <= 0x1p53) return static_cast<std::int64_t>(bytes);
  return bytes;
}

nlohmann::json estimate_json(const std::optional<DeepSpeedEstimate>& e) {
  if (!e) return nullptr;
  return {{"gpu_bytes", byte_count(e->gpu_bytes)}, {"host_bytes_per_node", byte_count(e->host_bytes_per_node)}};
}

nlohmann::json grid_json(const MemoryGrid& g, const Transformer& m, const Cluster& c) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& r : g.rows) {
    nlohmann::json lines;
    for (MemLine l : {MemLine::params, MemLine::grads, MemLine::optimizer, MemLine::comm_buckets,
                      MemLine::zero3_gathered})
      lines[kMemLineNames[static_cast<std::size_t>(l)]] = r.ztune.line(l);
    nlohmann::json row = {
        {"zero_stage", r.zero_stage},
        {"dp_shard", r.dp_shard > 0 ? nlohmann::json(r.dp_shard) : nlohmann::json(nullptr)},
        {"offload", {{"optimizer", to_string(r.offload_optimizer)}, {"params", to_string(r.offload_params)}}},
        {"precision", to_string(r.precision)},
        {"ztune",
         {{"gpu_bytes", r.ztune_gpu_bytes},
          {"gpu_lines", lines},
          {"host_bytes_per_node", r.ztune.host_bytes_per_node},
          {"nvme_bytes_per_node", r.ztune.nvme_bytes_per_node}}},
        {"deepspeed", estimate_json(r.deepspeed)},
        {"deepspeed_without_zero_init", estimate_json(r.deepspeed_no_init)}};
    if (!r.deepspeed) row["deepspeed_missing_why"] = r.no_deepspeed_why;
    if (g.capacities)
      row["fits"] = {{"gpu", r.states_fit_gpu()},
                     {"host", r.ztune.fits_host},
                     {"nvme", r.ztune.fits_nvme}};
    rows.push_back(std::move(row));
  }
  nlohmann::json out = {{"model", m.name},
                        {"params", g.params},
                        {"largest_module", {{"name", g.largest.name}, {"params", g.largest.params}}},
                        {"gpus", g.gpus},
                        {"nodes", g.nodes},
                        {"gpus_per_node", g.gpus_per_node},
                        {"excluded", {"activations", "workspace", "logits", "runtime", "fragmentation"}},
                        {"deepspeed_estimators", "estimate_zero2/3_model_states_mem_needs, DeepSpeed v0.19.8, "
                                                 "additional_buffer_factor 1.5"},
                        {"optimizer_states",
                         {{"master_dtype", to_string(g.states.master)},
                          {"moments_dtype", to_string(g.states.moments)},
                          {"param_remainders", g.states.remainders},
                          {"bytes_per_param", adam_state_bytes(g.states)}}},
                        {"rows", rows}};
  if (g.capacities) {
    out["cluster"] = c.name;
    out["capacity"] = {{"gpu_bytes", c.node.gpu.memory_bytes()},
                       {"host_bytes_per_node", c.node.host_memory_gb * 1e9},
                       {"nvme_bytes_per_node", c.node.nvme_size_tb * 1e12}};
  }
  return out;
}

void print_grid(const MemoryGrid& g, const Transformer& m, const Cluster& c) {
  const ByteUnit weights = byte_unit_for(4 * g.params);
  std::printf("Model states of %s: %s parameters (%.1f %s in fp32); DeepSpeed's largest layer: the %s, %s\n",
              m.name.c_str(), params_text(g.params).c_str(), 4 * g.params / weights.bytes, weights.name,
              g.largest.name.c_str(), params_text(g.largest.params).c_str());
  std::printf("on %d GPU%s (%d node%s × %d), all data parallel", g.gpus, g.gpus == 1 ? "" : "s", g.nodes,
              g.nodes == 1 ? "" : "s", g.gpus_per_node);
  if (g.dp_shard > 0)
    std::printf("; \"3 shard%d\": ZeRO-3 sharded in %d groups of %d and replicated across them (hybrid "
                "sharding: FSDP HYBRID_SHARD, DeepSpeed MiCS)", g.dp_shard, g.gpus / g.dp_shard, g.dp_shard);
  if (g.capacities)
    std::printf("; %s: %.1f GiB per GPU, %.0f GiB host and %.0f GiB NVMe per node", c.name.c_str(),
                c.node.gpu.memory_bytes() / kBytesPerGiB, c.node.host_memory_gb * 1e9 / kBytesPerGiB,
                c.node.nvme_size_tb * 1e12 / kBytesPerGiB);
  std::printf("\n\n");

  const ByteUnit u = byte_unit_for(largest_figure(g));
  std::vector<std::vector<std::string>> cells;
  std::set<std::string> missing;
  for (const auto& r : g.rows) {
    const bool ds = r.deepspeed.has_value();
    if (!ds) missing.insert(r.no_deepspeed_why);
    std::vector<std::string> row{std::to_string(r.zero_stage) + (r.dp_shard > 0 ? " shard" + std::to_string(r.dp_shard) : ""),
                                 offload_text(r),
                                 precision_text(r.precision, g.capacities),
                                 in_unit(r.ztune_gpu_bytes, u),
                                 ds ? in_unit(r.deepspeed->gpu_bytes, u) : "-",
                                 in_unit(r.ztune.host_bytes_per_node, u),
                                 ds ? in_unit(r.deepspeed->host_bytes_per_node, u) : "-",
                                 in_unit(r.ztune.nvme_bytes_per_node, u)};
    if (g.capacities) row.push_back(fits_text(r));
    cells.push_back(std::move(row));
  }
  std::vector<std::string> head{"ZeRO", "offload", "precision", "paper", "DeepSpeed", "paper", "DeepSpeed", "paper"};
  if (g.capacities) head.emplace_back("fits");
  std::vector<std::size_t> width(head.size());
  for (std::size_t i = 0; i < head.size(); ++i) width[i] = display_width(head[i]);
  for (const auto& row : cells)
    for (std::size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], display_width(row[i]));
  // The unit groups over their two columns each (GiB: per GPU, host per node; NVMe per node).
  const std::size_t lead = width[0] + width[1] + width[2] + 6;
  const std::size_t gpu_w = width[3] + width[4] + 2, host_w = width[5] + width[6] + 2;
  const std::string unit = std::string(" (") + u.name + ")";
  std::printf("%s  %s  %s  %s\n", std::string(lead - 2, ' ').c_str(), pad_right("per GPU" + unit, gpu_w).c_str(),
              pad_right("host/node" + unit, host_w).c_str(), "NVMe/node");
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool number = i >= 3 && i <= 7;
      const std::size_t pad = width[i] - display_width(row[i]);
      line += (i ? "  " : "") + (number ? std::string(pad, ' ') + row[i] : pad_right(row[i], width[i]));
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  };
  print_row(head);
  for (const auto& row : cells) print_row(row);

  std::printf("\nModel states only: parameters, gradients, optimizer states, communication buckets and ZeRO-3's\n"
              "gathered parameters. Activations, workspace, logits, the CUDA context and fragmentation are not\n"
              "counted (nor by DeepSpeed's estimators): `ztune predict` gives a whole plan's memory, its model\n"
              "states counted as its engine keeps them (ztune's executor: its own tensors; --accounting).\n");
  if (g.states.fp32()) {
    std::printf("paper: the ZeRO paper's count, 16-bit parameters and gradients and 12 bytes of fp32 optimizer "
                "state a\nparameter; offloaded optimizer states take 16 bytes a parameter on the host (with the fp32 "
                "gradients).\n");
  } else {
    std::printf("paper: the ZeRO paper's count, 16-bit parameters and gradients and %g bytes of optimizer state a parameter\n"
                "(%s; fp32 states: 12). fp32 rows: the parameters are\n"
                "the masters, the moments as stated. Offload keeps fp32 states: its rows are left out.\n",
                adam_state_bytes(g.states),
                adam_states_text(g.states).c_str());
  }
  std::printf("DeepSpeed: estimate_zero2/3_model_states_mem_needs (v0.19.8): fp32 gradient partitions too (18 bytes a\n"
              "parameter), 4 bytes × the largest layer under ZeRO-3, host figures × 1.5 and with zero.Init (--json\n"
              "has them without it); without offload its host figure is what loading the model takes, and stage 2's\n"
              "with optimizer offload counts 4 bytes a parameter for every GPU of the job\n"
              "(max(4·GPUs, 16)·Ψ·1.5).\n");
  for (const auto& why : missing) std::printf("-: %s.\n", why.c_str());
  if (g.capacities)
    std::printf("fits: the model states against %s's capacities (the GPU's before activations).\n", c.name.c_str());
}

}  // namespace

Command add_memory(CLI::App& root) {
  auto f = std::make_shared<MemoryFlags>();
  auto* app = root.add_subcommand(
      "memory",
      "Model-state memory per GPU and per node for every ZeRO stage × offload × precision, beside DeepSpeed's estimators");
  app->add_option("--model", f->model, "Model: catalog name, ztune model JSON or Hugging Face config.json")
      ->required();
  app->add_option("--gpus", f->gpus,
                  "GPUs in all, every one data parallel (default: the cluster's, or 1 without --cluster)")
      ->check(integer_in(1, static_cast<long long>(kMaxClusterNodes) * kMaxNodeGpus, "a GPU count"));
  app->add_option("--nodes", f->nodes, "Nodes the GPUs are on (default: 1, or as many as --cluster's nodes need)")
      ->check(integer_in(1, kMaxClusterNodes, "a node count"));
  app->add_option("--cluster", f->cluster,
                  "Cluster (catalog name or JSON file): its GPUs' and nodes' capacities and which plans it can run");
  app->add_option("--seq", f->seq, "Override the model's sequence length (learned positions count)")
      ->check(integer_in(kSeqFlag));
  app->add_option("--precision", f->precision, "bf16, fp16, fp32, or all (mixed precision and fp32)")
      ->capture_default_str()
      ->check(CLI::IsMember({"all", "bf16", "fp16", "fp32"}));
  add_optimizer_dtypes(*app, f->master_dtype, f->moments_dtype, f->param_remainders);
  app->add_option("--dp-shard", f->dp_shard,
                  "Hybrid sharding: ZeRO-3 rows also sharded inside groups of N GPUs and replicated across them (FSDP "
                  "HYBRID_SHARD, torchtitan data_parallel_shard_degree, DeepSpeed mics_shard_size); N divides the "
                  "GPUs (N = all of them is plain ZeRO-3: the stage-3 rows)")
      ->check(integer_in(kDpShardFlag));
  app->add_flag("--json", f->json, "Print the grid as JSON");
  return {app, [f]() {
            const Transformer m = load_transformer(f->model, f->seq);
            const bool have_cluster = !f->cluster.empty();
            const Cluster c = grid_cluster(*f);
            const OptimizerDtypes states{*precision_of(f->master_dtype), *precision_of(f->moments_dtype),
                                         f->param_remainders};
            if (f->precision == "fp32" && states.master != Precision::fp32)
              throw InputError("--master-dtype: " + f->master_dtype + " with --precision fp32: fp32 training's "
                               "master weights are its parameters; expected fp32 (or a 16-bit --precision)");
            // One group of every GPU is plain ZeRO-3, as predict takes it: the rows above.
            if (f->dp_shard > 0 && f->dp_shard == c.total_devices()) {
              std::fprintf(stderr, "ztune memory: note: --dp-shard %d: one shard group of all %d GPUs is plain "
                           "ZeRO-3, the stage-3 rows\n", f->dp_shard, f->dp_shard);
              f->dp_shard = 0;
            }
            if (f->dp_shard > 0) {
              // The shard group as a plan takes it (check_plan's rule), said in
              // the grid's words: its GPUs, not a plan's dp × cp.
              Plan probe;
              probe.dp = c.total_devices();
              probe.global_batch = probe.dp;
              probe.zero_stage = 3;
              probe.dp_shard = f->dp_shard;
              const int gpus = probe.dp;
              if (auto why = check_plan_shape(probe, m); why && why->starts_with("$.dp_shard"))
                throw InputError("--dp-shard " + std::to_string(f->dp_shard) + ": " +
                                 (gpus < 4 ? "hybrid sharding needs two or more groups of two GPUs; " +
                                                 std::to_string(gpus) + (gpus == 1 ? " GPU has" : " GPUs have") +
                                                 " none (give --gpus 4 or more)"
                                           : "the " + std::to_string(gpus) + " GPUs do not split into two or "
                                             "more groups of " + std::to_string(f->dp_shard) +
                                             "; expected a divisor of " + std::to_string(gpus) + " from 2 to " +
                                             std::to_string(gpus / 2)));
            }
            const MemoryGrid g =
                memory_grid(m, c, grid_precisions(*f, c, have_cluster), have_cluster, states, f->dp_shard);
            if (g.rows.empty() && !states.fp32())
              throw InputError("--master-dtype/--moments-dtype/--param-remainders: " +
                               adam_states_text(states) +
                               ": no plan of precision " + f->precision + " takes those states (remainders need "
                               "bf16 and an fp32 master; fp32 training's master is fp32)");
            if (g.rows.empty())
              throw InputError("--precision: " + f->precision + ": no plan of " + m.name + " on " + c.name +
                               " takes it (" + (have_cluster ? c.node.gpu.name : std::string("these GPUs")) + ")");
            if (f->json) {
              std::cout << grid_json(g, m, c).dump(1) << '\n';
            } else {
              print_grid(g, m, c);
            }
            return kExitOk;
          }};
}

}  // namespace ztune::cli
