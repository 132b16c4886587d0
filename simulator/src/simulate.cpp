#include "ztune/simulator/simulate.hpp"

#include <string>

#include "ztune/model/time_model.hpp"
#include "ztune/simulator/model_cost_source.hpp"

namespace ztune::sim {

std::optional<std::string> too_large_to_simulate(const Plan& p, const SimOptions& options) {
  if (p.grad_accum > kMaxSimulatedMicrobatches)
    return "has " + std::to_string(p.grad_accum) + " micro-batches per step; the simulator builds at most " +
           std::to_string(kMaxSimulatedMicrobatches);
  if (const double ops = fewest_ops(p); ops > static_cast<double>(options.build.op_limit))
    return "needs at least " + std::to_string(static_cast<std::int64_t>(ops)) +
           " operations to simulate (a forward and a backward for each of " + std::to_string(p.grad_accum) +
           " micro-batches through " + std::to_string(p.pp * p.model_chunks()) +
           " model chunks); the simulator builds at most " + std::to_string(options.build.op_limit);
  return std::nullopt;
}

SimResult simulate(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                   const SimOptions& options) {
  if (const auto why = too_large_to_simulate(p, options))
    throw GraphTooLarge(p.summary(), *why);
  if (const auto v = oversubscribed_view(p, c)) return simulate(m, p, *v, hw, options);
  const ModelCostSource costs(m, p, c, hw);
  BuildOptions build = options.build;
  build.stop = options.stop;
  return simulate_graph(build_iteration_graph(m.layers, p, placement_of(p, c), costs, build),
                        ResultOptions{options.memory_samples, options.all_stage_breakdowns, options.stop});
}

TimePrediction simulate_time(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw) {
  return simulate_time_until(m, p, c, hw, nullptr);
}

TimePrediction simulate_time_until(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                                   const std::atomic<bool>* stop) {
  SimOptions o;
  o.stop = stop;
  o.memory_samples = false;
  o.all_stage_breakdowns = false;
  return to_time_prediction(simulate(m, p, c, hw, o), predict_time(m, p, c, hw));
}

}  // namespace ztune::sim
