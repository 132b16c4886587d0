#include "ztune/tuner/export.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <sstream>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/model/sparse_attention.hpp"

namespace ztune {

namespace {

/// DeepSpeed's offload section: {"device": "cpu"|"nvme", "pin_memory": true[, "nvme_path"]}.
nlohmann::json offload_section(OffloadTarget t) {
  nlohmann::json j{{"device", to_string(t)}, {"pin_memory", true}};
  // ZeRO-Infinity needs a path on the node's NVMe; this is a placeholder to edit.
  if (t == OffloadTarget::nvme) j["nvme_path"] = "/local_nvme";
  return j;
}

/// An element count as DeepSpeed's integer. The plan reader bounds these to
/// [0, 1e15]; a plan built in memory with 1e308 or 1e-7 is refused, not written as
/// -9223372036854775808 or 0.
long long elems(double v, const char* field, const std::string& file) {
  if (!(v >= 0.5 && v <= 1e15)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", v);
    throw InputError(file + ": $.plan.communication." + field + ": expected an element count in [1, 1e15], got " + got);
  }
  return std::llround(v);
}

}  // namespace

std::optional<LaunchShape> plan_launch(int gpus, int tp, int node_gpus, int nodes) {
  if (gpus < 1 || node_gpus < 1 || tp < 1) return std::nullopt;
  // Whether a node starting `count` consecutive ranks keeps each tensor-parallel
  // group inside it: count a multiple of tp, or, for a tp wider than a node,
  // a whole node of a group spanning whole nodes.
  const auto holds_tp = [&](int count) {
    return tp <= node_gpus ? count % tp == 0 : count == node_gpus && tp % node_gpus == 0;
  };
  // The ranks as the cost model placed them (place_groups): whole nodes in
  // order, the remainder on the last.
  const int per = std::min(node_gpus, gpus);
  const int used = (gpus - 1) / per + 1;
  const int last = gpus - (used - 1) * per;
  if (holds_tp(per) && holds_tp(last) && used <= nodes) return LaunchShape{used, per, last};
  // Otherwise the same count k on every node (tp 3 on nodes of 16 launches as
  // 12 per node), the largest such k.
  for (int k = std::min(node_gpus, gpus); k >= 1; --k) {
    if (gpus % k != 0 || !holds_tp(k)) continue;
    if (gpus / k > nodes) break;  // smaller k only needs more nodes
    return LaunchShape{gpus / k, k, k};
  }
  return std::nullopt;
}

LaunchShape launch_shape(const PlanFile& pf, const std::string& file) {
  const Plan& p = pf.plan;
  const int gpus = p.gpus();
  if (!pf.cluster) return {1, gpus, gpus};
  const int node = pf.cluster->node.gpus;
  const int nodes = pf.cluster->nodes;
  if (const auto s = plan_launch(gpus, p.tp, node, nodes)) return *s;
  throw InputError(file + ": the plan's " + std::to_string(gpus) + " devices (" + p.summary() +
                   ") cannot be launched on at most " + std::to_string(nodes) + " nodes of " + std::to_string(node) +
                   " GPUs" +
                   (p.tp > 1 ? " with each tensor-parallel group of " + std::to_string(p.tp) + " inside a node" : "") +
                   "; choose a tensor parallelism that divides a node's GPUs, or a device count that is a multiple "
                   "of it (ztune search --gpus N)");
}

std::vector<std::string> launch_placeholders(const PlanFile& pf, Engine e, const std::string& file) {
  const LaunchShape shape = launch_shape(pf, file);
  std::vector<std::string> out;
  // A plan file may leave out its cluster and model (docs/formats.md); what the
  // commands then cannot know is said, not guessed silently.
  if (!pf.cluster && shape.ranks() > 1)
    out.push_back("the node shape: " + file + " has no $.cluster, so the command starts all " +
                  std::to_string(shape.ranks()) + " ranks as one node; set the launcher's node count and GPUs per "
                  "node (ztune search --out embeds the cluster)");
  if (!pf.model)
    out.push_back("the model: " + file + " has no $.model, so the arguments name no layers, hidden size, heads, "
                  "sequence length or vocabulary; add them (ztune search --out embeds the model)");
  const std::string n = std::to_string(shape.nodes);
  if (shape.nodes > 1) {
    if (e == Engine::deepspeed && shape.uniform())
      out.push_back("hostfile: " + n + " lines '<host> slots=" + std::to_string(shape.per_node) +
                    "' (the deepspeed launcher starts one node's ranks per line)");
    else if (e == Engine::deepspeed)
      out.push_back("hostfile: " + n + " lines, the first " + std::to_string(shape.nodes - 1) + " '<host> slots=" +
                    std::to_string(shape.per_node) + "' and the last '<host> slots=" +
                    std::to_string(shape.last_node) + "' (the deepspeed launcher starts each line's slots: " +
                    std::to_string(shape.ranks()) + " ranks)");
    else if (shape.uniform())
      out.push_back("MASTER_ADDR: the address of the first node, and run the same command on each of the " + n +
                    " nodes (torchrun's c10d rendezvous on port 29500)");
    else
      out.push_back("MASTER_ADDR: the address of the first node, and NODE_RANK: 0 to " +
                    std::to_string(shape.nodes - 1) + " on each of the " + n + " nodes; run the same command on each " +
                    "(torchrun's static rendezvous on port 29500): node " + std::to_string(shape.nodes - 1) +
                    " starts " + std::to_string(shape.last_node) + " ranks, the others " +
                    std::to_string(shape.per_node) + " (" + std::to_string(shape.ranks()) + " in all)");
  }
  const Plan& p = pf.plan;
  if (e == Engine::deepspeed &&
      (p.offload_optimizer == OffloadTarget::nvme || p.offload_params == OffloadTarget::nvme))
    out.push_back("/local_nvme: ds_config's zero_optimization offload nvme_path, a directory on each node's NVMe");
  if (e == Engine::deepspeed && p.sequence_parallel && shape.nodes > 1)
    out.push_back("CUDA_DEVICE_MAX_CONNECTIONS=1 in a .deepspeed_env file beside the launch (the deepspeed launcher "
                  "exports its lines on every node; Megatron-DeepSpeed's sequence parallelism requires it)");
  // What the plan leaves to the user: pretrain_gpt.py's tokenizer, data and
  // schedule arguments default to None (megatron arguments.py), so the
  // launch does not start without them.
  if ((e == Engine::deepspeed || e == Engine::megatron) && pf.model) {
    const Transformer& m = *pf.model;
    out.push_back("tokenizer: --tokenizer-type and its files, for the model's " + grouped(m.vocab) +
                  "-token vocabulary (Megatron pads the embedding to a multiple of --make-vocab-size-divisible-by "
                  "(128) × tp)");
    out.push_back(std::string("data: --data-path PREFIX (an indexed dataset from tools/preprocess_data.py)") +
                  (e == Engine::megatron ? ", or --mock-data" : ""));
    const double tokens_per_step = static_cast<double>(p.global_batch) * m.seq_len;
    // The flag's value as it is typed (argparse refuses "286,103").
    char iters[32];
    std::snprintf(iters, sizeof iters, "%.0f", std::ceil(m.train_tokens / tokens_per_step));
    out.push_back("schedule: --lr and --train-iters " + std::string(iters) + " (the model's " + grouped(m.train_tokens) +
                  " tokens at " + grouped(tokens_per_step) + " a step), or --train-samples");
  }
  return out;
}

namespace {

/// Which pretrain_gpt.py parses the arguments: Megatron-LM's
/// (megatron/training/arguments.py) or Megatron-DeepSpeed's (megatron/
/// arguments.py, forked from Megatron-LM in 2023 and named differently since:
/// an argument the other spells is an argparse error there).
enum class Dialect { megatron_lm, megatron_deepspeed };

/// A number as the shortest %g form ("1e-06", "0.5", "0").
std::string shortest(double v) {
  std::ostringstream o;
  o << v;
  return o.str();
}

/// pretrain_gpt.py's arguments of the model's shape in `d`'s spelling (both
/// launches use it). What its GPT model cannot express is refused rather than
/// dropped.
std::vector<std::string> model_arguments(const Transformer& m, const std::string& file, Dialect d) {
  if (auto why = engine_model_violation(m, Engine::megatron))
    throw InputError(file + ": " + *why + "; the exported command would train another model");
  const bool ds = d == Dialect::megatron_deepspeed;
  std::vector<std::string> a{"--num-layers",   std::to_string(m.layers),     "--hidden-size",
                             std::to_string(m.hidden), "--ffn-hidden-size", std::to_string(m.ffn_hidden),
                             "--num-attention-heads", std::to_string(m.heads), "--seq-length",
                             std::to_string(m.seq_len), "--max-position-embeddings",
                             std::to_string(m.learned_position_rows())};  // a learned table's rows (GPT-2's 1024)
  // Both parsers default --attention-dropout and --hidden-dropout to 0.1; the
  // model's own (Llama's 0) is what was priced (dropout masks are memory).
  a.insert(a.end(), {"--attention-dropout", shortest(m.dropout), "--hidden-dropout", shortest(m.dropout)});
  if (m.kv_heads != m.heads) {
    if (ds) a.insert(a.end(), {"--num-key-value-heads", std::to_string(m.kv_heads)});
    else a.insert(a.end(), {"--group-query-attention", "--num-query-groups", std::to_string(m.kv_heads)});
  }
  // Megatron-DeepSpeed adds a learned position table unless told not to, rotary or not.
  if (ds && m.position != PositionEmbedding::learned) a.emplace_back("--no-position-embedding");
  if (!ds && m.position == PositionEmbedding::none) a.insert(a.end(), {"--position-embedding-type", "none"});
  if (m.activation == Activation::swiglu) a.emplace_back("--swiglu");
  if (m.norm == NormKind::rmsnorm) a.insert(a.end(), {"--normalization", ds ? "rmsnorm" : "RMSNorm"});
  // --norm-epsilon (Megatron-LM) / --layernorm-epsilon (Megatron-DeepSpeed),
  // default 1e-5 in both: the ε of every LayerNorm or RMSNorm; Llama 1, Qwen2
  // and Gemma use 1e-6.
  if (m.norm_eps != kDefaultNormEps) a.insert(a.end(), {ds ? "--layernorm-epsilon" : "--norm-epsilon", shortest(m.norm_eps)});
  if (m.position == PositionEmbedding::rotary) {
    if (ds) a.emplace_back("--use-rotary-position-embeddings");
    else a.insert(a.end(), {"--position-embedding-type", "rope"});
    // The rotary base, an int in both (default RoFormer's 10000): Llama 3 rotates with 500000.
    if (m.rope_theta != kRoformerRopeTheta)
      a.insert(a.end(), {ds ? "--rotary-position-embeddings-theta" : "--rotary-base",
                         std::to_string(static_cast<long long>(std::llround(m.rope_theta)))});
    // --rotary-percent (both, default 1.0): GPT-NeoX turns a quarter of each head.
    if (m.rotary_fraction != 1.0) a.insert(a.end(), {"--rotary-percent", shortest(m.rotary_fraction)});
  }
  if (!m.bias) a.emplace_back("--disable-bias-linear");
  if (m.qkv_bias && ds)
    throw InputError(file + ": $.model.qkv_bias: Megatron-DeepSpeed has no biases on the Q, K and V projections "
                            "alone (Megatron-LM's --add-qkv-bias): export to megatron");
  if (m.qkv_bias) a.emplace_back("--add-qkv-bias");  // Qwen2: biases on the Q, K and V projections only
  if (!m.tied_embeddings) a.emplace_back("--untie-embeddings-and-output-weights");
  return a;
}

std::string join(const std::vector<std::string>& parts) {
  std::string s;
  for (const auto& p : parts) s += (s.empty() ? "" : " ") + p;
  return s;
}

void precision_arguments(const Plan& p, std::vector<std::string>& a) {
  if (p.precision == Precision::fp16) a.emplace_back("--fp16");
  if (p.precision == Precision::bf16) a.emplace_back("--bf16");
}

/// DeepSpeed's "sparse_attention" section (deepspeed/ops/sparse_attention/
/// sparsity_config.py; docs "Sparse Attention" config): the mode, the block,
/// one layout for all heads, causal ('unidirectional': ztune trains decoder-only
/// models), and the mode's layout parameters. The parameters are the ones the
/// cost model's density assumed (model/sparse_attention.hpp
/// kDeepSpeedSparseDefaults), which are DeepSpeed's class defaults, so the run
/// computes the blocks the prediction counted. Only fixed and variable get
/// here: the engine rule ds_sparse_causal refuses the others.
nlohmann::json sparse_attention_section(const Plan& p) {
  const SparseLayoutParams& prm = kDeepSpeedSparseDefaults;
  nlohmann::json s{{"mode", to_string(p.sparse_attention)},
                   {"block", p.sparse_block},
                   {"different_layout_per_head", false},
                   {"attention", "unidirectional"}};
  switch (p.sparse_attention) {
    case SparseLayout::fixed:
      s["num_local_blocks"] = prm.local_window_blocks;
      s["num_global_blocks"] = prm.fixed_global_blocks;
      s["num_different_global_patterns"] = 1;  // one pattern: the density counts the window's last block
      s["horizontal_global_attention"] = false;
      break;
    case SparseLayout::variable:
      s["num_random_blocks"] = 0;  // the density counts no random blocks for variable
      s["local_window_blocks"] = nlohmann::json::array({prm.local_window_blocks});
      s["global_block_indices"] = nlohmann::json::array({0});
      s["horizontal_global_attention"] = false;
      break;
    case SparseLayout::bigbird:
    case SparseLayout::longformer:
    case SparseLayout::none: break;
  }
  return s;
}

/// The stage sizes of the plan, or nothing when they cannot be known (no
/// model in the file and no stated partition) or there is one stage.
std::vector<int> stage_sizes(const PlanFile& pf) {
  const Plan& p = pf.plan;
  if (p.pp < 2) return {};
  if (!p.stage_layers.empty()) return p.stage_layers;
  if (!pf.model) return {};
  std::vector<int> out;
  for (int i = 0; i < p.pp; ++i) out.push_back(stage_layer_count(p, pf.model->layers, i));
  return out;
}

std::string describe_stages(const std::vector<int>& v) {
  std::string s;
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "+" : "") + std::to_string(v[i]);
  return s;
}

/// Megatron-LM states uneven stages by the first and the last stage's layer
/// counts (--decoder-first-pipeline-num-layers, --decoder-last-pipeline-num-layers,
/// megatron/core/transformer/transformer_block.py get_num_layers_to_build): the
/// other stages split the rest equally. A partition of another shape is refused.
std::vector<std::string> megatron_stage_arguments(const PlanFile& pf, const std::string& file) {
  const std::vector<int> v = stage_sizes(pf);
  if (v.empty()) return {};
  const auto n = v.size();
  // The middle stages, 1 … n−2, must be equal; which ends differ from them is free.
  for (std::size_t i = 2; i + 1 < n; ++i)
    if (v[i] != v[1])
      throw InputError(file + ": megatron cannot run this plan (" + pf.plan.summary() + "): its stages " +
                       describe_stages(v) +
                       " differ in the middle; Megatron-LM sets only the first and the last stage's layers "
                       "(--decoder-first/last-pipeline-num-layers) and splits the rest equally — state a partition "
                       "of that shape in $.plan.stage_layers");
  const int middle = n > 2 ? v[1] : v[0];
  std::vector<std::string> a;
  if (n == 2) {
    if (v[0] != v[1]) a.insert(a.end(), {"--decoder-first-pipeline-num-layers", std::to_string(v[0])});
    return a;
  }
  if (v[0] != middle) a.insert(a.end(), {"--decoder-first-pipeline-num-layers", std::to_string(v[0])});
  if (v[n - 1] != middle) a.insert(a.end(), {"--decoder-last-pipeline-num-layers", std::to_string(v[n - 1])});
  return a;
}

/// A plan's stated model chunks as Megatron-Core lays them out: equal chunks
/// of k layers with the first one short when the embedding counts as a layer
/// (--account-for-embedding-in-pipeline-split) and the last one short when the
/// loss does (--account-for-loss-in-pipeline-split); get_transformer_layer_offset
/// in megatron/core/transformer/transformer_layer.py. Another layout is refused.
std::vector<std::string> megatron_chunk_accounting(const Plan& p, const std::string& file) {
  // The layouts the two flags make (chunk_layers_accounting, their one owner),
  // against the plan's.
  int layers = 0;
  for (int n : p.chunk_layers) layers += n;
  for (const auto& [embedding, loss] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    try {
      if (chunk_layers_accounting(layers, p.pp, p.virtual_stages, embedding, loss) != p.chunk_layers) continue;
    } catch (const InputError&) {
      continue;  // those flags cannot lay out these layers
    }
    std::vector<std::string> a;
    if (embedding) a.emplace_back("--account-for-embedding-in-pipeline-split");
    if (loss) a.emplace_back("--account-for-loss-in-pipeline-split");
    return a;
  }
  throw InputError(file + ": megatron cannot run this plan (" + p.summary() + "): its model chunks (chunks: above) "
                   "are not a layout Megatron-LM states; it cuts chunks equal, or with "
                   "--account-for-embedding/loss-in-pipeline-split the first/last one layer short — state such "
                   "chunk_layers in $.plan.chunk_layers, or drop them (equal chunks)");
}

/// Megatron-DeepSpeed builds its PipelineModule with partition_method
/// "type:transformer" (megatron/model/gpt_model.py GPTModelPipe): DeepSpeed
/// balances the transformer layers over the stages itself, at most ⌈L/pp⌉
/// each — the plan's balanced partition. That is DeepSpeed's partition_balanced
/// since PR #4312 (October 2023: dynamic programming on the spread between
/// the heaviest and lightest stage, which on Megatron-DeepSpeed's layer list
/// gives the uniform partition: checked for every L ≤ 70, pp ≤ 12, session
/// 50). Before it, a binary search on the heaviest stage filled ⌈L/pp⌉ from
/// the first stage and left the rest to the last (32 layers on 5 stages:
/// 7+7+7+7+4, not 7+7+6+6+6): older DeepSpeed runs its own partition.
/// There is no argument to state another; such a plan is refused.
void require_deepspeed_partition(const PlanFile& pf, const std::string& file) {
  const Plan& p = pf.plan;
  if (p.stage_layers.empty() || p.pp < 2) return;
  int layers = 0;
  for (int n : p.stage_layers) layers += n;
  Plan balanced = p;
  balanced.stage_layers.clear();
  for (int i = 0; i < p.pp; ++i)
    if (p.stage_layers[static_cast<std::size_t>(i)] != stage_layer_count(balanced, layers, i))
      throw InputError(file + ": deepspeed cannot run this plan (" + p.summary() +
                       "): Megatron-DeepSpeed partitions the layers itself (PipelineModule partition_method "
                       "\"type:transformer\", balanced: at most " + std::to_string(max_stage_layers(balanced, layers)) +
                       " per stage) and has no argument for the stated stages " + describe_stages(p.stage_layers) +
                       "; drop $.plan.stage_layers (balanced) or export to megatron");
}

}  // namespace

void require_engine_can_run(const Plan& p, Engine e, const std::string& file) {
  if (auto rule = engine_violation(p, e))
    throw InputError(file + ": " + to_string(e) + " cannot run this plan (" + p.summary() +
                     "): " + std::string(engine_rule_text(*rule)));
}

nlohmann::json deepspeed_config(const PlanFile& pf, const std::string& file) {
  const Plan& p = pf.plan;
  require_engine_can_run(p, Engine::deepspeed, file);
  require_deepspeed_partition(pf, file);
  nlohmann::json zero{{"stage", p.zero_stage}};
  if (p.zero_stage >= 1) {
    zero["overlap_comm"] = p.overlap_comm;
    zero["contiguous_gradients"] = true;
    zero["reduce_scatter"] = p.reduce_scatter;
    zero["reduce_bucket_size"] = elems(p.reduce_bucket_elems, "reduce_bucket_elems", file);
    zero["allgather_partitions"] = true;
    zero["allgather_bucket_size"] = elems(p.allgather_bucket_elems, "allgather_bucket_elems", file);
  }
  if (p.zero_stage == 3) {
    zero["stage3_prefetch_bucket_size"] = elems(p.prefetch_bucket_elems, "prefetch_bucket_elems", file);
    zero["stage3_max_live_parameters"] = elems(p.max_live_params, "max_live_params", file);
    zero["stage3_max_reuse_distance"] =
        p.max_reuse_distance == 0 ? 0LL : elems(p.max_reuse_distance, "max_reuse_distance", file);
    zero["stage3_param_persistence_threshold"] =
        p.param_persistence_threshold == 0 ? 0LL : elems(p.param_persistence_threshold, "param_persistence_threshold", file);
  }
  if (p.offload_optimizer != OffloadTarget::none) zero["offload_optimizer"] = offload_section(p.offload_optimizer);
  if (p.offload_params != OffloadTarget::none) zero["offload_param"] = offload_section(p.offload_params);
  if (p.zeropp) {
    // ZeRO++ (Wang et al. 2023): int8 weight gathers, hpZ secondary partition within a node, int4 gradients.
    zero["zero_quantized_weights"] = true;
    // hpZ keeps a secondary parameter copy inside each node (DeepSpeed's tutorial: GPUs per node).
    zero["zero_hpz_partition_size"] = pf.cluster ? pf.cluster->node.gpus : 8;
    zero["zero_quantized_gradients"] = true;
  }
  nlohmann::json ds{{"train_batch_size", p.global_batch},
                    {"train_micro_batch_size_per_gpu", p.micro_batch},
                    {"gradient_accumulation_steps", p.grad_accum},
                    {"gradient_clipping", 1.0},
                    {"steps_per_print", 10},
                    {"wall_clock_breakdown", false},
                    {"zero_optimization", zero}};
  if (p.precision == Precision::fp16)
    ds["fp16"] = {{"enabled", true}, {"loss_scale", 0}, {"initial_scale_power", 16},
                  {"loss_scale_window", 1000}, {"hysteresis", 2}, {"min_loss_scale", 1}};
  if (p.precision == Precision::bf16) ds["bf16"] = {{"enabled", true}};
  // The gradient reduction's dtype (deepspeed/runtime/config.py
  // get_communication_data_type: "fp16", "bf16" or "fp32"; the engine's
  // allreduce_bucket casts each bucket to it), where the plan states one.
  if (p.grad_reduce_dtype) ds["communication_data_type"] = to_string(*p.grad_reduce_dtype);
  if (p.recompute == Recompute::full)
    ds["activation_checkpointing"] = {{"partition_activations", p.partition_activations},
                                      {"cpu_checkpointing", p.cpu_checkpointing},
                                      {"contiguous_memory_optimization", false},
                                      {"number_checkpoints", nullptr},
                                      {"synchronize_checkpoint_boundary", false},
                                      {"profile", false}};
  // DeepSpeed's pipeline engine reads only activation_checkpoint_interval,
  // pipe_partitioned, grad_partitioned and use_reentrant from this section
  // (deepspeed/runtime/pipe/engine.py); the stage count and the partition
  // method are PipelineModule arguments, which Megatron-DeepSpeed takes from
  // --pipeline-model-parallel-size and --partition-method (in the launch).
  if (p.pp > 1) ds["pipeline"] = {{"activation_checkpoint_interval", p.recompute == Recompute::full ? 1 : 0}};
  // 1-bit Adam is built by DeepSpeed from this section only when the training
  // script passes deepspeed.initialize no optimizer of its own (a client
  // optimizer overrides it): deepspeed_launch_refusal says so for the
  // Megatron-DeepSpeed launch.
  if (p.onebit_adam)
    ds["optimizer"] = {{"type", "OneBitAdam"},
                       {"params", {{"lr", 1e-4}, {"freeze_step", p.onebit_freeze_step}, {"cuda_aware", false},
                                   {"comm_backend_name", "nccl"}}}};
  if (p.sparse_attention != SparseLayout::none) ds["sparse_attention"] = sparse_attention_section(p);
  return ds;
}

namespace {

/// Megatron-DeepSpeed's "pretrain_gpt.py <arguments>", whichever launcher starts it.
std::vector<std::string> deepspeed_program(const PlanFile& pf, const std::string& config_path, const std::string& file) {
  const Plan& p = pf.plan;
  require_engine_can_run(p, Engine::deepspeed, file);
  require_deepspeed_partition(pf, file);
  std::vector<std::string> a{"pretrain_gpt.py"};
  a.insert(a.end(), {"--tensor-model-parallel-size", std::to_string(p.tp), "--pipeline-model-parallel-size",
                     std::to_string(p.pp)});
  if (p.pp == 1) a.emplace_back("--no-pipeline-parallel");
  // DeepSpeed-Ulysses: Megatron-DeepSpeed's --ds-sequence-parallel-size
  // (megatron/arguments.py; it asserts --deepspeed, which every launch here
  // has, and refuses --sequence-parallel and --context-parallel-size with it,
  // as check_plan_shape does). Any attention kernel: DistributedAttention
  // wraps the local one. train_batch_size stays micro × accumulation × dp:
  // DeepSpeed's config divides the world by the sequence-parallel size too.
  if (p.ulysses > 1) a.insert(a.end(), {"--ds-sequence-parallel-size", std::to_string(p.ulysses)});
  if (pf.model) {
    auto m = model_arguments(*pf.model, file, Dialect::megatron_deepspeed);
    a.insert(a.end(), m.begin(), m.end());
  }
  a.insert(a.end(), {"--micro-batch-size", std::to_string(p.micro_batch), "--global-batch-size",
                     std::to_string(p.global_batch)});
  precision_arguments(p, a);
  if (p.sequence_parallel) a.emplace_back("--sequence-parallel");
  if (p.recompute == Recompute::full) a.insert(a.end(), {"--checkpoint-activations", "--deepspeed-activation-checkpointing"});
  // Megatron-DeepSpeed passes it to deepspeed.checkpointing.configure (beside the ds_config key).
  if (p.partition_activations) a.emplace_back("--partition-activations");
  if (p.cpu_checkpointing) a.emplace_back("--checkpoint-in-cpu");  // ZeRO-R CPU checkpointing, likewise
  if (p.recompute == Recompute::selective) a.insert(a.end(), {"--recompute-granularity", "selective"});
  // With optimizer offload DeepSpeed raises ZeRORuntimeException unless the
  // client's optimizer is DeepSpeedCPUAdam (runtime/engine.py
  // _configure_optimizer, zero_force_ds_cpu_optimizer defaults to true);
  // Megatron-DeepSpeed builds DeepSpeedCPUAdam under --cpu-optimizer
  // (megatron/optimizer/__init__.py get_megatron_optimizer).
  if (p.offload_optimizer != OffloadTarget::none) a.emplace_back("--cpu-optimizer");
  // Megatron-DeepSpeed's FlashAttention-2 switch (ds_config has no attention key).
  if (p.attention == AttentionKernel::flash) a.emplace_back("--use-flash-attn-v2");
  // The softmax chain unfused (Megatron's arguments, inherited by Megatron-DeepSpeed).
  if (p.attention == AttentionKernel::eager) a.emplace_back("--no-masked-softmax-fusion");
  // Megatron-DeepSpeed's switches of the bias fusions (inherited from Megatron-LM;
  // its SwiGLU has no fused kernel to switch off).
  if (!p.bias_fusion) a.insert(a.end(), {"--no-bias-gelu-fusion", "--no-bias-dropout-fusion"});
  a.insert(a.end(),
           {"--zero-stage", std::to_string(p.zero_stage), "--deepspeed", "--deepspeed_config", shell_word(config_path)});
  return a;
}

}  // namespace

std::optional<std::string> deepspeed_launch_refusal(const Plan& p) {
  if (p.onebit_adam)
    return "Megatron-DeepSpeed's pretrain_gpt.py builds its own Adam (megatron/optimizer get_megatron_optimizer) and "
           "passes it to deepspeed.initialize, and a client optimizer overrides the config's OneBitAdam "
           "(deepspeed/__init__.py): it would train plain Adam with uncompressed gradients. Run the config with a "
           "script that lets DeepSpeed build the optimizer (deepspeed.initialize without optimizer=, as Hugging "
           "Face's Trainer --deepspeed does), on DeepSpeed 0.18 or earlier (0.19 dropped OneBitAdam from its config "
           "optimizers)";
  return std::nullopt;
}

std::vector<std::string> deepspeed_version_notes(const Plan& p) {
  std::vector<std::string> out;
  // DeepSpeed 0.19's config parser rejects these sections (runtime/config.py).
  if (p.sparse_attention != SparseLayout::none)
    out.push_back("sparse_attention needs DeepSpeed 0.18 or earlier: 0.19 removed block-sparse attention and "
                  "refuses the section");
  return out;
}

// Megatron-DeepSpeed's validate_args raises a RuntimeError for sequence
// parallelism unless CUDA_DEVICE_MAX_CONNECTIONS is 1 (the tensor-parallel
// GEMMs and their collectives issued in order), as Megatron-LM's does for tp.
std::string deepspeed_environment(const Plan& p) { return p.sequence_parallel ? "CUDA_DEVICE_MAX_CONNECTIONS=1 " : ""; }

std::string deepspeed_launch(const PlanFile& pf, const std::string& config_path, const std::string& file) {
  const auto program = deepspeed_program(pf, config_path, file);
  const LaunchShape shape = launch_shape(pf, file);
  std::vector<std::string> a{deepspeed_environment(pf.plan) + "deepspeed"};
  if (shape.nodes > 1) a.insert(a.end(), {"--hostfile", "hostfile"});
  a.insert(a.end(), {"--num_nodes", std::to_string(shape.nodes)});
  // --num_gpus gives every node that many (deepspeed/launcher/runner.py main);
  // a ragged launch takes each node's count from the hostfile's slots instead.
  if (shape.uniform()) a.insert(a.end(), {"--num_gpus", std::to_string(shape.per_node)});
  a.insert(a.end(), program.begin(), program.end());
  return join(a);
}

std::string deepspeed_torchrun_launch(const PlanFile& pf, const std::string& config_path, const std::string& file) {
  // BigScience's BLOOM runs started Megatron-DeepSpeed this way, one
  // torch.distributed.run per node under srun.
  return deepspeed_environment(pf.plan) + torchrun_command(pf, file) + " " +
         join(deepspeed_program(pf, config_path, file));
}

namespace {

// The optimizer's 16-bit states as Megatron-Core's precision-aware optimizer
// takes them (megatron/training/arguments.py: --use-precision-aware-optimizer,
// --main-params-dtype fp32|fp16, --exp-avg-dtype and --exp-avg-sq-dtype;
// OptimizerConfig.store_param_remainders, true by default, which
// --no-store-param-remainders turns off). Megatron-LM runs it inside its
// distributed optimizer, and has no bf16 master (NeMo's distributed_fused_adam
// dtype bf16 is Apex's optimizer, not Megatron-LM's).
void optimizer_state_arguments(const Plan& p, const std::string& file, std::vector<std::string>& a) {
  if (!p.low_precision_optimizer()) return;
  if (p.master_dtype == Precision::bf16)
    throw InputError(file + ": $.plan.optimizer.master_dtype: Megatron-LM's --main-params-dtype takes fp32 or fp16; "
                     "a bf16 master is NeMo's distributed_fused_adam (optim.dtype bf16), which this export does not "
                     "write (expected \"fp32\" or \"fp16\")");
  if (p.zero_stage != 1)
    throw InputError(file + ": $.plan.zero_stage: ztune exports Megatron-LM's precision-aware optimizer with its "
                     "distributed optimizer (--use-distributed-optimizer), which holds the 16-bit state shards; "
                     "expected zero_stage 1 with 16-bit optimizer states, got " + std::to_string(p.zero_stage));
  a.emplace_back("--use-precision-aware-optimizer");
  if (p.master_dtype != Precision::fp32) a.insert(a.end(), {"--main-params-dtype", to_string(p.master_dtype)});
  if (p.moments_dtype != Precision::fp32)
    a.insert(a.end(),
             {"--exp-avg-dtype", to_string(p.moments_dtype), "--exp-avg-sq-dtype", to_string(p.moments_dtype)});
  // Megatron-Core keeps bf16 models' fp32 masters as remainders unless told not to.
  if (p.precision == Precision::bf16 && p.master_dtype == Precision::fp32 && !p.param_remainders)
    a.emplace_back("--no-store-param-remainders");
}

}  // namespace

std::vector<std::string> megatron_arguments(const PlanFile& pf, const std::string& file) {
  const Plan& p = pf.plan;
  require_engine_can_run(p, Engine::megatron, file);
  std::vector<std::string> a{"--tensor-model-parallel-size", std::to_string(p.tp), "--pipeline-model-parallel-size",
                             std::to_string(p.pp)};
  // Megatron-Core's context parallelism (megatron/training/arguments.py
  // --context-parallel-size; the default p2p communication type is the ring).
  if (p.cp > 1) a.insert(a.end(), {"--context-parallel-size", std::to_string(p.cp)});
  // Stated chunks all equal are Megatron's own default cut (the branches below).
  const bool stated_chunks =
      std::adjacent_find(p.chunk_layers.begin(), p.chunk_layers.end(), std::not_equal_to<>()) != p.chunk_layers.end();
  if (stated_chunks) {
    const auto accounting = megatron_chunk_accounting(p, file);
    a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", std::to_string(p.virtual_stages)});
    a.insert(a.end(), accounting.begin(), accounting.end());
  } else if (p.virtual_stages > 1) {
    const std::vector<int> sizes = stage_sizes(pf);
    const bool uneven = std::adjacent_find(sizes.begin(), sizes.end(), std::not_equal_to<>()) != sizes.end();
    if (uneven) {
      // Uneven first/last stages with a virtual pipeline: Megatron-Core takes the
      // chunk count, each stage cut into that many (its layers a multiple of it).
      a.insert(a.end(), {"--num-virtual-stages-per-pipeline-rank", std::to_string(p.virtual_stages)});
    } else {
      if (!pf.model)
        throw InputError(file + ": --num-layers-per-virtual-pipeline-stage needs the model's layer count; the plan "
                                "file has no \"model\" (write it with ztune search --out)");
      a.insert(a.end(), {"--num-layers-per-virtual-pipeline-stage",
                         std::to_string(pf.model->layers / (p.pp * p.virtual_stages))});
    }
  }
  if (!stated_chunks) {
    const auto stages = megatron_stage_arguments(pf, file);
    a.insert(a.end(), stages.begin(), stages.end());
  }
  if (p.sequence_parallel) a.emplace_back("--sequence-parallel");
  // Transformer Engine's userbuffers overlap (megatron/training/arguments.py;
  // it asserts --sequence-parallel, which check_plan requires too).
  if (p.tp_comm_overlap) a.emplace_back("--tp-comm-overlap");
  // FP8 linear layers through Transformer Engine (megatron/training/
  // arguments.py: --fp8-format e4m3|hybrid, --fp8-recipe delayed|tensorwise|
  // ...): hybrid, E4M3 forward and E5M2 gradients, as ztune prices them. The
  // delayed recipe's amax history as NVIDIA's launch scripts and NeMo's
  // recipes set it (1024, max; Megatron-LM's own defaults are 1, most_recent).
  if (p.fp8 != Fp8Recipe::none) {
    a.insert(a.end(), {"--fp8-format", "hybrid", "--fp8-recipe", to_string(p.fp8)});
    if (p.fp8 == Fp8Recipe::delayed)
      a.insert(a.end(), {"--fp8-amax-history-len", "1024", "--fp8-amax-compute-algo", "max"});
    if (p.fp8_param_gather) a.emplace_back("--fp8-param-gather");
  }
  if (p.recompute == Recompute::selective) a.insert(a.end(), {"--recompute-granularity", "selective"});
  // Megatron-Core's block method (TransformerBlock._checkpointed_forward):
  // the first N layers of each model chunk.
  if (p.recompute == Recompute::full && p.recompute_num_layers > 0)
    a.insert(a.end(), {"--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers",
                       std::to_string(p.recompute_num_layers)});
  else if (p.recompute == Recompute::full)
    a.insert(a.end(), {"--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"});
  // Megatron-LM's ZeRO-R Pa: the saved layer inputs split over the tensor-parallel group.
  if (p.partition_activations) a.emplace_back("--distribute-saved-activations");
  a.insert(a.end(), {"--micro-batch-size", std::to_string(p.micro_batch), "--global-batch-size",
                     std::to_string(p.global_batch)});
  // Megatron-LM's FlashAttention switch (megatron/training/arguments.py). With
  // Transformer Engine, --attention-backend's default (auto) picks a fused
  // kernel: the standard and eager plans, priced unfused, say so.
  if (p.attention == AttentionKernel::flash) a.emplace_back("--use-flash-attn");
  if (p.attention == AttentionKernel::standard || p.attention == AttentionKernel::eager)
    a.insert(a.end(), {"--attention-backend", "unfused"});
  // Eager: megatron/training/arguments.py --no-masked-softmax-fusion ("Disable
  // fusion of query_key_value scaling, masking, and softmax").
  if (p.attention == AttentionKernel::eager) a.emplace_back("--no-masked-softmax-fusion");
  // Unfused bias kernels: megatron/training/arguments.py --no-bias-gelu-fusion
  // or --no-bias-swiglu-fusion (the model's activation; both where the plan
  // file names no model), and --no-bias-dropout-fusion.
  if (!p.bias_fusion) {
    const bool swiglu = pf.model && pf.model->activation == Activation::swiglu;
    if (!pf.model || !swiglu) a.emplace_back("--no-bias-gelu-fusion");
    if (!pf.model || swiglu) a.emplace_back("--no-bias-swiglu-fusion");
    a.emplace_back("--no-bias-dropout-fusion");
  }
  // cuDNN's fused attention: Megatron-Core's --attention-backend fused
  // (Transformer Engine's FusedAttention, what NVTE_FUSED_ATTN=1 selects).
  if (p.attention == AttentionKernel::cudnn) a.insert(a.end(), {"--attention-backend", "fused"});
  if (p.zero_stage == 1) a.emplace_back("--use-distributed-optimizer");
  // ZeRO-2/3: Megatron-FSDP, with the flags its user guide requires
  // (docs/discussions/megatron-fsdp-user-guide: optim_grads shards the
  // optimizer states and gradients, optim_grads_params the parameters too).
  if (p.zero_stage >= 2)
    a.insert(a.end(), {"--use-megatron-fsdp", "--data-parallel-sharding-strategy",
                       p.zero_stage == 2 ? "optim_grads" : "optim_grads_params", "--no-gradient-accumulation-fusion",
                       "--use-distributed-optimizer", "--ckpt-format", "fsdp_dtensor"});
  if (p.overlap_comm) a.emplace_back("--overlap-grad-reduce");
  precision_arguments(p, a);
  // The gradient reduction's dtype, where the plan states one other than
  // Megatron-LM's own (megatron/training/arguments.py: fp32 main grads under
  // --bf16, which --grad-reduce-in-bf16 turns off; 16-bit under --fp16 unless
  // --accumulate-allreduce-grads-in-fp32).
  if (p.grad_reduce_dtype == Precision::bf16 && p.precision == Precision::bf16)
    a.emplace_back("--grad-reduce-in-bf16");
  if (p.grad_reduce_dtype == Precision::fp32 && p.precision == Precision::fp16)
    a.emplace_back("--accumulate-allreduce-grads-in-fp32");
  optimizer_state_arguments(p, file, a);
  if (pf.model) {
    auto m = model_arguments(*pf.model, file, Dialect::megatron_lm);
    a.insert(a.end(), m.begin(), m.end());
  }
  return a;
}

// `s` as one word of a POSIX shell command: itself when it holds only
// characters no shell treats specially, else single-quoted (a quote in it
// written '\'').
std::string shell_word(const std::string& s) {
  const bool plain = !s.empty() && s.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                                       "0123456789_./:=@%+,-") == std::string::npos;
  if (plain) return s;
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string torchrun_command(const PlanFile& pf, const std::string& file) {
  const LaunchShape shape = launch_shape(pf, file);
  const std::string nodes = std::to_string(shape.nodes);
  if (shape.uniform()) {
    // Several nodes meet at a c10d rendezvous on the first node (torchrun's
    // --rdzv_backend/--rdzv_endpoint; $MASTER_ADDR is the user's to set).
    const std::string rdzv =
        shape.nodes > 1 ? " --rdzv_backend c10d --rdzv_endpoint $MASTER_ADDR:29500 --rdzv_id ztune" : "";
    return "torchrun --nnodes " + nodes + " --nproc_per_node " + std::to_string(shape.per_node) + rdzv;
  }
  // Ragged: the static rendezvous orders the nodes by --node_rank, so the
  // smaller last node is the last in rank order, as the prediction placed it;
  // torchrun numbers the ranks by the nodes' cumulative counts. One command
  // for every node: the shell picks the node's count from $NODE_RANK.
  const std::string last = std::to_string(shape.nodes - 1);
  return "torchrun --nnodes " + nodes + " --node_rank $NODE_RANK --nproc_per_node $([ \"$NODE_RANK\" -lt " + last +
         " ] && echo " + std::to_string(shape.per_node) + " || echo " + std::to_string(shape.last_node) +
         ") --master_addr $MASTER_ADDR --master_port 29500";
}

std::string srun_launch(const PlanFile& pf, const std::string& torchrun_launch, const std::string& file) {
  const LaunchShape shape = launch_shape(pf, file);
  // One torchrun per node of the allocation, which starts that node's ranks;
  // NODE_RANK and MASTER_ADDR are what the launch above reads.
  // The node's command is one bash -c word, quoted whole (a quote inside the
  // launch, from a file name, stays a quote).
  return "srun --nodes " + std::to_string(shape.nodes) + " --ntasks-per-node 1 bash -c " +
         shell_word("export NODE_RANK=$SLURM_NODEID MASTER_ADDR=$(scontrol show hostnames \"$SLURM_JOB_NODELIST\" "
                    "| head -n 1); " + torchrun_launch);
}

std::string megatron_launch(const PlanFile& pf, const std::string& file) {
  const auto args = megatron_arguments(pf, file);
  // Megatron-LM's validate_args (megatron/training/arguments.py) asserts
  // CUDA_DEVICE_MAX_CONNECTIONS=1 with tensor parallelism before Blackwell, so
  // the tensor-parallel GEMMs and their collectives are issued in order; but
  // under Megatron-FSDP (ZeRO-2/3 here) it asserts the opposite (FSDP needs
  // more than one connection to overlap its gathers), and with tp only warns.
  const bool megatron_fsdp = pf.plan.zero_stage >= 2;
  const std::string env = pf.plan.tp > 1 && !megatron_fsdp ? "CUDA_DEVICE_MAX_CONNECTIONS=1 " : "";
  return env + torchrun_command(pf, file) + " pretrain_gpt.py " + join(args);
}

}  // namespace ztune
