// Benchmark of the simulator (issue 4 acceptance): one simulated iteration of
// a 1T-parameter GPT (128 layers) with tp 8 × pp 64, 64 micro-batches and the
// interleaved schedule (2 model chunks per stage) on Selene (DGX A100 80GB),
// target < 20 ms on one core. Prints figures; docs/benchmarks.md records them.
//
// Protocol: one warm-up simulation, then the best (minimum) and the median of
// N runs, each timing the whole simulate(): cost lookup, graph build, engine,
// the pacing stage's breakdown and every stage's memory peaks (as the tuner
// and `validate --simulate` run it: no memory samples, no other stages'
// breakdowns), and, separately, the engine alone on the built graph. Times are
// the thread's CPU time (CLOCK_THREAD_CPUTIME_ID), so a machine shared with
// other jobs does not inflate them; wall time is printed beside.
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <vector>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/simulator/event_loop.hpp"
#include "ztune/simulator/simulate.hpp"

namespace {

double cpu_now() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double wall_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main() {
  const ztune::Transformer m = ztune::load_transformer("1t");
  ztune::Cluster c = ztune::load_cluster("selene-3072");
  ztune::Plan p;
  p.tp = 8;
  p.pp = 64;
  p.dp = 1;
  p.virtual_stages = 2;
  p.schedule = ztune::Schedule::interleaved;
  p.micro_batch = 1;
  p.grad_accum = 64;
  p.global_batch = 64;
  p.sequence_parallel = true;
  p.recompute = ztune::Recompute::selective;
  if (auto why = ztune::check_plan(p, m, c)) {
    std::fprintf(stderr, "bench_simulate: plan rejected: %s\n", why->c_str());
    return 1;
  }
  const ztune::HardwareProfile hw = ztune::default_profile_for(c);
  ztune::sim::SimOptions o;
  o.memory_samples = false;
  o.all_stage_breakdowns = false;

  const int runs = 30;
  ztune::sim::SimResult r = ztune::sim::simulate(m, p, c, hw, o);  // warm-up
  std::vector<double> whole;
  std::vector<double> wall;
  std::vector<double> engine;
  for (int i = 0; i < runs; ++i) {
    double c0 = cpu_now();
    const double w0 = wall_now();
    r = ztune::sim::simulate(m, p, c, hw, o);
    whole.push_back(cpu_now() - c0);
    wall.push_back(wall_now() - w0);
    c0 = cpu_now();
    const ztune::sim::Timeline t = ztune::sim::run_event_loop(r.graph);
    engine.push_back(cpu_now() - c0);
    if (t.iteration_s != r.iteration_s) {
      std::fprintf(stderr, "bench_simulate: the engine is not deterministic\n");
      return 1;
    }
  }
  std::sort(whole.begin(), whole.end());
  std::sort(engine.begin(), engine.end());
  std::sort(wall.begin(), wall.end());
  std::printf("simulate: 1t (L128 h25600) tp8 x pp64 x v2 interleaved, 64 micro-batches, on %s\n", c.name.c_str());
  std::printf("  operations %zu, iteration %.3f s (simulated)\n", r.graph.size(), r.iteration_s);
  std::printf("  whole simulate(): best %.2f ms, median %.2f ms CPU time  (%d runs, one thread; wall median %.2f ms)\n",
              whole.front() * 1e3, whole[whole.size() / 2] * 1e3, runs, wall[wall.size() / 2] * 1e3);
  std::printf("  engine alone:     best %.2f ms, median %.2f ms CPU time\n", engine.front() * 1e3,
              engine[engine.size() / 2] * 1e3);
  std::printf("  target < 20 ms per simulation: %s\n", whole[whole.size() / 2] < 0.020 ? "met" : "NOT met");
  return 0;
}
