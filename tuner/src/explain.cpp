#include "ztune/tuner/explain.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>

#include "ztune/model/memory_model.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/tuner/search_space.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune {

namespace {

// GiB, as the memory tables of predict, search and the planner print them
// (issue 23: the hints said "32.7 GB of 34.4 GB" beside a table's 32.7/32.0).
std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / kBytesPerGiB);
  return buf;
}

/// Tries one modification of a plan; nothing when the changed plan is not a
/// valid plan (more stages than layers, ZeRO-2/3 with a pipeline, ...).
std::optional<FitHint> try_variant(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                   const SearchOptions& o, const std::string& change, const Plan& p) {
  if (check_plan(p, m, c)) return std::nullopt;
  FitHint h;
  h.change = change;
  const MemoryPrediction mem = predict_memory(m, p, c, hw, o.memory);
  h.fits = mem.fits();
  h.detail = p.summary() + " needs " + describe_memory(mem) + (h.fits ? ": fits" : ": still too big");
  if (h.fits) h.tokens_per_s = predict_time(m, p, c, hw).tokens_per_s;
  if (auto rule = engine_violation(p, o.space.engine, c)) {
    h.fits = false;
    h.detail += "; but --engine " + to_string(o.space.engine) + " cannot run it (" +
                std::string(engine_rule_text(*rule)) + ")";
  }
  return h;
}

/// A memory-only search (no ranking) with `o` changed by the caller.
SearchResult feasibility(const Transformer& m, const Cluster& c, const HardwareProfile& hw, SearchOptions o) {
  o.prune_enabled = true;  // what it counts is plans that fit: priced, even under --no-prune
  o.rank_enabled = false;
  o.simulate_enabled = false;
  o.top = 1;
  o.closest = 0;
  return run_search(m, c, hw, o);
}

/// A hint whose probe searched a space over --max-plans: said in the hint,
/// with the cap's message; the search's own result stands (the probe's
/// exception had ended the search with its output unprinted).
FitHint over_cap(const std::string& change, const PlanSpaceOverCap& e) {
  return {change, std::string("not worked out: ") + e.what(), false};
}

// "12 plans fit, e.g. ... needs 61.2 GiB of 80.0 GiB per GPU" ("1 plan fits").
std::string example(const SearchResult& r) {
  if (r.plans.empty()) return "";
  const auto& p = r.plans.front();
  return ", e.g. " + p.plan.summary() + " needs " + describe_memory(p.prediction.memory);
}
std::string fitting(const SearchResult& r) {
  return grouped(static_cast<double>(r.feasible)) + (r.feasible == 1 ? " plan fits" : " plans fit") + example(r);
}

/// The hint of `change`, priced by the memory-only search `x`: how many plans
/// fit, or that its space is over --max-plans.
FitHint search_hint(const std::string& change, const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                    const SearchOptions& x) {
  try {
    const SearchResult s = feasibility(m, c, hw, x);
    return {change, fitting(s), s.feasible > 0};
  } catch (const PlanSpaceOverCap& e) {
    return over_cap(change, e);
  }
}

}  // namespace

std::string describe_memory(const MemoryPrediction& mem) {
  std::string s = gb(mem.gpu_total_bytes) + " of " + gb(mem.gpu_capacity_bytes) + " per GPU";
  if (mem.gpu_usable_bytes < mem.gpu_capacity_bytes)
    s = gb(mem.gpu_total_bytes) + " of " + gb(mem.gpu_usable_bytes) + " usable per GPU (" + gb(mem.gpu_capacity_bytes) +
        " less the headroom kept free)";
  if (!mem.fits_host)
    s += ", host " + gb(mem.host_bytes_per_node) + " of " + gb(mem.host_capacity_bytes) + " per node";
  if (!mem.fits_nvme)
    s += ", NVMe " + gb(mem.nvme_bytes_per_node) + " of " + gb(mem.nvme_capacity_bytes) + " per node";
  return s;
}

std::vector<FitHint> plan_fit_hints(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                    const SearchOptions& o, const Plan& base) {
  std::vector<FitHint> hints;
  // One hint per distinct plan: two changes that land on the same plan (ZeRO
  // stage 3 from stage 2 and "ZeRO-3 and full recomputation" when the plan
  // already recomputes fully) are one hint, under the first name.
  std::vector<std::string> tried;
  // A change that moves a degree or stage the user pinned says so: "ZeRO-3
  // ... [fits]" under --zero 0 had read as if the pin could stay.
  auto unpinned = [&](const Plan& p) {
    std::string s;
    auto check = [&](const char* flag, const std::optional<int>& pin, int now) {
      if (pin && *pin != now) s += (s.empty() ? "" : ", ") + std::string(flag) + " " + std::to_string(now);
    };
    check("--zero", o.space.zero_stage, p.zero_stage);
    check("--tp", o.space.tp, p.tp);
    check("--pp", o.space.pp, p.pp);
    check("--cp", o.space.cp, p.cp);
    check("--ulysses", o.space.ulysses, p.ulysses);
    if (o.space.dp_shard && *o.space.dp_shard != p.dp_shard)
      s += (s.empty() ? "" : ", ") + std::string(p.dp_shard == 0 ? "without --dp-shard" : "--dp-shard " + std::to_string(p.dp_shard));
    if (o.space.recompute && *o.space.recompute != p.recompute)
      s += (s.empty() ? "" : ", ") + std::string("--recompute ") + to_string(p.recompute);
    if (!o.space.sequence_parallel && p.sequence_parallel)
      s += (s.empty() ? "" : ", ") + std::string("without --no-sequence-parallel");
    return s.empty() ? s : " (in place of your pin: " + s + ")";
  };
  auto add = [&](const std::string& change, const Plan& p) {
    if (p.grad_accum > kMaxGradAccum) return;  // a plan no file holds (plan.hpp): not advice
    std::string key = p.summary();
    if (std::find(tried.begin(), tried.end(), key) != tried.end()) return;
    tried.push_back(std::move(key));
    if (auto h = try_variant(m, c, hw, o, change + unpinned(p), p)) hints.push_back(std::move(*h));
  };
  // The accumulation micro-batch 1 needs, in 64 bits (up to 2^24 · 2^20).
  const std::int64_t accum_at_one = std::int64_t{base.grad_accum} * base.micro_batch;
  if (base.micro_batch > 1 && accum_at_one <= kMaxGradAccum) {
    Plan p = base;
    p.grad_accum = static_cast<int>(accum_at_one);
    p.micro_batch = 1;
    add("micro-batch 1", p);
  }
  if (!fused_attention(base.attention) && base.sparse_attention == SparseLayout::none &&
      engine_runs_flash(o.space.engine, m, c)) {
    // What selective recomputation drops, flash never stores.
    Plan p = base;
    p.attention = preferred_fused_kernel(o.space.engine, hw);
    if (p.recompute == Recompute::selective && p.recompute_policy == SelectivePolicy::attention)
      p.recompute = Recompute::none;
    add(p.attention == AttentionKernel::cudnn ? "cuDNN fused attention (--attention cudnn: no s×s scores stored)"
                                              : "FlashAttention (--attention flash: no s×s scores stored)",
        p);
  }
  if (base.recompute == Recompute::none && !fused_attention(base.attention)) {
    Plan p = base;
    p.recompute = Recompute::selective;
    add("selective recomputation", p);
  }
  if (base.recompute != Recompute::full || base.recompute_num_layers > 0) {
    Plan p = base;
    p.recompute = Recompute::full;
    p.recompute_policy = SelectivePolicy::attention;
    p.recompute_num_layers = 0;
    add(base.recompute_num_layers > 0 ? "every layer recomputed (no --recompute-num-layers)" : "full recomputation", p);
    // Megatron's block method where the engine runs it: the fewest layers of
    // each model chunk recomputed that fit (faster than every layer).
    if (runs_block_recompute(p, o.space.engine) && !check_plan(p, m, c)) {
      if (const int n = fewest_recomputed_layers(m, p, c, hw, o.memory); n > 0 && n != base.recompute_num_layers) {
        Plan block = p;
        block.recompute_num_layers = n;
        add("full recomputation of " + std::to_string(n) + " layer" + (n == 1 ? "" : "s") +
                " per model chunk (--recompute full --recompute-num-layers " + std::to_string(n) +
                ", Megatron's block method)",
            block);
      }
    }
  }
  if (base.tp > 1 && !base.sequence_parallel) {
    Plan p = base;
    p.sequence_parallel = true;
    p.partition_activations = false;  // SP splits the checkpoints itself
    // as the search's megatron plans, where Transformer Engine runs
    p.tp_comm_overlap =
        o.space.engine == Engine::megatron && supports_transformer_engine(c) && o.space.tp_comm_overlap;
    add("sequence parallelism", p);
  }
  if (base.tp > 1 && base.recompute == Recompute::full && !base.sequence_parallel && !base.partition_activations) {
    Plan p = base;
    p.partition_activations = true;
    add("partitioned activation checkpoints (ZeRO-R Pa)", p);
  }
  // DeepSpeed's CPU checkpointing: the checkpoints of full recomputation on the host.
  if (base.recompute == Recompute::full && !base.cpu_checkpointing && c.device_kind == DeviceKind::gpu &&
      o.space.engine == Engine::deepspeed) {
    Plan p = base;
    p.cpu_checkpointing = true;
    add("activation checkpoints in host memory (ZeRO-R CPU checkpointing)", p);
  }
  // The same GPUs split differently: ZeRO one stage further, or twice the
  // model parallelism for half the data parallelism.
  if (base.dp > 1 && base.zero_stage < 3 && !base.onebit_adam) {
    Plan p = base;
    p.zero_stage = base.zero_stage + 1;
    add("ZeRO stage " + std::to_string(p.zero_stage), p);
  }
  if (base.dp % 2 == 0) {
    Plan p = base;
    p.dp /= 2;
    p.grad_accum *= 2;
    p.tp *= 2;
    if (p.tp <= c.node.gpus) add("tp " + std::to_string(p.tp), p);
    p.tp = base.tp;
    p.pp *= 2;
    p.stage_layers.clear();  // twice the stages, balanced (a stated partition has pp entries)
    p.chunk_layers.clear();
    if (p.pp <= m.layers) add("pp " + std::to_string(p.pp), p);
    // Context parallelism: each GPU keeps s/cp of every sequence's activations
    // (the same weights, the batch unchanged: dp halves, accumulation doubles).
    // Doubled until it fits, as far as dp, the sequence and the heads allow
    // (check_plan: cp's load-balanced chunks need 2·cp to divide the
    // sequence, Ulysses its degree alone): the first degree that fits is the
    // hint (cp 4 fits a 32k sequence cp 2 does not); when none does, the
    // largest tried says so.
    auto split_sequence = [&](int Plan::*degree, const char* name, const char* what) {
      std::optional<Plan> last_tried_plan;
      for (Plan q = base; q.dp % 2 == 0;) {
        q.dp /= 2;
        q.grad_accum *= 2;
        q.*degree *= 2;
        if (q.grad_accum > kMaxGradAccum || check_plan(q, m, c)) break;
        last_tried_plan = q;
        if (predict_memory(m, q, c, hw, o.memory).fits()) break;
      }
      if (!last_tried_plan) return;
      const std::string n = std::to_string((*last_tried_plan).*degree);
      add(std::string(name) + " " + n + " (" + what + ": s/" + n + " of each sequence's activations per GPU" +
              (degree == &Plan::ulysses ? ", all-to-all over heads)" : ")"),
          *last_tried_plan);
    };
    split_sequence(&Plan::cp, "cp", "context parallelism");
    // DeepSpeed-Ulysses: the same division of the activations by all-to-alls
    // over heads (check_plan refuses what the heads or the engine do not allow).
    if (base.cp == 1 && !base.sequence_parallel) split_sequence(&Plan::ulysses, "ulysses", "DeepSpeed-Ulysses");
  }
  // Under a pipeline ZeRO-3 keeps the gathered stage and its whole gradients
  // beside its partitions (Plan::zero3_held_through_step): more memory than
  // ZeRO-1, never a way to fit.
  if (base.dp > 1 && base.pp == 1 && (base.zero_stage < 3 || base.recompute != Recompute::full) &&
      !base.onebit_adam) {
    Plan p = base;
    p.zero_stage = 3;
    p.recompute = Recompute::full;
    add(base.zero_stage == 3          ? "full recomputation"
        : base.recompute == Recompute::full ? "ZeRO stage 3"
                                            : "ZeRO-3 and full recomputation",
        p);
  }
  if (c.device_kind == DeviceKind::gpu && base.offload_optimizer == OffloadTarget::none && !base.onebit_adam &&
      (base.pp == 1 || o.space.engine != Engine::deepspeed)) {
    // ZeRO-Offload is built on ZeRO-2 (Ren et al. 2021, §4): gradient
    // partitions stream to the host as the backward reduces them; ZeRO-1
    // would keep every 16-bit gradient on the device until the boundary.
    Plan p = base;
    p.zero_stage = std::max(2, p.zero_stage);
    p.offload_optimizer = OffloadTarget::cpu;
    add("optimizer offload to CPU (ZeRO-Offload)", p);
  }
  if (base.pp == 1 && c.device_kind == DeviceKind::gpu &&
      (base.zero_stage != 3 || base.offload_optimizer == OffloadTarget::none ||
       base.offload_params == OffloadTarget::none)) {
    Plan p = base;
    p.zero_stage = 3;
    p.onebit_adam = false;
    p.offload_optimizer = OffloadTarget::cpu;
    p.offload_params = OffloadTarget::cpu;
    add("ZeRO-3 with optimizer and parameter offload to CPU", p);
    // The same with the activations at their smallest, naming only what changes.
    p.micro_batch = 1;
    p.grad_accum = static_cast<int>(std::min<std::int64_t>(accum_at_one, kMaxGradAccum + std::int64_t{1}));
    p.recompute = Recompute::full;
    std::string also;
    if (base.micro_batch > 1) also = "micro-batch 1";
    if (base.recompute != Recompute::full) also += (also.empty() ? "" : ", ") + std::string("full recomputation");
    if (!also.empty()) add("ZeRO-3 CPU offload with " + also, p);
  }
  return hints;
}

namespace {

// Device counts below the cluster's with at least one dp × tp × pp layout
// (cp 1), largest first; at most `limit`. Only a filter of candidates: the
// layout rules themselves are SearchSpace's, which feasibility() applies to
// each count tried (laying out every count below 800,000 would take seconds).
// Whether a data-parallel degree `dp` can carry the pinned shard group: the
// weights' group dp × cp × ulysses a multiple of --dp-shard, with two or more
// groups (SearchSpace::shard_group_sizes).
bool takes_dp_shard(const SearchOptions& o, std::int64_t dp) {
  if (!o.space.dp_shard) return true;
  const std::int64_t group = dp * o.space.cp.value_or(1) * o.space.ulysses.value_or(1);
  return group > *o.space.dp_shard && group % *o.space.dp_shard == 0;
}

// The global batch's divisors, kept for the next call: the more-GPUs probe
// asks once per node count (42 times 10^6 trial divisions for a prime batch
// near 2^40, 6 s of hints).
const std::vector<std::int64_t>& batch_divisors(std::int64_t batch) {
  thread_local std::int64_t cached = 0;
  thread_local std::vector<std::int64_t> kept;
  if (batch != cached) {
    kept = divisors(batch);
    cached = batch;
  }
  return kept;
}

// The device counts below `below` (the cluster's, or the --gpus asked for)
// that have a layout, largest first, at most `limit`.
std::vector<int> layout_device_counts(const Transformer& m, const Cluster& c, const SearchOptions& o, int limit,
                                      std::int64_t below) {
  const std::int64_t total = below;
  const std::int64_t batch = o.space.global_batch > 0 ? o.space.global_batch : m.global_batch;
  const int gpn = std::max(1, c.node.gpus);
  // Pinned degrees (--tp/--pp/--cp) are the only ones a layout may have.
  std::vector<int> tps;
  if (o.space.tp) {
    tps.push_back(*o.space.tp);
  } else {
    for (int t : divisors(m.heads))
      if (m.kv_heads % t == 0 && (o.space.allow_tp_across_nodes || t <= gpn)) tps.push_back(t);
  }
  const int pp_lo = o.space.pp.value_or(1);
  const int pp_hi = o.space.pp.value_or(m.layers);
  const std::int64_t cp = o.space.cp.value_or(1) * o.space.ulysses.value_or(1);
  std::vector<std::int64_t> counts;
  for (std::int64_t d : batch_divisors(batch)) {
    if (!takes_dp_shard(o, d)) continue;
    for (int t : tps)
      for (int pp = pp_lo; pp <= pp_hi; ++pp) {
        const std::int64_t n = d * t * pp * cp;
        if (n >= total) break;
        counts.push_back(n);
      }
  }
  std::sort(counts.begin(), counts.end(), std::greater<>());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  std::vector<int> out;
  for (std::size_t i = 0; i < counts.size() && static_cast<int>(out.size()) < limit; ++i)
    out.push_back(static_cast<int>(counts[i]));
  return out;
}

}  // namespace

BestOnDevices best_plan_on(const Transformer& m, const Cluster& c, const HardwareProfile& hw, SearchOptions o,
                           int gpus) {
  o.space.gpus = gpus;
  o.space.min_gpus = o.space.max_gpus = 0;
  o.top = 1;
  o.closest = 0;
  o.simulate_enabled = false;
  // The best plan that fits, ranked: whatever passes the caller's search
  // turned off (a search stored with --no-prune or --no-rank).
  o.prune_enabled = o.rank_enabled = true;
  const SearchResult r = run_search(m, c, hw, o);
  BestOnDevices b;
  b.space = r.space;
  b.interrupted = r.interrupted;
  if (!r.plans.empty()) b.best = r.plans.front();
  return b;
}

std::string after_search_work(bool nothing_fits) {
  return nothing_fits ? "working out what would make a plan fit" : "checking the best plan's memory margin";
}

std::optional<HeadroomAlternative> tight_memory_alternative(const Transformer& m, const Cluster& c,
                                                             const HardwareProfile& hw, SearchOptions o,
                                                             const Candidate& best, double headroom_pct,
                                                             const ProgressFn& progress) {
  const MemoryPrediction& mem = best.prediction.memory;
  if (mem.gpu_capacity_bytes <= 0) return std::nullopt;
  const double fraction = mem.gpu_total_bytes / mem.gpu_capacity_bytes;
  if (fraction <= kTightMemoryFraction || o.memory.gpu_headroom >= headroom_pct / 100.0) return std::nullopt;
  o.memory.gpu_headroom = headroom_pct / 100.0;
  o.top = 1;
  o.closest = 0;
  o.simulate_enabled = false;
  o.prune_enabled = o.rank_enabled = true;
  const SearchResult r = run_search(m, c, hw, o, progress);
  if (r.plans.empty() || r.interrupted || best.prediction.time.tokens_per_s <= 0) return std::nullopt;
  HeadroomAlternative h;
  h.best_fraction = fraction;
  h.headroom_pct = headroom_pct;
  h.alternative = r.plans.front();
  h.tokens_per_s_ratio = h.alternative.prediction.time.tokens_per_s / best.prediction.time.tokens_per_s;
  return h;
}

std::string describe_tight_memory(const HeadroomAlternative& t, const std::string& margin_named) {
  const Candidate& a = t.alternative;
  const double a_fraction = a.prediction.memory.gpu_total_bytes / a.prediction.memory.gpu_capacity_bytes;
  return "the best plan needs " + formatted("%.1f", 100.0 * t.best_fraction) +
         " % of each GPU's memory, and ztune's memory model is checked on no real engine's peak (its own "
         "executor's, within 5 %, and published closed forms): with " + margin_named + " the best plan is " +
         a.plan.summary() + " at " + grouped(a.prediction.time.tokens_per_s) + " tokens/s (" +
         formatted("%+.1f", 100.0 * (t.tokens_per_s_ratio - 1.0)) + " %, analytical) in " +
         formatted("%.1f", 100.0 * a_fraction) + " % of memory";
}

std::vector<FitHint> predict_fit_hints(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                       const SearchOptions& o, const Plan& plan, const MemoryPrediction& mp) {
  if (mp.fits()) return {};
  std::vector<FitHint> hints = plan_fit_hints(m, c, hw, o, plan);
  SearchOptions same = o;
  same.space.global_batch = plan.global_batch;
  // The same kind of plan: FP8 ones (with FP8 parameters) beside an FP8 plan.
  same.space.fp8 = plan.fp8;
  same.space.fp8_param_gather = plan.fp8_param_gather;
  FitHint best;
  best.change = plan.gpus() == 1 ? std::string("the search's best plan on this GPU")
                                 : "the search's best plan on these " + std::to_string(plan.gpus()) + " GPUs";
  BestOnDevices b;
  try {
    b = best_plan_on(m, c, hw, same, plan.gpus());
  } catch (const PlanSpaceOverCap& e) {
    hints.push_back(over_cap(best.change, e));
    return hints;
  }
  if (!b.best) {
    best.detail = "none of " + std::to_string(b.space) + " plans fits (ztune search --gpus " +
                  std::to_string(plan.gpus()) + " --explain says what would)";
  } else {
    best.fits = true;
    best.tokens_per_s = b.best->prediction.time.tokens_per_s;
    best.detail = b.best->plan.summary() + " needs " + describe_memory(b.best->prediction.memory) + ": fits";
  }
  hints.push_back(best);
  return hints;
}

namespace {
/// "with --gpus N (of the cluster's T)": a hint's device count within the cluster.
std::string with_gpus(std::int64_t n, const Cluster& c) {
  return "with --gpus " + std::to_string(n) + " (of the cluster's " + std::to_string(c.total_devices()) + ")";
}
}  // namespace

std::optional<FitHint> fewer_gpus_hint(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                       const SearchOptions& o, std::int64_t below) {
  constexpr int kTries = 8;
  for (int n : layout_device_counts(m, c, o, kTries, below)) {
    SearchOptions x = o;
    x.space.gpus = n;
    x.space.min_gpus = x.space.max_gpus = 0;
    SearchResult s;
    try {
      s = feasibility(m, c, hw, x);
    } catch (const PlanSpaceOverCap& e) {
      return over_cap("fewer GPUs", e);
    }
    if (s.feasible > 0)
      return FitHint{"fewer GPUs", with_gpus(n, c) + " " + fitting(s),
                     true};
  }
  return std::nullopt;
}

std::vector<FitHint> explain_infeasible(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                        const SearchOptions& o, const SearchResult& r) {
  std::vector<FitHint> hints;
  if (!r.closest.empty()) hints = plan_fit_hints(m, c, hw, o, r.closest.front().plan);
  // The other engines, each priced as it runs (its profile, its accounting of
  // the model states): the one where most plans fit. Only ztune's own had been
  // tried, where DeepSpeed's NVMe offload or FSDP fitted on the same GPUs.
  {
    std::optional<SearchResult> best;
    Engine best_engine = o.space.engine;
    bool best_drops_fp8 = false;
    std::string tried, over_cap_engines;
    for (const Engine e : {Engine::ztune, Engine::deepspeed, Engine::megatron, Engine::fsdp}) {
      if (e == o.space.engine) continue;
      SearchOptions x = o;
      x.space.engine = e;
      // Each engine's own accounting, unless the user's search counted the
      // states another way (--accounting), which the hint's change keeps.
      if (!o.accounting_stated) x.memory.accounting = state_accounting_of(e);
      const HardwareProfile priced = with_engine(hw, to_string(e));
      // An engine without an FP8 library (its profile's "fp8") runs the plan in 16 bits.
      const bool drops_fp8 = priced.engine.fp8 == Fp8Library::none &&
                             (o.space.fp8 != Fp8Recipe::none || o.space.fp8_param_gather);
      if (priced.engine.fp8 == Fp8Library::none) {
        x.space.fp8 = Fp8Recipe::none;
        x.space.fp8_param_gather = false;
      }
      try {
        auto s = feasibility(m, c, priced, x);
        tried += (tried.empty() ? "" : ", ") + to_string(e);
        if (!best || s.feasible > best->feasible) {
          best = std::move(s);
          best_engine = e;
          best_drops_fp8 = drops_fp8;
        }
      } catch (const PlanSpaceOverCap&) {
        over_cap_engines += (over_cap_engines.empty() ? "" : ", ") + to_string(e);
      } catch (const InputError&) {
        // A pin that engine cannot run (--zero 1 under FSDP): not an option.
      }
    }
    const bool several = over_cap_engines.find(',') != std::string::npos;
    const std::string unworked = over_cap_engines.empty() ? ""
                                 : " (" + over_cap_engines + " not worked out: " + (several ? "their spaces are" : "its space is") +
                                       " over --max-plans)";
    if (best && best->feasible > 0) {
      hints.push_back({"--engine " + to_string(best_engine) + " in place of --engine " + to_string(o.space.engine) +
                           (best_drops_fp8 ? " (without --fp8: it has no FP8 kernels)" : ""),
                       fitting(*best) + unworked, true});
    } else if (best && r.evaluated > 0) {
      // Where no plan passed the rules the pin is the cause (as the widenings below).
      hints.push_back({"another --engine", "no plan fits under " + tried + " either" + unworked, false});
    } else if (!unworked.empty()) {
      hints.push_back({"another --engine", "not worked out: the spaces of " + over_cap_engines + " are over --max-plans", false});
    }
  }
  // A --dp-shard pin no layout of these devices carries: said first, with why.
  if (o.space.dp_shard && r.evaluated == 0)
    hints.push_back({"--dp-shard " + std::to_string(*o.space.dp_shard),
                     "no layout of the devices searched has a weights' data-parallel group (dp × cp × ulysses, dp "
                     "dividing the global batch) that it divides into two or more groups",
                     false});
  // The pins the user gave, named as given: the search again without them.
  std::string pins;
  for (const auto& [flag, given] : {std::pair{"--tp", o.space.tp.has_value()}, std::pair{"--pp", o.space.pp.has_value()},
                                    std::pair{"--zero", o.space.zero_stage.has_value()},
                                    std::pair{"--cp", o.space.cp.has_value()},
                                    std::pair{"--ulysses", o.space.ulysses.has_value()},
                                    std::pair{"--dp-shard", o.space.dp_shard.has_value()},
                                    std::pair{"--recompute", o.space.recompute.has_value()},
                                    std::pair{"--no-sequence-parallel", !o.space.sequence_parallel}})
    if (given) pins += (pins.empty() ? "" : "/") + std::string(flag);
  if (!pins.empty()) try {
    SearchOptions x = o;
    x.space.tp = x.space.pp = x.space.zero_stage = x.space.cp = x.space.dp_shard = x.space.ulysses = std::nullopt;
    x.space.recompute.reset();
    x.space.sequence_parallel = true;
    auto s = feasibility(m, c, hw, x);
    hints.push_back({"without " + pins, fitting(s), s.feasible > 0});
  } catch (const PlanSpaceOverCap& e) {
    hints.push_back(over_cap("without the pinned degrees", e));
  }
  // Context parallelism the space leaves out: under 8k tokens the default
  // space has none, and the hint tries cp up to 8; from 8k it
  // stops at 8 (or --max-cp), and the hint tries twice that (a million-token
  // sequence fits with cp 16 where cp 8 does not).
  const int searched_cp = sequence_split_limit(o.space.max_cp, m);
  const int wider_cp = searched_cp == 1 ? kContextParallelMaxDefault : 2 * searched_cp;
  // These two widen a space that had plans to price: where no plan passed the
  // rules (a pin no layout carries), the pin is the cause, and a widening that
  // fits nothing either is not said ("[no] --max-cp 8" beside "--pp 3" on 32
  // GPUs had read as a reason).
  auto widening = [&](FitHint h) {
    if (h.fits || r.evaluated > 0) hints.push_back(std::move(h));
  };
  // Only where the engine runs cp on these devices (not DeepSpeed, nor ztune's
  // executor on GPUs): its space has none to widen.
  if (engine_runs_context_parallel(o.space.engine, c) && !o.space.cp && o.space.max_cp != 1 && m.seq_len % 4 == 0 &&
      wider_cp <= m.seq_len / 4) {
    SearchOptions x = o;
    x.space.max_cp = wider_cp;
    widening(search_hint("--max-cp " + std::to_string(wider_cp), m, c, hw, x));
  }
  // One node has no tp across nodes to allow (more nodes are the more-GPUs hint's).
  if (!o.space.allow_tp_across_nodes && c.nodes > 1) {
    SearchOptions x = o;
    x.space.allow_tp_across_nodes = true;
    widening(search_hint("--allow-tp-across-nodes", m, c, hw, x));
  }
  const bool restricted = o.space.gpus > 0 || o.space.min_gpus > 0 || o.space.max_gpus > 0;
  // Fewer GPUs: the largest counts below every device that have a layout,
  // tried from the top. A search of every device finds no layout when the
  // devices outnumber what the batch, the heads and the layers can split over
  // (dp divides the global batch, tp the heads, pp at most the layers), and
  // the layouts it finds may all need a pipeline that rules out what fits on
  // fewer (16 dgx2 GPUs for a 7-sequence batch are tp8 × pp2, where ZeRO-Offload
  // cannot run; 8 fit with it).
  // With --gpus (or --min/--max-gpus) the counts below the one asked for:
  // 8 fit where --gpus 12 has no layout.
  const std::int64_t asked = o.space.gpus > 0 ? o.space.gpus : o.space.max_gpus > 0 ? o.space.max_gpus : 0;
  if (!restricted && r.feasible == 0) {
    if (auto h = fewer_gpus_hint(m, c, hw, o, c.total_devices())) hints.push_back(std::move(*h));
  } else if (restricted && r.feasible == 0 && asked > 1) {
    if (auto h = fewer_gpus_hint(m, c, hw, o, std::min<std::int64_t>(asked, c.total_devices())))
      hints.push_back(std::move(*h));
  }
  // More GPUs: growing node counts, each at the largest device count up to
  // its devices that has a layout (below).
  SearchOptions x = o;
  x.space.gpus = x.space.min_gpus = x.space.max_gpus = 0;
  // A --tp pin wider than a node lays out only across nodes: the probe allows
  // it and its hint says so (it had said nothing fits on any count).
  const bool across = o.space.tp && *o.space.tp > c.node.gpus && !o.space.allow_tp_across_nodes;
  if (across) x.space.allow_tp_across_nodes = true;
  const std::string across_flag = across ? " and --allow-tp-across-nodes:" : "";
  Cluster bigger = c;
  const std::int64_t gpn = std::max(1, c.node.gpus);
  bool found = false;
  // Each count is a search of its own (1.5 s each for a 65,536-token model,
  // 25 counts: the hints had taken 40 s after a 1.4 s search, silently): the
  // probe stops after kMoreGpusBudget, said with the last count tried.
  constexpr auto kMoreGpusBudget = std::chrono::seconds(10);
  const auto started = std::chrono::steady_clock::now();
  std::string last_tried;
  auto fits_on = [&](const Cluster& on, const SearchOptions& y, const std::string& where) {
    if (!last_tried.empty() && std::chrono::steady_clock::now() - started > kMoreGpusBudget) {
      hints.push_back({"more GPUs", "not worked out: none fits on the counts tried (the last " + last_tried +
                                        "), and the probe stopped after " + std::to_string(kMoreGpusBudget.count()) +
                                        " s (a search with more --nodes looks further)",
                       false});
      return true;  // stop
    }
    last_tried = where;
    try {
      const auto s = feasibility(m, on, hw, y);
      if (s.feasible > 0) hints.push_back({"more GPUs", where + across_flag + " " + fitting(s), true});
      return s.feasible > 0;
    } catch (const PlanSpaceOverCap& e) {
      hints.push_back(over_cap("more GPUs (" + where + ")", e));
      return true;  // stop: larger counts hold larger spaces
    }
  };
  // With the devices restricted (--gpus, --max-gpus), first the counts
  // between them and the cluster's, doubling: the hint had jumped to the
  // whole cluster (32 devices where 8 fit, 1,024 where 128 do).
  if (restricted) {
    const std::int64_t from = o.space.gpus > 0 ? o.space.gpus : std::max(o.space.max_gpus, o.space.min_gpus);
    for (std::int64_t n = 2 * std::max<std::int64_t>(from, 1); n < c.total_devices() && !found; n *= 2) {
      SearchOptions y = x;
      y.space.gpus = static_cast<int>(n);
      found = fits_on(c, y, with_gpus(n, c));
    }
  }
  // Whole clusters: the cluster's own devices when --gpus restricted them,
  // then more nodes, one at a time up to twice as many, then by halves
  // (×1.5, ×2, ×3, ...): doubling alone had skipped 4 nodes where 3 did not fit
  // and never reached a multiple of 3 a pin needs.
  std::vector<std::int64_t> node_counts;
  if (restricted) node_counts.push_back(c.nodes);
  for (std::int64_t n = c.nodes + 1; n <= 2LL * c.nodes && n <= kMaxClusterNodes && node_counts.size() < 9; ++n)
    node_counts.push_back(n);
  for (std::int64_t n = 2LL * c.nodes; n <= kMaxClusterNodes && node_counts.size() < 40; n = n * 3 / 2 + (n == 1))
    if (node_counts.empty() || n > node_counts.back()) node_counts.push_back(n);
  if ((node_counts.empty() || node_counts.back() < kMaxClusterNodes) && c.nodes < kMaxClusterNodes)
    node_counts.push_back(kMaxClusterNodes);
  // Each count probes the largest device count up to its devices that has a
  // layout (dp dividing the batch, tp the heads, pp at most the layers), on
  // the nodes that count needs: every device used had rarely been a layout
  // (4 GPUs a node × 1.5^k nodes against a batch of 3,072), and the hint had
  // said nothing fits on 1,000,000 nodes where 1,024 carry dp16×tp4×pp64.
  const std::int64_t starting = restricted ? 0 : c.total_devices();
  std::int64_t last_probed = starting;
  for (const std::int64_t n : node_counts) {
    if (found) break;
    const std::vector<int> layout = layout_device_counts(m, c, x, 1, n * gpn + 1);
    if (layout.empty() || layout.front() <= last_probed) continue;
    const std::int64_t g = layout.front();
    last_probed = g;
    const std::int64_t nodes = (g + gpn - 1) / gpn;
    bigger.nodes = static_cast<int>(nodes);
    SearchOptions y = x;
    if (g != bigger.total_devices()) y.space.gpus = static_cast<int>(g);
    const std::string devices = counted(static_cast<double>(g), "device");
    found = fits_on(bigger, y,
                    nodes == c.nodes && y.space.gpus == 0
                        ? "without --gpus/--min-gpus/--max-gpus (the cluster's " + devices + ")"
                        : "with --nodes " + std::to_string(nodes) +
                              (y.space.gpus > 0 ? " --gpus " + std::to_string(g) : std::string()) + " (" + devices +
                              ")");
  }
  // Pinned model-parallel degrees (--tp/--pp/--cp) need a device count that is
  // their product times a data-parallel degree dividing the global batch
  // (tp 8 × pp 9 = 72 is never a divisor of 256 · 2^k): the smallest such
  // counts above the cluster's, each on the whole nodes it needs.
  const std::int64_t unit = static_cast<std::int64_t>(o.space.tp.value_or(1)) * o.space.pp.value_or(1) *
                            o.space.cp.value_or(1) * o.space.ulysses.value_or(1);
  const std::int64_t batch = o.space.global_batch > 0 ? o.space.global_batch : m.global_batch;
  if (!found && unit > 1 && batch > 0 && c.node.gpus > 0) {
    int tries = 0;
    // The batch's divisors, not every integer up to it: a prime batch near 2^36
    // had stepped through 6.9e10 candidates (minutes, past the probe's budget).
    for (const std::int64_t dp : batch_divisors(batch)) {
      if (tries >= 8 || found) break;
      if (!takes_dp_shard(o, dp)) continue;
      const std::int64_t g = unit * dp;
      if (g <= c.total_devices()) continue;
      const std::int64_t nodes = (g + c.node.gpus - 1) / c.node.gpus;
      if (nodes > kMaxClusterNodes || g > std::numeric_limits<int>::max()) break;
      ++tries;
      bigger.nodes = static_cast<int>(nodes);
      last_probed = std::max(last_probed, g);
      SearchOptions y = x;
      y.space.gpus = static_cast<int>(g);
      found = fits_on(bigger, y,
                      "with " + std::to_string(g) + " devices on " + std::to_string(nodes) + " nodes (" +
                          std::to_string(unit) + " model-parallel × dp " + std::to_string(dp) + ")");
    }
  }
  if (!found) {
    // No larger count has a layout at all (nothing above the start was
    // probed): more nodes cannot help, which "even on N nodes" had not said.
    // Otherwise the largest count with a layout the probe searched.
    if (last_probed == starting)
      hints.push_back({"more GPUs",
                       (starting > 0 ? "no larger device count has a layout: beyond " +
                                           counted(static_cast<double>(starting), "device") + " none"
                                     : std::string("no device count has a layout: none")) +
                           " splits into dp × tp × pp with dp dividing the global batch of " +
                           grouped(static_cast<double>(batch)) + (unit > 1 ? " and the pinned degrees" : "") +
                           (o.space.dp_shard ? ", and a weights' data-parallel group that --dp-shard " +
                                                   std::to_string(*o.space.dp_shard) + " splits into two or more"
                                             : std::string()) +
                           " (a global batch with more divisors opens more)",
                       false});
    else
      hints.push_back({"more GPUs", "nothing fits even on " + counted(static_cast<double>(last_probed), "device") +
                                        " on " + counted(static_cast<double>((last_probed + gpn - 1) / gpn), "node") +
                                        ", the largest count with a layout that was searched",
                       false});
  }
  return hints;
}

}  // namespace ztune
