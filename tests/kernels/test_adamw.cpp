#include <catch2/catch.hpp>

#include "ztune/kernels/adamw.hpp"

using namespace ztune::kernels;

TEST_CASE("AdamW matches the update computed by hand in double", "[kernels][adamw]") {
  // Two steps on three elements; the closed form of the first step is
  // p − lr·(g/(|g| + ε) + λp) because m̂ = g and v̂ = g² after bias correction.
  std::vector<float> p{1.0f, -2.0f, 0.5f}, m(3, 0.0f), v(3, 0.0f);
  const std::vector<float> g1{0.1f, -0.3f, 2.0f}, g2{-0.2f, 0.1f, 1.0f};
  AdamWParams h;
  h.lr = 0.01f;
  h.weight_decay = 0.1f;
  cpu::adamw_update(p.data(), g1.data(), m.data(), v.data(), 3, h);
  std::vector<double> pd{1.0, -2.0, 0.5}, md(3, 0.0), vd(3, 0.0);
  for (int i = 0; i < 3; ++i) {
    CHECK(p[i] == Approx(pd[i] - 0.01 * (g1[i] / (std::abs(g1[i]) + 1e-8) + 0.1 * pd[i])).epsilon(1e-6));
  }
  // Second step against the full recurrence in double.
  for (int i = 0; i < 3; ++i) {
    md[i] = 0.1 * g1[i];
    vd[i] = 0.05 * g1[i] * g1[i];
    pd[i] -= 0.01 * ((md[i] / 0.1) / (std::sqrt(vd[i] / 0.05) + 1e-8) + 0.1 * pd[i]);
  }
  h.step = 2;
  cpu::adamw_update(p.data(), g2.data(), m.data(), v.data(), 3, h);
  for (int i = 0; i < 3; ++i) {
    md[i] = 0.9 * md[i] + 0.1 * g2[i];
    vd[i] = 0.95 * vd[i] + 0.05 * g2[i] * g2[i];
    const double mh = md[i] / (1 - 0.81), vh = vd[i] / (1 - 0.95 * 0.95);
    pd[i] -= 0.01 * (mh / (std::sqrt(vh) + 1e-8) + 0.1 * pd[i]);
    CHECK(p[i] == Approx(pd[i]).epsilon(1e-5));
    CHECK(m[i] == Approx(md[i]).epsilon(1e-5));
    CHECK(v[i] == Approx(vd[i]).epsilon(1e-5));
  }
}
