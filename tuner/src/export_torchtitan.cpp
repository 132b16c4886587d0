// `ztune export --format torchtitan`: a plan as torchtitan's job TOML (the
// JobConfig dataclasses of torchtitan/config/job_config.py; the fields this
// file writes are checked against that file's field list in
// tests/tuner/fixtures/torchtitan_job_config_fields.json) and its torchrun
// launch. torchtitan trains its own Llama 3 model (torchtitan/models/llama3):
// a model of another architecture is refused, one of Llama's shape that is not
// a registered flavor is written under its own name, listed as a flavor to
// register.
#include <algorithm>
#include <cmath>
#include <sstream>

#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/export.hpp"

namespace ztune {

namespace {

/// torchtitan's registered Llama 3 flavors (torchtitan/models/llama3/__init__.py):
/// layers, dim, heads, kv heads and the FFN width its multiple_of and
/// ffn_dim_multiplier give (8B: 14336, 70B: 28672, 405B: 53248), with Llama 3's
/// tokenizer (128,256 ids) and rope_theta 500,000. Llama 2 70B has the 70B's
/// shape but 32,000 ids and rope_theta 10,000: it is not that flavor.
struct Flavor {
  const char* name;
  int layers, hidden, heads, kv_heads, ffn_hidden;
};
constexpr Flavor kLlama3Flavors[] = {
    {"8B", 32, 4096, 32, 8, 14336},
    {"70B", 80, 8192, 64, 8, 28672},
    {"405B", 126, 16384, 128, 8, 53248},
};
constexpr int kLlama3Vocab = 128256;
constexpr double kLlama3RopeTheta = 500000;

}  // namespace

std::string torchtitan_model_refusal(const Transformer& m) {
  if (m.activation != Activation::swiglu) return "$.model.activation: torchtitan's Llama 3 MLP is SwiGLU";
  if (m.norm != NormKind::rmsnorm) return "$.model.norm: torchtitan's Llama 3 normalizes with RMSNorm";
  if (m.position != PositionEmbedding::rotary) return "$.model.position_embedding: torchtitan's Llama 3 uses RoPE";
  if (m.bias || m.qkv_bias) return "$.model.bias: torchtitan's Llama 3 linears have no biases";
  if (m.tied_embeddings) return "$.model.tied_embeddings: torchtitan's Llama 3 has a separate output projection";
  if (m.parallel_residual) return "$.model.parallel_residual: torchtitan's Llama 3 blocks are sequential";
  if (m.rotary_fraction != 1.0) return "$.model.rotary_fraction: torchtitan's Llama 3 rotates whole heads";
  if (m.windowed()) return "$.model.attention_window: torchtitan's Llama 3 attends the whole causal prefix";
  return "";
}

namespace {

const Flavor* flavor_of(const Transformer& m) {
  for (const auto& f : kLlama3Flavors)
    if (m.layers == f.layers && m.hidden == f.hidden && m.heads == f.heads && m.kv_heads == f.kv_heads &&
        m.ffn_hidden == f.ffn_hidden && m.vocab == kLlama3Vocab && m.rope_theta == kLlama3RopeTheta)
      return &f;
  return nullptr;
}

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

const char* schedule_name(Schedule s) {
  switch (s) {
    case Schedule::gpipe: return "GPipe";
    case Schedule::one_f_one_b: return "1F1B";
    case Schedule::interleaved: return "Interleaved1F1B";
  }
  return "1F1B";
}

}  // namespace

// The torchtitan release whose job config this writes (an export audit parsed
// the TOMLs with each release's own ConfigManager): 0.1.0 reads every field;
// 0.2.x renamed checkpoint.enable_checkpoint to enable, moved [float8] under
// [quantize.linear.float8] and pipeline_parallel_split_points to
// module_fqns_per_model_part; 0.3.0 reads no TOML job config.
const char* const kTorchtitanVersionNote =
    "written for torchtitan 0.1.0 (pip install torchtitan==0.1.0); 0.2.x renamed checkpoint.enable_checkpoint and "
    "moved the float8 section and the pipeline split points, and 0.3 takes no TOML job config";

std::string torchtitan_config(const PlanFile& pf, const std::string& file) {
  const Plan& p = pf.plan;
  require_engine_can_run(p, Engine::fsdp, file);
  if (!pf.model)
    throw InputError(file + ": $.model: the plan file carries no model; torchtitan's config names the model it "
                            "trains (write the plan with ztune search --out or ztune predict)");
  const Transformer& m = *pf.model;
  if (const std::string why = torchtitan_model_refusal(m); !why.empty())
    throw InputError(file + ": " + why + "; torchtitan's trainer runs its Llama 3 model only (wrap another "
                                          "model with PyTorch FSDP yourself, or search it for --engine deepspeed "
                                          "and export that plan)");
  if (p.precision == Precision::fp16)
    throw InputError(file + ": $.plan.precision: torchtitan trains in bf16 or fp32 (training.mixed_precision_param), "
                            "not fp16; expected \"bf16\"");
  // JobConfig training.mixed_precision_reduce: choices ["float32"] (what the
  // config below writes; tests/tuner/fixtures/torchtitan_job_config_fields.json).
  if (p.grad_reduce_dtype && *p.grad_reduce_dtype != Precision::fp32)
    throw InputError(file + ": $.plan.communication.grad_reduce_dtype: torchtitan reduces its gradients in fp32 "
                            "(training.mixed_precision_reduce accepts only \"float32\"); expected \"fp32\", or leave "
                            "it out");
  if (p.tp > 1 && !p.sequence_parallel)
    throw InputError(file + ": $.plan.sequence_parallel: torchtitan's tensor parallelism always shards the norms "
                            "over the sequence (SequenceParallel); expected sequence_parallel true with tp " +
                     std::to_string(p.tp));
  if (p.recompute_policy == SelectivePolicy::dots)
    throw InputError(file + ": $.plan.recompute_policy: \"dots\" is JAX's dots_saveable (PaxML's SAVE_DOT_ONLY); "
                            "torchtitan's selective checkpointing is op-level (\"alternate_mm\") or per layer "
                            "(\"alternate_layers\"): expected one of those, or recompute \"full\" or \"none\"");
  if (p.recompute_policy == SelectivePolicy::mlp_in)
    throw InputError(file + ": $.plan.recompute_policy: \"mlp_in\" is MaxText's save_dot_except_mlpwi; torchtitan's "
                            "selective checkpointing is op-level (\"alternate_mm\") or per layer (\"alternate_layers\"): "
                            "expected one of those, or recompute \"full\" or \"none\"");
  if (p.recompute == Recompute::selective && p.recompute_policy == SelectivePolicy::attention &&
      !fused_attention(p.attention))
    throw InputError(file + ": $.plan.recompute: ztune's selective recomputation is Korthikanti's attention-core "
                            "recomputation; torchtitan's selective checkpointing is op- or layer-level: expected "
                            "\"none\" or \"full\", or flash attention (whose recomputation is in the kernel)");

  const Flavor* flavor = flavor_of(m);
  std::ostringstream o;
  o << "# torchtitan job config written by ztune export for " << p.summary() << "\n";
  o << "# (torchtitan/config/job_config.py fields; launch: see the command ztune printed)\n";
  o << "# " << kTorchtitanVersionNote << "\n\n";
  o << "[job]\n";
  o << "dump_folder = \"./outputs\"\n";
  o << "description = " << quoted("ztune: " + p.summary()) << "\n\n";

  o << "[model]\n";
  o << "name = \"llama3\"\n";
  o << "flavor = " << quoted(flavor ? flavor->name : m.name) << "\n";
  o << "tokenizer_path = \"./assets/tokenizer/original/tokenizer.model\"\n";
  // FP8 linear layers: torchao's Float8Linear through torchtitan's float8
  // converter, with tensorwise scales (the fsdp engine's rule); the output
  // layer stays bf16, as torchtitan's own configurations filter it and ztune
  // prices it, and FSDP gathers bf16 weights (no float8 all-gather).
  if (p.fp8 != Fp8Recipe::none) o << "converters = [\"float8\"]\n";
  o << "\n";
  if (p.fp8 != Fp8Recipe::none) {
    o << "[float8]\n";
    o << "recipe_name = \"" << to_string(p.fp8) << "\"\n";
    o << "enable_fsdp_float8_all_gather = false\n";
    o << "filter_fqns = [\"output\"]\n\n";
  }

  o << "[optimizer]\n";
  o << "name = \"AdamW\"\n";
  o << "implementation = \"fused\"\n\n";

  // Per-device batch: one micro-batch, accumulated to global_batch_size
  // (torchtitan's gradient accumulation = global / (local × dp)); with a
  // pipeline the local batch holds every pipeline micro-batch.
  o << "[training]\n";
  o << "local_batch_size = " << static_cast<long long>(p.micro_batch) * (p.pp > 1 ? p.grad_accum : 1) << "\n";
  o << "global_batch_size = " << p.global_batch << "\n";
  o << "seq_len = " << m.seq_len << "\n";
  if (m.train_tokens > 0) {
    const double per_step = static_cast<double>(p.global_batch) * m.seq_len;
    o << "steps = " << static_cast<long long>(std::ceil(m.train_tokens / per_step)) << "\n";
  }
  o << "mixed_precision_param = " << (p.precision == Precision::bf16 ? "\"bfloat16\"" : "\"float32\"") << "\n";
  o << "mixed_precision_reduce = \"float32\"\n";
  o << "enable_cpu_offload = " << (p.offload_optimizer != OffloadTarget::none ? "true" : "false") << "\n";
  o << "dataset = \"c4\"\n\n";

  // ZeRO-0: DDP (replicate); ZeRO-2: FSDP2 without resharding after forward;
  // ZeRO-3: FSDP2 resharding after forward, or under a pipeline torchtitan's
  // "default" policy, which keeps the gathered stage through the step
  // (Plan::zero3_held_through_step); hybrid: HSDP, sharded in groups of
  // dp_shard, replicated across them.
  // torchtitan's FSDP shards over its dp_shard × cp mesh dimensions; ztune's
  // dp_shard counts ranks of the weights' dp × cp group, so torchtitan's shard
  // degree is dp_shard / cp (cp must divide it) and the rest of dp replicates.
  const int dp = p.dp;
  if (p.hybrid_sharded() && p.dp_shard % p.cp != 0)
    throw InputError(file + ": $.plan.dp_shard: torchtitan shards FSDP over data_parallel_shard_degree × cp ranks; "
                     "a shard group of " + std::to_string(p.dp_shard) + " is not a multiple of cp " +
                     std::to_string(p.cp) + " (expected a multiple of " + std::to_string(p.cp) + ")");
  const int shard = p.zero_stage == 0 ? 1 : (p.hybrid_sharded() ? p.dp_shard / p.cp : dp);
  const int replicate = dp / shard;
  o << "[parallelism]\n";
  o << "data_parallel_replicate_degree = " << replicate << "\n";
  o << "data_parallel_shard_degree = " << shard << "\n";
  if (p.zero3_held_through_step())
    o << "fsdp_reshard_after_forward = \"default\"\n";
  else if (p.zero_stage >= 2)
    o << "fsdp_reshard_after_forward = " << (p.zero_stage == 2 ? "\"never\"" : "\"always\"") << "\n";
  o << "tensor_parallel_degree = " << p.tp << "\n";
  o << "context_parallel_degree = " << p.cp << "\n";
  o << "pipeline_parallel_degree = " << p.pp << "\n";
  if (p.pp > 1) {
    o << "pipeline_parallel_schedule = \"" << schedule_name(p.schedule) << "\"\n";
    o << "pipeline_parallel_microbatch_size = " << p.micro_batch << "\n";
    // The virtual stages' first layers as split points ("layers.N"), pp × v
    // of them in the order the pipeline runs them (plan.hpp virtual_stage_bounds).
    // An empty end chunk (Plan::chunk_layers: the embedding or the loss
    // alone) has no layer to name.
    if (std::find(p.chunk_layers.begin(), p.chunk_layers.end(), 0) != p.chunk_layers.end())
      throw InputError(file + ": $.plan.chunk_layers: torchtitan's split points name the layer each stage begins "
                       "at, and this plan has a model chunk of no layers (the embedding or the loss alone, "
                       "Megatron-Core's accounting layout); expected every chunk to hold a layer, or export to megatron");
    const auto bounds =
        virtual_stage_bounds(p.stage_layers, m.layers, p.pp, std::max(1, p.virtual_stages), p.chunk_layers);
    o << "pipeline_parallel_split_points = [";
    for (std::size_t s = 1; s + 1 < bounds.size(); ++s) o << (s > 1 ? ", " : "") << "\"layers." << bounds[s] << "\"";
    o << "]\n";
  }
  o << "\n[activation_checkpoint]\n";
  // torchtitan's op-level policy is ztune's alternate_mm, its every-k-th-
  // block policy alternate_layers (k = recompute_every); Korthikanti's
  // attention-core recomputation with a flash kernel is the kernel's own (none).
  if (p.recompute_policy == SelectivePolicy::alternate_mm)
    o << "mode = \"selective\"\nselective_ac_option = \"op\"\n\n";
  else if (p.recompute_policy == SelectivePolicy::alternate_layers)
    o << "mode = \"selective\"\nselective_ac_option = \"" << p.recompute_every << "\"\n\n";
  else
    o << "mode = \"" << (p.recompute == Recompute::full ? "full" : "none") << "\"\n\n";

  o << "[checkpoint]\n";
  o << "enable_checkpoint = false\n";
  return o.str();
}

std::string torchtitan_launch(const PlanFile& pf, const std::string& config_path, const std::string& file) {
  return torchrun_command(pf, file) + " -m torchtitan.train --job.config_file " + shell_word(config_path);
}

Plan as_torchtitan_runs(const Plan& p) {
  Plan q = p;
  q.grad_reduce_dtype = Precision::fp32;
  return q;
}

std::vector<std::string> torchtitan_placeholders(const PlanFile& pf, const std::string& file) {
  auto out = launch_placeholders(pf, Engine::fsdp, file);
  out.push_back(std::string("torchtitan's version: ") + kTorchtitanVersionNote);
  out.push_back("model.tokenizer_path: torchtitan's Llama 3 tokenizer (scripts/download_hf_assets.py or "
                "download_tokenizer.py puts it under ./assets)");
  out.push_back("training.dataset: \"c4\" streams allenai/c4 from the Hugging Face hub; set dataset_path for a "
                "local copy");
  // The fsdp engine prices PyTorch FSDP's reduce_dtype default (the training
  // precision); torchtitan reduces in fp32 only. Say which the plan was priced with.
  if (!pf.plan.grad_reduce_dtype && pf.plan.precision == Precision::bf16 && pf.plan.dp_cp() > 1)
    out.push_back("training.mixed_precision_reduce \"float32\": torchtitan's only choice; the plan states no "
                  "gradient-reduction dtype and was priced with the fsdp engine's bf16 reduction (PyTorch FSDP's "
                  "default): state communication.grad_reduce_dtype \"fp32\" in the plan (predict and search "
                  "--grad-reduce-dtype fp32) to price it as torchtitan runs it" +
                  std::string(pf.plan.zero3_held_through_step()
                                  ? "; under the pipeline it also keeps each stage's whole gradients in fp32 "
                                    "through the step, 2 bytes a parameter more than priced"
                                  : ""));
  if (pf.model && !flavor_of(*pf.model)) {
    const Transformer& m = *pf.model;
    std::ostringstream f;
    f << "model.flavor \"" << m.name << "\": not one of torchtitan's Llama 3 flavors (8B, 70B, 405B); register it in "
      << "torchtitan/models/llama3/__init__.py as TransformerModelArgs(dim=" << m.hidden << ", n_layers=" << m.layers
      << ", n_heads=" << m.heads << ", n_kv_heads=" << m.kv_heads << ", rope_theta=" << m.rope_theta
      << ", norm_eps=" << m.norm_eps << ") with multiple_of and ffn_dim_multiplier giving an FFN of "
      << m.ffn_hidden << "; its vocabulary is the tokenizer's (torchtitan sets vocab_size from the tokenizer, "
      << "models/llama3/model/args.py update_from_config): use a tokenizer of " << m.vocab
      << " tokens, else the embedding and output layers take the tokenizer's count, not the "
      << m.vocab << " the plan was priced with";
    out.push_back(f.str());
  }
  return out;
}

}  // namespace ztune
