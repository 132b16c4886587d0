#include "ztune/calibration/acceptance.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune::calibration {

namespace {

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100 * v);
  return buf;
}
double rel_error(double predicted, double measured) {
  return measured > 0 ? std::abs(predicted - measured) / measured : 0.0;
}

// The microbenchmark fit (or the prior when there are no measurements); with
// `median_spread`, the measured points' median spread too.
CandidateProfile micro_fit(const CalibrationInputs& in, const Measurements* m, double* median_spread = nullptr) {
  if (m == nullptr) return {in.prior, in.prior_cluster};
  const ProfileFit f = fit_profile(*m, in.prior_cluster, in.prior, in.prior.name);
  if (median_spread != nullptr) *median_spread = f.median_spread;
  return {f.profile, f.cluster};
}

CandidateProfile runs_on(const CandidateProfile& start, const std::vector<RunObservation>& runs,
                         const RunFitOptions& o) {
  if (runs.empty()) return start;
  const RunFit f = fit_profile_to_runs(runs, start.cluster, start.profile, o);
  return {f.profile, f.cluster};
}

}  // namespace

CrossValidation cross_validate(const CalibrationInputs& in) {
  CrossValidation cv;
  const CandidateProfile micro = micro_fit(in, in.measurements, &cv.point_noise);
  // Leave one run out: the candidate is refitted on the others (from the same
  // microbenchmark fit) and predicts the one it did not see.
  cv.runs_judged = in.runs.size() >= 2;
  for (std::size_t i = 0; i < in.runs.size(); ++i) {
    const RunObservation& r = in.runs[i];
    HeldOutRun h;
    h.label = r.label;
    h.plan = r.plan.summary();
    h.measured_s = r.measured_iteration_s;
    h.previous_s = predict_time(r.model, r.plan, in.previous_cluster, in.previous).iteration_s;
    if (cv.runs_judged) {
      std::vector<RunObservation> others;
      for (std::size_t j = 0; j < in.runs.size(); ++j)
        if (j != i) others.push_back(in.runs[j]);
      const CandidateProfile c = runs_on(micro, others, in.run_options);
      h.candidate_s = predict_time(r.model, r.plan, c.cluster, c.profile).iteration_s;
    }
    cv.runs.push_back(h);
  }
  if (cv.runs_judged) {
    for (const auto& h : cv.runs) {
      cv.previous_run_error += rel_error(h.previous_s, h.measured_s);
      cv.candidate_run_error += rel_error(h.candidate_s, h.measured_s);
    }
    cv.previous_run_error /= static_cast<double>(cv.runs.size());
    cv.candidate_run_error /= static_cast<double>(cv.runs.size());
  }
  // k-fold on the points: each fold predicted by a fit on the others.
  if (in.measurements != nullptr) {
    const Measurements& m = *in.measurements;
    cv.previous_points = point_errors(m, in.previous_cluster, in.previous);
    const int folds = std::max(2, in.point_folds);
    std::vector<PointPrediction> held;
    for (int k = 0; k < folds; ++k) {
      const Measurements train = measurement_fold(m, folds, k, false);
      const Measurements test = measurement_fold(m, folds, k, true);
      const CandidateProfile c = micro_fit(in, &train);
      const auto p = predict_points(test, c.cluster, c.profile);
      held.insert(held.end(), p.begin(), p.end());
    }
    cv.candidate_points = point_errors(held);
    cv.points_judged = cv.candidate_points.points > 0;
  }
  return cv;
}

std::vector<ReferencePlanCheck> check_reference_plans(const Cluster& prior_cluster, const HardwareProfile& prior,
                                                      const Cluster& candidate_cluster,
                                                      const HardwareProfile& candidate) {
  std::vector<ReferencePlanCheck> out;
  const int n = std::max(1, prior_cluster.total_devices());
  const Precision precision = prior_cluster.device_kind == DeviceKind::cpu ? Precision::fp32 : Precision::bf16;
  const std::vector<std::string> available = catalog_names("models");
  for (const char* name : {"tiny", "gpt2-1.5b", "llama-7b"}) {
    if (std::find(available.begin(), available.end(), name) == available.end()) continue;
    const Transformer model = load_transformer(name);
    std::vector<std::pair<int, int>> layouts{{n, 1}};  // (dp, tp)
    if (n >= 2 && n % 2 == 0 && model.heads % 2 == 0 && model.kv_heads % 2 == 0) layouts.emplace_back(n / 2, 2);
    for (const auto& [dp, tp] : layouts) {
      Plan p;
      p.dp = dp;
      p.tp = tp;
      p.micro_batch = 1;
      p.grad_accum = 1;
      p.global_batch = dp;
      p.precision = precision;
      ReferencePlanCheck r;
      r.model = name;
      r.plan = p.summary();
      try {
        r.prior_s = predict_time(model, p, prior_cluster, prior).iteration_s;
        r.candidate_s = predict_time(model, p, candidate_cluster, candidate).iteration_s;
      } catch (const InputError&) {
        continue;  // a plan this cluster cannot express (checked for every cluster alike)
      }
      out.push_back(r);
    }
  }
  return out;
}

Verdict decide(const CrossValidation& cv, const std::vector<ReferencePlanCheck>& reference, const DecisionRules& rules,
               double in_sample_before, double in_sample_after, std::size_t runs) {
  Verdict v;
  for (const auto& r : reference) {
    if (!r.within_factor(rules.reference_factor))
      v.refused_plans.push_back(r.model + " " + r.plan + " (" + formatted("%.4g", r.candidate_s) + " s vs the prior's " +
                                formatted("%.4g", r.prior_s) + " s, " + formatted("%.3g", r.ratio()) + "x)");
  }
  if (!v.refused_plans.empty()) {
    std::string list;
    for (const auto& p : v.refused_plans) list += (list.empty() ? "" : "; ") + p;
    v.reasons.push_back("its predictions differ from those of the profile it started from by more than " +
                        formatted("%.3g", rules.reference_factor) + "x on " + std::to_string(v.refused_plans.size()) +
                        " reference plan(s): " + list);
  }
  if (cv.runs_judged) {
    const std::string line = "held-out runs (leave-one-run-out, " + std::to_string(cv.runs.size()) +
                             " runs): mean |error| " + pct(cv.candidate_run_error) + " fitted vs " +
                             pct(cv.previous_run_error) + " with the profile in place";
    if (cv.candidate_run_error < cv.previous_run_error) v.notes.push_back(line);
    else v.reasons.push_back("it does not predict the held-out runs better: " + line);
  }
  if (cv.points_judged) {
    // When the held-out runs (the target) say the fit is better, points worse
    // by less than their own repeatability do not veto it: a median |log
    // error| 0.019 above the profile in place, measured with rounds 2 % apart,
    // refused a fit that cut the runs' error from 17.9 to 5.3 % (clean-clone
    // run, session 17). Without that evidence the points are judged strictly
    // (a refit on the same points is refused).
    const bool runs_better = cv.runs_judged && cv.candidate_run_error < cv.previous_run_error;
    const double margin = runs_better ? std::log1p(std::max(0.0, cv.point_noise)) : 0.0;
    std::string sections;
    for (const auto& [section, e] : cv.candidate_points.by_section) {
      const auto before = cv.previous_points.by_section.find(section);
      sections += (sections.empty() ? "; " : ", ") + section + " " + formatted("%.3f", e) +
                  (before == cv.previous_points.by_section.end() ? "" : " vs " + formatted("%.3f", before->second));
    }
    const std::string line = "held-out microbenchmark points (" + std::to_string(cv.candidate_points.points) +
                             ", 5-fold): median |log error|, sections alike, " +
                             formatted("%.3f", cv.candidate_points.median_abs_log_error) + " fitted vs " +
                             formatted("%.3f", cv.previous_points.median_abs_log_error) + " with the profile in place" +
                             sections +
                             (margin > 0 ? " (allowed " + formatted("%.3f", margin) + " more: the points' repeatability)" : "");
    if (cv.candidate_points.median_abs_log_error <= cv.previous_points.median_abs_log_error + margin)
      v.notes.push_back(line);
    else
      v.reasons.push_back("it does not predict the held-out microbenchmark points better: " + line);
  }
  if (runs > 0 && !cv.runs_judged) {
    // One run cannot be left out: the microbenchmark points may be judged,
    // but the run only in sample, which the points cannot vouch for (a refit
    // on the run the profile in place learned from predicts it as well, not
    // better: a tenth of a point is allowed).
    if (in_sample_after <= in_sample_before + 1e-3)
      v.notes.push_back("the run is not cross-validated: one run cannot be left out; judged on its in-sample error (" +
                        pct(in_sample_before) + " -> " + pct(in_sample_after) + ") and the reference plans");
    else
      v.reasons.push_back("it does not predict the run it learned from better (" + pct(in_sample_before) + " -> " +
                          pct(in_sample_after) + ")");
  } else if (runs == 0 && !cv.points_judged) {
    v.reasons.push_back("nothing was measured to learn from");
  }
  v.accept = v.reasons.empty();
  return v;
}

}  // namespace ztune::calibration
