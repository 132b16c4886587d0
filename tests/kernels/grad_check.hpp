#pragma once
// Finite-difference oracle for the kernels' backward passes: for L = Σ w ⊙ f(x)
// (w fixed random weights), ∂L/∂x_i ≈ (L(x + ε e_i) − L(x − ε e_i)) / 2ε.
// The kernels run in fp32, so ε = 1e-2 balances truncation (O(ε²)) and rounding
// (≈ 1e-6·|L|/ε) error; the tolerance below is set from that.
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

namespace ztune::test {

inline std::vector<float> random_vector(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& w) {
  double s = 0.0;
  for (std::size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * w[i];
  return s;
}

/// Checks `analytic` against central differences of `loss` with respect to `x`.
inline void check_gradient(std::vector<float>& x, const std::function<double()>& loss,
                           const std::vector<float>& analytic, const char* what, float eps = 1e-2f) {
  REQUIRE(analytic.size() == x.size());
  int wrong = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float saved = x[i];
    x[i] = saved + eps;
    const double lp = loss();
    x[i] = saved - eps;
    const double lm = loss();
    x[i] = saved;
    const double numeric = (lp - lm) / (2.0 * eps);
    const double tol = 3e-3 + 2e-2 * std::abs(numeric);
    if (std::abs(numeric - analytic[i]) > tol && ++wrong <= 10)
      UNSCOPED_INFO(what << "[" << i << "]: analytic " << analytic[i] << " numeric " << numeric);
  }
  CHECK(wrong == 0);
}

}  // namespace ztune::test
