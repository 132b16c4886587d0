#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "ztune/kernels/cross_entropy.hpp"

using namespace ztune::kernels;

TEST_CASE("cross-entropy of uniform logits is log V", "[kernels][cross_entropy]") {
  const int n = 3, v = 10;
  std::vector<float> logits(n * v, 2.5f), losses(n);
  std::vector<std::int32_t> targets{0, 4, 9};
  cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), n, v);
  for (float l : losses) CHECK(l == Approx(std::log(10.0)));
}

TEST_CASE("vocabulary-sharded cross-entropy equals the full one", "[kernels][cross_entropy]") {
  const int n = 4, v = 12, half = 6;
  auto logits = ztune::test::random_vector(n * v, 1, 3.0f);
  std::vector<std::int32_t> targets{0, 7, 11, 5};
  std::vector<float> full(n);
  cpu::cross_entropy_forward(full.data(), logits.data(), targets.data(), n, v);
  // Two shards: columns [0,6) and [6,12), each stored contiguously.
  std::vector<float> s0(n * half), s1(n * half);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < half; ++j) {
      s0[i * half + j] = logits[i * v + j];
      s1[i * half + j] = logits[i * v + half + j];
    }
  std::vector<float> m0(n), m1(n), m(n), e0(n), e1(n), e(n), t0(n), t1(n), t(n), losses(n);
  cpu::cross_entropy_row_max(m0.data(), s0.data(), n, half);
  cpu::cross_entropy_row_max(m1.data(), s1.data(), n, half);
  for (int i = 0; i < n; ++i) m[i] = std::max(m0[i], m1[i]);  // all-reduce max
  cpu::cross_entropy_row_sumexp(e0.data(), s0.data(), m.data(), n, half);
  cpu::cross_entropy_row_sumexp(e1.data(), s1.data(), m.data(), n, half);
  cpu::cross_entropy_target_logit(t0.data(), s0.data(), targets.data(), n, half, 0);
  cpu::cross_entropy_target_logit(t1.data(), s1.data(), targets.data(), n, half, half);
  for (int i = 0; i < n; ++i) {
    e[i] = e0[i] + e1[i];
    t[i] = t0[i] + t1[i];
  }
  cpu::cross_entropy_loss(losses.data(), m.data(), e.data(), t.data(), n);
  for (int i = 0; i < n; ++i) CHECK(losses[i] == Approx(full[i]).epsilon(1e-6));
}

TEST_CASE("cross-entropy backward matches finite differences", "[kernels][cross_entropy]") {
  const int n = 3, v = 7;
  auto logits = ztune::test::random_vector(n * v, 1, 2.0f);
  std::vector<std::int32_t> targets{1, 6, 0};
  auto w = ztune::test::random_vector(n, 2);
  std::vector<float> losses(n), mx(n), sum(n), dlogits(n * v, 0.0f);
  auto loss = [&] {
    cpu::cross_entropy_forward(losses.data(), logits.data(), targets.data(), n, v);
    return ztune::test::weighted_sum(losses, w);
  };
  cpu::cross_entropy_row_max(mx.data(), logits.data(), n, v);
  cpu::cross_entropy_row_sumexp(sum.data(), logits.data(), mx.data(), n, v);
  cpu::cross_entropy_backward(dlogits.data(), logits.data(), mx.data(), sum.data(), targets.data(), w.data(), n, v,
                              0);
  ztune::test::check_gradient(logits, loss, dlogits, "dlogits", 1e-3f);
}
