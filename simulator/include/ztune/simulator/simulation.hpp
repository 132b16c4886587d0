#pragma once
// A simulated iteration: the graph, its timeline, the breakdown per stage and
// of the pacing stage, per-resource busy time, and memory per stage over time.
#include <vector>

#include "ztune/model/prediction.hpp"
#include "ztune/simulator/breakdown.hpp"
#include "ztune/simulator/engine.hpp"
#include "ztune/simulator/memory_trace.hpp"
#include "ztune/simulator/op_graph.hpp"

namespace ztune::sim {

struct SimResult {
  OpGraph graph;
  Timeline timeline;
  double iteration_s = 0;
  int pacing_stage = 0;
  TimeParts breakdown{};           // of the pacing stage; sums to iteration_s
  std::vector<TimeParts> stages;   // one per stage; each sums to iteration_s
  std::vector<StageMemory> memory; // one per stage

  [[nodiscard]] double part(TimePart p) const { return breakdown[static_cast<std::size_t>(p)]; }
  [[nodiscard]] double busy_s(int resource) const {
    return timeline.resource_busy_s[static_cast<std::size_t>(resource)];
  }
  [[nodiscard]] double idle_s(int resource) const { return iteration_s - busy_s(resource); }
};

/// Runs the engine on `g` and derives breakdowns and memory.
[[nodiscard]] SimResult simulate_graph(OpGraph g, bool keep_memory_samples = true);

/// The analytical prediction with the simulated iteration time and breakdown
/// in place of its own; throughput, TFLOP/s, MFU and HFU rescaled to the
/// simulated time (the FLOPs are the analytical model's).
[[nodiscard]] TimePrediction to_time_prediction(const SimResult& r, const TimePrediction& analytical);

}  // namespace ztune::sim
