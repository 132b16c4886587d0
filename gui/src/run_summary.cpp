#include "ztune/gui/run_summary.hpp"

#include <algorithm>
#include <csignal>

#include "ztune/gui/units.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune::gui {
MeasuredRun measured_run(const RunRecord& record) {
  MeasuredRun r;
  if (!record.steps.empty()) r.step_time_s = record.step_time_s;
  r.losses = record.losses;
  for (const double b : record.peak_memory_bytes) r.peak_memory_bytes = std::max(r.peak_memory_bytes.value_or(0.0), b);
  return r;
}

QString run_ending(int exit_code, bool crashed) {
  const auto name = [](int sig) { return QString::fromStdString(signal_name(sig)); };
  if (crashed) return QStringLiteral("ztune run was killed by %1 (signal %2)").arg(name(exit_code)).arg(exit_code);
  // `ztune run` answers SIGINT, SIGTERM and SIGHUP by ending its ranks and exiting 128 + the signal.
  for (const int sig : {SIGINT, SIGTERM, SIGHUP})
    if (exit_code == 128 + sig)
      return QStringLiteral("ztune run was interrupted by %1 and ended its ranks (exit %2)")
          .arg(name(sig))
          .arg(exit_code);
  return QStringLiteral("ztune run failed (exit %1)").arg(exit_code);
}

QString compare_run(const MeasuredRun& measured, double predicted_step_s) {
  if (!measured.step_time_s) return QStringLiteral("the run printed no step time");
  const double m = *measured.step_time_s;
  QString s = QStringLiteral("measured %1 per step, predicted %2").arg(format_duration(m), format_duration(predicted_step_s));
  if (m > 0) {
    const double err = (predicted_step_s - m) / m;
    s += QStringLiteral(" (%1%2 off)").arg(err >= 0 ? "+" : "").arg(format_percent(err));
  }
  return s;
}

}  // namespace ztune::gui
