#include "ztune/calibration/session_report.hpp"

#include <algorithm>
#include <cmath>

#include "ztune/vocab/text.hpp"

namespace ztune::calibration {

namespace {
double err(double predicted, double measured) { return measured > 0 ? (predicted - measured) / measured : 0; }
}  // namespace

void print_session(std::FILE* out, const SessionResult& r) {
  if (r.micro) {
    print_fitted_values(out, "Microbenchmark fit (robust least squares, relative error, the prior profile as prior)",
                        r.micro->values);
    print_collective_fits(out, r.micro->collectives);
    if (!r.micro->outliers.empty()) {
      std::fprintf(out, "\nOutliers (down-weighted by the robust fit)\n");
      for (const auto& o : r.micro->outliers) std::fprintf(out, "  - %s\n", o.c_str());
    }
    if (!r.micro->dropped.empty()) {
      std::fprintf(out, "\nPoints left out (rounds too spread after re-measuring)\n");
      for (const auto& d : r.micro->dropped) std::fprintf(out, "  - %s\n", d.c_str());
    }
  }
  if (!r.run_fit.values.empty())
    print_fitted_values(out,
                        "Run fit (Levenberg-Marquardt on iteration time, " + std::to_string(r.run_fit.iterations) +
                            " iterations; " + std::to_string(r.run_fit.refined.size()) +
                            " parameter(s) determined by the runs)",
                        r.run_fit.values);
  print_notes(out, r.notes);
  print_run_comparisons(out, r.rows);
  if (r.cv.runs_judged) {
    std::fprintf(out, "\nLeave-one-run-out: each run predicted by a fit on the others\n");
    std::size_t label_w = display_width("run"), plan_w = display_width("plan");
    for (const auto& h : r.cv.runs) {
      label_w = std::max(label_w, display_width(h.label));
      plan_w = std::max(plan_w, display_width(h.plan));
    }
    std::fprintf(out, "  %s %s %10s %17s %17s\n", pad_right("run", label_w).c_str(), pad_right("plan", plan_w).c_str(),
                 "measured", "in place (err)", "held out (err)");
    for (const auto& h : r.cv.runs)
      std::fprintf(out, "  %s %s %9.4fs %9.4fs %+6.1f%% %9.4fs %+6.1f%%\n", pad_right(h.label, label_w).c_str(),
                   pad_right(h.plan, plan_w).c_str(), h.measured_s, h.previous_s, 100 * err(h.previous_s, h.measured_s),
                   h.candidate_s, 100 * err(h.candidate_s, h.measured_s));
    std::fprintf(out, "  mean |error| on held-out runs: in place %.1f%%, fitted %.1f%%\n", 100 * r.cv.previous_run_error,
                 100 * r.cv.candidate_run_error);
  }
  if (r.cv.points_judged)
    std::fprintf(out,
                 "\nHeld-out microbenchmark points (5-fold): median |ln(predicted/measured)| in place %.3f, fitted %.3f "
                 "(%d points)\n",
                 r.cv.previous_points.median_abs_log_error, r.cv.candidate_points.median_abs_log_error,
                 r.cv.candidate_points.points);
  if (!r.reference.empty()) {
    std::fprintf(out, "\nReference plans: iteration time, the prior profile vs fitted (refused beyond the factor, either way)\n");
    std::size_t model_w = display_width("model"), plan_w = display_width("plan");
    for (const auto& p : r.reference) {
      model_w = std::max(model_w, display_width(p.model));
      plan_w = std::max(plan_w, display_width(p.plan));
    }
    std::fprintf(out, "  %s %s %14s %14s %8s\n", pad_right("model", model_w).c_str(), pad_right("plan", plan_w).c_str(),
                 "prior", "fitted", "ratio");
    for (const auto& p : r.reference)
      std::fprintf(out, "  %s %s %13.4gs %13.4gs %7.3fx\n", pad_right(p.model, model_w).c_str(),
                   pad_right(p.plan, plan_w).c_str(),
                   p.prior_s, p.candidate_s, p.ratio());
  }
  if (r.noise) std::fprintf(out, "\nMachine: %s\n", r.noise->summary.c_str());
}

void print_verdict(std::FILE* out, const SessionResult& r, bool forced) {
  for (const auto& n : r.verdict.notes) std::fprintf(out, "  judged: %s\n", n.c_str());
  if (r.verdict.accept) {
    std::fprintf(out, "verdict: the fitted profile predicts better than the profile in place: it replaces it\n");
    return;
  }
  std::fprintf(out, "verdict: %s\n", forced ? "refused, but written anyway (--force):" : "refused; the profile in place is kept:");
  for (const auto& why : r.verdict.reasons) std::fprintf(out, "  - %s\n", why.c_str());
}

nlohmann::json session_json(const SessionResult& r) {
  nlohmann::json j;
  if (r.micro) {
    j["microbenchmark_fit"] = fitted_values_json(r.micro->values);
    j["collectives"] = collective_fits_json(r.micro->collectives);
    j["outliers"] = r.micro->outliers;
    j["dropped_points"] = r.micro->dropped;
  }
  j["run_fit"] = fitted_values_json(r.run_fit.values);
  j["run_fit_refined"] = r.run_fit.refined;
  j["run_fit_held_at_prior"] = r.run_fit.held_at_prior;
  j["runs"] = run_comparisons_json(r.rows);
  j["mean_abs_error"] = {{"fitted", {{"before", mean_abs_error(r.rows, false, 0)},
                                     {"micro_fit", mean_abs_error(r.rows, false, 1)},
                                     {"after", mean_abs_error(r.rows, false, 2)}}},
                         {"held_out", {{"before", mean_abs_error(r.rows, true, 0)},
                                       {"micro_fit", mean_abs_error(r.rows, true, 1)},
                                       {"after", mean_abs_error(r.rows, true, 2)}}}};
  nlohmann::json loo = nlohmann::json::array();
  for (const auto& h : r.cv.runs)
    loo.push_back({{"run", h.label}, {"plan", h.plan}, {"measured_s", h.measured_s}, {"in_place_s", h.previous_s},
                   {"held_out_s", h.candidate_s}});
  j["cross_validation"] = {{"runs_judged", r.cv.runs_judged},
                           {"leave_one_run_out", loo},
                           {"in_place_run_error", r.cv.previous_run_error},
                           {"held_out_run_error", r.cv.candidate_run_error},
                           {"points_judged", r.cv.points_judged},
                           {"in_place_point_error", r.cv.previous_points.median_abs_log_error},
                           {"held_out_point_error", r.cv.candidate_points.median_abs_log_error}};
  nlohmann::json ref = nlohmann::json::array();
  for (const auto& p : r.reference)
    ref.push_back({{"model", p.model}, {"plan", p.plan}, {"prior_s", p.prior_s}, {"fitted_s", p.candidate_s},
                   {"ratio", p.ratio()}});
  j["reference_plans"] = ref;
  if (r.noise)
    j["machine"] = {{"load_before", r.noise->load_before}, {"load_after", r.noise->load_after},
                    {"cores", r.noise->cores}, {"steal_fraction", r.noise->steal_fraction},
                    {"median_spread", r.noise->median_spread}, {"points", r.noise->points},
                    {"dropped", r.noise->dropped}, {"loaded", r.noise->loaded}, {"noisy", r.noise->noisy},
                    {"summary", r.noise->summary}};
  j["verdict"] = {{"accept", r.verdict.accept}, {"reasons", r.verdict.reasons}, {"notes", r.verdict.notes},
                  {"refused_plans", r.verdict.refused_plans}};
  j["notes"] = r.notes;
  return j;
}

}  // namespace ztune::calibration
