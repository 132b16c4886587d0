#pragma once
// The microbenchmark points as a profile predicts them: the same formulas the
// fit inverts (profile_fit.hpp, part 1), run forwards. Cross-validation
// (calibration/loop) compares a candidate profile with the one in place on
// points it was not fitted to.
//
// Example: auto e = point_errors(m, cluster, profile); e.median_abs_log_error
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
/// (cluster, profile) predicts it (host Adam is a figure, not a point).
std::vector<PointPrediction> predict_points(const Measurements& m, const Cluster& c, const HardwareProfile& hw);

struct PointErrors {
  int points = 0;
  /// Median over points of |ln(predicted / measured)|: robust to the few
  /// points a busy machine spoils, symmetric in too slow and too fast.
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
