// engine_runs.json (../shared/validation, shipped in data/validation): measured
// training runs of Megatron-LM/Megatron-Core/NeMo, DeepSpeed and PyTorch
// FSDP/torchtitan-class engines on V100, A100 and H100. Each row becomes a
// ztune model, plan and cluster, predicted with the hardware profile of its GPU
// and the engine profile of its family; the compared figure is tokens per
// second per GPU, read or converted from what the row publishes (tokens/s,
// iteration time, or TFLOP/s under the source's stated FLOP convention). A row
// ztune cannot express is listed with the reason, never dropped.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/text.hpp"
#include "validation_sources.hpp"

namespace fs = std::filesystem;

namespace ztune::validation_detail {

namespace {


bool contains(const std::string& text, const std::string& word) { return ascii_lower(text).find(ascii_lower(word)) != std::string::npos; }

// A field of a row: absent or null reads as nullopt; anything else must be a
// finite number (InputError naming the file and the path otherwise).
std::optional<double> number(const nlohmann::json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key) || obj[key].is_null()) return std::nullopt;
  const auto& v = obj[key];
  if (!v.is_number() || !std::isfinite(v.get<double>()))
    throw InputError(where + "." + key + ": expected a finite number or null, got " + describe_json(v));
  return v.get<double>();
}

std::optional<int> whole(const nlohmann::json& obj, const char* key, const std::string& where) {
  const auto v = number(obj, key, where);
  if (!v) return std::nullopt;
  if (*v < 1 || *v > 1e7 || std::floor(*v) != *v)
    throw InputError(where + "." + key + ": expected a whole number from 1 to 10^7, got " + describe_json(obj[key]));
  return static_cast<int>(*v);
}

std::string text(const nlohmann::json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key) || !obj[key].is_string())
    throw InputError(where + "." + key + ": expected a string, got " +
                     (obj.contains(key) ? describe_json(obj[key]) : std::string("nothing")));
  return obj[key].get<std::string>();
}

const nlohmann::json& object(const nlohmann::json& obj, const char* key, const std::string& where) {
  if (!obj.contains(key) || !obj[key].is_object())
    throw InputError(where + "." + key + ": expected an object");
  return obj[key];
}

// FLOPs per token of Megatron's count, 96·l·h²(1 + s/6h + V/16lh) per token
// (Narayanan et al. 2021 eq. 3 divided by B·s; recomputation included).
double megatron96_flops_per_token(const Transformer& m) {
  const double l = m.layers, h = m.hidden, s = m.seq_len, v = m.vocab;
  return 96.0 * l * h * h * (1.0 + s / (6.0 * h) + v / (16.0 * l * h));
}

const std::string* cluster_for(const SourceSpec& spec, const std::string& gpu) {
  const std::string* best = nullptr;
  std::size_t best_len = 0;
  for (const auto& [key, path] : spec.clusters)
    if (contains(gpu, key) && key.size() > best_len) {
      best = &path;
      best_len = key.size();
    }
  return best;
}

}  // namespace

void engine_runs_source(const SourceSpec& spec, const std::string& dir, Context& ctx,
                        std::vector<ValidationCase>& out, std::vector<SkippedRun>& skipped) {
  const std::string file = (fs::path(dir) / spec.file).string();
  const nlohmann::json runs = read_json_file(file);
  if (!runs.is_array()) throw InputError(file + ": $: expected an array of runs");
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const nlohmann::json& row = runs[i];
    const std::string at = file + ": $[" + std::to_string(i) + "]";
    if (!row.is_object()) throw InputError(at + ": expected an object");
    const std::string id = text(row, "id", at);
    if (!starts_with_any(spec.id_prefixes, id)) continue;
    const std::string where = at + " (" + id + ")";
    auto skip = [&](const std::string& why) { skipped.push_back({spec.name, id, why}); };
    const std::string family = text(row, "engine_family", where);
    if (family != spec.engine)
      throw InputError(where + ".engine_family: expected \"" + spec.engine + "\" (source " + spec.name + "), got \"" +
                       family + "\"");
    const auto& hw = object(row, "hardware", where);
    const auto& model = object(row, "model", where + ".model");
    const auto& plan = object(row, "plan", where + ".plan");
    const auto& measured = object(row, "measured", where + ".measured");
    const std::string gpu_text = text(hw, "gpu", where + ".hardware");
    const std::string* cluster_path = cluster_for(spec, gpu_text);
    if (cluster_path == nullptr) {
      skip("no cluster in validation.json for GPU \"" + gpu_text + "\"");
      continue;
    }

    // Context parallelism (Megatron-Core --context-parallel-size): plan.cp,
    // absent or null meaning 1. dp is the published data-parallel degree
    // (GPUs / (tp·pp·cp)); cp consumes no batch.
    const int cp = whole(plan, "cp", where + ".plan").value_or(1);
    // Hybrid sharding (ZeRO-3 inside groups, replicated across them: plan.dp_shard).
    //  - plan.fsdp_replicas R (MaxText's dcn data parallelism over its fsdp
    //    axis): shard groups of dp × cp / R ranks;
    //  - "HSDP" with the sharding stated "within node" (PyTorch FSDP
    //    HYBRID_SHARD, fms-fsdp): shard groups of one node's data-parallel ranks.
    // What a row does not publish and ztune assumes is said in its detail.
    const bool sharding_stated = plan.contains("fsdp_sharding") && plan["fsdp_sharding"].is_string();
    const std::string sharding = sharding_stated ? plan["fsdp_sharding"].get<std::string>() : "";
    const int row_tp = whole(plan, "tp", where + ".plan").value_or(1);
    const int row_pp = whole(plan, "pp", where + ".plan").value_or(1);
    const auto per_node = whole(hw, "gpus_per_node", where + ".hardware");
    const auto replicas = whole(plan, "fsdp_replicas", where + ".plan");
    auto gpus = whole(hw, "gpus_total", where + ".hardware");
    auto dp = whole(plan, "dp", where + ".plan");
    std::optional<double> stage_stated = number(plan, "zero_stage", where + ".plan");
    int dp_shard = 0;
    std::string assumed;
    // What the row does not publish and a statement supplies, each with its why, in order.
    auto assume = [&assumed](const std::string& why) { assumed += (assumed.empty() ? "" : "; ") + why; };
    if (!gpus && !dp && per_node && contains(sharding, "HSDP") && contains(sharding, ">1 node")) {
      // OLMo-core: the scripts' default launch is one node; the mesh is HSDP
      // (shard within the node) only beyond it, so one node is full sharding.
      gpus = *per_node;
      dp = *per_node / (row_tp * row_pp * cp);
      assumed = "GPU count assumed: the training scripts' default launch, 1 node × " + std::to_string(*per_node);
    }
    if (gpus && !dp && !stage_stated && per_node && contains(sharding, "FSDP+DP")) {
      // dgxc PaxML: "FSDP+DP" with the DCN mesh data-parallel over nodes; the
      // intra-node (ICI) mesh is not published: FSDP within the node assumed.
      dp = *gpus / (row_tp * row_pp * cp);
      stage_stated = 3;
      if (*gpus > *per_node) dp_shard = *per_node / (row_tp * cp);
      assumed = "sharding assumed: FSDP within the node of " + std::to_string(*per_node) +
                " (the intra-node mesh is not published), data parallel across nodes";
    }
    if (!gpus || !dp) {
      skip("the GPU count or the data-parallel degree is not published");
      continue;
    }
    if (!stage_stated && per_node && contains(sharding, "HSDP") && contains(sharding, "within node")) {
      stage_stated = 3;
      dp_shard = *per_node / (row_tp * cp);
    }
    if (replicas && *replicas > 1) {
      if ((*dp * cp) % *replicas != 0) {
        skip("hybrid sharding (plan.fsdp_replicas " + std::to_string(*replicas) + ") does not divide dp × cp " +
             std::to_string(*dp * cp));
        continue;
      }
      dp_shard = *dp * cp / *replicas;
    }
    if (dp_shard >= *dp * cp) dp_shard = 0;  // one group: plain ZeRO-3
    if (!stage_stated) {
      skip("the sharding is not a ZeRO stage over all of dp (" +
           (sharding.empty() ? std::string("not stated") : sharding) + ")");
      continue;
    }
    auto mb = whole(plan, "micro_batch", where + ".plan");
    // validation.json states what the row leaves out, and why.
    const auto found = spec.assumed.find(id);
    const SourceSpec::Assumed* stated = found != spec.assumed.end() ? &found->second : nullptr;
    std::optional<std::int64_t> gb_assumed;
    if (stated) {
      if (!mb && stated->micro_batch) mb = stated->micro_batch;
      gb_assumed = stated->global_batch;
      assume(stated->why);
    }
    if (!mb) {
      skip("the micro-batch is not published");
      continue;
    }
    const int tp = row_tp;
    const int pp = row_pp;
    auto gb = whole(plan, "global_batch", where + ".plan");
    if (!gb && gb_assumed) gb = gb_assumed;
    if (!gb && *dp == 1) gb = *mb;  // one rank, no accumulation stated: the micro-batch is the batch
    if (!gb) {
      skip("the global batch is not published");
      continue;
    }

    // The model.
    const std::string name = text(model, "name", where + ".model");
    const bool gpt_style = contains(name, "gpt") || contains(name, "bert");
    Transformer m;
    m.name = name;
    m.source = "engine_runs.json " + id;
    m.layers = whole(model, "layers", where + ".model").value_or(0);
    m.hidden = whole(model, "hidden", where + ".model").value_or(0);
    m.heads = whole(model, "heads", where + ".model").value_or(0);
    m.kv_heads = whole(model, "kv_heads", where + ".model").value_or(m.heads);
    m.ffn_hidden = whole(model, "ffn_hidden", where + ".model").value_or(4 * m.hidden);
    m.seq_len = whole(model, "seq_len", where + ".model").value_or(0);
    const int vocab = whole(model, "vocab", where + ".model").value_or(0);
    m.vocab = spec.megatron_vocab ? megatron_padded_vocab(vocab, tp) : vocab;
    // Gated (SwiGLU) or not: squared ReLU (Nemotron-4) has GeLU's FLOPs and traffic.
    m.activation = contains(text(model, "activation", where + ".model"), "swiglu") ? Activation::swiglu : Activation::gelu;
    m.norm = contains(text(model, "norm", where + ".model"), "rmsnorm") ? NormKind::rmsnorm : NormKind::layernorm;
    m.position = gpt_style ? PositionEmbedding::learned : PositionEmbedding::rotary;
    m.bias = gpt_style;
    m.tied_embeddings = gpt_style;
    // A masked-LM encoder (the row's model says MLM: BERT pre-training) runs its
    // head on the masked 15 % of the positions, which NVIDIA's and DeepSpeed's
    // BERT gather before the decoder (Devlin et al. 2019's masking rate).
    if (contains(name, "mlm")) m.head_token_fraction = 0.15;
    // Dropout as the source's configuration sets it (validation.json), else
    // the GPT-2/Megatron-LM 0.1 the model has by default.
    if (const auto* d = statement_for(spec.dropout, id)) {
      m.dropout = d->p;
      assume(d->why);
    }
    m.global_batch = *gb;
    m.train_tokens = 1;
    if (m.layers < 1 || m.hidden < 1 || m.heads < 1 || m.seq_len < 1 || vocab < 1)
      throw InputError(where + ".model: expected layers, hidden, heads, seq_len and vocab");

    Plan p;
    p.tp = tp;
    p.pp = pp;
    p.dp = *dp;
    p.cp = cp;
    p.micro_batch = *mb;
    p.global_batch = *gb;
    if (p.devices() != *gpus) {
      skip(std::string(cp > 1 ? "tp × pp × cp × dp = " : "tp × pp × dp = ") + std::to_string(p.devices()) +
           " is not the " + std::to_string(*gpus) + " GPUs the run used");
      continue;
    }
    if (p.global_batch % (static_cast<std::int64_t>(p.micro_batch) * p.dp) != 0) {
      skip("the global batch " + std::to_string(p.global_batch) + " is not a multiple of micro-batch × dp");
      continue;
    }
    p.grad_accum = static_cast<int>(p.global_batch / (static_cast<std::int64_t>(p.micro_batch) * p.dp));
    const auto stage = stage_stated;
    if (*stage < 0 || *stage > 3 || std::floor(*stage) != *stage)
      throw InputError(where + ".plan.zero_stage: expected 0, 1, 2 or 3");
    p.zero_stage = static_cast<int>(*stage);
    p.dp_shard = dp_shard;
    const std::string rc = text(plan, "recompute", where + ".plan");
    const auto recompute = recompute_of(rc);
    if (!recompute) throw InputError(where + ".plan.recompute: expected none, selective or full, got \"" + rc + "\"");
    p.recompute = *recompute;
    if (stated && stated->recompute) p.recompute = *stated->recompute;  // validation.json says what ran, and why
    p.sequence_parallel = plan.contains("sequence_parallel") && plan["sequence_parallel"].is_boolean() &&
                          plan["sequence_parallel"].get<bool>();
    // ZeRO-R's partitioned activation checkpoints (DeepSpeed partition_activations).
    p.partition_activations = plan.contains("partition_activations") && plan["partition_activations"].is_boolean() &&
                              plan["partition_activations"].get<bool>();
    if (auto v = whole(plan, "interleave_chunks", where + ".plan"); v && *v > 1) {
      p.virtual_stages = *v;
      p.schedule = Schedule::interleaved;
    }
    p.precision = contains(text(plan, "precision", where + ".plan"), "bf16") ? Precision::bf16 : Precision::fp16;
    // FP8 linear layers, where the row's precision names them ("fp8",
    // "float8"): under bf16 unless the row says fp16 (NVIDIA's and
    // torchtitan's FP8 recipes all autocast from bf16). The scaling is the
    // library's where it has one (torchao's float8: current, tensorwise),
    // else Transformer Engine's delayed scaling unless the row says current
    // ("fp8-cs", "current scaling", "tensorwise").
    {
      const std::string prec = text(plan, "precision", where + ".plan");  // contains() ignores case
      if (contains(prec, "fp8") || contains(prec, "float8")) {
        if (!contains(prec, "fp16")) p.precision = Precision::bf16;
        const bool current = spec.engine == "fsdp" || contains(prec, "fp8-cs") || contains(prec, "current") ||
                             contains(prec, "tensorwise");
        p.fp8 = current ? Fp8Recipe::tensorwise : Fp8Recipe::delayed;
      }
    }
    p.attention = text(model, "attention", where + ".model") == "flash" ? AttentionKernel::flash : AttentionKernel::standard;
    // Which library ran the flash kernel: the rows record it under
    // inferred."model.attention" from the launch scripts (Transformer Engine's
    // NVTE_FUSED_ATTN=1 picks cuDNN's fused attention; MaxText's
    // attention=cudnn_flash_te the same); every other flash row names
    // FlashAttention-2 (PyTorch SDPA, flash-attn, NVTE_FUSED_ATTN=0).
    if (p.attention == AttentionKernel::flash && row.contains("inferred") && row["inferred"].is_object() &&
        row["inferred"].contains("model.attention") && row["inferred"]["model.attention"].is_string()) {
      const std::string how = row["inferred"]["model.attention"].get<std::string>();
      if (contains(how, "NVTE_FUSED_ATTN=1") || contains(how, "cudnn_flash_te")) p.attention = AttentionKernel::cudnn;
    }
    if (stated && stated->attention) p.attention = *stated->attention;  // validation.json says which, and why
    if (stated && stated->bias_fusion) p.bias_fusion = *stated->bias_fusion;
    // Offload: "cpu …" or "nvme …" (the optimizer states), and optionally the
    // ZeRO-3 parameters in plan.offload_params.
    auto offload_target = [&](const char* key) {
      if (!plan.contains(key) || !plan[key].is_string()) return OffloadTarget::none;
      const std::string v = plan[key].get<std::string>();
      return v.starts_with("cpu") ? OffloadTarget::cpu : v.starts_with("nvme") ? OffloadTarget::nvme : OffloadTarget::none;
    };
    p.offload_optimizer = offload_target("offload");
    p.offload_params = offload_target("offload_params");
    // DeepSpeed's CPU checkpointing, where the row's offload names the
    // activation checkpoints beside the optimizer states (the Azure ZeRO-3
    // rows: "the activation and optimizer states are allocated in the main
    // memory").
    p.cpu_checkpointing = p.recompute == Recompute::full && plan.contains("offload") && plan["offload"].is_string() &&
                          contains(plan["offload"].get<std::string>(), "activation checkpoints");
    p.overlap_comm = spec.overlap_comm;
    // NeMo's ub_tp_comm_overlap (Megatron-Core --tp-comm-overlap), where the
    // row's notes record it from the run's yaml or configure script, or where
    // validation.json assumes it (with the reason); a row that says neither is
    // run without it.
    if (p.sequence_parallel && row.contains("notes") && row["notes"].is_string()) {
      const std::string notes = row["notes"].get<std::string>();
      p.tp_comm_overlap = contains(notes, "ub_tp_comm_overlap") && !contains(notes, "ub_tp_comm_overlap=false");
    }
    // The gradient reduction's dtype: the row's precision text where it names
    // it (OLMo-core's "param bf16, reduce fp32", torchtitan's "reduce_dtype
    // fp32"), else the source's, stated in validation.json with its reason.
    {
      const std::string precision = text(plan, "precision", where + ".plan");
      if (contains(precision, "reduce fp32") || contains(precision, "reduce_dtype fp32")) {
        p.grad_reduce_dtype = Precision::fp32;
      } else {
        if (const auto* g = statement_for(spec.grad_reduce, id)) {
          p.grad_reduce_dtype = g->dtype;
          assume(g->why);
        }
      }
    }
    // The loss's kernels, where the source's code differs from its engine profile's.
    std::optional<CrossEntropyKernels> loss;
    if (const auto* e = statement_for(spec.cross_entropy, id)) {
      loss = e->kernels;
      assume(e->why);
    }
    for (const auto& o : spec.optimizer_states) {
      if (!starts_with_any(o.id_prefixes, id)) continue;
      p.master_dtype = o.master;
      p.moments_dtype = o.moments;
      p.param_remainders = o.param_remainders;
      assume(o.why);
      break;
    }
    if (stated && stated->tp_comm_overlap) p.tp_comm_overlap = *stated->tp_comm_overlap;
    if (stated && stated->reduce_scatter) p.reduce_scatter = *stated->reduce_scatter;
    if (stated && stated->recompute_policy) p.recompute_policy = *stated->recompute_policy;
    if (stated && stated->zero3_config) {
      p.prefetch_bucket_elems = stated->zero3_config->prefetch_bucket_elems;
      p.max_live_params = stated->zero3_config->max_live_params;
      p.max_reuse_distance = stated->zero3_config->max_reuse_distance;
      p.reduce_bucket_elems = stated->zero3_config->reduce_bucket_elems;
    }

    const Cluster& base = ctx.cluster((fs::path(dir) / *cluster_path).string());
    const Cluster c = sized(base, *gpus);
    if (auto why = check_plan(p, m, c)) {
      skip("not a valid ztune plan: " + *why);
      continue;
    }

    // The published figure, as tokens per second per GPU.
    double published = 0;
    std::string how;
    const double tokens_per_step = static_cast<double>(p.global_batch) * m.seq_len;
    if (auto v = number(measured, "tokens_per_s_per_gpu", where + ".measured")) {
      published = *v;
    } else if (auto t = number(measured, "tokens_per_s", where + ".measured")) {
      published = *t / *gpus;
    } else if (auto it = number(measured, "iteration_time_s", where + ".measured")) {
      published = tokens_per_step / *it / *gpus;
    } else if (auto tf = number(measured, "tflops_per_gpu", where + ".measured");
               tf && spec.tflops_convention == "megatron96") {
      published = *tf * 1e12 / megatron96_flops_per_token(m);
    } else {
      skip("publishes no throughput ztune can convert (no tokens/s or iteration time, and no FLOP convention for "
           "its TFLOP/s)");
      continue;
    }
    // Bounded where any run could be (a billion tokens/s per GPU): past it the
    // error and the MAPE are not numbers.
    if (!(published > 0) || published > 1e9)
      throw InputError(where + ".measured: expected a throughput above 0 and at most 1e9 tokens/s per GPU, got " +
                       std::to_string(published));

    ValidationCase vc;
    vc.source = spec.name;
    vc.id = id;
    vc.metric = "tokens_per_s_per_gpu";
    vc.detail = describe(m, p);
    vc.shape = run_shape(m, p);
    vc.assumed = assumed;
    vc.gpu = c.node.gpu.name;
    vc.engine = spec.engine;
    vc.published = published;
    // Under a graph compiler (torch.compile, XLA) or hand-fused kernels the
    // elementwise chains are fused: the engine's compiled traffic prices them.
    const std::string engine_text = text(row, "engine", where);
    const bool compiled_run = (contains(engine_text, "torch.compile") && !contains(engine_text, "no torch.compile")) ||
                              contains(engine_text, "xla") || contains(engine_text, "fused kernels");
    if (compiled_run) vc.detail += " compiled";
    if (!assumed.empty()) vc.detail += " [" + assumed + "]";
    const HardwareProfile& priced =
        ctx.profile(c, spec.engine, compiled_run, stated ? stated->megatron_softmax_rule : std::nullopt, loss);
    const double iteration = ctx.time(m, p, c, priced).iteration_s;
    vc.predicted = iteration > 0 ? tokens_per_step / iteration / *gpus : 0;
    vc.memory_fraction = ctx.memory_fraction(m, p, c, priced);
    vc.tolerance_pct = spec.case_tolerance_pct.value_or(0);
    out.push_back(vc);
  }
}

}  // namespace ztune::validation_detail
