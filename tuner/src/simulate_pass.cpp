#include "ztune/tuner/simulate_pass.hpp"

#include <algorithm>

#include "ztune/tuner/search.hpp"

namespace ztune {

// The simulator library (simulator/) has not landed a simulate() entry point
// yet: the pass reports that instead of inventing a time.
bool simulator_available() { return false; }

void simulate_top(const Transformer& /*m*/, const Cluster& /*c*/, const HardwareProfile& /*hw*/,
                  const SearchOptions& o, double /*tokens*/, std::vector<Candidate>& plans, PassStats& stats) {
  if (!stats.enabled) return;
  const auto k = std::min<std::size_t>(static_cast<std::size_t>(std::max(0, o.simulate_top)), plans.size());
  stats.in = static_cast<std::int64_t>(k);
  if (!simulator_available()) {
    stats.note = "simulator not available";
    stats.out = 0;
    return;
  }
}

}  // namespace ztune
