#pragma once
// What the timeline view draws: one row per (pipeline stage, resource) that ran
// anything, and one item per operation (plus the idle gaps of each compute
// stream). A value type built from the simulator's result; the view only
// paints it through TimeAxis.
//
// Example: auto t = timeline_from_simulation(sim::simulate_graph(graph)); t.rows[0].label == "stage 0 compute".
#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include <QString>

#include "ztune/gui/time_axis.hpp"

namespace ztune::sim {
struct SimResult;
}

namespace ztune::gui {

/// Colour classes of the Gantt chart.
enum class TimelineKind : std::uint8_t {
  forward,        // forward compute (layers, embedding, head)
  backward,       // backward compute
  recompute,      // recomputed forward
  communication,  // TP/PP/DP collectives, ZeRO-3 gathers, pipeline sends
  offload,        // PCIe and NVMe transfers ("Offload")
  optimizer,      // optimizer step (GPU or host)
  idle,           // a compute stream waiting (pipeline bubble or exposed communication)
  other,          // anything the simulator adds later
  count
};

QString timeline_kind_label(TimelineKind k);

struct TimelineRow {
  QString label;  // "stage 0 compute"
  int stage = 0;
  bool compute = false;
  double busy_fraction = 0;  // the simulator's busy time of this resource / iteration time
};

struct TimelineItem {
  int row = 0;           // index into TimelineData::rows
  QString label;         // the simulator's op name, e.g. "F mb3 L12-13"
  TimelineKind kind = TimelineKind::other;
  double start_s = 0;
  double end_s = 0;
};

struct TimelineData {
  std::vector<TimelineRow> rows;
  std::vector<TimelineItem> items;  // sorted by row, then start
  double end_s = 0;                 // the iteration time
  [[nodiscard]] bool empty() const { return items.empty(); }
};

/// What the Gantt chart paints for the window it shows: one bar per operation
/// when zoomed in, and when zoomed out a run of operations too narrow to see
/// (a 64-micro-batch pipeline's forwards and backwards, 150,000 operations)
/// drawn as one bar per few pixels that carries each kind's share of its time
/// (the widget stacks them: a 1F1B steady state reads as a two-tone band, the
/// warm-up as forwards, the bubble as idle) rather than as noise (issue 23).
struct TimelineBar {
  int row = 0;
  TimelineKind kind = TimelineKind::other;  // the operation's, or the run's dominant kind
  double start_s = 0;
  double end_s = 0;
  std::size_t first = 0;  // index of its first operation in TimelineData::items
  int count = 0;          // operations it stands for (1: the operation itself)
  /// Seconds of each kind inside the bar (a merged run is painted as these shares, stacked).
  std::array<double, static_cast<std::size_t>(TimelineKind::count)> time{};
  /// The share of the bar's span its operations fill (Σ time / span, at most 1):
  /// a merged run of a link's sparse collectives is mostly idle, and the widget
  /// paints it that much lower than a busy stream's (issue 23: at 384
  /// micro-batches the links' 6 %-busy rows were drawn as solid bars).
  [[nodiscard]] double occupancy() const;
  /// Σ time: the seconds its operations take.
  [[nodiscard]] double busy_s() const;
};

/// The bars for `axis`'s window: operations at least `min_px` pixels wide are
/// their own bar; consecutive narrower ones of a row merge while the run spans
/// at most `min_px` pixels. Operations outside the window are left out. Every
/// operation in the window is in exactly one bar; bars of a row do not overlap.
std::vector<TimelineBar> timeline_bars(const TimelineData& d, const TimeAxis& axis, double min_px = 3);

/// A bar's time by kind, for its tooltip: "forward 33 %, backward 67 %".
QString timeline_bar_mix(const TimelineBar& bar);

/// Rows in the simulator's resource order (stage-major); only resources that ran an
/// operation get a row. Idle items fill the gaps of each compute stream in [0, iteration].
TimelineData timeline_from_simulation(const sim::SimResult& r);

}  // namespace ztune::gui
