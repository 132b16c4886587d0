#pragma once
// The microbenchmark points as a profile predicts them: the same formulas the
// fit inverts (profile_fit.hpp, part 1), run forwards. Cross-validation
// (calibration/loop) compares a candidate profile with the one in place on
// points it was not fitted to.
//
// Example: auto e = point_errors(m, cluster, profile); e.median_abs_log_error
#include <map>
#include <string>
#include <vector>

#include "ztune/calibration/profile_fit.hpp"

namespace ztune {

/// One measured point against a profile's prediction of it.
struct PointPrediction {
  std::string section;  // "gemm", "attention", "memory-bound", "copies", "collectives"
  std::size_t index = 0;
  double measured_s = 0;
  double predicted_s = 0;
};

/// Every GEMM, attention, memory-bound, copy and collective point of `m` as
/// (cluster, profile) predicts it, as the fit counts them: memory-bound
/// kernels by memory_work_bytes (a CPU kernel the time model does not price is
/// left out), copies those of copies_in_fit (host Adam is a figure, not a point).
std::vector<PointPrediction> predict_points(const Measurements& m, const Cluster& c, const HardwareProfile& hw);

struct PointErrors {
  int points = 0;
  /// Each section's median over its points of |ln(predicted / measured)|:
  /// robust to the few points a busy machine spoils, symmetric in too slow
  /// and too fast.
  std::map<std::string, double> by_section;
  /// The sections' medians averaged, each section weighing alike. Why not one
  /// median over all points: 75 of a CPU sweep's 143 points are collectives,
  /// whose one-figure fabric model leaves MPI's kinds 0.6 apart in |log|
  /// (broadcast at 9 GB/s busbw, all-reduce at 1.5): a median over all points
  /// sat inside that gap, and which profile it favoured was chance (issue 21's
  /// refusals of fits that halved the held-out runs' error, sessions 16-17).
  double median_abs_log_error = 0;
};
PointErrors point_errors(const std::vector<PointPrediction>& p);
inline PointErrors point_errors(const Measurements& m, const Cluster& c, const HardwareProfile& hw) {
  return point_errors(predict_points(m, c, hw));
}

/// The measurements split into `folds` parts (every folds-th point of each
/// section, offset `fold`): `take` true keeps that part, false the rest.
Measurements measurement_fold(const Measurements& m, int folds, int fold, bool take);

}  // namespace ztune
