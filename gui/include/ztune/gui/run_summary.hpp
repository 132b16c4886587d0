#pragma once
// What `ztune run --json` printed, against what the cost model predicted.
#include <optional>
#include <vector>

#include <QByteArray>
#include <QString>

namespace ztune::gui {

struct MeasuredRun {
  std::optional<double> step_time_s;     // median step time
  std::vector<double> losses;            // one per step
  std::optional<double> peak_memory_bytes;  // largest over the ranks
};

/// Parses the JSON summary `ztune run --json` prints (the whole output, or its
/// last line that starts with '{'); nullopt when there is none.
std::optional<MeasuredRun> parse_run_summary(const QByteArray& stdout_text);

/// "measured 1.23 s per step, predicted 1.10 s (−10.6 %)".
QString compare_run(const MeasuredRun& measured, double predicted_step_s);

}  // namespace ztune::gui
