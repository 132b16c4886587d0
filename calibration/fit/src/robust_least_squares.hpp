#pragma once
// Robust, regularised relative-error linear least squares for the calibration
// fits (profile_fit.cpp). Timings on a shared machine carry outliers (a rank
// descheduled for a slice), so plain least squares would chase them:
// iteratively reweighted least squares with Cauchy weights on the relative
// residuals (scale = 1.4826 · MAD, the normal-consistent estimate; Holland &
// Welsch 1977), solved each round with Eigen's column-pivoting QR.
//
// The prior (issue 21): each column may carry a Gaussian prior x0 ± σ (the
// shipped profile's value): one more row (x − x0)/σ, the data rows divided by
// the residual scale, so the solution is the MAP estimate of a normal model
// (ridge regression towards x0; Hoerl & Kennard 1970). A column the data does
// not determine stays at x0 and is reported as such: `determined` is false
// when the posterior standard deviation is more than half the prior's.
#include <vector>

#include <Eigen/Dense>

namespace ztune::fit_detail {

struct LsPrior {
  std::vector<double> x0;     // prior value per column
  std::vector<double> sigma;  // prior standard deviation per column (≤ 0 or inf: no prior)
};

struct LsSolution {
  Eigen::VectorXd x;                // coefficients (0 for dropped columns)
  double rms_rel_residual = 0;      // √(Σ w r² / Σ w), r relative to the fit
  double scale = 0;                 // the residuals' robust scale (≥ 2 %)
  int points = 0;
  std::vector<bool> determined;     // per column: the data, not the prior, set it
  std::vector<int> outliers;        // rows down-weighted below 1 % (|r| > ~10 scales)
  std::vector<double> residuals;    // per row, relative ((A x − y) / fitted); 0 for ignored rows
};

/// Minimises Σ w_i ((A x)_i − y_i)² / (A x)_i² / s² + Σ_j ((x_j − x0_j)/σ_j)²
/// with robust weights w and scale s. Columns flagged in `nonnegative` are kept
/// ≥ 0 by dropping the most negative one and refitting (an active set; enough
/// for the 1–3 columns these fits have). Rows with y ≤ 0 are ignored.
LsSolution robust_relative_ls(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const std::vector<bool>& nonnegative,
                              const LsPrior* prior = nullptr);

/// Weighted isotonic regression (pool adjacent violators; Ayer et al. 1955):
/// the non-decreasing sequence closest to `v` in Σ w (v − f)². Used for the
/// GEMM efficiency table, whose efficiency must not fall as the size grows.
std::vector<double> isotonic_non_decreasing(const std::vector<double>& v, const std::vector<double>& w);

}  // namespace ztune::fit_detail
