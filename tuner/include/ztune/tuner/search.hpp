#pragma once
// The search: enumerate the space (search_space.hpp), then run each batch of
// plans through the passes — rules (check_plan + engine), prune (memory),
// rank (analytical time and objective) — on every core, keeping a top-N per
// worker; then simulate the best few. Infeasibility is a counted value, never
// an exception (STYLE.md #9).
//
// Example: auto r = run_search(model, cluster, default_profile_for(cluster), {});
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/candidate.hpp"
#include "ztune/tuner/prune_reason.hpp"
#include "ztune/tuner/search_options.hpp"
#include "ztune/tuner/search_pass.hpp"

namespace ztune {

/// What the search is doing: laying out the space (device counts; seconds for
/// millions of them), or running the plans through the passes.
enum class SearchPhase : std::uint8_t { enumerate, rank, simulate };

struct SearchProgress {
  std::int64_t done = 0;   // rank: plans processed (rejected layouts count at once); enumerate: device counts laid
                           // out; simulate: plans simulated
  std::int64_t total = 0;  // rank: plans in the space; enumerate: device counts to lay out; simulate: plans to
  double elapsed_s = 0;
  SearchPhase phase = SearchPhase::rank;
  std::int64_t plans = 0;  // enumerate: plans counted so far
};
using ProgressFn = std::function<void(const SearchProgress&)>;

struct SearchResult {
  std::vector<Candidate> plans;    // best first (the top N); simulated ones first
  std::vector<Candidate> closest;  // memory-infeasible plans closest to fitting, closest first
  std::int64_t space = 0;          // plans in the space
  std::int64_t evaluated = 0;      // plans that reached the passes (their layout was valid)
  std::int64_t feasible = 0;       // plans that pass every rule and fit in memory
  std::int64_t block_recompute = 0;  // of those, recomputing every layer, given Megatron's block method instead
  std::int64_t layouts = 0;        // dp × tp × pp layouts in the space
  PruneCounts pruned;
  std::vector<PassStats> passes;   // rules, prune, rank, simulate
  double elapsed_s = 0;            // wall time of the whole search
  int threads = 1;
  bool interrupted = false;        // stopped early by SearchOptions::stop (while enumerating: no plan ranked)
  // The resolved inputs (defaults filled in).
  Objective objective = Objective::throughput;
  double tokens = 0;
  double gpu_hour_price = 0;
  std::int64_t global_batch = 0;

  [[nodiscard]] const PassStats* pass(const std::string& name) const;
  /// Every plan of the space was ranked: not interrupted, or interrupted only
  /// while its best plans were simulated (their list and the counts are whole).
  [[nodiscard]] bool ranked_whole_space() const;
};

/// Searches the space. Throws InputError for impossible constraints (a flag the
/// cluster or model cannot meet) and for a space over SpaceOptions::max_plans; an
/// empty `plans` with feasible == 0 means nothing fits. `progress` is called about
/// every 100 ms from the calling thread, while enumerating and while ranking.
SearchResult run_search(const Transformer& m, const Cluster& c, const HardwareProfile& hw, const SearchOptions& o,
                        const ProgressFn& progress = {});

/// Times `c` as the rank pass does: its analytical iteration (predict_time)
/// and the objective's value of it (1-bit Adam plans by their run-averaged
/// step). The planner times the closest plans with it when nothing fits. A
/// memo (a worker's own, bound to m, cl and hw) saves the layer costs plans
/// share; the result is the same without one.
void time_candidate(Candidate& c, const Transformer& m, const Cluster& cl, const HardwareProfile& hw, Objective o,
                    double tokens, double gpu_hour_price, LayerCostMemo* memo = nullptr);

/// The ranking order of a search with objective `o` (better first; ties by enumeration id).
[[nodiscard]] bool ranks_before(Objective o, const Candidate& a, const Candidate& b);

}  // namespace ztune
