#pragma once
// What the timeline view draws: one row per (pipeline stage, resource) that ran
// anything, and one item per operation (plus the idle gaps of each compute
// stream). A value type built from the simulator's result; the view only
// paints it through TimeAxis.
//
// Example: auto t = timeline_from_simulation(sim::simulate_graph(graph)); t.rows[0].label == "stage 0 compute".
#include <cstdint>
#include <vector>

#include <QString>

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

/// Rows in the simulator's resource order (stage-major); only resources that ran an
/// operation get a row. Idle items fill the gaps of each compute stream in [0, iteration].
TimelineData timeline_from_simulation(const sim::SimResult& r);

}  // namespace ztune::gui
