#pragma once
// JSON renderings of predictions, candidates and a whole search, as printed by
// `ztune search --json` and stored in the results database.
#include <nlohmann/json.hpp>

#include "ztune/model/prediction.hpp"
#include "ztune/tuner/candidate.hpp"
#include "ztune/tuner/search.hpp"

namespace ztune {

/// {"gpu": {line: bytes}, "gpu_total_bytes", "gpu_capacity_bytes", "host_bytes_per_node", ..., "fits"}
nlohmann::json memory_to_json(const MemoryPrediction& m);
/// {"parts": {part: s}, "iteration_s", "tokens_per_s", "model_tflops_per_gpu", "mfu", ...}
nlohmann::json time_to_json(const TimePrediction& t);
/// {"plan": plan_to_json, "prediction": {"memory", "time" (null if not ranked), "simulated" (null if
/// not simulated), "days", "objective"}} — days and objective use the search's token budget.
nlohmann::json candidate_to_json(const Candidate& c, const SearchResult& r);
/// Exactly {"plans": [...], "space": N, "feasible": M, "pruned_by": {reason: count}, "elapsed_s": t}.
nlohmann::json search_result_to_json(const SearchResult& r);
/// The passes as [{"name", "enabled", "in", "out", "seconds", "note"}] (stored with the search).
nlohmann::json passes_to_json(const SearchResult& r);

}  // namespace ztune
