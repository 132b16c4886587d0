#pragma once
// A simulated iteration: the graph, its timeline, the breakdown per stage and
// of the pacing stage, per-resource busy time, and memory per stage over time.
#include <vector>

#include "ztune/model/prediction.hpp"
#include "ztune/simulator/breakdown.hpp"
#include "ztune/simulator/event_loop.hpp"
#include "ztune/simulator/memory_trace.hpp"
#include "ztune/simulator/op_graph.hpp"

namespace ztune::sim {

struct SimResult {
  OpGraph graph;
  Timeline timeline;
  double iteration_s = 0;
  int pacing_stage = 0;
  TimeParts breakdown{};           // of the pacing stage; sums to iteration_s
  std::vector<TimeParts> stages;   // one per stage; each sums to iteration_s (all zero but the
                                   // pacing stage's when not asked for all)
  std::vector<StageMemory> memory; // one per stage

  [[nodiscard]] double part(TimePart p) const { return breakdown[static_cast<std::size_t>(p)]; }
  [[nodiscard]] double busy_s(int resource) const {
    return timeline.resource_busy_s[static_cast<std::size_t>(resource)];
  }
  [[nodiscard]] double idle_s(int resource) const { return iteration_s - busy_s(resource); }
};

struct ResultOptions {
  bool memory_samples = true;         // keep each stage's memory-over-time samples (for plots)
  bool all_stage_breakdowns = true;   // every stage's breakdown, not only the pacing stage's
  const std::atomic<bool>* stop = nullptr;  // checked by the event loop (SimulationStopped)
};

/// Runs the event loop on `g` (finalized here if it is not yet) and derives
/// breakdowns and memory.
[[nodiscard]] SimResult simulate_graph(OpGraph g, const ResultOptions& options = {});

/// The analytical prediction with the simulated iteration time and breakdown
/// in place of its own; throughput, TFLOP/s, MFU and HFU rescaled to the
/// simulated time (the FLOPs are the analytical model's).
[[nodiscard]] TimePrediction to_time_prediction(const SimResult& r, const TimePrediction& analytical);

}  // namespace ztune::sim
