#pragma once
// Simulates one iteration of a plan with the cost model's operation costs.
// Example: auto r = ztune::sim::simulate(model, plan, cluster, default_profile_for(cluster));
#include <cstdint>
#include <optional>
#include <string>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/simulator/graph_builder.hpp"
#include "ztune/simulator/simulation.hpp"

namespace ztune::sim {

struct SimOptions {
  BuildOptions build;
  bool memory_samples = true;        // keep each stage's memory-over-time samples (for plots)
  bool all_stage_breakdowns = true;  // every stage's breakdown, not only the pacing stage's
  /// A stop request: the graph's building and the event loop check it and
  /// throw SimulationStopped (the planner's Cancel and window close, Ctrl-C
  /// in the search's simulate pass). Null: never stopped.
  const std::atomic<bool>* stop = nullptr;
};

/// The most micro-batches per step the simulator builds a graph for. Its
/// operations grow with them (a forward and a backward per layer group each), so
/// --global-batch 2^28 took gigabytes and minutes; 65,536 takes about 100 MiB.
/// Beyond it simulate() throws InputError and the tuner keeps the analytical time.
inline constexpr std::int64_t kMaxSimulatedMicrobatches = 65536;

/// Why simulate() refuses `p` before building anything ("has 131072
/// micro-batches per step; ...", to follow the plan's name), or nullopt: more
/// micro-batches than kMaxSimulatedMicrobatches, or more operations than the
/// graph's limit (BuildOptions::op_limit, about 125 bytes each while simulating)
/// however its layers are grouped: a pipeline's graph has a forward and a
/// backward per model chunk and micro-batch (pp 8 × 31 chunks × 32,768
/// micro-batches was 16 M operations, and ran out of memory). A plan under both
/// can still pass the limit while it is built: simulate() then throws
/// GraphTooLarge (graph_builder.hpp).
[[nodiscard]] std::optional<std::string> too_large_to_simulate(const Plan& p, const SimOptions& options = {});

/// The plan must satisfy check_plan(). Throws GraphTooLarge (an InputError)
/// with too_large_to_simulate's reason.
[[nodiscard]] SimResult simulate(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                                 const SimOptions& options = {});

/// predict_time() with the simulated iteration time and breakdown: the
/// drop-in for `--simulate` (ValidationOptions::time, ztune predict).
[[nodiscard]] TimePrediction simulate_time(const Transformer& m, const Plan& p, const Cluster& c,
                                           const HardwareProfile& hw);
/// The same, ended by `stop` as SimOptions::stop is (SimulationStopped): the
/// search's simulate pass, which Ctrl-C stops.
[[nodiscard]] TimePrediction simulate_time_until(const Transformer& m, const Plan& p, const Cluster& c,
                                                 const HardwareProfile& hw, const std::atomic<bool>* stop);

}  // namespace ztune::sim
