#pragma once
// What a `ztune run` measured (its run record), against what the cost model predicted.
#include <optional>
#include <vector>

#include <QString>

#include "ztune/vocab/run_record.hpp"

namespace ztune::gui {

struct MeasuredRun {
  std::optional<double> step_time_s;     // median step time
  std::vector<double> losses;            // one per step
  std::optional<double> peak_memory_bytes;  // largest over the ranks
};

/// The figures of the run record `ztune run --record FILE` wrote, read by the one
/// strict reader (ztune/vocab/run_record.hpp: read_run_record, which refuses a
/// bad record naming the file and JSON path). No step time when it ran no step.
MeasuredRun measured_run(const RunRecord& record);

/// "measured 1.23 s per step, predicted 1.10 s (−10.6 %)".
QString compare_run(const MeasuredRun& measured, double predicted_step_s);

}  // namespace ztune::gui
