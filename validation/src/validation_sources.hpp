#pragma once
// Shared by the validation source readers (validation.cpp: published_runs.json
// rows and vTrain's CSVs; validation_engine_runs.cpp: engine_runs.json): the
// source spec of validation.json, the per-run context, and the plan helpers.
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/time_model.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/validation/validation.hpp"

namespace ztune::validation_detail {

struct SourceSpec {
  std::string name, description, kind, file, cluster;
  std::string engine;  // engine family that ran the source's runs ("" for formulas)
  std::vector<std::string> id_prefixes;
  std::vector<std::string> metrics;
  // engine_runs: the cluster of each row by a substring of its hardware.gpu
  // (the longest key found wins), how the source's runs reduced gradients,
  // whether Megatron padded the vocabulary, and the FLOP convention of a
  // TFLOP/s-only row ("megatron96": 96·B·s·l·h²(1 + s/6h + V/16lh), recompute counted).
  std::vector<std::pair<std::string, std::string>> clusters;
  bool overlap_comm = true;
  bool megatron_vocab = false;
  std::string tflops_convention;
  // engine_runs: the dtype the source's runs (those whose ids start with one
  // of id_prefixes; all of them when it is empty) reduced their gradients in,
  // where a row does not say (a row whose plan.precision reads "reduce fp32"
  // says so itself), stated in validation.json with the engine code or the
  // configuration that sets it: Plan::grad_reduce_dtype.
  struct GradReduce {
    Precision dtype = Precision::fp32;
    std::vector<std::string> id_prefixes;
    std::string why;
  };
  std::vector<GradReduce> grad_reduce;
  // engine_runs: the loss kernels of the source's runs (those whose ids start
  // with one of id_prefixes; all without them) where their code's differ from
  // the engine profile's (NeMo 2 fuses Megatron's cross-entropy; torchtitan's
  // 2024 code compiled its model, not its loss): EngineProfile::cross_entropy.
  struct CrossEntropy {
    CrossEntropyKernels kernels = CrossEntropyKernels::fused;
    std::vector<std::string> id_prefixes;
    std::string why;
  };
  std::vector<CrossEntropy> cross_entropy;
  // engine_runs: the optimizer state dtypes of the source's runs (those whose
  // ids start with one of id_prefixes) where the configuration they ran sets
  // them and the row does not say: Plan::master_dtype and moments_dtype.
  struct OptimizerStates {
    Precision master = Precision::fp32;
    Precision moments = Precision::fp32;
    bool param_remainders = false;  // Plan::param_remainders (Apex's store_param_remainders)
    std::vector<std::string> id_prefixes;
    std::string why;
  };
  std::vector<OptimizerStates> optimizer_states;
  // engine_runs: the dropout probability the source's runs (those whose ids
  // start with one of id_prefixes; all of them when it is empty) trained with,
  // read from the configuration they ran, where it is not the 0.1 of GPT-2 and
  // Megatron-LM that a row's model has otherwise (Llama-style models train
  // without dropout: no masks kept, no dropout kernels): Transformer::dropout.
  struct Dropout {
    double p = kDefaultDropout;
    std::vector<std::string> id_prefixes;
    std::string why;
  };
  std::vector<Dropout> dropout;
  std::optional<double> case_tolerance_pct;  // nullopt: "printed_precision"
  double mape_tolerance_pct = 0;
  // engine_runs: what a row does not publish, stated in validation.json with
  // the reason (a sibling row's setting, the source's text): row id → value.
  struct Assumed {
    std::optional<int> micro_batch;
    std::optional<std::int64_t> global_batch;
    std::optional<bool> tp_comm_overlap;  // the run's TP overlap, where its notes are silent
    std::optional<bool> reduce_scatter;   // how its ZeRO-1/2 reduced gradients, where the row is silent
    std::optional<AttentionKernel> attention;  // the run's attention kernel, where the row does not name it
    std::optional<bool> bias_fusion;  // whether its code fused bias-GeLU and bias-dropout-add (Plan::bias_fusion)
    // What the run recomputed where the row's word means something else in
    // ztune's vocabulary (fms-fsdp's "Selective AC" checkpoints whole blocks).
    std::optional<Recompute> recompute;
    std::optional<SelectivePolicy> recompute_policy;  // what the engine's selective recomputation recomputes
    // The run's engine code predates (or has) Megatron's shape rule for its
    // fused softmax: EngineProfile::megatron_softmax_rule for this run only.
    std::optional<bool> megatron_softmax_rule;
    // The run's DeepSpeed ZeRO-3 knobs, from its recipe's ds_config (elements).
    struct Zero3Config {
      double prefetch_bucket_elems = 0;
      double max_live_params = 0;
      double max_reuse_distance = 0;
      double reduce_bucket_elems = 0;
    };
    std::optional<Zero3Config> zero3_config;
    std::string why;
  };
  std::map<std::string, Assumed> assumed;
};

struct Context {
  const ValidationOptions& opt;
  std::map<std::string, Cluster> clusters;
  std::map<std::string, HardwareProfile> profiles;

  const Cluster& cluster(const std::string& path) {
    auto it = clusters.find(path);
    if (it == clusters.end()) it = clusters.emplace(path, load_cluster(path)).first;
    return it->second;
  }
  // The case's hardware profile with its engine attached (one per GPU ×
  // engine × whether a graph compiler ran it × a run's own softmax rule).
  const HardwareProfile& profile(const Cluster& c, const std::string& engine, bool compiled_run = false,
                                 std::optional<bool> softmax_rule = std::nullopt,
                                 std::optional<CrossEntropyKernels> loss = std::nullopt) {
    const std::string key = (opt.profile != nullptr ? std::string("--profile") : c.node.gpu.name) + "|" + engine +
                            (compiled_run ? "|compiled" : "") +
                            (softmax_rule ? (*softmax_rule ? "|softmax-rule" : "|softmax-always") : "") +
                            (loss ? std::string("|loss-") + name_in(kCrossEntropyNames, *loss) : "");
    auto it = profiles.find(key);
    if (it == profiles.end()) {
      HardwareProfile hw = opt.profile != nullptr ? *opt.profile : default_profile_for(c);
      if (!engine.empty()) hw = with_engine(std::move(hw), engine);
      if (compiled_run) hw.engine = compiled(hw.engine);
      if (softmax_rule) hw.engine.megatron_softmax_rule = *softmax_rule;
      if (loss) hw.engine.cross_entropy = *loss;
      it = profiles.emplace(key, std::move(hw)).first;
    }
    return it->second;
  }
  // The memory model's GPU bytes (the most loaded stage, the model states
  // counted as the ZeRO paper counts them: MemoryOptions' default, not the
  // engine's accounting) over the GPU's capacity: a published run ran, so above
  // 1 the memory model or ztune's reading of the row is wrong. (Under the
  // megatron accounting four NeMo Llama 3.1 runs, read with fp32 gradient
  // reduction, come out at 102-110 %. Apex's DistributedFusedAdam keeps its
  // contiguous gradient buffer, when on, in grad_sync_dtype: those runs either
  // synced in bf16 (as the same release's GPT-3 and Nemotron-4 340B yamls do)
  // or kept only ZeRO-2's gradient shards (the buffer off, Apex's default).
  // The stored sources do not say which; the first changes their times.)
  // `hw` is the profile() the run's time is priced with (compiled, its softmax
  // rule, its loss's kernels): the loss's peak memory is the engine's.
  static double memory_fraction(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
    // States counted as the run's engine keeps them (its profile's name), as
    // predict and search count them for that engine.
    const MemoryPrediction mp =
        predict_memory(m, p, c, hw, MemoryOptions{state_accounting_of_engine(hw.engine.name)});
    return mp.gpu_capacity_bytes > 0 ? mp.gpu_total_bytes / mp.gpu_capacity_bytes : 0;
  }
  TimePrediction time(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) const {
    return opt.time ? opt.time(m, p, c, hw) : predict_time(m, p, c, hw);
  }
};

/// Whether `id` starts with one of `prefixes` (a source's rows, and the rows a
/// per-source setting of validation.json applies to, are named by id prefixes).
[[nodiscard]] inline bool starts_with_any(const std::vector<std::string>& prefixes, const std::string& id) {
  for (const auto& prefix : prefixes)
    if (id.starts_with(prefix)) return true;
  return false;
}

/// The first of a source's per-row statements (grad_reduce, cross_entropy,
/// dropout: each with `id_prefixes`) that covers row `id`, all rows where it
/// names no prefixes; nullptr where none does.
template <class Statement>
[[nodiscard]] const Statement* statement_for(const std::vector<Statement>& statements, const std::string& id) {
  for (const auto& s : statements)
    if (s.id_prefixes.empty() || starts_with_any(s.id_prefixes, id)) return &s;
  return nullptr;
}

/// Megatron pads the vocabulary to a multiple of 128 × tp (make_vocab_size_divisible_by).
int megatron_padded_vocab(int vocab, int tp);
/// A GPT layer stack as Megatron builds it (FFN 4h, GeLU, LayerNorm, learned
/// positions, tied embeddings, vocabulary padded for tp).
Transformer gpt(const std::string& name, int layers, int hidden, int heads, int seq, int vocab, int tp);
/// `base` with enough nodes for `gpus`.
Cluster sized(const Cluster& base, int gpus);
void check_or_throw(const Plan& p, const Transformer& m, const Cluster& c, const std::string& where);
/// "L24 h1920 a15 s1024 <plan summary>".
std::string describe(const Transformer& m, const Plan& p);

/// engine_runs.json rows of one source (validation_engine_runs.cpp).
void engine_runs_source(const SourceSpec& spec, const std::string& dir, Context& ctx,
                        std::vector<ValidationCase>& out, std::vector<SkippedRun>& skipped);

}  // namespace ztune::validation_detail
