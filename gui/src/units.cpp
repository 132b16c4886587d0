#include "ztune/gui/units.hpp"

#include <cmath>

namespace ztune::gui {
namespace {

constexpr double kKiB = 1024.0;

QString fixed(double v, int decimals) { return QString::number(v, 'f', decimals); }

/// One decimal below 100, none above: "12.3", "123".
QString three_digits(double v) { return fixed(v, std::fabs(v) < 100 ? 1 : 0); }

/// Three significant figures: "5.15", "51.5", "515". Counts a few percent
/// apart (5,149 and 5,083 tokens/s in the plans table) must not read the same.
QString three_figures(double v) {
  const double a = std::fabs(v);
  return fixed(v, a < 10 ? 2 : a < 100 ? 1 : 0);
}

}  // namespace

double to_gib(double bytes) { return bytes / (kKiB * kKiB * kKiB); }

QString format_bytes(double bytes) {
  const double a = std::fabs(bytes);
  if (a >= kKiB * kKiB * kKiB * kKiB) return fixed(bytes / (kKiB * kKiB * kKiB * kKiB), 2) + " TiB";
  if (a >= kKiB * kKiB * kKiB) return fixed(bytes / (kKiB * kKiB * kKiB), 1) + " GiB";
  if (a >= kKiB * kKiB) return fixed(bytes / (kKiB * kKiB), 1) + " MiB";
  if (a >= kKiB) return fixed(bytes / kKiB, 1) + " KiB";
  return fixed(bytes, 0) + " B";
}

QString format_duration(double seconds) {
  if (!std::isfinite(seconds)) return QStringLiteral("∞");
  const double a = std::fabs(seconds);
  if (a == 0) return QStringLiteral("0 s");
  if (a >= 86400) return format_days(seconds / 86400);
  // Three significant digits below ten of a unit: the plan table ranks by
  // these, and 75.3 s and 76.8 s had both read "1.3 min" (audit50gui L3).
  if (a >= 3600) return fixed(seconds / 3600, a < 36000 ? 2 : 1) + " h";
  if (a >= 60) return fixed(seconds / 60, a < 600 ? 2 : 1) + " min";
  if (a >= 1) return fixed(seconds, 2) + " s";
  if (a >= 1e-3) return three_digits(seconds * 1e3) + " ms";
  return fixed(seconds * 1e6, 0) + " µs";
}

QString format_time_tick(double t_s, double step_s) {
  double scale = 1;
  const char* unit = " s";
  // The largest unit in which the step is at least 0.5: ticks read "2.5 s", not "2500 ms".
  if (step_s < 5e-4) {
    scale = 1e6;
    unit = " µs";
  } else if (step_s < 0.5) {
    scale = 1e3;
    unit = " ms";
  }
  const double step = step_s * scale;
  // Enough decimals to tell neighbouring ticks apart (a 0.5 ms step needs one).
  int decimals = 0;
  while (decimals < 6 && std::fabs(step * std::pow(10.0, decimals) - std::round(step * std::pow(10.0, decimals))) > 1e-6)
    ++decimals;
  double v = t_s * scale;
  if (std::fabs(v) < 0.5 * std::pow(10.0, -decimals)) v = 0;  // no "-0"
  return QString::number(v, 'f', decimals) + QString::fromUtf8(unit);
}

QString format_days(double days) {
  if (!std::isfinite(days)) return QStringLiteral("∞");
  // Down to the minutes and seconds a tiny model's budget takes ("0.0 h" said
  // nothing, issue 23).
  const double hours = days * 24;
  if (std::fabs(hours) < 1.0 / 60) return fixed(hours * 3600, 1) + " s";
  if (std::fabs(hours) < 1) return fixed(hours * 60, 1) + " min";
  if (std::fabs(days) < 1) return fixed(hours, 1) + " h";
  return three_digits(days) + (std::fabs(days - 1) < 0.05 ? " day" : " days");
}

QString format_tflops(double tflops) {
  // CPU ranks and tiny models run at GFLOP/s (or MFLOP/s): scaled, not "0.0 TFLOP/s".
  const double a = std::fabs(tflops);
  if (a > 0 && a < 1e-3) return three_digits(tflops * 1e6) + " MFLOP/s";
  if (a > 0 && a < 1) return three_digits(tflops * 1e3) + " GFLOP/s";
  return three_digits(tflops) + " TFLOP/s";
}

QString format_tokens_per_s(double tokens_per_s) {
  const double a = std::fabs(tokens_per_s);
  if (a >= 1e6) return fixed(tokens_per_s / 1e6, 2) + " M tokens/s";
  // Three significant digits: plans a few percent apart must not read the same
  // in the ranked table ("1.2 k" for both 1,151 and 1,249 tokens/s).
  if (a >= 1e4) return three_digits(tokens_per_s / 1e3) + " k tokens/s";
  if (a >= 1e3) return fixed(tokens_per_s / 1e3, 2) + " k tokens/s";
  return fixed(tokens_per_s, 0) + " tokens/s";
}

QString format_percent(double fraction) { return fixed(fraction * 100, 1) + " %"; }

QString format_count(double n) {
  const double a = std::fabs(n);
  if (a >= 1e12) return three_figures(n / 1e12) + " T";
  if (a >= 1e9) return three_figures(n / 1e9) + " B";
  if (a >= 1e6) return three_figures(n / 1e6) + " M";
  if (a >= 1e3) return three_figures(n / 1e3) + " k";
  return fixed(n, 0);
}

}  // namespace ztune::gui
