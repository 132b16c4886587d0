#include "ztune/tuner/simulate_pass.hpp"

#include <algorithm>
#include <chrono>
#include <string>

#include "ztune/simulator/simulate.hpp"
#include "ztune/tuner/objective.hpp"
#include "ztune/tuner/search.hpp"

namespace ztune {

void simulate_candidate(Candidate& cand, const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                        const SearchOptions& o, double tokens) {
  // simulate_time(): the analytical prediction with the simulated iteration
  // time and breakdown, throughput and MFU rescaled to it.
  cand.simulated = sim::simulate_time_until(m, cand.plan, c, hw, o.stop);
  // The simulator times the compression phase too; the warm-up share is the model's.
  cand.objective = objective_value(o.objective, run_averaged(*cand.simulated, onebit_run_factor(m, cand.plan, c, hw)),
                                   cand.plan.gpus(), tokens, o.gpu_hour_price);
}

void simulate_top(const Transformer& m, const Cluster& c, const HardwareProfile& hw, const SearchOptions& o,
                  double tokens, std::vector<Candidate>& plans, PassStats& stats,
                  const std::function<void(std::int64_t done, std::int64_t k)>& simulated) {
  if (!stats.enabled) return;
  const auto k = std::min<std::size_t>(static_cast<std::size_t>(std::max(0, o.simulate_top)), plans.size());
  const auto t0 = std::chrono::steady_clock::now();
  stats.in = static_cast<std::int64_t>(k);
  std::size_t done = 0;
  for (; done < k; ++done) {
    if (o.stop != nullptr && o.stop->load()) break;
    Candidate& cand = plans[done];
    if (!cand.timed) break;  // unranked plans have no analytical time to refine
    // Bounded work whatever the batch: a plan the simulator does not build
    // (too many micro-batches, or operations, before or while it is built)
    // and the plans after it keep their analytical time. Any other input
    // error (a profile's non-finite duration) still ends the search.
    auto keep_analytical = [&](const std::string& why) {
      stats.note = "plan " + std::to_string(done + 1) + " (" + cand.plan.summary() + ") " + why +
                   ": it and the plans after it keep their analytical times";
    };
    if (const auto why = sim::too_large_to_simulate(cand.plan)) {
      keep_analytical(*why);
      break;
    }
    try {
      simulate_candidate(cand, m, c, hw, o, tokens);
    } catch (const sim::GraphTooLarge& e) {
      keep_analytical(e.reason());
      break;
    } catch (const sim::SimulationStopped&) {
      break;  // a stop inside a large plan's simulation: it keeps its analytical time
    }
    if (simulated) simulated(static_cast<std::int64_t>(done + 1), static_cast<std::int64_t>(k));
  }
  stats.out = static_cast<std::int64_t>(done);
  if (done < k && stats.note.empty()) stats.note = "stopped after " + std::to_string(done) + " of " + std::to_string(k);
  // The simulated plans, re-ranked by the objective on their simulated time, lead.
  std::stable_sort(plans.begin(), plans.begin() + static_cast<std::ptrdiff_t>(done),
                   [&](const Candidate& a, const Candidate& b) { return ranks_before(o.objective, a, b); });
  stats.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace ztune
