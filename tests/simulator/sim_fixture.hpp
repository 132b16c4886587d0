#pragma once
// Builds and simulates a plan with hand-set costs.
#include <numeric>

#include "fixed_costs.hpp"
#include "ztune/simulator/graph_builder.hpp"
#include "ztune/simulator/simulation.hpp"

namespace ztune::sim::test {

inline Plan pipeline_plan(int pp, int microbatches, Schedule schedule = Schedule::one_f_one_b, int chunks = 1) {
  Plan p;
  p.pp = pp;
  p.grad_accum = microbatches;
  p.global_batch = microbatches;
  p.schedule = schedule;
  p.virtual_stages = chunks;
  return p;
}

inline SimResult run(int layers, const Plan& p, const FixedCosts& c, const BuildOptions& o = {}) {
  return simulate_graph(build_iteration_graph(layers, p, single_node_placement(p), c, o));
}

inline double sum(const TimeParts& parts) { return std::accumulate(parts.begin(), parts.end(), 0.0); }
inline double part(const TimeParts& parts, TimePart p) { return parts[static_cast<std::size_t>(p)]; }

}  // namespace ztune::sim::test
