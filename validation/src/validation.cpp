#include "ztune/validation/validation.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/time_model.hpp"
#include "validation_sources.hpp"

namespace fs = std::filesystem;

namespace ztune {

double ValidationCase::optimism_pct() const {
  const bool duration = metric == "iteration_time_s" || metric == "layer_forward_ms" || metric == "layer_backward_ms";
  if (!is_time_metric(metric)) return error_pct();
  if (!duration) return error_pct();
  return predicted > 0 ? 100.0 * (published / predicted - 1.0) : 0;
}

bool ValidationCase::ok() const { return std::abs(error_pct()) <= tolerance_pct + 1e-9; }

bool ValidationReport::ok() const {
  for (const auto& s : sources)
    if (!s.ok()) return false;
  return true;
}

std::string default_validation_dir() { return (fs::path(data_dir()) / "validation").string(); }

namespace validation_detail {

int megatron_padded_vocab(int vocab, int tp) {
  const int multiple = 128 * tp;
  return (vocab + multiple - 1) / multiple * multiple;
}

Transformer gpt(const std::string& name, int layers, int hidden, int heads, int seq, int vocab, int tp) {
  Transformer t;
  t.name = name;
  t.source = "validation case";
  t.layers = layers;
  t.hidden = hidden;
  t.heads = heads;
  t.kv_heads = heads;
  t.ffn_hidden = 4 * hidden;
  t.activation = Activation::gelu;
  t.norm = NormKind::layernorm;
  t.position = PositionEmbedding::learned;
  t.bias = true;
  t.vocab = megatron_padded_vocab(vocab, tp);
  t.seq_len = seq;
  t.tied_embeddings = true;
  t.global_batch = 1;
  t.train_tokens = 1;
  return t;
}

Cluster sized(const Cluster& base, int gpus) {
  Cluster c = base;
  c.nodes = std::max(1, (gpus + c.node.gpus - 1) / c.node.gpus);
  return c;
}

void check_or_throw(const Plan& p, const Transformer& m, const Cluster& c, const std::string& where) {
  if (auto why = check_plan(p, m, c)) throw InputError(where + ": the run's plan is not valid for ztune: " + *why);
}

std::string describe(const Transformer& m, const Plan& p) {
  std::ostringstream os;
  os << "L" << m.layers << " h" << m.hidden << " a" << m.heads << " s" << m.seq_len << " " << p.summary();
  return os.str();
}

}  // namespace validation_detail

namespace {

using namespace validation_detail;

std::vector<std::string> string_list(ObjectReader& r, std::string_view key) {
  const auto& v = r.raw(key);
  if (!v.is_array() || v.empty()) throw r.error(key, "expected a non-empty array of strings, got " + describe_json(v));
  std::vector<std::string> out;
  for (const auto& s : v) {
    if (!s.is_string()) throw r.error(key, "expected strings, got " + describe_json(s));
    out.push_back(s.get<std::string>());
  }
  return out;
}

// A file validation.json names, relative to its folder, is there: a missing
// one had been reported only by its resolved path, not by who named it (and a
// copy of data/validation elsewhere lacks the catalog's ../clusters).
void require_beside(const std::string& spec_path, const std::string& at, const std::string& relative) {
  const fs::path file = fs::path(spec_path).parent_path() / relative;
  std::error_code ec;
  if (!fs::is_regular_file(file, ec))
    throw InputError(spec_path + ": " + at + ": " + file.string() +
                     (fs::exists(file, ec) ? " is not a regular file" : ": no such file") +
                     " (paths are relative to the validation folder; data/validation's reach the catalog's "
                     "clusters through ../clusters)");
}

// The metrics a published_runs source may compare (published_source prices each).
constexpr const char* kMetrics[] = {"iteration_time_s",
                                    "mfu",
                                    "layer_forward_ms",
                                    "layer_backward_ms",
                                    "memory_gib_weights_grads_optimizer",
                                    "memory_gib_activations",
                                    "activation_memory_pct_of_tp_baseline",
                                    "memory_gb_per_gpu"};

std::vector<SourceSpec> read_spec(const std::string& path) {
  nlohmann::json doc = read_json_file(path);
  ObjectReader r(doc, path, "$");
  r.schema("ztune.validation/1");
  const auto& arr = r.raw("sources");
  if (!arr.is_array()) throw r.error("sources", "expected an array");
  std::vector<SourceSpec> out;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    ObjectReader s(arr[i], path, "$.sources[" + std::to_string(i) + "]");
    SourceSpec spec;
    spec.name = s.string("name");
    spec.description = s.string("description");
    spec.kind = s.choice("kind", {"published_runs", "vtrain_csv", "engine_runs"});
    spec.file = s.string("file");
    spec.engine = s.optional_choice("engine", {"megatron", "deepspeed", "fsdp", ""}, "");
    if (spec.kind == "engine_runs") {
      auto cl = s.object("clusters");
      for (const auto& [key, v] : s.raw("clusters").items()) {
        spec.clusters.emplace_back(key, cl.string(key));
        require_beside(path, cl.path_of(key), spec.clusters.back().second);
      }
      cl.finish();
      if (spec.clusters.empty()) throw s.error("clusters", "expected at least one GPU name → cluster file");
      if (spec.engine.empty()) throw s.error("engine", "expected the engine family of an engine_runs source");
      spec.id_prefixes = string_list(s, "id_prefixes");
      spec.overlap_comm = s.boolean("overlap_comm");
      spec.megatron_vocab = s.boolean("megatron_vocab");
      spec.tflops_convention = s.optional_choice("tflops_convention", {"megatron96", ""}, "");
      // The per-source settings given for rows by id prefix: an array of
      // objects, each read (and finished) by `read`.
      const auto each_entry = [&](const char* key, const char* expected, const auto& read) {
        if (!s.has(key)) return;
        const auto& list = s.raw(key);
        if (!list.is_array()) throw s.error(key, std::string("expected an array of ") + expected);
        for (std::size_t k = 0; k < list.size(); ++k) {
          ObjectReader e(list[k], path, s.path_of(key) + "[" + std::to_string(k) + "]");
          read(e);
          e.finish();
        }
      };
      each_entry("grad_reduce", "{dtype, id_prefixes, why}", [&](ObjectReader& g) {
        SourceSpec::GradReduce x;
        x.dtype = *precision_of(g.choice("dtype", kPrecisionNames));
        if (g.has("id_prefixes")) x.id_prefixes = string_list(g, "id_prefixes");
        x.why = g.string("why");
        spec.grad_reduce.push_back(std::move(x));
      });
      each_entry("cross_entropy", "{kernels, id_prefixes, why}", [&](ObjectReader& e) {
        SourceSpec::CrossEntropy x;
        x.kernels = *value_in<CrossEntropyKernels>(kCrossEntropyNames, e.choice("kernels", kCrossEntropyNames));
        if (e.has("id_prefixes")) x.id_prefixes = string_list(e, "id_prefixes");
        x.why = e.string("why");
        spec.cross_entropy.push_back(std::move(x));
      });
      each_entry("dropout", "{p, id_prefixes, why}", [&](ObjectReader& d) {
        SourceSpec::Dropout x;
        x.p = d.number("p", 0.0, 0.99);
        if (d.has("id_prefixes")) x.id_prefixes = string_list(d, "id_prefixes");
        x.why = d.string("why");
        spec.dropout.push_back(std::move(x));
      });
      each_entry("optimizer_states", "{master_dtype, moments_dtype, param_remainders?, id_prefixes, why}",
                 [&](ObjectReader& o) {
        SourceSpec::OptimizerStates x;
        x.master = *precision_of(o.choice("master_dtype", kPrecisionNames));
        x.moments = *precision_of(o.choice("moments_dtype", kPrecisionNames));
        x.param_remainders = o.optional_boolean("param_remainders").value_or(false);
        x.id_prefixes = string_list(o, "id_prefixes");
        x.why = o.string("why");
        spec.optimizer_states.push_back(std::move(x));
      });
      if (auto a = s.optional_object("assumed")) {
        for (const auto& [id, v] : s.raw("assumed").items()) {
          auto row = a->object(id);
          SourceSpec::Assumed x;
          if (auto mb = row.optional_integer("micro_batch", 1, 1 << 20)) x.micro_batch = static_cast<int>(*mb);
          x.global_batch = row.optional_integer("global_batch", 1, std::int64_t{1} << 40);
          x.tp_comm_overlap = row.optional_boolean("tp_comm_overlap");
          x.reduce_scatter = row.optional_boolean("reduce_scatter");
          x.bias_fusion = row.optional_boolean("bias_fusion");
          if (row.has("attention"))
            x.attention = attention_kernel_of(row.choice("attention", kAttentionKernelNames));
          if (row.has("recompute")) x.recompute = recompute_of(row.choice("recompute", kRecomputeNames));
          if (row.has("recompute_policy"))
            x.recompute_policy = selective_policy_of(row.choice("recompute_policy", kSelectivePolicyNames));
          if (row.has("masked_softmax"))
            x.megatron_softmax_rule = row.choice("masked_softmax", {"megatron", "always"}) == "megatron";
          if (auto z = row.optional_object("zero3_config")) {
            constexpr double kMaxElems = 1e15;
            SourceSpec::Assumed::Zero3Config zc;
            zc.prefetch_bucket_elems = z->number("prefetch_bucket_elems", 1, kMaxElems);
            zc.max_live_params = z->number("max_live_params", 1, kMaxElems);
            zc.max_reuse_distance = z->number("max_reuse_distance", 0, kMaxElems);
            zc.reduce_bucket_elems = z->number("reduce_bucket_elems", 1, kMaxElems);
            z->finish();
            x.zero3_config = zc;
          }
          x.why = row.string("why");
          if (!x.micro_batch && !x.global_batch && !x.tp_comm_overlap && !x.attention && !x.bias_fusion &&
              !x.reduce_scatter && !x.recompute && !x.recompute_policy && !x.zero3_config && !x.megatron_softmax_rule)
            throw row.error("why",
                            "expected micro_batch, global_batch, tp_comm_overlap, attention, bias_fusion, "
                            "reduce_scatter, recompute, recompute_policy, zero3_config or masked_softmax beside the "
                            "reason");
          row.finish();
          spec.assumed.emplace(id, x);
        }
        a->finish();
      }
    } else {
      spec.cluster = s.string("cluster");
      require_beside(path, s.path_of("cluster"), spec.cluster);
    }
    if (spec.kind == "published_runs") {
      spec.id_prefixes = string_list(s, "id_prefixes");
      spec.metrics = string_list(s, "metrics");
      // A misspelt metric had matched no run's and dropped the source unsaid.
      for (std::size_t k = 0; k < spec.metrics.size(); ++k)
        if (std::find(std::begin(kMetrics), std::end(kMetrics), spec.metrics[k]) == std::end(kMetrics)) {
          std::string known;
          for (const char* m : kMetrics) known += (known.empty() ? "" : ", ") + std::string(m);
          throw InputError(path + ": " + s.path_of("metrics") + "[" + std::to_string(k) + "]: unknown metric \"" +
                           spec.metrics[k] + "\" (expected one of " + known + ")");
        }
    }
    const auto& tol = s.raw("case_tolerance_pct");
    if (tol.is_string() && tol.get<std::string>() == "printed_precision") {
      spec.case_tolerance_pct.reset();
    } else if (tol.is_number() && tol.get<double>() > 0) {
      spec.case_tolerance_pct = tol.get<double>();
    } else {
      throw s.error("case_tolerance_pct", "expected a number > 0 or \"printed_precision\", got " + describe_json(tol));
    }
    spec.mape_tolerance_pct = s.positive("mape_tolerance_pct");
    s.finish();
    out.push_back(spec);
  }
  r.finish();
  return out;
}







// Decimal places of a JSON number as printed ("35.6" → 1, "120" → 0).
int printed_decimals(const nlohmann::json& v) {
  std::string s = v.dump();
  auto dot = s.find('.');
  return dot == std::string::npos ? 0 : static_cast<int>(s.size() - dot - 1);
}

void published_source(const SourceSpec& spec, const std::string& dir, Context& ctx, std::vector<ValidationCase>& out) {
  const std::string file = (fs::path(dir) / spec.file).string();
  nlohmann::json runs = read_json_file(file);
  if (!runs.is_array()) throw InputError(file + ": $: expected an array of runs");
  const Cluster& base = ctx.cluster((fs::path(dir) / spec.cluster).string());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const std::string at = "$[" + std::to_string(i) + "]";
    ObjectReader r(runs[i], file, at);
    const std::string id = r.string("id");
    if (!starts_with_any(spec.id_prefixes, id)) continue;
    const std::string where = file + ": " + at + " (" + id + ")";
    (void)r.string("source");
    (void)r.string("kind");
    (void)r.raw("hardware");
    (void)r.optional_string("notes");
    auto model = r.object("model");
    auto plan = r.object("plan");
    auto measured = r.object("measured");
    const double params = model.positive("params");

    // ZeRO Table 1: model states only, from Ψ alone (paper accounting, K = 12).
    if (spec.metrics.size() == 1 && spec.metrics[0] == "memory_gb_per_gpu") {
      const int dp = static_cast<int>(plan.integer("dp", 1, 1 << 20));
      const int stage = static_cast<int>(plan.integer("zero_stage", 0, 3));
      const auto& printed = measured.raw("memory_gb_per_gpu");
      if (!printed.is_number()) throw measured.error("memory_gb_per_gpu", "expected a number");
      ValidationCase vc;
      vc.source = spec.name;
      vc.id = id;
      vc.metric = "memory_gb_per_gpu";
      vc.detail = "Ψ=" + describe_json(model.raw("params")) + " dp" + std::to_string(dp) + " z" + std::to_string(stage);
      vc.published = printed.get<double>();
      vc.predicted = model_state_bytes(params, dp, stage, StateAccounting::paper, Precision::fp16).total() / 1e9;
      // Within one unit of the last printed digit (the paper rounds or truncates).
      vc.tolerance_pct = 100.0 * std::pow(10.0, -printed_decimals(printed)) / vc.published;
      out.push_back(vc);
      continue;
    }

    const int tp = static_cast<int>(plan.integer("tp", 1, 1 << 20));
    Transformer m = gpt(model.string("name"), static_cast<int>(model.integer("layers", 1, 1 << 20)),
                        static_cast<int>(model.integer("hidden", 1, 1 << 24)),
                        static_cast<int>(model.integer("heads", 1, 1 << 20)),
                        static_cast<int>(model.integer("seq_len", 1, 1 << 24)),
                        static_cast<int>(model.integer("vocab", 1, 1 << 24)), tp);
    Plan p;
    p.tp = tp;
    p.pp = static_cast<int>(plan.integer("pp", 1, 1 << 20));
    p.dp = static_cast<int>(plan.integer("dp", 1, 1 << 20));
    p.zero_stage = static_cast<int>(plan.integer("zero_stage", 0, 3));
    p.micro_batch = static_cast<int>(plan.integer("micro_batch", 1, 1 << 20));
    p.global_batch = plan.integer("global_batch", 1, std::int64_t{1} << 40);
    p.grad_accum = static_cast<int>(p.global_batch / (static_cast<std::int64_t>(p.micro_batch) * p.dp));
    p.recompute = *recompute_of(plan.choice("recompute", kRecomputeNames));
    p.sequence_parallel = plan.boolean("sequence_parallel");
    if (auto v = plan.optional_integer("interleave_chunks", 1, 1024); v && *v > 1) {
      p.virtual_stages = static_cast<int>(*v);
      p.schedule = Schedule::interleaved;
    }
    p.precision = Precision::bf16;
    // Megatron-LM (2022) all-reduced gradients after the backward, not overlapped.
    p.overlap_comm = false;
    const Cluster c = sized(base, p.gpus());
    check_or_throw(p, m, c, where);
    const HardwareProfile& hw = ctx.profile(c, spec.engine);

    for (const auto& metric : spec.metrics) {
      ValidationCase vc;
      vc.source = spec.name;
      vc.id = id;
      vc.metric = metric;
      vc.detail = describe(m, p);
      vc.shape = run_shape(m, p);
      vc.gpu = c.node.gpu.name;
      vc.engine = spec.engine;
      vc.tolerance_pct = spec.case_tolerance_pct.value_or(0);
      if (metric == "activation_memory_pct_of_tp_baseline") {
        auto pct = measured.object(metric);
        const double base_bytes = layer_activation_bytes(m, p.micro_batch, p.tp, false, Recompute::none);
        struct Mode { const char* key; bool sp; Recompute r; };
        for (const Mode& mode : {Mode{"none", false, Recompute::none}, Mode{"sequence_parallel", true, Recompute::none},
                                 Mode{"selective_recompute", false, Recompute::selective},
                                 Mode{"sequence_parallel_plus_selective", true, Recompute::selective},
                                 Mode{"full_recompute", false, Recompute::full}}) {
          ValidationCase row = vc;
          row.metric = std::string("activation_pct:") + mode.key;
          row.published = pct.positive(mode.key);
          row.predicted = 100.0 * layer_activation_bytes(m, p.micro_batch, p.tp, mode.sp, mode.r) / base_bytes;
          out.push_back(row);
        }
        pct.finish();
        continue;
      }
      // At most 1e12 in any metric's unit (seconds, ms, tokens/s, TFLOP/s): past
      // it a typo turns the error and the source's MAPE into infinities.
      auto value = measured.optional_positive(metric, false, 1e12);
      if (!value) continue;  // this run does not publish this metric
      vc.published = *value;
      if (metric == "iteration_time_s") {
        vc.predicted = ctx.time(m, p, c, hw).iteration_s;
        vc.memory_fraction = ctx.memory_fraction(m, p, c, hw);
      } else if (metric == "mfu") {
        vc.predicted = ctx.time(m, p, c, hw).mfu;
        vc.memory_fraction = ctx.memory_fraction(m, p, c, hw);
      } else if (metric == "layer_forward_ms" || metric == "layer_backward_ms") {
        const LayerCost lc = layer_cost(m, p, c, hw);
        const double fwd = lc.fwd_s + lc.tp_fwd_s;
        const double bwd = lc.bwd_s + lc.recompute_s + lc.tp_bwd_s + lc.tp_recompute_s +
                           exposed(lc.tp_bwd_async_s, lc.tp_bwd_window_s, hw.engine.tp_overlap);
        vc.predicted = 1e3 * (metric == "layer_forward_ms" ? fwd : bwd);
      } else if (metric == "memory_gib_weights_grads_optimizer" || metric == "memory_gib_activations") {
        // The figure's model states count the stage's transformer layers only
        // (Megatron accounting, 18 B/param); its activations are the first stage's.
        MemoryPrediction mp = predict_memory(m, p, c, hw, MemoryOptions{StateAccounting::megatron});
        const double layer_psi = static_cast<double>(m.layers) / p.pp * m.params_per_layer() / p.tp;
        const double bytes =
            metric == "memory_gib_activations"
                ? mp.line(MemLine::activations)
                : model_state_bytes(layer_psi, p.dp, p.zero_stage, StateAccounting::megatron, Precision::bf16).total();
        vc.predicted = bytes / kBytesPerGiB;
      } else {
        throw InputError(file + ": source \"" + spec.name + "\": unknown metric \"" + metric + "\"");
      }
      out.push_back(vc);
    }
    // The remaining measured keys are other sources' metrics; mark them read.
    for (const auto& [key, v] : runs[i]["measured"].items()) (void)measured.raw(key);
    for (const auto& [key, v] : runs[i]["plan"].items()) (void)plan.raw(key);
    for (const auto& [key, v] : runs[i]["model"].items()) (void)model.raw(key);
    model.finish();
    plan.finish();
    measured.finish();
    r.finish();
  }
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cell;
  std::istringstream is(line);
  while (std::getline(is, cell, ',')) {
    if (!cell.empty() && cell.back() == '\r') cell.pop_back();
    out.push_back(cell);
  }
  return out;
}

void vtrain_source(const SourceSpec& spec, const std::string& dir, Context& ctx, std::vector<ValidationCase>& out) {
  const std::string file = (fs::path(dir) / spec.file).string();
  std::ifstream in(file);
  if (!in) throw InputError(file + ": cannot open file");
  std::string line;
  std::getline(in, line);
  const auto header = split_csv(line);
  auto column = [&](const std::string& name) {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return i;
    throw InputError(file + ":1: missing column \"" + name + "\"");
  };
  const std::size_t c_gpus = column("# GPUs"), c_gb = column("global batch"), c_mb = column("micro batch"),
                    c_h = column("hidden size"), c_a = column("attention heads"), c_l = column("# layers"),
                    c_s = column("sequence length"), c_tp = column("tensor parallelism"),
                    c_dp = column("data parallelism"), c_pp = column("pipeline parallelism"),
                    c_t = column("iteration time (ms)");
  const Cluster& base = ctx.cluster((fs::path(dir) / spec.cluster).string());
  int line_no = 1;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line == "\r") continue;
    const auto cells = split_csv(line);
    const std::string where = file + ":" + std::to_string(line_no);
    if (cells.size() != header.size())
      throw InputError(where + ": expected " + std::to_string(header.size()) + " cells, got " +
                       std::to_string(cells.size()));
    auto num = [&](std::size_t col) {
      try {
        return std::stod(cells[col]);
      } catch (const std::exception&) {
        throw InputError(where + ": column \"" + header[col] + "\": expected a number, got \"" + cells[col] + "\"");
      }
    };
    auto integer = [&](std::size_t col) { return static_cast<int>(std::lround(num(col))); };
    Plan p;
    p.tp = integer(c_tp);
    p.dp = integer(c_dp);
    p.pp = integer(c_pp);
    p.micro_batch = integer(c_mb);
    p.global_batch = integer(c_gb);
    if (p.global_batch % (static_cast<std::int64_t>(p.micro_batch) * p.dp) != 0)
      throw InputError(where + ": global batch is not a multiple of micro batch × data parallelism");
    p.grad_accum = static_cast<int>(p.global_batch / (static_cast<std::int64_t>(p.micro_batch) * p.dp));
    // vTrain's runs: activation checkpointing on, 1F1B, fp16, no DDP bucketing
    // (so the data-parallel all-reduce follows the backward), no ZeRO.
    p.recompute = Recompute::full;
    p.schedule = Schedule::one_f_one_b;
    p.precision = Precision::fp16;
    p.zero_stage = 0;
    p.overlap_comm = false;
    const int gpus = integer(c_gpus);
    if (p.gpus() != gpus) throw InputError(where + ": tp × dp × pp ≠ # GPUs");
    Transformer m = gpt("vtrain", integer(c_l), integer(c_h), integer(c_a), integer(c_s), 50257, p.tp);
    const Cluster c = sized(base, gpus);
    check_or_throw(p, m, c, where);
    ValidationCase vc;
    vc.source = spec.name;
    vc.id = "csv:" + std::to_string(line_no);
    vc.metric = "iteration_time_s";
    vc.detail = describe(m, p);
    vc.shape = run_shape(m, p);
    vc.gpu = c.node.gpu.name;
    vc.engine = spec.engine;
    vc.published = num(c_t) / 1e3;
    const HardwareProfile& hw = ctx.profile(c, spec.engine);
    vc.predicted = ctx.time(m, p, c, hw).iteration_s;
    vc.memory_fraction = ctx.memory_fraction(m, p, c, hw);
    vc.tolerance_pct = spec.case_tolerance_pct.value_or(0);
    out.push_back(vc);
  }
}

}  // namespace

RunShape run_shape(const Transformer& m, const Plan& p) {
  std::uint32_t f = 0;
  if (p.offload_optimizer == OffloadTarget::cpu) f |= kOptimizerOffloadCpu;
  if (p.offload_optimizer == OffloadTarget::nvme) f |= kOptimizerOffloadNvme;
  if (p.offload_params == OffloadTarget::cpu) f |= kParamOffload;
  if (p.offload_params == OffloadTarget::nvme) f |= kParamOffloadNvme;
  if (p.zeropp) f |= kZeroPP;
  if (p.precision == Precision::fp16) f |= kFp16;
  if (p.onebit_adam) f |= kOnebitAdam;
  if (p.sparse_attention != SparseLayout::none) f |= kSparseAttention;
  if (p.fp8 != Fp8Recipe::none) f |= kFp8;
  if (p.precision == Precision::fp32) f |= kFp32;
  if (p.zero_stage == 3) f |= kZero3;
  if (p.dp_shard > 0) f |= kHybridShard;
  if (p.cpu_checkpointing) f |= kCpuCheckpointing;
  if (p.tp_comm_overlap && p.tp > 1) f |= kTpCommOverlap;
  return RunShape{p.gpus(), m.total_params(), m.hidden, m.seq_len, p.tp, p.pp, p.cp, p.ulysses, f};
}

const char* run_feature_name(std::uint32_t bit) {
  switch (bit) {
    case kOptimizerOffloadCpu: return "optimizer offloaded to CPU";
    case kOptimizerOffloadNvme: return "optimizer offloaded to NVMe";
    case kParamOffload: return "parameters offloaded to CPU";
    case kParamOffloadNvme: return "parameters offloaded to NVMe";
    case kZeroPP: return "ZeRO++";
    case kFp16: return "fp16 training";
    case kOnebitAdam: return "1-bit Adam";
    case kSparseAttention: return "sparse attention";
    case kFp8: return "FP8";
    case kFp32: return "fp32 training";
    case kZero3: return "ZeRO-3";
    case kHybridShard: return "hybrid sharding";
    case kCpuCheckpointing: return "CPU activation checkpointing";
    case kTpCommOverlap: return "TP communication overlap";
    default: return "?";
  }
}

bool is_time_metric(const std::string& metric) {
  return metric == "iteration_time_s" || metric == "mfu" || metric == "layer_forward_ms" ||
         metric == "layer_backward_ms" || metric == "tokens_per_s_per_gpu";
}

std::string gpu_family(const std::string& gpu_name) {
  // Upper case, as the runs and the catalog name GPUs: a cluster file's
  // "a100-sxm4-80gb" is the A100s the runs were measured on (profiles match
  // the family case-blind too); CPU ranks keep their lower-case "cpu".
  const std::string family = ascii_upper(gpu_name.substr(0, gpu_name.find('-')));
  return family == "CPU" ? std::string("cpu") : family;
}

std::vector<SourceSummary> time_accuracy(const ValidationReport& r, const std::string& gpu) {
  const std::string family = gpu_family(gpu);
  std::vector<SourceSummary> out;
  for (const auto& c : r.cases) {
    if (!is_time_metric(c.metric) || c.gpu.empty() || gpu_family(c.gpu) != family) continue;
    auto it = std::find_if(out.begin(), out.end(), [&](const SourceSummary& s) { return s.name == c.source; });
    if (it == out.end()) {
      out.push_back({});
      it = std::prev(out.end());
      it->name = c.source;
      for (const auto& s : r.sources)
        if (s.name == c.source) it->description = s.description;
    }
    const double e = std::abs(c.error_pct());
    it->mape += e;  // a sum until the end
    it->mean_signed_pct += c.optimism_pct();
    it->max_abs_pct = std::max(it->max_abs_pct, e);
    it->failed += c.ok() ? 0 : 1;
    ++it->cases;
  }
  for (auto& s : out) {
    s.mape /= s.cases;
    s.mean_signed_pct /= s.cases;
  }
  return out;
}

ValidationReport run_validation(const std::string& dir, const ValidationOptions& opt) {
  const std::string spec_path = (fs::path(dir) / "validation.json").string();
  const auto specs = read_spec(spec_path);
  Context ctx{opt, {}, {}};
  ValidationReport report;
  double sum_all = 0;
  for (std::size_t i = 0; i < specs.size(); ++i) {
    const SourceSpec& spec = specs[i];
    if (!opt.only.empty() && spec.name.find(opt.only) == std::string::npos) continue;
    if (!opt.engine.empty() && spec.engine != opt.engine) continue;
    const std::size_t first = report.cases.size(), skipped = report.skipped.size();
    if (spec.kind == "published_runs") {
      published_source(spec, dir, ctx, report.cases);
    } else if (spec.kind == "engine_runs") {
      engine_runs_source(spec, dir, ctx, report.cases, report.skipped);
    } else {
      vtrain_source(spec, dir, ctx, report.cases);
    }
    // A source that selects nothing (id prefixes no run has, an empty runs
    // file) had vanished from the report with exit 0.
    if (report.cases.size() == first && report.skipped.size() == skipped)
      throw InputError(spec_path + ": $.sources[" + std::to_string(i) + "] (\"" + spec.name + "\"): selects no run of " +
                       (fs::path(dir) / spec.file).string() +
                       (spec.id_prefixes.empty() ? std::string()
                                                 : " (no run's id starts with its id_prefixes" +
                                                       std::string(spec.metrics.empty() ? "" : " or publishes its metrics") +
                                                       ")") +
                       "; expected at least one");
    SourceSummary s;
    s.name = spec.name;
    s.description = spec.description;
    s.kind = spec.kind;
    s.engine = spec.engine;
    s.mape_tolerance_pct = spec.mape_tolerance_pct;
    double sum = 0;
    for (std::size_t k = first; k < report.cases.size(); ++k) {
      const double e = std::abs(report.cases[k].error_pct());
      sum += e;
      s.mean_signed_pct += report.cases[k].optimism_pct();
      s.max_abs_pct = std::max(s.max_abs_pct, e);
      s.failed += report.cases[k].ok() ? 0 : 1;
      ++s.cases;
    }
    s.mape = s.cases > 0 ? sum / s.cases : 0;
    s.mean_signed_pct = s.cases > 0 ? s.mean_signed_pct / s.cases : 0;
    sum_all += sum;
    report.sources.push_back(s);
  }
  report.overall_mape = report.cases.empty() ? 0 : sum_all / static_cast<double>(report.cases.size());
  return report;
}

}  // namespace ztune
