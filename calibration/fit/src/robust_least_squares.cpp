#include "robust_least_squares.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace ztune::fit_detail {

namespace {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<long>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

bool has_prior(const LsPrior* p, int j) {
  if (p == nullptr) return false;
  const auto k = static_cast<std::size_t>(j);
  return k < p->sigma.size() && k < p->x0.size() && p->sigma[k] > 0 && std::isfinite(p->sigma[k]);
}

// Robust weights below this mark a row as an outlier (|r| above ~10 scales).
constexpr double kOutlierWeight = 0.05;

// One IRLS solve over the columns in `active`.
LsSolution solve_active(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const std::vector<int>& active,
                        const LsPrior* prior) {
  const Eigen::Index rows = a.rows();
  const auto cols = static_cast<Eigen::Index>(active.size());
  Eigen::MatrixXd sub(rows, cols);
  for (Eigen::Index j = 0; j < cols; ++j) sub.col(j) = a.col(active[static_cast<std::size_t>(j)]);
  std::vector<int> prior_cols;  // positions in `active` with a prior
  for (Eigen::Index j = 0; j < cols; ++j)
    if (has_prior(prior, active[static_cast<std::size_t>(j)])) prior_cols.push_back(static_cast<int>(j));
  const auto np = static_cast<Eigen::Index>(prior_cols.size());
  Eigen::VectorXd w = Eigen::VectorXd::Ones(rows);
  for (Eigen::Index i = 0; i < rows; ++i)
    if (!(y(i) > 0)) w(i) = 0;
  Eigen::VectorXd x = Eigen::VectorXd::Zero(cols);
  Eigen::VectorXd r = Eigen::VectorXd::Zero(rows);
  // Residuals are relative to the fitted value (the previous round's; the
  // first round uses the median of y), so a point far below the rest (a GEMM
  // efficiency from a descheduled call) is not magnified by dividing by it.
  std::vector<double> ys;
  for (Eigen::Index i = 0; i < rows; ++i)
    if (y(i) > 0) ys.push_back(y(i));
  Eigen::VectorXd ref = Eigen::VectorXd::Constant(rows, ys.empty() ? 1.0 : median(ys));
  double scale = 0.02;
  Eigen::MatrixXd aw(rows + np, cols);
  for (int iter = 0; iter < 15; ++iter) {
    Eigen::VectorXd yw(rows + np);
    for (Eigen::Index i = 0; i < rows; ++i) {
      const double s = w(i) > 0 ? std::sqrt(w(i)) / ref(i) / scale : 0.0;
      aw.row(i) = sub.row(i) * s;
      yw(i) = y(i) * s;
    }
    for (Eigen::Index q = 0; q < np; ++q) {
      const int j = prior_cols[static_cast<std::size_t>(q)];
      const auto k = static_cast<std::size_t>(active[static_cast<std::size_t>(j)]);
      aw.row(rows + q).setZero();
      aw(rows + q, j) = 1.0 / prior->sigma[k];
      yw(rows + q) = prior->x0[k] / prior->sigma[k];
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
    scale = std::max(0.02, 1.4826 * median(abs_r));
    constexpr double kCauchy = 2.385;  // 95% efficiency at the normal
    for (Eigen::Index i = 0; i < rows; ++i) {
      if (!(y(i) > 0)) continue;
      const double u = r(i) / (kCauchy * scale);
      w(i) = 1.0 / (1.0 + u * u);
    }
  }
  LsSolution s;
  s.x = Eigen::VectorXd::Zero(a.cols());
  s.scale = scale;
  for (Eigen::Index j = 0; j < cols; ++j) s.x(active[static_cast<std::size_t>(j)]) = x(j);
  double num = 0, den = 0;
  s.residuals.assign(static_cast<std::size_t>(rows), 0.0);
  for (Eigen::Index i = 0; i < rows; ++i) {
    if (!(y(i) > 0)) continue;
    num += w(i) * r(i) * r(i);
    den += w(i);
    ++s.points;
    s.residuals[static_cast<std::size_t>(i)] = r(i);
    if (w(i) < kOutlierWeight) s.outliers.push_back(static_cast<int>(i));
  }
  s.rms_rel_residual = den > 0 ? std::sqrt(num / den) : 0;
  // What the data determine: the posterior covariance of the last round's
  // normal equations (data rows and prior rows), against the prior's width.
  s.determined.assign(static_cast<std::size_t>(a.cols()), false);
  Eigen::MatrixXd h = Eigen::MatrixXd::Zero(cols, cols);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const double sw = w(i) > 0 ? std::sqrt(w(i)) / ref(i) / scale : 0.0;
    h += (sub.row(i).transpose() * sw) * (sub.row(i) * sw);
  }
  Eigen::MatrixXd hp = h;
  for (int j : prior_cols) {
    const double sg = prior->sigma[static_cast<std::size_t>(active[static_cast<std::size_t>(j)])];
    hp(j, j) += 1.0 / (sg * sg);
  }
  const Eigen::FullPivLU<Eigen::MatrixXd> lu(hp);
  const bool invertible = lu.isInvertible();
  const Eigen::MatrixXd cov = invertible ? Eigen::MatrixXd(lu.inverse()) : Eigen::MatrixXd::Zero(cols, cols);
  for (Eigen::Index j = 0; j < cols; ++j) {
    const int col = active[static_cast<std::size_t>(j)];
    if (h(j, j) <= 0) continue;  // no data touches it
    if (has_prior(prior, col)) {
      const double sg = prior->sigma[static_cast<std::size_t>(col)];
      s.determined[static_cast<std::size_t>(col)] = invertible && cov(j, j) < 0.25 * sg * sg;
    } else {
      s.determined[static_cast<std::size_t>(col)] = invertible;
    }
  }
  return s;
}

}  // namespace

LsSolution robust_relative_ls(const Eigen::MatrixXd& a, const Eigen::VectorXd& y, const std::vector<bool>& nonnegative,
                              const LsPrior* prior) {
  std::vector<int> active;
  for (Eigen::Index j = 0; j < a.cols(); ++j) active.push_back(static_cast<int>(j));
  std::vector<int> dropped;
  while (true) {
    LsSolution s = solve_active(a, y, active, prior);
    int worst = -1;
    double most_negative = 0;
    for (int j : active)
      if (nonnegative[static_cast<std::size_t>(j)] && s.x(j) < most_negative) {
        most_negative = s.x(j);
        worst = j;
      }
    if (worst < 0 || active.size() == 1) {
      if (worst >= 0) {
        s.x(worst) = 0;
        dropped.push_back(worst);
      }
      // A column the fit pushed below its bound 0 is not determined by the
      // data (the caller keeps its prior).
      for (int j : dropped) s.determined[static_cast<std::size_t>(j)] = false;
      return s;
    }
    active.erase(std::find(active.begin(), active.end(), worst));
    dropped.push_back(worst);
  }
}

std::vector<double> isotonic_non_decreasing(const std::vector<double>& v, const std::vector<double>& w) {
  struct Block {
    double sum = 0, weight = 0;
    std::size_t count = 0;
    [[nodiscard]] double mean() const { return weight > 0 ? sum / weight : 0; }
  };
  std::vector<Block> blocks;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double wi = i < w.size() && w[i] > 0 ? w[i] : 1e-12;
    blocks.push_back({v[i] * wi, wi, 1});
    while (blocks.size() > 1 && blocks[blocks.size() - 2].mean() > blocks.back().mean()) {
      Block b = blocks.back();
      blocks.pop_back();
      blocks.back().sum += b.sum;
      blocks.back().weight += b.weight;
      blocks.back().count += b.count;
    }
  }
  std::vector<double> out;
  for (const auto& b : blocks) out.insert(out.end(), b.count, b.mean());
  return out;
}

}  // namespace ztune::fit_detail
