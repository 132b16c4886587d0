// ztune predict: the cost model's memory and time for one plan, as two
// readable tables or one JSON object (keys fixed by issue 3). An impossible
// plan exits 2 naming the rule it breaks; a plan that does not fit still gets
// its full prediction, with fits false and the overflowing lines named.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "plan_flags.hpp"
#include "search_output.hpp"
#include "ztune/tuner/planning.hpp"
#include "ztune/model/finite_check.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/tuner/engine.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/onebit_adam.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/sparse_attention.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/model/time_model.hpp"
#include "ztune/tuner/explain.hpp"
#include "ztune/tuner/planning.hpp"
#include "ztune/tuner/search.hpp"

namespace ztune::cli {

namespace {


struct PredictFlags {
  InputFlags input;
  PlanFlags plan;
  std::string profile;
  std::string engine;  // whose engine profile prices the plan ("": the plan file's, else ztune)
  bool compile = false;          // the engine runs under a graph compiler (torch.compile, XLA)
  std::string accounting = "engine";  // as --engine keeps its model states (state_accounting_of)
  double memory_headroom_pct = 0;  // % of each GPU's memory kept free
  bool json = false;
  bool simulate = false;  // iteration time from the discrete-event simulator
  std::string trace;      // Chrome trace JSON of the simulated iteration (implies simulate)
};

/// Everything one prediction needs, resolved from the flags.
struct PredictInputs {
  Transformer model;
  Cluster cluster;
  Plan plan;
  HardwareProfile profile;
  MemoryOptions memory;
  Engine engine = Engine::ztune;  // --engine: whose rules the fit hints' plans must pass
  bool compiled = false;  // --compile: the engine's compiled elementwise traffic
};

PredictInputs resolve(const PredictFlags& f) {
  PredictInputs in;
  // A plan file written by `ztune search --out` carries its cluster and model:
  // --cluster and --model are then optional, and override the file's (the
  // same plan elsewhere: a what-if), which a note on stderr says.
  std::optional<PlanFile> file;
  if (!f.plan.plan_file.empty()) file = load_plan_file(f.plan.plan_file);
  auto note_override = [&](const char* flag, const std::string& given, const char* what, const std::string& embedded) {
    if (!given.empty() && !embedded.empty())
      std::fprintf(stderr, "ztune: note: %s %s replaces the %s %s embedded in %s\n", flag, given.c_str(), what,
                   embedded.c_str(), f.plan.plan_file.c_str());
  };
  if (f.input.cluster.empty() && file && file->cluster) {
    in.cluster = *file->cluster;
    if (f.input.nodes > 0) in.cluster.nodes = f.input.nodes;
  } else {
    if (f.input.cluster.empty() && file)
      throw InputError("--cluster: required: " + f.plan.plan_file + " has no $.cluster");
    in.cluster = f.input.load_cluster_or_throw();
  }
  if (f.input.model.empty() && file && file->model) {
    in.model = *file->model;
    if (f.input.seq > 0) in.model.seq_len = f.input.seq;
  } else {
    if (f.input.model.empty() && file)
      throw InputError("--model: required: " + f.plan.plan_file + " has no $.model");
    in.model = f.input.load_model_or_throw();
  }
  // Said once both loaded: a --cluster or --model that is refused gets no note first.
  if (file) {
    note_override("--cluster", f.input.cluster, "cluster", file->cluster ? file->cluster->name : "");
    note_override("--model", f.input.model, "model", file->model ? file->model->name : "");
  }
  in.plan = f.plan.resolve(in.model, in.cluster);  // throws InputError naming the broken rule
  // The engine: --engine, else the one the plan file was searched for, else ztune's own.
  const std::string engine_name = !f.engine.empty()           ? f.engine
                                  : file && file->engine      ? *file->engine
                                                              : std::string("ztune");
  if (file && file->engine && !f.engine.empty() && f.engine != *file->engine)
    std::fprintf(stderr, "ztune: note: --engine %s replaces the engine %s the plan in %s was searched for\n",
                 f.engine.c_str(), file->engine->c_str(), f.plan.plan_file.c_str());
  const Engine engine = *engine_from_string(engine_name);
  in.engine = engine;
  if (auto rule = engine_violation(in.plan, engine, in.cluster)) {
    // A plan file need not say which engine it was made for (--engine is
    // ztune's own by default): name those that run it.
    std::string others;
    for (const Engine e : {Engine::megatron, Engine::deepspeed, Engine::fsdp, Engine::ztune})
      if (e != engine && !engine_violation(in.plan, e, in.cluster)) others += (others.empty() ? "" : " or ") + to_string(e);
    throw InputError("--engine " + engine_name + " cannot run this plan: " + std::string(engine_rule_text(*rule)) +
                     (others.empty() ? "" : "; --engine " + others + " runs it"));
  }
  if (auto why = engine_model_violation(in.model, engine))
    throw InputError("--engine " + engine_name + " cannot train this model: " + *why);
  // Compiled: --compile, or the plan file searched with it.
  in.compiled = f.compile || (file && file->compile);
  in.profile = priced_profile(in.cluster, f.profile, engine_name, in.compiled);
  if (auto why = fp8_library_refusal(in.plan.fp8, in.profile.engine)) throw InputError("--fp8: " + *why);
  in.cluster = with_measured_figures(in.cluster, in.profile);  // a calibrated profile's figures
  in.memory.accounting = accounting_named(f.accounting, engine);
  in.memory.gpu_headroom = f.memory_headroom_pct / 100.0;
  return in;
}

std::string overflow_names(const MemoryPrediction& mp) {
  std::array<MemLine, static_cast<std::size_t>(MemLine::count)> lines{};
  int n = overflowing_lines(mp, lines.data(), static_cast<int>(lines.size()));
  std::string s;
  for (int i = 0; i < n; ++i) s += (i ? ", " : "") + std::string(kMemLineNames[static_cast<std::size_t>(lines[i])]);
  return s;
}

// Issue 10: what 1-bit Adam and sparse attention change (the iteration above is
// 1-bit Adam's compression phase; its warm-up and the run average are here).
nlohmann::json features_json(const PredictInputs& in) {
  nlohmann::json f{{"attention_density", attention_density(in.model, in.plan)}};
  if (in.plan.onebit_adam) {
    const OnebitAdamPhases ph = onebit_adam_phases(in.model, in.plan, in.cluster, in.profile);
    const OnebitAdamCost o = onebit_adam_cost(in.model, in.plan, in.cluster, in.profile);
    f["onebit_adam"] = {{"iteration_reported", "compression phase"},
                        {"warmup_iteration_s", ph.warmup_iteration_s},
                        {"compressed_iteration_s", ph.compressed_iteration_s},
                        {"run_steps", ph.run_steps},
                        {"warmup_fraction", ph.warmup_fraction},
                        {"average_iteration_s", ph.average_iteration_s},
                        {"volume_ratio", ph.volume_ratio},
                        {"average_volume_reduction", ph.average_volume_reduction},
                        {"warmup_wire_bytes", o.warmup_wire_bytes},
                        {"compressed_wire_bytes", o.compressed_wire_bytes},
                        {"error_feedback_bytes", o.error_feedback_bytes}};
  }
  if (in.plan.fp8 != Fp8Recipe::none) {
    // What the FP8 figures rest on: the library, the peak MFU is against, and
    // the two memory terms it moves (in the activations and workspace lines).
    const Fp8Library lib = in.profile.engine.fp8;
    const int layers = max_stage_layers(in.plan, in.model.layers);
    f["fp8"] = {{"recipe", to_string(in.plan.fp8)},
                {"param_gather", in.plan.fp8_param_gather},
                {"library", name_in(kFp8LibraryNames, lib)},
                {"mfu_peak_tflops", in.cluster.node.gpu.peak_tflops_fp8},
                {"activation_saving_bytes_per_layer", fp8_activation_saving(in.model, in.plan, lib)},
                {"weight_copy_bytes", fp8_weight_copy_bytes(in.model, in.plan, lib, layers)}};
  }
  return f;
}

/// For a plan that does not fit: single changes on the same GPUs, then the
/// search's best plan on them (tuner/explain.hpp predict_fit_hints).
std::vector<FitHint> fit_hints(const PredictInputs& in, const MemoryPrediction& mp) {
  SearchOptions o;
  o.memory = in.memory;
  // The hints are plans for the engine the user named: its rules refuse, its
  // search space picks the kernels (before, every hint was checked against
  // ztune's executor whatever --engine said).
  o.space.engine = in.engine;
  return predict_fit_hints(in.model, in.cluster, in.profile, o, in.plan, mp);
}

nlohmann::json fit_hints_json(const std::vector<FitHint>& hints) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& h : hints) {
    nlohmann::json j{{"change", h.change}, {"detail", h.detail}, {"fits", h.fits}};
    if (h.fits) j["tokens_per_s"] = h.tokens_per_s;
    a.push_back(j);
  }
  return a;
}

void print_fit_hints(const std::vector<FitHint>& hints) {
  if (hints.empty()) return;
  std::printf("\nWhat would make this plan fit (one change each on the same GPUs, then the search's best):\n");
  for (const auto& h : hints) {
    std::printf("  %s %s: %s", h.fits ? "[fits]" : "[no]  ", h.change.c_str(), h.detail.c_str());
    if (h.fits) std::printf(", %.0f tokens/s", h.tokens_per_s);
    std::printf("\n");
  }
}

// The largest micro-batch no larger than `fits` that divides the sequences a
// step gives each replica (global batch / dp), the one a run can take: 3 fits
// but 1024 / 8 = 128 sequences take 2 (a plan at 3 is refused). 0 when none.
int largest_runnable_micro_batch(const Plan& p, int fits) {
  if (fits <= 0 || p.dp <= 0 || p.global_batch % p.dp != 0) return 0;
  const long long per_replica = p.global_batch / p.dp;
  for (long long mb = std::min<long long>(fits, per_replica); mb >= 1; --mb)
    if (per_replica % mb == 0) return static_cast<int>(mb);
  return 0;
}

nlohmann::json prediction_json(const PredictInputs& in, const Prediction& pr, int largest_mb) {
  const auto& mp = pr.memory;
  const auto& tp = pr.time;
  nlohmann::json gpu{{"total_bytes", mp.gpu_total_bytes}, {"capacity_bytes", mp.gpu_capacity_bytes}};
  for (std::size_t i = 0; i < kMemLineNames.size(); ++i) gpu[std::string(kMemLineNames[i]) + "_bytes"] = mp.gpu[i];
  nlohmann::json overflow = nlohmann::json::array();
  std::array<MemLine, static_cast<std::size_t>(MemLine::count)> lines{};
  int n = overflowing_lines(mp, lines.data(), static_cast<int>(lines.size()));
  for (int i = 0; i < n; ++i) overflow.push_back(kMemLineNames[static_cast<std::size_t>(lines[i])]);
  nlohmann::json breakdown;
  for (std::size_t i = 0; i < kTimePartNames.size(); ++i) breakdown[kTimePartNames[i]] = tp.parts[i];
  // The plan as fields, as search --json and plan files hold it, and its
  // stages resolved (a balanced partition is not written in the plan): a
  // reader had to parse the summary for cp, ulysses, dp_shard and the stages.
  nlohmann::json stages = nlohmann::json::array();
  for (int i = 0; i < in.plan.pp; ++i) stages.push_back(stage_layer_count(in.plan, in.model.layers, i));
  return {{"plan", in.plan.summary()},
          {"plan_fields", plan_to_json(in.plan)},
          {"stage_layers", stages},
          {"model", in.model.name},
          {"model_params", static_cast<std::int64_t>(std::llround(in.model.total_params()))},
          {"seq_len", in.model.seq_len},
          {"model_dropout", in.model.dropout},
          {"cluster", in.cluster.name},
          {"profile", in.profile.name},
          {"engine", in.profile.engine.name},
          {"compiled", in.compiled},
          {"memory",
           {{"accounting", states_counted_as(in.memory.accounting, storage_precision(in.plan), in.cluster, in.profile)},
            {"gpu", gpu},
            {"stage", mp.stage},
            {"gpu_usable_bytes", mp.gpu_usable_bytes},
            {"host_bytes", mp.host_bytes_per_node},
            {"host_capacity_bytes", mp.host_capacity_bytes},
            {"nvme_bytes", mp.nvme_bytes_per_node},
            {"nvme_capacity_bytes", mp.nvme_capacity_bytes},
            {"fits", mp.fits()},
            {"fits_gpu", mp.fits_gpu},
            {"fits_host", mp.fits_host},
            {"fits_nvme", mp.fits_nvme},
            {"overflow_lines", overflow},
            {"largest_micro_batch", largest_mb},  // the largest that fits in memory
            {"largest_runnable_micro_batch", largest_runnable_micro_batch(in.plan, largest_mb)}}},
          {"time",
           {{"iteration_s", tp.iteration_s},
            {"tokens_per_s", tp.tokens_per_s},
            {"model_tflops_per_gpu", tp.model_tflops_per_gpu},
            {"hardware_tflops_per_gpu", tp.hardware_tflops_per_gpu},
            {"mfu", tp.mfu},
            {"hfu", tp.hfu},
            {"model_flops", tp.model_flops},
            {"hardware_flops", tp.hardware_flops},
            {"breakdown_s", breakdown}}},
          {"features", features_json(in)}};
}

// An executor engine runs the attention of context parallelism and Ulysses on
// fp32 copies (op_costs.hpp attention_precision): said, or its time beside
// another engine's for the same plan is a puzzle (2.5x on llama-70b, cp 2).
// The engine named is one that runs the mode (Megatron-Core has no Ulysses).
std::string attention_copies_note(const PredictInputs& in) {
  const Precision copies = attention_precision(in.plan, in.profile.engine);
  if (copies == in.plan.precision) return "";
  const bool cp = in.plan.cp > 1;
  return "engine " + in.profile.engine.name + " runs " + (cp ? "context-parallel" : "Ulysses") + " attention on " +
         to_string(copies) + " copies, not in " + to_string(in.plan.precision) + "; --engine " +
         (cp ? "megatron prices Megatron-Core's" : "deepspeed prices DeepSpeed-Ulysses'") + " " +
         to_string(in.plan.precision) + " attention";
}

// The profile by name and the file it was read from: `--profile
// local-cpu-calibrated` reads the user's calibrated profile when there is
// one, else the catalog's example of that name (calibrated on another
// machine), and only the file tells them apart.
std::string profile_line(const HardwareProfile& hw) {
  return hw.file.empty() ? hw.name : hw.name + " (" + hw.file + ")";
}

void print_tables(const PredictInputs& in, const Prediction& pr, int largest_mb) {
  const auto& mp = pr.memory;
  const auto& tp = pr.time;
  std::printf("plan     %s\nmodel    %s (%s parameters, %d-token sequences)\ncluster  %s (%d × %d %s)\nprofile  %s\nengine   %s\n",
              in.plan.summary().c_str(), in.model.name.c_str(), params_text(in.model.total_params()).c_str(), in.model.seq_len,
              in.cluster.name.c_str(),
              in.cluster.nodes, in.cluster.node.gpus, in.cluster.node.gpu.name.c_str(), profile_line(in.profile).c_str(),
              (in.profile.engine.name + (in.compiled ? " (compiled: torch.compile / XLA fusion)" : "")).c_str());
  if (const std::string note = attention_copies_note(in); !note.empty()) std::printf("note     %s\n", note.c_str());
  if (const std::string note = dropout_note(in.model, in.cluster, in.profile); !note.empty())
    std::printf("note     %s\n", note.c_str());
  if (const std::string note = measured_elsewhere_note(in.cluster, in.profile); !note.empty())
    std::printf("note     %s\n", note.c_str());
  const std::string counted =
      states_counted_as(in.memory.accounting, storage_precision(in.plan), in.cluster, in.profile);
  if (counted == "executor")
    std::printf("states   counted as ztune's executor allocates them (--accounting applies to the other engines)\n");
  else if (counted == "fp32")
    std::printf("states   fp32: 4 + 4 + 8 bytes a parameter under every accounting (--accounting applies to 16-bit "
                "plans)\n");
  else
    std::printf("states   counted in %s's accounting (--accounting; the engine's by default)\n", counted.c_str());
  // Where the engine keeps bf16 gradients in fp32 (op_costs.hpp): say so, the
  // time it costs comes out of the breakdown's overhead and dp_comm lines.
  if (bf16_optimizer_runs(in.plan, in.profile.engine))
    std::printf("grads    DeepSpeed's BF16_Optimizer (bf16 pipeline without ZeRO): each micro-batch's gradients folded "
                "into fp32 buffers (%.1f ms, in overhead), reduced in fp32\n",
                1e3 * bf16_grad_accumulation_time(in.model, in.plan, in.cluster, in.profile));
  else if (in.plan.grad_reduce_dtype)
    std::printf("grads    reduced in %s (the plan's communication.grad_reduce_dtype)\n",
                to_string(*in.plan.grad_reduce_dtype).c_str());
  else if (gradient_reduce_bytes(in.plan, in.profile.engine) > bytes_of(in.plan.precision)) {
    if (in.profile.engine.name == "ztune")
      std::printf("grads    reduced in fp32 (ztune's executor reduces float buffers)\n");
    else
      std::printf("grads    reduced in fp32 (the %s engine's fp32 gradient buffer; --grad-reduce-dtype %s states "
                  "a 16-bit reduction)\n",
                  in.profile.engine.name.c_str(), to_string(in.plan.precision).c_str());
  }
  if (in.plan.low_precision_optimizer()) {
    // As the engine keeps them: ztune's executor keeps no copy of an fp16 master beside fp16 parameters either.
    const OptimizerDtypes kept = optimizer_dtypes_kept(in.plan, in.cluster, in.profile);
    std::printf("adam     %s (%g bytes a parameter, fp32's 12; the plan's optimizer.master_dtype, moments_dtype, "
                "param_remainders)\n",
                adam_states_text(kept).c_str(),
                adam_state_bytes(kept));
  }
  if (in.plan.fp8 != Fp8Recipe::none) {
    // How the engine runs them, and how far the figure has been checked.
    const bool te = in.profile.engine.fp8 == Fp8Library::transformer_engine;
    std::printf("fp8      linear GEMMs in FP8, %s scaling, through %s; the attention core and the LM head in %s; "
                "MFU against the FP8 peak (NVIDIA's convention). No FP8 run is in ztune's validation set: the error "
                "band below is the %s cell's (docs/benchmarks.md checks FP8 against published runs outside it)\n",
                to_string(in.plan.fp8).c_str(),
                !te                        ? "torchao's Float8Linear (16-bit inputs kept; weights cast at each use)"
                : in.plan.fp8_param_gather ? "Transformer Engine with FP8 parameters (FP8 inputs kept for backward; the "
                                             "weights' transposes cached, in workspace; weights gathered in FP8)"
                                           : "Transformer Engine (FP8 inputs kept for backward; FP8 weight copies "
                                             "cached, in workspace)",
                to_string(in.plan.precision).c_str(), to_string(in.plan.precision).c_str());
  }
  if (const std::string note = sequence_note(in.model); !note.empty()) std::printf("%s\n", note.c_str());
  if (in.plan.recompute == Recompute::full && in.plan.recompute_num_layers > 0) {
    // Megatron's block method: which layers each stage recomputes (the rest keep everything).
    const int n = in.plan.recompute_num_layers;
    const std::string first = n == 1 ? "first layer" : "first " + std::to_string(n) + " layers";
    std::printf("recompute %d of %d layers (Megatron's block method: each model chunk's %s; the others keep every "
                "activation)\n",
                recomputed_layers_total(in.plan, in.model.layers), in.model.layers, first.c_str());
  }
  std::printf("\n");
  // Uneven pipeline stages: say which layers each stage holds (the plan's
  // own partition, stated or made from --first-stage-layers or the
  // accounting flags, or the balanced one DeepSpeed's "uniform" makes).
  if (in.plan.pp > 1 && !even_stages(in.plan, in.model.layers)) {
    std::printf("stages  ");
    for (int i = 0; i < in.plan.pp; ++i) std::printf(" %d", stage_layer_count(in.plan, in.model.layers, i));
    std::printf(" layers, first to last (%s)\n\n",
                in.plan.stage_layers.empty() ? "balanced as DeepSpeed's uniform partition" : "the plan's partition");
  }
  // Stated model chunks (Megatron-Core's accounting layout): the chunks in
  // the order the pipeline runs them, as the plan's summary lists them.
  if (!in.plan.chunk_layers.empty()) {
    const std::string s = in.plan.summary();
    std::printf("chunks  %s layers, virtual stage 0 to %zu (chunk c of stage r is virtual stage c·pp + r)\n\n",
                s.substr(s.find(" chunks:") + 8).c_str(), in.plan.chunk_layers.size() - 1);
  }
  // ZeRO-3 under a pipeline is priced as FSDP2 runs it there: say so, since
  // its memory and traffic differ from ZeRO-3 without one.
  if (in.plan.zero3_held_through_step())
    std::printf("ZeRO-3 under the pipeline: each stage gathered once per step and held to its last backward, its "
                "gradients accumulated whole and reduce-scattered once (FSDP2 under torch.distributed.pipelining)\n\n");
  // The heading's GiB above the numbers' last digits (column 45).
  const std::string heading = in.plan.pp > 1 ? "Memory per GPU (stage " + std::to_string(mp.stage) + ", most loaded)"
                                             : std::string("Memory per GPU (most loaded stage)");
  std::printf("%-42sGiB\n", heading.c_str());
  for (std::size_t i = 0; i < kMemLineNames.size(); ++i)
    std::printf("  %-22s %18.3f\n", kMemLineNames[i], mp.gpu[i] / kBytesPerGiB);
  const bool headroom = mp.gpu_usable_bytes < mp.gpu_capacity_bytes;
  std::printf("  %-22s %18.3f\n  %-22s %18.3f", "total", mp.gpu_total_bytes / kBytesPerGiB, "capacity",
              mp.gpu_capacity_bytes / kBytesPerGiB);
  if (headroom) {
    char label[48];
    std::snprintf(label, sizeof label, "usable (%.3g%% kept free)", in.memory.gpu_headroom * 100);
    std::printf("\n  %-22s %18.3f", label, mp.gpu_usable_bytes / kBytesPerGiB);
  }
  std::printf("   %s\n", mp.fits_gpu ? "fits" : "DOES NOT FIT");
  if (!mp.fits_gpu) {
    // The fewest lines, largest first, whose sum passes the limit (overflow_names).
    const std::string names = overflow_names(mp);
    const char* limit = headroom ? "usable memory" : "capacity";
    // How far over, the figure a change must win back.
    const double over = (mp.gpu_total_bytes - mp.gpu_usable_bytes) / kBytesPerGiB;
    if (names.find(',') == std::string::npos)
      std::printf("  overflow: %.2f GiB over the %s; the %s line alone is more than it\n", over, limit, names.c_str());
    else
      std::printf("  overflow: %.2f GiB over the %s; the largest lines, %s, are together more than it\n", over, limit,
                  names.c_str());
  }
  // Memory alone answers this; the batch may give each replica fewer sequences a step.
  const long long per_replica = in.plan.dp > 0 ? in.plan.global_batch / in.plan.dp : 0;
  if (largest_mb > 0 && per_replica > 0 && largest_mb > per_replica)
    std::printf("  largest micro-batch that fits: %d in memory, more than the %lld sequence%s a step this global "
                "batch gives each of the %d replicas\n",
                largest_mb, per_replica, per_replica == 1 ? "" : "s", in.plan.dp);
  else if (const int runnable = largest_runnable_micro_batch(in.plan, largest_mb); largest_mb > 0 && runnable != largest_mb)
    std::printf("  largest micro-batch that fits: %d in memory; %d is the largest that divides the %lld sequences a "
                "step gives each of the %d replicas (--micro-batch must)\n",
                largest_mb, runnable, per_replica, in.plan.dp);
  else if (largest_mb > 0)
    std::printf("  largest micro-batch that fits: %d\n", largest_mb);
  else
    std::printf("  no micro-batch fits this layout, not even 1 sequence\n");
  std::printf("Host per node   %10.1f GiB of %10.1f GiB   %s\n", mp.host_bytes_per_node / kBytesPerGiB,
              mp.host_capacity_bytes / kBytesPerGiB, mp.fits_host ? "fits" : "DOES NOT FIT");
  std::printf("NVMe per node   %10.1f GiB of %10.1f GiB   %s\n\n", mp.nvme_bytes_per_node / kBytesPerGiB,
              mp.nvme_capacity_bytes / kBytesPerGiB, mp.fits_nvme ? "fits" : "DOES NOT FIT");
  std::printf("Time per iteration                   s       %%\n");
  for (std::size_t i = 0; i < kTimePartNames.size(); ++i)
    std::printf("  %-22s %12.4f %7.1f\n", kTimePartNames[i], tp.parts[i],
                tp.iteration_s > 0 ? 100.0 * tp.parts[i] / tp.iteration_s : 0.0);
  std::printf("  %-22s %12.4f\n\n", "iteration", tp.iteration_s);
  std::printf("tokens/s %.0f   model TFLOP/s per GPU %.1f   hardware TFLOP/s per GPU %.1f   MFU %.1f%%   HFU %.1f%%\n",
              tp.tokens_per_s, tp.model_tflops_per_gpu, tp.hardware_tflops_per_gpu, 100 * tp.mfu, 100 * tp.hfu);
  if (in.plan.sparse_attention != SparseLayout::none)
    std::printf("sparse attention %s, block %d: %.4f of the s×s scores computed\n",
                to_string(in.plan.sparse_attention).c_str(), in.plan.sparse_block, attention_density(in.model, in.plan));
  if (in.plan.onebit_adam) {
    const OnebitAdamPhases ph = onebit_adam_phases(in.model, in.plan, in.cluster, in.profile);
    std::printf("1-bit Adam: the iteration above is the compression phase; warm-up (plain Adam) %.4f s; "
                "warm-up %.1f%% of %.0f steps -> run average %.4f s; volume %.4f of Adam's per step, %.2fx less over "
                "the run\n",
                ph.warmup_iteration_s, 100 * ph.warmup_fraction, ph.run_steps, ph.average_iteration_s,
                ph.volume_ratio, ph.average_volume_reduction);
  }
}

}  // namespace

Command add_predict(CLI::App& root) {
  auto f = std::make_shared<PredictFlags>();
  auto* app = root.add_subcommand("predict", "Predict memory per GPU/host/NVMe and iteration time for one plan");
  f->input.add_to(*app, false);  // required unless --plan's file carries them (resolve)
  f->plan.add_to(*app);
  app->add_option("--profile", f->profile,
                  "Hardware profile: a file, or a name in ~/.local/share/ztune/profiles/ or data/profiles/ "
                  "(default: data/profiles/<gpu>.json)")
      ->check(GivenPath);
  add_engine_flags(*app, f->engine, f->compile,
                   "The engine that runs the plan; its profile (data/engines/: host costs, fusion, overlap) prices it "
                   "(default: the engine a --plan file was searched for, else ztune, its own executor)");
  add_accounting(*app, f->accounting);
  add_memory_headroom(*app, f->memory_headroom_pct);
  app->add_flag("--json", f->json, "Print one JSON object");
  app->add_flag("--simulate", f->simulate,
                "Iteration time and breakdown from the discrete-event simulator instead of the analytical estimate");
  app->add_option("--trace", f->trace,
                  "Write the simulated iteration as Chrome trace JSON (Perfetto); implies --simulate. An existing "
                  "file is replaced")
      ->check(WritableFile);
  return {app, [f]() {
            auto inputs = f->input.files();
            inputs.emplace_back("--plan", f->plan.plan_file);
            inputs.emplace_back("--profile", f->profile);
            refuse_output_over_input("--trace", f->trace, inputs);
            const PredictInputs in = resolve(*f);
            Prediction pr{predict_memory(in.model, in.plan, in.cluster, in.profile, in.memory),
                          predict_time(in.model, in.plan, in.cluster, in.profile)};
            // CPU ranks train 16-bit plans (the executor stages them) but the
            // cluster may state no 16-bit throughput: say so, with the memory
            // that can still be predicted, instead of an infinite time.
            if (const std::string why = unpriced_precision(in.cluster, in.plan.precision); !why.empty()) {
              char mem[96];
              const double b = pr.memory.gpu_total_bytes;
              const bool gib = b >= kBytesPerGiB;
              std::snprintf(mem, sizeof mem, "%.2f %s per rank (%s)", gib ? b / kBytesPerGiB : b / 1048576.0,
                            gib ? "GiB" : "MiB", pr.memory.fits_gpu ? "fits" : "does not fit");
              // The precision came from --precision, or from the plan file's plan.
              const std::string source = f->plan.plan_file.empty() ? "--precision " + to_string(in.plan.precision)
                                                                   : f->plan.plan_file + ": $.plan.precision";
              throw InputError(source + ": " + why +
                               ", so this plan's time cannot be predicted; its memory is " + mem +
                               ", and `ztune run` trains it and compares the memory");
            }
            require_finite_time(pr.time, "cluster " + in.cluster.name + " with " + profile_label(in.profile) +
                                             ", plan " + in.plan.summary());
            std::optional<SimulatedPlan> simulated;
            if (f->simulate || !f->trace.empty()) {
              simulated = simulate_plan(in.model, in.plan, in.cluster, in.profile, pr.time, f->trace);
              pr.time = simulated->time;
            }
            const int largest_mb =
                largest_fitting_micro_batch(in.model, in.plan, in.cluster, in.profile, 1024, in.memory);
            const Accuracy accuracy = accuracy_for(in.cluster, to_string(in.engine));
            const std::vector<FitHint> hints = fit_hints(in, pr.memory);
            if (f->json) {
              nlohmann::json j = prediction_json(in, pr, largest_mb);
              j["memory"]["fit_hints"] = fit_hints_json(hints);
              j["time"]["method"] = simulated ? "simulated" : "analytical";
              j["accuracy"] = accuracy_json(accuracy, pr.time.iteration_s, pr.time.tokens_per_s,
                                            band_widening(accuracy, in.model, in.plan));
              j["accuracy"]["your_runs"] = runs_fit_json(in.profile);
              if (const std::string note = attention_copies_note(in); !note.empty()) j["time"]["note"] = note;
              if (!accuracy.envelope.empty() || !accuracy.cv.empty())
                j["accuracy"]["extrapolation"] =
                    extrapolation_json(accuracy, in.model, in.plan);
              if (simulated) {
                j["time"]["analytical_iteration_s"] = simulated->analytical_s;
                j["time"]["simulated_operations"] = simulated->operations;
                j["time"]["breakdown_stage"] = simulated->pacing_stage;
                if (!f->trace.empty()) j["time"]["trace"] = f->trace;
              }
              std::cout << j.dump(2) << "\n";
            } else {
              print_tables(in, pr, largest_mb);
              if (simulated)
                std::printf("time simulated: %zu operations, breakdown of pipeline stage %d; analytical estimate "
                            "%.4f s%s%s\n",
                            simulated->operations, simulated->pacing_stage, simulated->analytical_s,
                            f->trace.empty() ? "" : "; trace written to ", f->trace.c_str());
              std::printf("%s\n", accuracy_line(accuracy, in.profile.name, catalog_profile_for(in.cluster)).c_str());
              if (const std::string mine = runs_fit_line(in.profile); !mine.empty()) std::printf("%s\n", mine.c_str());
              if (const std::string band = error_band_line(accuracy, pr.time.iteration_s, pr.time.tokens_per_s,
                                                           band_widening(accuracy, in.model, in.plan));
                  !band.empty())
                std::printf("%s\n", band.c_str());
              if (const std::string beyond =
                      extrapolation_line(accuracy, in.model, in.plan);
                  !beyond.empty())
                std::printf("%s\n", beyond.c_str());
              print_fit_hints(hints);
            }
            return kExitOk;
          }};
}

}  // namespace ztune::cli
