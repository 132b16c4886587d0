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

/// Why a `ztune run` child that did not exit 0 ended, for the Run panel: a
/// signal that killed it is named (QProcess's exit code of a crashed child is
/// the signal's number), as is one it stopped on (it exits 128 + the signal
/// after ending its ranks: the Stop button's SIGTERM); any other status is the
/// command's own failure.
QString run_ending(int exit_code, bool crashed);

/// "measured 1.23 s per step, predicted 1.10 s (−10.6 %)".
QString compare_run(const MeasuredRun& measured, double predicted_step_s);

}  // namespace ztune::gui
