#include "robust_least_squares.hpp"

#include <algorithm>
#include <cmath>

namespace ztune::fit_detail {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// One IRLS solve over the columns in `active`.
LsSolution solve_active(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const std::vector<int>& active) {
  const Eigen::Index rows = a.rows();
  const auto cols = static_cast<Eigen::Index>(active.size());
  Eigen::MatrixXd sub(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j) sub.col(j) = a.col(active[static_cast<std::size_t>(j)]);
  Eigen::VectorXd w = Eigen::VectorXd::Ones(rows);
  for (Eigen::Index i = 0; i < rows; ++i)
    if (!(y(i) > 0)) w(i) = 0;
  Eigen::VectorXd x = Eigen::VectorXd::Zero(cols);
  Eigen::VectorXd r(rows);
  // Residuals are relative to the fitted value (the previous round's; the
  // first round uses the median of y), so a point far below the rest (a GEMM
  // efficiency from a descheduled call) is not magnified by dividing by it.
  std::vector<double> ys;
  for (Eigen::Index i = 0; i < rows; ++i)
    if (y(i) > 0) ys.push_back(y(i));
  Eigen::VectorXd ref = Eigen::VectorXd::Constant(rows, ys.empty() ? 1.0 : median(ys));
  for (int iter = 0; iter < 15; ++iter) {
    Eigen::MatrixXd aw(rows, cols);
    Eigen::VectorXd yw(rows);
    for (Eigen::Index i = 0; i < rows; ++i) {
      const double s = w(i) > 0 ? std::sqrt(w(i)) / ref(i) : 0.0;
      aw.row(i) = sub.row(i) * s;
      yw(i) = y(i) * s;
    }
    x = aw.colPivHouseholderQr().solve(yw);
    for (Eigen::Index i = 0; i < rows; ++i) {
      if (!(y(i) > 0)) continue;
      const double fitted = sub.row(i).dot(x);
      // Guard: a fitted value at or below zero falls back to y as the reference.
      ref(i) = fitted > 1e-12 * y(i) ? fitted : y(i);
      r(i) = (fitted - y(i)) / ref(i);
    }
    std::vector<double> abs_r;
    for (Eigen::Index i = 0; i < rows; ++i)
      if (y(i) > 0) abs_r.push_back(std::abs(r(i)));
    // Scale floor 2%: below that the data are as good as timing gets.
    const double scale = std::max(0.02, 1.4826 * median(abs_r));
    constexpr double kCauchy = 2.385;  // 95% efficiency at the normal
    for (Eigen::Index i = 0; i < rows; ++i) {
      if (!(y(i) > 0)) continue;
      const double u = r(i) / (kCauchy * scale);
      w(i) = 1.0 / (1.0 + u * u);
    }
  }
  LsSolution s;
  s.x = Eigen::VectorXd::Zero(a.cols());
  for (Eigen::Index j = 0; j < cols; ++j) s.x(active[static_cast<std::size_t>(j)]) = x(j);
  double num = 0, den = 0;
  for (Eigen::Index i = 0; i < rows; ++i) {
    if (!(y(i) > 0)) continue;
    num += w(i) * r(i) * r(i);
    den += w(i);
    ++s.points;
  }
  s.rms_rel_residual = den > 0 ? std::sqrt(num / den) : 0;
  return s;
}

}  // namespace

LsSolution robust_relative_ls(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const std::vector<bool>& nonnegative) {
  std::vector<int> active;
  for (Eigen::Index j = 0; j < a.cols(); ++j) active.push_back(static_cast<int>(j));
  while (true) {
    LsSolution s = solve_active(a, y, active);
    int worst = -1;
    double most_negative = 0;
    for (int j : active)
      if (nonnegative[static_cast<std::size_t>(j)] && s.x(j) < most_negative) {
        most_negative = s.x(j);
        worst = j;
      }
    if (worst < 0 || active.size() == 1) {
      if (worst >= 0) s.x(worst) = 0;
      return s;
    }
    active.erase(std::find(active.begin(), active.end(), worst));
  }
}

}  // namespace ztune::fit_detail
