#include "ztune/tuner/search.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>
#include <utility>

#include "ztune/model/finite_check.hpp"
#include "ztune/model/layer_cost_memo.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/tuner/objective.hpp"
#include "ztune/tuner/search_space.hpp"
#include "ztune/tuner/simulate_pass.hpp"
#include "ztune/tuner/top_n.hpp"
#include "ztune/vocab/input_error.hpp"

namespace ztune {

const PassStats* SearchResult::pass(const std::string& name) const {
  for (const auto& p : passes)
    if (p.name == name) return &p;
  return nullptr;
}

void time_candidate(Candidate& c, const Transformer& m, const Cluster& cl, const HardwareProfile& hw, Objective o,
                    double tokens, double gpu_hour_price, LayerCostMemo* memo) {
  c.prediction.time = predict_time(m, c.plan, cl, hw, memo);
  c.timed = true;
  // 1-bit Adam plans rank by their run-averaged step (warm-up included).
  c.objective = objective_value(o, run_averaged(c.prediction.time, onebit_run_factor(m, c.plan, cl, hw)),
                                c.plan.gpus(), tokens, gpu_hour_price);
}

bool SearchResult::ranked_whole_space() const {
  // run_search runs the simulate pass only after an uninterrupted ranking.
  if (!interrupted) return true;
  const PassStats* sim = pass("simulate");
  return sim != nullptr && sim->enabled;
}

bool ranks_before(Objective o, const Candidate& a, const Candidate& b) {
  if (a.objective != b.objective) return higher_is_better(o) ? a.objective > b.objective : a.objective < b.objective;
  return a.id < b.id;
}

namespace {

using Clock = std::chrono::steady_clock;
constexpr std::size_t kBatch = 1024;

PruneReason layout_reason(LayoutRule r) {
  switch (r) {
    case LayoutRule::tp_across_nodes: return PruneReason::tp_across_nodes;
    case LayoutRule::tp_shape: return PruneReason::tp_shape;
    case LayoutRule::pp_layers: return PruneReason::pp_layers;
    case LayoutRule::fp8_shape: return PruneReason::fp8_shape;
    case LayoutRule::unlaunchable: return PruneReason::unlaunchable;
    default: return PruneReason::layout_other;
  }
}

// The memory pressure a plan that does not fit must not exceed to enter the
// "closest to fitting" list (its closest_order: pressure, then id): above it
// the plan's memory need not be known further (predict_memory_unless_above).
double nearest_bar(const TopN& nearest) {
  if (nearest.capacity() == 0) return -std::numeric_limits<double>::infinity();
  if (nearest.size() < nearest.capacity()) return std::numeric_limits<double>::infinity();
  return nearest.worst().memory_pressure();
}

PruneReason memory_reason(const MemoryPrediction& m) {
  if (!m.fits_gpu) return PruneReason::memory_gpu;
  if (!m.fits_host) return PruneReason::memory_host;
  return PruneReason::memory_nvme;
}

/// What one worker thread owns: its counts, pass statistics, top lists and batch.
struct Worker {
  Worker(const Transformer& m, const Cluster& c, const HardwareProfile& hw, std::size_t top, std::size_t closest,
         TopN::Better best_order, TopN::Better closest_order)
      : best(top, std::move(best_order)), nearest(closest, std::move(closest_order)), layers(m, c, hw) {
    plans.resize(kBatch);
    ids.resize(kBatch);
    memory.resize(kBatch);
    alive.reserve(kBatch);
  }
  PruneCounts pruned;
  PassStats rules{"rules"}, prune{"prune"}, rank{"rank"};
  TopN best, nearest;
  std::int64_t feasible = 0;
  std::int64_t block_recompute = 0;  // fitting plans given Megatron's block method
  std::int64_t evaluated = 0;
  std::vector<Plan> plans;
  std::vector<std::uint64_t> ids;
  std::vector<MemoryPrediction> memory;
  std::vector<std::uint32_t> alive;
  Candidate scratch;
  LayerCostMemo layers;  // the rank pass's layer and edge costs, by what they read of a plan
};

/// Shared read-only inputs of the workers.
struct Job {
  const Transformer& model;
  const Cluster& cluster;
  const HardwareProfile& hw;
  const SearchOptions& options;
  const SearchSpace& space;
  double tokens;
  std::atomic<std::size_t> next_layout{0};
  std::atomic<std::int64_t> done{0};
  std::atomic<bool> stopped{false};
};

bool stop_requested(const Job& job) {
  return job.options.stop != nullptr && job.options.stop->load(std::memory_order_relaxed);
}

// A plan that recomputes every layer and fits becomes Megatron's block method
// at its fastest where the engine runs it: the fewest layers of each chunk
// recomputed that still fit (fewest_recomputed_layers), never slower and
// never more than the memory it was allowed. Where the same plan fits without
// recomputation, that plan (also in the space) is faster than any block: this
// one stays as it was.
bool recompute_fewest_layers(const Job& job, Plan& p, MemoryPrediction& memory) {
  if (p.recompute != Recompute::full || p.recompute_num_layers > 0 || p.cpu_checkpointing) return false;
  if (job.options.space.recompute) return false;  // pinned: every layer, as asked
  if (!runs_block_recompute(p, job.options.space.engine)) return false;
  Plan none = p;
  none.recompute = Recompute::none;
  none.partition_activations = false;
  if (predict_memory(job.model, none, job.cluster, job.hw, job.options.memory).fits()) return false;
  MemoryPrediction fitted;
  const int n = fewest_recomputed_layers(job.model, p, job.cluster, job.hw, job.options.memory, &fitted);
  if (n == 0) return false;
  p.recompute_num_layers = n;
  memory = fitted;
  return true;
}

void flush(Job& job, Worker& w, std::size_t n) {
  if (n == 0) return;
  const auto& o = job.options;
  w.evaluated += static_cast<std::int64_t>(n);
  w.alive.clear();
  // Pass 1: rules. Generators only produce plans check_plan accepts, so it is
  // the authority that verifies them; engine rules narrow to --engine's space.
  run_pass(w.rules, static_cast<std::int64_t>(n), [&](std::int64_t) {
    for (std::uint32_t i = 0; i < n; ++i) {
      const Plan& p = w.plans[i];
      if (check_plan(p, job.model, job.cluster)) {
        w.pruned.add(PruneReason::plan_rule);
      } else if (auto rule = engine_violation(p, o.space.engine, job.cluster)) {
        w.pruned.add(engine_reason(*rule));
      } else {
        w.alive.push_back(i);
      }
    }
    return static_cast<std::int64_t>(w.alive.size());
  });
  // Pass 2: memory prune. A plan that does not fit is counted by the first
  // resource it overflows and offered to the "closest to fitting" list.
  run_pass(w.prune, static_cast<std::int64_t>(w.alive.size()), [&](std::int64_t) {
    std::size_t k = 0;
    for (std::uint32_t i : w.alive) {
      // Most plans of a large space do not fit: one stage past the list's bar
      // settles them (a third of the prune pass's time on Llama 3.1 405B).
      auto memory = predict_memory_unless_above(job.model, w.plans[i], job.cluster, job.hw, o.memory,
                                                nearest_bar(w.nearest));
      if (!memory) {
        w.pruned.add(PruneReason::memory_gpu);
        continue;
      }
      w.memory[i] = *memory;
      if (w.memory[i].fits()) {
        if (recompute_fewest_layers(job, w.plans[i], w.memory[i])) ++w.block_recompute;
        w.alive[k++] = i;
        continue;
      }
      w.pruned.add(memory_reason(w.memory[i]));
      // The list orders by memory and id: the plan is copied only to enter it.
      w.scratch.prediction.memory = w.memory[i];
      w.scratch.id = w.ids[i];
      if (w.nearest.admits(w.scratch)) {
        w.scratch.plan = w.plans[i];
        w.nearest.offer(w.scratch);
      }
    }
    w.alive.resize(k);
    return static_cast<std::int64_t>(k);
  });
  // Pass 3: analytical rank by the objective.
  const bool memory_known = w.prune.enabled;
  run_pass(w.rank, static_cast<std::int64_t>(w.alive.size()), [&](std::int64_t) {
    for (std::uint32_t i : w.alive) {
      Candidate& c = w.scratch;
      // Moved, not copied: the batch's plan is not read again (the next batch
      // overwrites it), and a plan's stage and chunk lists are vectors.
      std::swap(c.plan, w.plans[i]);
      c.id = w.ids[i];
      c.prediction.memory =
          memory_known ? w.memory[i] : predict_memory(job.model, c.plan, job.cluster, job.hw, o.memory);
      time_candidate(c, job.model, job.cluster, job.hw, o.objective, job.tokens, o.gpu_hour_price, &w.layers);
      if (c.prediction.memory.fits()) ++w.feasible;
      if (w.best.admits(c)) w.best.offer(c);
    }
    return static_cast<std::int64_t>(w.alive.size());
  });
  if (!w.rank.enabled) {
    // Unranked: keep plans in enumeration order (memory known only when pruned).
    for (std::uint32_t i : w.alive) {
      Candidate& c = w.scratch;
      c.plan = w.plans[i];
      c.id = w.ids[i];
      c.prediction = Prediction{};
      if (memory_known) c.prediction.memory = w.memory[i];
      c.timed = false;
      c.objective = 0;
      ++w.feasible;
      if (w.best.admits(c)) w.best.offer(c);
    }
  }
  job.done.fetch_add(static_cast<std::int64_t>(n), std::memory_order_relaxed);
}

void work(Job& job, Worker& w) {
  const auto& layouts = job.space.layouts();
  for (;;) {
    if (stop_requested(job)) {
      job.stopped = true;
      return;
    }
    const std::size_t li = job.next_layout.fetch_add(1);
    if (li >= layouts.size()) return;
    const Layout& l = layouts[li];
    if (l.rejected != LayoutRule::none) {
      w.pruned.add(layout_reason(l.rejected), l.plans);
      job.done.fetch_add(l.plans, std::memory_order_relaxed);
      continue;
    }
    std::size_t n = 0;
    auto id = static_cast<std::uint64_t>(l.first_id);
    bool stopping = false;
    job.space.for_each_plan(l, [&](const Plan& p) {
      if (stopping) return;
      w.plans[n] = p;
      w.ids[n] = id++;
      if (++n == kBatch) {
        flush(job, w, n);
        n = 0;
        stopping = stop_requested(job);
      }
    });
    if (!stopping) flush(job, w, n);
  }
}

}  // namespace

SearchResult run_search(const Transformer& m, const Cluster& c, const HardwareProfile& hw, const SearchOptions& o,
                        const ProgressFn& progress) {
  const auto t0 = Clock::now();
  EnumerationHooks hooks;
  hooks.stop = o.stop;
  if (progress)
    hooks.progress = [&progress, t0](std::int64_t done, std::int64_t total, std::int64_t plans) {
      progress({done, total, std::chrono::duration<double>(Clock::now() - t0).count(), SearchPhase::enumerate, plans});
    };
  if (o.space.fp8 != Fp8Recipe::none)
    if (auto why = fp8_device_refusal(c)) throw InputError("--fp8: " + *why + "; expected no --fp8 on " + c.name);
  if (auto why = fp8_library_refusal(o.space.fp8, hw.engine)) throw InputError("--fp8: " + *why);
  SpaceOptions so = o.space;
  so.fused_kernel = preferred_fused_kernel(o.space.engine, hw);
  SearchSpace space(m, c, so, hooks);
  SearchResult r;
  r.objective = o.objective;
  r.tokens = o.tokens > 0 ? o.tokens : m.train_tokens;
  r.gpu_hour_price = o.gpu_hour_price;
  r.global_batch = space.global_batch();
  r.space = space.size();
  r.layouts = static_cast<std::int64_t>(space.layouts().size());
  if (space.interrupted()) {
    // Stopped while laying out the space: nothing was ranked yet.
    r.interrupted = true;
    r.passes = {PassStats{"rules"}, PassStats{"prune", o.prune_enabled}, PassStats{"rank", o.rank_enabled},
                PassStats{"simulate", false}};
    if (o.simulate_enabled && o.simulate_top > 0) r.passes.back().note = "skipped: interrupted";
    r.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
    return r;
  }

  int threads = o.threads > 0 ? o.threads : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  threads = std::max(1, std::min<int>(threads, static_cast<int>(std::max<std::size_t>(1, space.layouts().size()))));
  r.threads = threads;

  const Objective obj = o.objective;
  const bool ranked = o.rank_enabled;
  TopN::Better best_order = [obj, ranked](const Candidate& a, const Candidate& b) {
    return ranked ? ranks_before(obj, a, b) : a.id < b.id;
  };
  TopN::Better closest_order = [](const Candidate& a, const Candidate& b) {
    const double pa = a.memory_pressure(), pb = b.memory_pressure();
    return pa != pb ? pa < pb : a.id < b.id;
  };
  // --top/--simulate-top are clamped to what exists: a list never holds more plans
  // than the space has (and TopN allocates as it fills, so 2^31 costs nothing).
  const std::size_t keep = static_cast<std::size_t>(
      std::min<std::int64_t>(std::max({o.top, o.simulate_top, 1}), std::max<std::int64_t>(r.space, 1)));
  const auto closest = static_cast<std::size_t>(std::max(0, o.closest));

  Job job{m, c, hw, o, space, r.tokens};
  std::vector<Worker> workers;
  workers.reserve(static_cast<std::size_t>(threads));
  for (int i = 0; i < threads; ++i) {
    workers.emplace_back(m, c, hw, keep, closest, best_order, closest_order);
    workers.back().prune.enabled = o.prune_enabled;
    workers.back().rank.enabled = o.rank_enabled;
  }
  {
    // Workers report completion through a condition variable; the calling
    // thread wakes every 100 ms to report progress (and returns at once when done).
    std::mutex mu;
    std::condition_variable cv;
    int finished = 0;
    std::vector<std::jthread> pool;
    for (auto& w : workers)
      pool.emplace_back([&job, &w, &mu, &cv, &finished] {
        work(job, w);
        {
          std::lock_guard lock(mu);
          ++finished;
        }
        cv.notify_one();
      });
    std::unique_lock lock(mu);
    while (!cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return finished == threads; })) {
      if (progress)
        progress({job.done.load(), r.space, std::chrono::duration<double>(Clock::now() - t0).count()});
    }
  }
  r.interrupted = job.stopped.load() || stop_requested(job);

  TopN best(keep, best_order), nearest(closest, closest_order);
  PassStats rules{"rules"}, prune{"prune", o.prune_enabled}, rank{"rank", o.rank_enabled};
  for (const auto& w : workers) {
    best.merge(w.best);
    nearest.merge(w.nearest);
    r.pruned.add(w.pruned);
    r.feasible += w.feasible;
    r.block_recompute += w.block_recompute;
    r.evaluated += w.evaluated;
    rules.add(w.rules);
    prune.add(w.prune);
    rank.add(w.rank);
  }
  r.plans = best.sorted();
  r.closest = nearest.sorted();
  // Nothing infinite is shown, stored or simulated: a kept plan whose predicted
  // time is not finite means an input figure is absurdly small (5e-324).
  if (o.rank_enabled)
    for (const auto& cand : r.plans)
      require_finite_time(cand.prediction.time,
                          "cluster " + c.name + " with " + profile_label(hw) + ", plan " + cand.plan.summary());
  r.passes = {rules, prune, rank};

  // An interrupted search returns at once: its best plans are not re-simulated.
  PassStats sim{"simulate", o.simulate_enabled && o.simulate_top > 0 && !r.interrupted};
  if (r.interrupted && o.simulate_enabled && o.simulate_top > 0) sim.note = "skipped: interrupted";
  simulate_top(m, c, hw, o, r.tokens, r.plans, sim, [&](std::int64_t done, std::int64_t k) {
    if (progress) progress({done, k, std::chrono::duration<double>(Clock::now() - t0).count(), SearchPhase::simulate});
  });
  // A stop during the simulate pass interrupts the search as one during the
  // others does: the caller must not take it for a finished one (ztune search
  // had exited 0, stored it as complete and, with --run, launched the plan).
  if (!r.interrupted && stop_requested(job)) {
    r.interrupted = true;
    if (sim.out < sim.in) sim.note = "interrupted after " + std::to_string(sim.out) + " of " + std::to_string(sim.in);
  }
  r.passes.push_back(sim);
  if (o.top >= 0 && r.plans.size() > static_cast<std::size_t>(std::max(o.top, 1)))
    r.plans.resize(static_cast<std::size_t>(std::max(o.top, 1)));
  r.elapsed_s = std::chrono::duration<double>(Clock::now() - t0).count();
  if (progress) progress({job.done.load(), r.space, r.elapsed_s});
  return r;
}

}  // namespace ztune
