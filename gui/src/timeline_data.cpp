#include "ztune/gui/timeline_data.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include <QStringList>

#include "ztune/simulator/simulation.hpp"

namespace ztune::gui {
namespace {

// The simulator already says which part of the iteration each operation counts
// towards (sim::time_part_of); the colour follows it.
TimelineKind kind_of(sim::OpKind k) {
  switch (time_part_of(k)) {
    case TimePart::forward: return TimelineKind::forward;
    case TimePart::backward: return TimelineKind::backward;
    case TimePart::recompute: return TimelineKind::recompute;
    case TimePart::optimizer: return TimelineKind::optimizer;
    case TimePart::tp_comm:
    case TimePart::pp_comm:
    case TimePart::cp_comm:
    case TimePart::ulysses_comm:
    case TimePart::dp_comm:
    case TimePart::zero3_gather: return TimelineKind::communication;
    case TimePart::offload_stall: return TimelineKind::offload;
    default: return TimelineKind::other;
  }
}

}  // namespace

QString timeline_kind_label(TimelineKind k) {
  switch (k) {
    case TimelineKind::forward: return QStringLiteral("Forward");
    case TimelineKind::backward: return QStringLiteral("Backward");
    case TimelineKind::recompute: return QStringLiteral("Recompute");
    case TimelineKind::communication: return QStringLiteral("Communication");
    case TimelineKind::offload: return QStringLiteral("Offload");
    case TimelineKind::optimizer: return QStringLiteral("Optimizer");
    case TimelineKind::idle: return QStringLiteral("Idle");
    case TimelineKind::other:
    case TimelineKind::count: break;
  }
  return QStringLiteral("Other");
}

TimelineData timeline_from_simulation(const sim::SimResult& r) {
  TimelineData out;
  out.end_s = r.iteration_s;
  const auto& g = r.graph;
  const std::size_t n = g.size();

  std::vector<int> row_of(g.resources.size(), -1);
  for (std::size_t id = 0; id < n; ++id) row_of[static_cast<std::size_t>(g.op(id).resource)] = 0;
  for (std::size_t res = 0; res < g.resources.size(); ++res) {
    if (row_of[res] < 0) continue;
    row_of[res] = static_cast<int>(out.rows.size());
    const auto& rs = g.resources[res];
    out.rows.push_back({QString::fromStdString(sim::resource_name(rs)), rs.stage,
                        rs.kind == sim::ResourceKind::compute,
                        r.iteration_s > 0 ? r.busy_s(static_cast<int>(res)) / r.iteration_s : 0.0});
  }

  out.items.reserve(n);
  for (std::size_t id = 0; id < n; ++id) {
    const auto& op = g.op(id);
    out.items.push_back({row_of[static_cast<std::size_t>(op.resource)], QString::fromStdString(sim::op_name(op)),
                         kind_of(op.kind), r.timeline.start_s[id], r.timeline.end_s[id]});
  }
  std::sort(out.items.begin(), out.items.end(), [](const TimelineItem& a, const TimelineItem& b) {
    return a.row != b.row ? a.row < b.row : a.start_s < b.start_s;
  });

  // Gaps of each compute stream (it runs one operation at a time, so the items are disjoint).
  const double eps = 1e-12 * std::max(1.0, r.iteration_s);
  std::vector<TimelineItem> idle;
  for (std::size_t i = 0; i < out.items.size();) {
    const int row = out.items[i].row;
    double t = 0;
    for (; i < out.items.size() && out.items[i].row == row; ++i) {
      if (!out.rows[static_cast<std::size_t>(row)].compute) continue;
      if (out.items[i].start_s > t + eps)
        idle.push_back({row, QStringLiteral("idle"), TimelineKind::idle, t, out.items[i].start_s});
      t = std::max(t, out.items[i].end_s);
    }
    if (out.rows[static_cast<std::size_t>(row)].compute && r.iteration_s > t + eps)
      idle.push_back({row, QStringLiteral("idle"), TimelineKind::idle, t, r.iteration_s});
  }
  out.items.insert(out.items.end(), idle.begin(), idle.end());
  std::stable_sort(out.items.begin(), out.items.end(), [](const TimelineItem& a, const TimelineItem& b) {
    return a.row != b.row ? a.row < b.row : a.start_s < b.start_s;
  });
  return out;
}

double TimelineBar::busy_s() const {
  double busy = 0;
  for (double t : time) busy += t;
  return busy;
}

double TimelineBar::occupancy() const {
  const double span = end_s - start_s;
  return span > 0 ? std::clamp(busy_s() / span, 0.0, 1.0) : 1.0;
}

std::vector<TimelineBar> timeline_bars(const TimelineData& d, const TimeAxis& axis, double min_px) {
  std::vector<TimelineBar> bars;
  // Boundaries within rounding count as inside: times accumulated step by step
  // (t += 1 ms) land a few ulps past the edge they stand for.
  const double merge_s = min_px * axis.seconds_per_px() * (1.0 + 1e-9);
  const double edge_s = 1e-12 * std::max({1.0, std::abs(axis.start_s), std::abs(axis.end_s)});
  TimelineBar run;
  auto close = [&] {
    if (run.count == 0) return;
    if (run.count > 1)  // the kind that took most of the run's time names it
      run.kind = static_cast<TimelineKind>(std::max_element(run.time.begin(), run.time.end()) - run.time.begin());
    bars.push_back(run);
    run = {};
  };
  for (std::size_t i = 0; i < d.items.size(); ++i) {
    const TimelineItem& it = d.items[i];
    if (it.end_s < axis.start_s - edge_s || it.start_s > axis.end_s + edge_s) continue;
    const bool narrow = it.end_s - it.start_s < merge_s;
    // An open run holds narrow operations only: a wide one closes as it opens.
    const bool joins = narrow && run.count > 0 && run.row == it.row && it.end_s - run.start_s <= merge_s;
    if (!joins) {
      close();
      run.row = it.row;
      run.kind = it.kind;
      run.start_s = it.start_s;
      run.end_s = it.end_s;
      run.first = i;
    }
    run.end_s = std::max(run.end_s, it.end_s);
    ++run.count;
    run.time[static_cast<std::size_t>(it.kind)] += it.end_s - it.start_s;
    if (!narrow) close();
  }
  close();
  return bars;
}

QString timeline_bar_mix(const TimelineBar& bar) {
  const double total = bar.busy_s();
  QStringList parts;
  for (std::size_t k = 0; k < bar.time.size(); ++k) {
    if (bar.time[k] <= 0 || total <= 0) continue;
    parts << QStringLiteral("%1 %2 %")
                 .arg(timeline_kind_label(static_cast<TimelineKind>(k)).toLower())
                 .arg(std::lround(100 * bar.time[k] / total));
  }
  return parts.join(QStringLiteral(", "));
}

}  // namespace ztune::gui
