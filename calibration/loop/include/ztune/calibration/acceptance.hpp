#pragma once
// A fit must earn its place (issue 21): before a calibrated profile replaces
// the one in place, it is cross-validated — leave-one-run-out on the measured
// training runs, k-fold on the microbenchmark points — and compared with the
// profile in place on the same held-out measurements; and its predictions of
// the catalog's reference plans must stay within a stated factor of those of
// the profile it started from (the prior: shipped, or the one in place). decide() turns that into a verdict with its reasons.
//
// Example:
//   CalibrationInputs in{&m, runs, prior_cluster, prior, previous_cluster, previous};
//   CrossValidation cv = cross_validate(in);
//   auto ref = check_reference_plans(prior_cluster, prior, candidate_cluster, candidate);
//   Verdict v = decide(cv, ref, {});
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ztune/calibration/point_model.hpp"
#include "ztune/calibration/profile_fit.hpp"

namespace ztune::calibration {

/// What a calibration learns from, and the profiles it starts from and must beat.
struct CalibrationInputs {
  const Measurements* measurements = nullptr;  // microbenchmarks (null: none)
  std::vector<RunObservation> runs;            // training runs the fit learns from
  Cluster prior_cluster;                       // the fit's start (with the prior's measured figures)
  HardwareProfile prior;
  Cluster previous_cluster;                    // the profile in place (what is replaced)
  HardwareProfile previous;
  RunFitOptions run_options;
  int point_folds = 5;
};

/// A fitted profile and the cluster it prices.
struct CandidateProfile {
  HardwareProfile profile;
  Cluster cluster;
};

/// One run predicted by a fit that did not see it, and by the profile in place.
struct HeldOutRun {
  std::string label;
  std::string plan;
  double measured_s = 0;
  double previous_s = 0;
  double candidate_s = 0;  // fitted on every other run
};

struct CrossValidation {
  std::vector<HeldOutRun> runs;
  bool runs_judged = false;          // at least two runs: leave-one-run-out is possible
  double previous_run_error = 0;     // mean |error| of the profile in place on the runs
  double candidate_run_error = 0;    // mean |error| of the held-out predictions
  bool points_judged = false;        // microbenchmarks were given
  PointErrors previous_points;       // the profile in place on every point
  PointErrors candidate_points;      // each point predicted by a fit on the other folds
  double point_noise = 0;            // the points' median spread (IQR / median of their rounds)
};

CrossValidation cross_validate(const CalibrationInputs& in);

/// One reference plan: its iteration as the prior profile and as the
/// candidate predict it.
struct ReferencePlanCheck {
  std::string model;
  std::string plan;
  double prior_s = 0;
  double candidate_s = 0;
  [[nodiscard]] double ratio() const { return prior_s > 0 ? candidate_s / prior_s : 0; }
  /// How far the candidate moved this plan, as a factor >= 1 (infinite when
  /// either prediction is not a positive finite time).
  [[nodiscard]] double factor_off() const {
    const double q = ratio();
    return q > 0 && std::isfinite(q) ? std::max(q, 1 / q) : std::numeric_limits<double>::infinity();
  }
  /// The acceptance rule's test: the candidate within [1/f, f] of the prior.
  [[nodiscard]] bool within_factor(double f) const { return factor_off() <= f; }
};

/// The catalog's reference plans for a cluster: the models tiny, gpt2-1.5b
/// and llama-7b (those the catalog has), each pure data parallel over every
/// device and, where the heads divide, tensor parallel over two (micro-batch
/// 1, no accumulation; fp32 on CPU ranks, bf16 on GPUs). A profile that
/// predicts one of them more than a factor off its prior has
/// learned something the microbenchmarks and runs cannot justify.
std::vector<ReferencePlanCheck> check_reference_plans(const Cluster& prior_cluster, const HardwareProfile& prior,
                                                      const Cluster& candidate_cluster,
                                                      const HardwareProfile& candidate);

struct DecisionRules {
  double reference_factor = 2.0;  // refuse beyond this ratio, either way
};

struct Verdict {
  bool accept = false;
  std::vector<std::string> reasons;       // why it is refused (empty when accepted)
  std::vector<std::string> notes;         // how it was judged
  std::vector<std::string> refused_plans; // reference plans beyond the factor
};

/// Accepts the candidate only when it predicts the held-out runs and points
/// better than the profile in place (each set judged where it exists; points
/// worse by less than their repeatability, ln(1 + median spread), pass when
/// the runs are better) and
/// every reference plan within the factor. A single run cannot be left out:
/// it must be predicted no worse in sample, and the verdict says so.
/// `in_sample_before/after`: mean |error| on the runs learned from.
Verdict decide(const CrossValidation& cv, const std::vector<ReferencePlanCheck>& reference, const DecisionRules& rules,
               double in_sample_before, double in_sample_after, std::size_t runs);

}  // namespace ztune::calibration
