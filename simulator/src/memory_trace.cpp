#include "ztune/simulator/memory_trace.hpp"

#include <algorithm>

namespace ztune::sim {
namespace {

struct Change {
  double t = 0;
  double activation = 0;
  double params = 0;
};

}  // namespace

std::vector<StageMemory> stage_memory(const OpGraph& g, const Timeline& t, bool keep_samples) {
  std::vector<std::vector<Change>> changes(static_cast<std::size_t>(g.stages));
  for (OpId v = 0; v < g.size(); ++v) {
    const Op& op = g.ops[v];
    auto& c = changes[static_cast<std::size_t>(op.stage)];
    auto at = [&](double delta, bool positive) { return (delta > 0) == positive ? delta : 0.0; };
    if (op.activation_delta > 0 || op.gathered_param_delta > 0)
      c.push_back({t.start_s[v], at(op.activation_delta, true), at(op.gathered_param_delta, true)});
    if (op.activation_delta < 0 || op.gathered_param_delta < 0)
      c.push_back({t.end_s[v], at(op.activation_delta, false), at(op.gathered_param_delta, false)});
  }
  std::vector<StageMemory> out(static_cast<std::size_t>(g.stages));
  for (std::size_t s = 0; s < out.size(); ++s) {
    auto& c = changes[s];
    // At equal times, frees go first: a buffer freed when one op ends is
    // reusable by the op that starts at that instant.
    std::stable_sort(c.begin(), c.end(), [](const Change& a, const Change& b) {
      if (a.t != b.t) return a.t < b.t;
      return a.activation + a.params < b.activation + b.params;
    });
    StageMemory& m = out[s];
    double act = 0;
    double params = 0;
    if (keep_samples) m.samples.reserve(c.size());
    for (const Change& ch : c) {
      act += ch.activation;
      params += ch.params;
      m.peak_activation_bytes = std::max(m.peak_activation_bytes, act);
      m.peak_gathered_param_bytes = std::max(m.peak_gathered_param_bytes, params);
      m.peak_total_bytes = std::max(m.peak_total_bytes, act + params);
      if (keep_samples) m.samples.push_back({ch.t, act, params});
    }
  }
  return out;
}

}  // namespace ztune::sim
