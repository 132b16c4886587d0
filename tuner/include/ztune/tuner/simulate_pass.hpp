#pragma once
// The simulate pass: re-times the best K plans with the discrete-event
// simulator (simulator/) and re-ranks them by the objective; the analytical
// rank is kept for the rest. A stop request ends the pass early and its note
// says so.
#include <cstdint>
#include <functional>
#include <vector>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/candidate.hpp"
#include "ztune/tuner/search_options.hpp"
#include "ztune/tuner/search_pass.hpp"

namespace ztune {

/// Re-times one ranked candidate with the simulator: Candidate::simulated, and
/// its objective on that time (1-bit Adam plans: run-averaged, warm-up
/// included). What the pass does to each plan, and what a reopened search
/// does to the plans its search simulated.
void simulate_candidate(Candidate& cand, const Transformer& m, const Cluster& c, const HardwareProfile& hw,
                        const SearchOptions& o, double tokens);

/// Simulates the first min(K, plans.size()) plans (K = o.simulate_top) when
/// `stats.enabled`, fills Candidate::simulated and re-sorts those K by the
/// objective; the rest keep their analytical order after them.
/// `simulated(done, k)` is called after each plan (a long pass's progress line).
void simulate_top(const Transformer& m, const Cluster& c, const HardwareProfile& hw, const SearchOptions& o,
                  double tokens, std::vector<Candidate>& plans, PassStats& stats,
                  const std::function<void(std::int64_t done, std::int64_t k)>& simulated = {});

}  // namespace ztune
