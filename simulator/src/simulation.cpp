#include "ztune/simulator/simulation.hpp"

#include <utility>

namespace ztune::sim {

SimResult simulate_graph(OpGraph g, const ResultOptions& options) {
  SimResult r;
  r.graph = std::move(g);
  if (!r.graph.finalized()) finalize_graph(r.graph);
  r.timeline = run_event_loop(r.graph, options.stop);
  r.iteration_s = r.timeline.iteration_s;
  r.pacing_stage = pacing_stage(r.graph, r.timeline);
  r.stages = stage_breakdowns(r.graph, r.timeline, options.all_stage_breakdowns ? -1 : r.pacing_stage);
  r.breakdown = r.stages[static_cast<std::size_t>(r.pacing_stage)];
  r.memory = stage_memory(r.graph, r.timeline, options.memory_samples);
  return r;
}

TimePrediction to_time_prediction(const SimResult& r, const TimePrediction& analytical) {
  TimePrediction t = analytical;
  t.parts = r.breakdown;
  t.iteration_s = r.iteration_s;
  if (r.iteration_s > 0 && analytical.iteration_s > 0) {
    const double speed = analytical.iteration_s / r.iteration_s;
    t.tokens_per_s = analytical.tokens_per_s * speed;
    t.model_tflops_per_gpu = analytical.model_tflops_per_gpu * speed;
    t.hardware_tflops_per_gpu = analytical.hardware_tflops_per_gpu * speed;
    t.mfu = analytical.mfu * speed;
    t.hfu = analytical.hfu * speed;
  }
  return t;
}

}  // namespace ztune::sim
