#pragma once
// Robust relative-error linear least squares for the calibration fits
// (profile_fit.cpp). Timings on a shared machine carry outliers (a rank
// descheduled for a slice), so plain least squares would chase them:
// iteratively reweighted least squares with Cauchy weights on the relative
// residuals (scale = 1.4826 · MAD, the normal-consistent estimate; Holland &
// Welsch 1977), solved each round with Eigen's column-pivoting QR.
#include <vector>

#include <Eigen/Dense>

namespace ztune::fit_detail {

struct LsSolution {
  Eigen::VectorXd x;            // coefficients (0 for dropped columns)
  double rms_rel_residual = 0;  // √(Σ w r² / Σ w), r relative to y
  int points = 0;
};

/// Minimises Σ w_i ((A x)_i − y_i)² / (A x)_i² (relative to the fitted value)
/// with robust weights w. Columns
/// flagged in `nonnegative` are kept ≥ 0 by dropping the most negative one and
/// refitting (an active set; enough for the 1–3 columns these fits have).
/// Rows with y ≤ 0 are ignored.
LsSolution robust_relative_ls(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const std::vector<bool>& nonnegative);

}  // namespace ztune::fit_detail
