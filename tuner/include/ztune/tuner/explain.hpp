#pragma once
// What would make a plan fit when none does (`ztune search --explain`, and
// always when the search comes back empty): single changes to the plan closest
// to fitting (smaller micro-batch, full recomputation, ZeRO-3 offload), and
// relaxations of the space (more GPUs, another engine, tp across nodes), each
// with the numbers that decide it.
#include <string>
#include <vector>

#include "ztune/model/cluster.hpp"
#include "ztune/model/hardware_profile.hpp"
#include "ztune/model/transformer.hpp"
#include "ztune/tuner/search.hpp"

namespace ztune {

struct FitHint {
  std::string change;  // "micro-batch 1", "more GPUs", ...
  std::string detail;  // the plan tried and its memory, e.g. "... needs 35.1 GB of 32.0 GB per GPU"
  bool fits = false;   // the change alone makes a plan fit
};

/// Hints for a search `r` that found nothing feasible (uses r.closest). Runs a
/// few memory-only searches for the relaxations (more GPUs: the node count
/// doubled until something fits, up to 4096× the cluster).
std::vector<FitHint> explain_infeasible(const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                                        const SearchOptions& o, const SearchResult& r);

/// "35.1 GB of 32.0 GB per GPU" (and host/NVMe when those overflow).
std::string describe_memory(const MemoryPrediction& mem);

}  // namespace ztune
