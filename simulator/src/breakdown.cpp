#include "ztune/simulator/breakdown.hpp"

#include <algorithm>
#include <limits>

namespace ztune::sim {
namespace {

constexpr OpId kNone = std::numeric_limits<OpId>::max();

std::size_t idx(TimePart p) { return static_cast<std::size_t>(p); }

class Attribution {
 public:
  Attribution(const OpGraph& g, const Timeline& t) : g_(g), t_(t), n_(g.size()) {
    // Reverse adjacency: the breakdown walks from an operation to its inputs.
    offsets_.assign(n_ + 1, 0);
    for (std::size_t v = 0; v < n_; ++v)
      for (auto [b, e] = boost::out_edges(static_cast<std::uint32_t>(v), g.dag()); b != e; ++b)
        ++offsets_[boost::target(*b, g.dag()) + 1];
    for (std::size_t v = 0; v < n_; ++v) offsets_[v + 1] += offsets_[v];
    sources_.resize(offsets_[n_]);
    std::vector<std::size_t> fill(offsets_.begin(), offsets_.end() - 1);
    for (std::size_t v = 0; v < n_; ++v)
      for (auto [b, e] = boost::out_edges(static_cast<std::uint32_t>(v), g.dag()); b != e; ++b)
        sources_[fill[boost::target(*b, g.dag())]++] = v;
    own_.resize(static_cast<std::size_t>(g.stages));
    for (OpId v = 0; v < n_; ++v) {
      const Op& op = g.ops[v];
      own_[static_cast<std::size_t>(op.stage)].push_back(v);
      if (op.peer_stage >= 0 && op.peer_stage != op.stage) own_[static_cast<std::size_t>(op.peer_stage)].push_back(v);
    }
  }

  TimeParts stage(int s) const {
    TimeParts parts{};
    std::vector<OpId> compute;
    OpId last = kNone;
    for (const OpId v : own_[static_cast<std::size_t>(s)]) {
      const Op& op = g_.ops[v];
      if (is_compute(op.kind)) compute.push_back(v);
      if (op.stage == s && (last == kNone || t_.end_s[v] > t_.end_s[last])) last = v;
    }
    // The builder chains a stage's compute in program order, so id order is
    // usually start order already; sort only when it is not.
    auto earlier = [&](OpId a, OpId b) {
      return t_.start_s[a] != t_.start_s[b] ? t_.start_s[a] < t_.start_s[b] : a < b;
    };
    if (!std::is_sorted(compute.begin(), compute.end(), earlier)) std::sort(compute.begin(), compute.end(), earlier);
    double cursor = 0;  // end of the previous compute operation
    for (const OpId v : compute) {
      const Op& op = g_.ops[v];
      charge_gap(s, cursor, t_.start_s[v], v, parts);
      parts[idx(time_part_of(op.kind))] += t_.end_s[v] - t_.start_s[v];
      cursor = std::max(cursor, t_.end_s[v]);
    }
    // After the last compute: what the stage's last operation waited for,
    // then (if the stage ends before the iteration does) bubble.
    if (last != kNone && t_.end_s[last] > cursor) {
      const double end = t_.end_s[last];
      walk(s, cursor, end, last, /*include_self=*/true, parts);
      cursor = end;
    }
    parts[idx(TimePart::bubble)] += std::max(0.0, t_.iteration_s - cursor);
    return parts;
  }

 private:
  const OpGraph& g_;
  const Timeline& t_;
  std::size_t n_;
  std::vector<std::size_t> offsets_;
  std::vector<OpId> sources_;
  std::vector<std::vector<OpId>> own_;  // per stage: its ops and the pipeline sends it receives

  // A stage waits on its own operations and on the pipeline sends it receives.
  bool owned_by(const Op& op, int s) const { return op.stage == s || op.peer_stage == s; }

  OpId latest_input(OpId v) const {
    OpId best = kNone;
    for (std::size_t i = offsets_[v]; i < offsets_[v + 1]; ++i) {
      const OpId u = sources_[i];
      if (best == kNone || t_.end_s[u] > t_.end_s[best] || (t_.end_s[u] == t_.end_s[best] && u > best)) best = u;
    }
    return best;
  }

  void charge_gap(int s, double from, double to, OpId next, TimeParts& parts) const {
    if (to <= from) return;
    walk(s, from, to, next, /*include_self=*/false, parts);
  }

  // Charges [from, to] by walking back from `v` (or from its latest input)
  // along latest-finishing inputs.
  void walk(int s, double from, double to, OpId v, bool include_self, TimeParts& parts) const {
    double cursor = to;
    OpId cur = include_self ? v : latest_input(v);
    while (cur != kNone && cursor > from) {
      const Op& op = g_.ops[cur];
      if (!owned_by(op, s) || is_compute(op.kind)) break;  // another stage's work (bubble) or our own compute
      double& part = parts[idx(time_part_of(op.kind))];
      // A hole after the op ends (its successor queued on a serial resource)
      // is charged to the op's kind too.
      if (t_.end_s[cur] < cursor) {
        const double hole_begin = std::max(from, t_.end_s[cur]);
        part += cursor - hole_begin;
        cursor = hole_begin;
      }
      const double begin = std::max(from, t_.start_s[cur]);
      if (cursor > begin) part += cursor - begin;
      cursor = std::min(cursor, begin);
      cur = latest_input(cur);
    }
    if (cursor > from) parts[idx(TimePart::bubble)] += cursor - from;
  }
};

}  // namespace

std::vector<TimeParts> stage_breakdowns(const OpGraph& g, const Timeline& t, int only) {
  const Attribution a(g, t);
  std::vector<TimeParts> out(static_cast<std::size_t>(g.stages));
  for (int s = 0; s < g.stages; ++s)
    if (only < 0 || s == only) out[static_cast<std::size_t>(s)] = a.stage(s);
  return out;
}

int pacing_stage(const OpGraph& g, const Timeline& t) {
  const auto stages = static_cast<std::size_t>(g.stages);
  std::vector<double> last_end(stages, 0.0);
  std::vector<double> compute(stages, 0.0);
  for (OpId v = 0; v < g.size(); ++v) {
    const Op& op = g.ops[v];
    const auto s = static_cast<std::size_t>(op.stage);
    last_end[s] = std::max(last_end[s], t.end_s[v]);
    if (is_compute(op.kind)) compute[s] += t.end_s[v] - t.start_s[v];
  }
  std::size_t best = 0;
  for (std::size_t s = 1; s < stages; ++s)
    if (last_end[s] > last_end[best] || (last_end[s] == last_end[best] && compute[s] > compute[best])) best = s;
  return static_cast<int>(best);
}

}  // namespace ztune::sim
