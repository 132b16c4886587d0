#pragma once
// Memory of each stage's GPU over the simulated iteration: stored activations
// of the micro-batches in flight (plus the recomputation working set) and
// ZeRO-3 gathered parameters. Allocations happen when an operation starts,
// frees when it ends. Model states (parameters, gradients, optimizer) are
// constant over the iteration and are the memory model's business.
#include <vector>

#include "ztune/simulator/event_loop.hpp"
#include "ztune/simulator/op_graph.hpp"

namespace ztune::sim {

struct MemorySample {
  double t_s = 0;
  double activation_bytes = 0;
  double gathered_param_bytes = 0;
};

struct StageMemory {
  double peak_activation_bytes = 0;
  double peak_gathered_param_bytes = 0;
  double peak_total_bytes = 0;        // peak of the sum (not the sum of the peaks)
  std::vector<MemorySample> samples;  // after each change, in time order
};

[[nodiscard]] std::vector<StageMemory> stage_memory(const OpGraph& g, const Timeline& t, bool keep_samples = true);

}  // namespace ztune::sim
