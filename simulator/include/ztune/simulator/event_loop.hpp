#pragma once
// The discrete-event loop: runs an operation graph on its resources. (Named so
// that "engine" means one thing in ztune, the training framework of
// tuner/engine.hpp.) An operation starts when all its inputs are done and its
// resource is free (compute streams and the host CPU run one at a time, in order of readiness,
// ties by operation id); transfers on a link share its bandwidth equally
// (processor sharing), so two concurrent transfers each take twice as long.
// Deterministic: the same graph gives bit-identical timings.
#include <vector>

#include "ztune/simulator/op_graph.hpp"

namespace ztune::sim {

struct Timeline {
  std::vector<double> start_s;          // per operation id
  std::vector<double> end_s;
  std::vector<double> resource_busy_s;  // per resource: time with at least one operation running
  double iteration_s = 0;               // the last end
};

/// Simulates `g` (finalize_graph first). Throws std::logic_error when the
/// graph is not finalized or has a cycle (builder bugs, never user errors), and
/// InputError when a duration is not a finite number >= 0 or the durations add
/// up to more than a double holds (a cluster or profile figure such as 5e-324),
/// which would otherwise never finish.
/// `stop`: checked every kStopCheckEvery events (SimulationStopped).
[[nodiscard]] Timeline run_event_loop(const OpGraph& g, const std::atomic<bool>* stop = nullptr);

}  // namespace ztune::sim
