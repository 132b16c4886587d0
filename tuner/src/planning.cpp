#include "ztune/tuner/planning.hpp"

#include "ztune/simulator/chrome_trace.hpp"
#include "ztune/simulator/simulate.hpp"

namespace ztune {

SimulatedPlan simulate_plan(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                            const TimePrediction& analytical, const std::string& trace_path) {
  const sim::SimResult r = sim::simulate(m, p, c, hw);
  if (!trace_path.empty()) sim::write_chrome_trace_file(trace_path, r);
  SimulatedPlan out;
  out.time = sim::to_time_prediction(r, analytical);
  out.analytical_s = analytical.iteration_s;
  out.operations = r.graph.size();
  out.pacing_stage = r.pacing_stage;
  return out;
}

PublishedRunsReport validate_published_runs(const std::string& dir, ValidationOptions opt, bool simulated) {
  PublishedRunsReport out;
  if (simulated) {
    out.analytical = run_validation(dir, opt);
    opt.time = sim::simulate_time;
  }
  out.report = run_validation(dir, opt);
  return out;
}

}  // namespace ztune
