#include "ztune/calibration/calibrate_report.hpp"

#include <algorithm>
#include <cmath>

#include "ztune/vocab/text.hpp"

namespace ztune::calibration {

namespace {
double err(double predicted, double measured) { return measured > 0 ? (predicted - measured) / measured : 0; }
}  // namespace

void print_fitted_values(std::FILE* out, const std::string& title, const std::vector<FittedValue>& values) {
  if (values.empty()) return;
  std::fprintf(out, "\n%s\n", title.c_str());
  std::fprintf(out, "  %-40s %12s %12s %-10s %6s %8s  %s\n", "value", "before", "after", "unit", "points", "rms res",
               "set by");
  for (const auto& v : values)
    std::fprintf(out, "  %-40s %12.4g %12.4g %-10s %6d %7.1f%%  %s\n", v.name.c_str(), v.before, v.after,
                 v.unit.c_str(), v.points, 100.0 * v.rms_rel_residual,
                 v.determined ? "data" : "prior (not determined by the data)");
}

void print_collective_fits(std::FILE* out, const std::vector<CollectiveFit>& fits) {
  if (fits.empty()) return;
  std::fprintf(out, "\nCollectives: t = latency + S·busfactor / busbw (per collective and layout)\n");
  std::fprintf(out, "  %-16s %-10s %6s %-6s %12s %12s %6s %8s\n", "collective", "group", "ranks", "level", "latency us",
               "busbw GB/s", "points", "rms res");
  for (const auto& f : fits)
    std::fprintf(out, "  %-16s %-10s %6d %-6s %12.2f %12.3f %6d %7.1f%%\n", f.collective.c_str(), f.group.c_str(),
                 f.ranks, f.crosses_nodes ? "inter" : "intra", f.latency_s * 1e6, f.busbw_gbps, f.points,
                 100.0 * f.rms_rel_residual);
}

void print_notes(std::FILE* out, const std::vector<std::string>& notes) {
  if (notes.empty()) return;
  std::fprintf(out, "\nNotes\n");
  for (const auto& n : notes) std::fprintf(out, "  - %s\n", n.c_str());
}

void print_run_comparisons(std::FILE* out, const std::vector<RunComparison>& rows) {
  std::fprintf(out, "\nIteration time of measured runs: predicted vs measured\n");
  if (rows.empty()) {
    std::fprintf(out, "  (no measured runs for this cluster yet: `ztune run` or `ztune --run` stores some; or pass "
                      "--records FILE...)\n");
    return;
  }
  // Run and plan columns as wide as their longest entry (issue 23: cut at 34
  // bytes, plans lost their ends, "…par→n fit", and a × could be cut in half).
  std::size_t label_w = display_width("run"), plan_w = display_width("plan");
  for (const auto& r : rows) {
    label_w = std::max(label_w, display_width(r.label));
    plan_w = std::max(plan_w, display_width(r.plan));
  }
  std::fprintf(out, "  %s %s %-8s %10s %17s %17s %17s\n", pad_right("run", label_w).c_str(),
               pad_right("plan", plan_w).c_str(), "set", "measured", "in place (err)", "micro fit (err)",
               "fitted (err)");
  for (const auto& r : rows)
    std::fprintf(out, "  %s %s %-8s %9.4fs %9.4fs %+6.1f%% %9.4fs %+6.1f%% %9.4fs %+6.1f%%\n",
                 pad_right(r.label, label_w).c_str(), pad_right(r.plan, plan_w).c_str(), r.held_out ? "held-out" : "fit",
                 r.measured_s, r.before_s, 100 * err(r.before_s, r.measured_s), r.micro_s,
                 100 * err(r.micro_s, r.measured_s), r.after_s, 100 * err(r.after_s, r.measured_s));
  for (bool held : {false, true}) {
    bool any = false;
    for (const auto& r : rows) any = any || r.held_out == held;
    if (!any) continue;
    std::fprintf(out, "  mean |error| on %-12s runs: in place %.1f%%, micro fit %.1f%%, fitted %.1f%%%s\n",
                 held ? "held-out" : "learned-from", 100 * mean_abs_error(rows, held, 0),
                 100 * mean_abs_error(rows, held, 1), 100 * mean_abs_error(rows, held, 2),
                 held ? "" : " (in-sample: the leave-one-run-out figure below is the fair one)");
  }
}

nlohmann::json fitted_values_json(const std::vector<FittedValue>& values) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& v : values)
    a.push_back({{"name", v.name}, {"before", v.before}, {"after", v.after}, {"unit", v.unit}, {"points", v.points},
                 {"rms_rel_residual", v.rms_rel_residual}, {"determined", v.determined}});
  return a;
}

nlohmann::json collective_fits_json(const std::vector<CollectiveFit>& fits) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& f : fits)
    a.push_back({{"collective", f.collective}, {"group", f.group}, {"ranks", f.ranks},
                 {"crosses_nodes", f.crosses_nodes}, {"latency_s", f.latency_s}, {"busbw_gbps", f.busbw_gbps},
                 {"points", f.points}, {"rms_rel_residual", f.rms_rel_residual}});
  return a;
}

nlohmann::json run_comparisons_json(const std::vector<RunComparison>& rows) {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& r : rows)
    a.push_back({{"run", r.label}, {"plan", r.plan}, {"held_out", r.held_out}, {"measured_s", r.measured_s},
                 {"before_s", r.before_s}, {"micro_fit_s", r.micro_s}, {"after_s", r.after_s},
                 {"error_before", err(r.before_s, r.measured_s)}, {"error_micro_fit", err(r.micro_s, r.measured_s)},
                 {"error_after", err(r.after_s, r.measured_s)}});
  return a;
}

double mean_abs_error(const std::vector<RunComparison>& rows, bool held_out, int column) {
  double sum = 0;
  int n = 0;
  for (const auto& r : rows) {
    if (r.held_out != held_out) continue;
    const double p = column == 0 ? r.before_s : column == 1 ? r.micro_s : r.after_s;
    sum += std::abs(err(p, r.measured_s));
    ++n;
  }
  return n > 0 ? sum / n : 0;
}

}  // namespace ztune::calibration
