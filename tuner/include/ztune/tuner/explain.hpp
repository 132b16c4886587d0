#pragma once
// What would make a plan fit: for one plan that does not (`ztune predict`), and
// when no plan does (`ztune search --explain`, and always when the search
// comes back empty): single changes to the plan closest to fitting, and
// relaxations of the space (more GPUs, another engine, tp across nodes), each
// with the numbers that decide it.
#include <optional>
#include <string>
#include <vector>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/search.hpp"

namespace ztune {

struct FitHint {
  std::string change;  // "micro-batch 1", "more GPUs", ...
  std::string detail;  // the plan tried and its memory, e.g. "... needs 35.1 GB of 32.0 GB per GPU"
  bool fits = false;   // the change alone makes a plan fit
  double tokens_per_s = 0;  // the changed plan's predicted throughput (analytical) when it fits
};

/// Changes to one plan on the same GPUs, each tried alone (and one all-in
/// combination): smaller micro-batch, FlashAttention, recomputation, sequence
/// parallelism, the next ZeRO stage, twice the tensor or pipeline parallelism
/// for half the data parallelism, optimizer offload, ZeRO-3 with offload. Each
/// says what the changed plan needs, whether it fits, and its throughput when
/// it does; changes that make no valid plan say why.
std::vector<FitHint> plan_fit_hints(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                    const SearchOptions& o, const Plan& base);

/// The search's best plan on exactly `gpus` devices of `c` (memory prune and
/// analytical rank, no simulation), the space `o` describes otherwise; empty
/// when nothing fits there. `space` is how many plans the search counted.
/// The one "best plan on N GPUs" of predict's last hint and of the planner's
/// scaling chart. Throws InputError as run_search does (a batch N cannot divide).
struct BestOnDevices {
  std::optional<Candidate> best;
  std::int64_t space = 0;
  bool interrupted = false;  // o.stop was raised
};
BestOnDevices best_plan_on(const Transformer& m, const Cluster& c, const HardwareProfile& hw, SearchOptions o,
                           int gpus);

/// A best plan that needs more than this share of its GPUs' memory is tight:
/// ztune's memory model is checked against its own executor's measured peaks
/// (tests/executor/memory_model.py: within 5 %) and against published closed
/// forms, and against no real engine's peak that close to capacity.
inline constexpr double kTightMemoryFraction = 0.95;

/// The memory the search's best plan leaves free, and the alternative a user
/// who wants a margin would take: when `best` needs more than
/// kTightMemoryFraction of its GPUs' memory, the best plan of the same space
/// with `headroom_pct` of each GPU's memory kept free (memory prune and
/// analytical rank, as --memory-headroom searches; the caller's own headroom
/// and pins kept otherwise). nullopt when the best is not tight, when the
/// search already kept that much free, or when nothing fits with it.
struct HeadroomAlternative {
  double best_fraction = 0;   // the tight best plan's GPU memory / capacity
  double headroom_pct = 0;    // the margin the alternative keeps
  Candidate alternative;      // ranked analytically
  double tokens_per_s_ratio = 0;  // its analytical tokens/s over the best's analytical tokens/s
};
/// `progress` reports the second search as run_search does (it is as large as the first).
std::optional<HeadroomAlternative> tight_memory_alternative(const Transformer& m, const Cluster& c,
                                                             const HardwareProfile& hw, SearchOptions o,
                                                             const Candidate& best, double headroom_pct = 5.0,
                                                             const ProgressFn& progress = {});

/// What a search's caller works out once the search has finished, in words
/// ("checking the best plan's memory margin"): `ztune search` and the planner
/// say it when a stop request ends that work, so the user knows what is not shown.
std::string after_search_work(bool nothing_fits);

/// "the best plan needs 99.1 % of each GPU's memory, and ...: with
/// <margin_named> the best plan is <summary> at N tokens/s (−0.8 %,
/// analytical) in 89.9 % of memory" (the search's note, the planner's report).
std::string describe_tight_memory(const HeadroomAlternative& t, const std::string& margin_named);

/// What `ztune predict` says for a plan that does not fit: plan_fit_hints,
/// then the search's best plan on the plan's GPUs and global batch. Empty
/// when the plan fits.
std::vector<FitHint> predict_fit_hints(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                       const SearchOptions& o, const Plan& plan, const MemoryPrediction& mp);

/// Hints for a search `r` that found nothing feasible (uses r.closest). Runs a
/// few memory-only searches for the relaxations (fewer GPUs when all of them,
/// or the --gpus asked for, cannot be split, fewer_gpus_hint; more GPUs: the
/// cluster's own devices under --gpus, then nodes one at a time up to twice
/// the cluster and by halves beyond, up to a cluster file's bound; a pin's
/// whole unit, tp × pp × cp × ulysses × a dp --dp-shard divides).
std::vector<FitHint> explain_infeasible(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                        const SearchOptions& o, const SearchResult& r);

/// When the devices (`below`: the cluster's, or the --gpus asked for) are too
/// many to split (dp dividing the global batch, tp the heads, pp at most the
/// layers, the pins): the largest smaller device count with a layout on which
/// a plan fits (`--gpus N`), trying the 8 largest counts that have a layout;
/// nullopt when none of them fits.
std::optional<FitHint> fewer_gpus_hint(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                       const SearchOptions& o, std::int64_t below);

/// "35.1 GB of 32.0 GB per GPU" (and host/NVMe when those overflow).
std::string describe_memory(const MemoryPrediction& mem);

}  // namespace ztune
