#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "grad_check.hpp"
#include "ztune/kernels/layernorm.hpp"

using namespace ztune::kernels;

TEST_CASE("layernorm output has zero mean and unit variance with w=1, b=0", "[kernels][layernorm]") {
  const int n = 3, c = 16;
  auto x = ztune::test::random_vector(n * c, 1, 3.0f);
  std::vector<float> w(c, 1.0f), b(c, 0.0f), out(n * c), mean(n), rstd(n);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c,
                         cpu::kLayerNormEps);
  for (int i = 0; i < n; ++i) {
    double m = 0, v = 0;
    for (int j = 0; j < c; ++j) m += out[i * c + j];
    m /= c;
    for (int j = 0; j < c; ++j) v += (out[i * c + j] - m) * (out[i * c + j] - m);
    v /= c;
    CHECK(std::abs(m) < 1e-6);
    // var/(var + eps) with eps = 1e-5 on var ≈ 9.
    CHECK(v == Approx(1.0).epsilon(1e-5));
  }
}

TEST_CASE("layernorm backward matches finite differences", "[kernels][layernorm]") {
  const int n = 4, c = 8;
  auto x = ztune::test::random_vector(n * c, 1);
  auto w = ztune::test::random_vector(c, 2);
  auto b = ztune::test::random_vector(c, 3);
  auto dout = ztune::test::random_vector(n * c, 4);
  std::vector<float> out(n * c), mean(n), rstd(n), dx(n * c, 0), dw(c, 0), db(c, 0);
  auto loss = [&] {
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c,
                           cpu::kLayerNormEps);
    return ztune::test::weighted_sum(out, dout);
  };
  loss();
  cpu::layernorm_backward(dx.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                          rstd.data(), n, c);
  ztune::test::check_gradient(x, loss, dx, "dinp", 1e-3f);
  ztune::test::check_gradient(w, loss, dw, "dweight");
  ztune::test::check_gradient(b, loss, db, "dbias");
}

TEST_CASE("layernorm honours its eps: rows ±a give ±a/sqrt(a² + eps)", "[kernels][layernorm]") {
  // A row (a, −a) has mean 0 and biased variance a², so with w = 1, b = 0 the
  // output is ±a/sqrt(a² + eps) in closed form; eps = 0.5 moves it far from ±1.
  const std::vector<float> x = {1.0f, -1.0f, 2.0f, -2.0f}, w = {1.0f, 1.0f}, b = {0.0f, 0.0f};
  std::vector<float> out(4), mean(2), rstd(2);
  for (float eps : {cpu::kLayerNormEps, 0.5f, 1e-6f}) {
    cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), 2, 2, eps);
    for (int i = 0; i < 2; ++i) {
      const double a = i + 1;
      CHECK(mean[i] == 0.0f);
      CHECK(rstd[i] == Approx(1.0 / std::sqrt(a * a + eps)).epsilon(1e-6));
      CHECK(out[2 * i] == Approx(a / std::sqrt(a * a + eps)).epsilon(1e-6));
      CHECK(out[2 * i + 1] == Approx(-a / std::sqrt(a * a + eps)).epsilon(1e-6));
    }
  }
}
