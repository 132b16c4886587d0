// The Llama-shaped model's kernels (CPU references): RMSNorm, SwiGLU, RoPE and
// grouped-query head repetition, each against an independent oracle: values worked
// out by hand, the operation's defining property (RoPE is a rotation whose dot
// products depend only on relative position; kv_repeat's backward is its adjoint),
// and finite differences for every backward.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "grad_check.hpp"
#include "ztune/kernels/kv_repeat.hpp"
#include "ztune/kernels/layernorm.hpp"
#include "ztune/kernels/rope.hpp"
#include "ztune/kernels/swiglu.hpp"

using namespace ztune::kernels;
using ztune::test::check_gradient;
using ztune::test::random_vector;
using ztune::test::weighted_sum;

// ---------------------------------------------------------------- RMSNorm

TEST_CASE("rmsnorm of [3, 4] divides by sqrt(12.5) and scales by w", "[kernels][rmsnorm]") {
  // mean(x²) = (9 + 16)/2 = 12.5; with eps = 0, rstd = 1/sqrt(12.5).
  const std::vector<float> x = {3.0f, 4.0f, 1.0f, -1.0f}, w = {2.0f, 0.5f};
  std::vector<float> out(4), rstd(2);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 2, 2, 0.0f);
  const double r = 1.0 / std::sqrt(12.5);
  CHECK(rstd[0] == Approx(r).epsilon(1e-7));
  CHECK(out[0] == Approx(2.0 * 3.0 * r).epsilon(1e-7));  // 1.6970563
  CHECK(out[1] == Approx(0.5 * 4.0 * r).epsilon(1e-7));  // 0.5656854
  // Row [1, −1]: mean(x²) = 1, rstd = 1, out = x·w.
  CHECK(rstd[1] == Approx(1.0).epsilon(1e-7));
  CHECK(out[2] == Approx(2.0).epsilon(1e-7));
  CHECK(out[3] == Approx(-0.5).epsilon(1e-7));
}

TEST_CASE("rmsnorm eps enters under the square root", "[kernels][rmsnorm]") {
  // x = [1, −1], eps = 1: rstd = 1/sqrt(1 + 1); x = [0, 0], eps = 0.25: rstd = 2, out = 0.
  const std::vector<float> x = {1.0f, -1.0f, 0.0f, 0.0f}, w = {1.0f, 1.0f};
  std::vector<float> out(4), rstd(2);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 1, 2, 1.0f);
  CHECK(rstd[0] == Approx(1.0 / std::sqrt(2.0)).epsilon(1e-7));
  CHECK(out[0] == Approx(1.0 / std::sqrt(2.0)).epsilon(1e-7));
  cpu::rmsnorm_forward(out.data() + 2, rstd.data() + 1, x.data() + 2, w.data(), 1, 2, 0.25f);
  CHECK(rstd[1] == Approx(2.0).epsilon(1e-7));
  CHECK(out[2] == 0.0f);
  CHECK(out[3] == 0.0f);
}

TEST_CASE("rmsnorm backward: zero along x, rstd·dout across it (eps = 0)", "[kernels][rmsnorm]") {
  // With eps = 0 the output is invariant to scaling x, so a gradient dout ∥ x
  // (w = 1) gives dx = 0; dout ⊥ x gives dx = rstd·dout (the x̂·mean(dx̂·x̂) term vanishes).
  const std::vector<float> x = {3.0f, 4.0f}, w = {1.0f, 1.0f};
  std::vector<float> out(2), rstd(1);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), 1, 2, 0.0f);
  const std::vector<float> along = {3.0f, 4.0f}, across = {4.0f, -3.0f};
  std::vector<float> dx(2, 0.0f), dw(2, 0.0f);
  cpu::rmsnorm_backward(dx.data(), dw.data(), along.data(), x.data(), w.data(), rstd.data(), 1, 2);
  CHECK(std::abs(dx[0]) < 1e-6f);
  CHECK(std::abs(dx[1]) < 1e-6f);
  // dweight = dout·x̂ = [3·3, 4·4]/sqrt(12.5).
  CHECK(dw[0] == Approx(9.0 / std::sqrt(12.5)).epsilon(1e-6));
  CHECK(dw[1] == Approx(16.0 / std::sqrt(12.5)).epsilon(1e-6));
  std::fill(dx.begin(), dx.end(), 0.0f);
  cpu::rmsnorm_backward(dx.data(), dw.data(), across.data(), x.data(), w.data(), rstd.data(), 1, 2);
  CHECK(dx[0] == Approx(4.0 / std::sqrt(12.5)).epsilon(1e-6));
  CHECK(dx[1] == Approx(-3.0 / std::sqrt(12.5)).epsilon(1e-6));
}

TEST_CASE("rmsnorm backward matches finite differences", "[kernels][rmsnorm]") {
  const int n = 4, c = 8;
  const float eps = 1e-5f;
  auto x = random_vector(n * c, 21);
  auto w = random_vector(c, 22);
  auto dout = random_vector(n * c, 23);
  std::vector<float> out(n * c), rstd(n), dx(n * c, 0.0f), dw(c, 0.0f);
  auto loss = [&] {
    cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, eps);
    return weighted_sum(out, dout);
  };
  loss();
  cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), n, c);
  check_gradient(x, loss, dx, "rmsnorm dinp", 1e-3f);
  check_gradient(w, loss, dw, "rmsnorm dweight");
}

TEST_CASE("rmsnorm backward accumulates into dinp and dweight", "[kernels][rmsnorm]") {
  const int n = 3, c = 5;
  auto x = random_vector(n * c, 31), w = random_vector(c, 32), dout = random_vector(n * c, 33);
  std::vector<float> out(n * c), rstd(n);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, 1e-6f);
  std::vector<float> dx_fresh(n * c, 0.0f), dw_fresh(c, 0.0f), dx(n * c, 0.5f), dw(c, -2.0f);
  cpu::rmsnorm_backward(dx_fresh.data(), dw_fresh.data(), dout.data(), x.data(), w.data(), rstd.data(), n, c);
  cpu::rmsnorm_backward(dx.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), n, c);
  for (int i = 0; i < n * c; ++i) CHECK(dx[i] == Approx(0.5f + dx_fresh[i]).margin(1e-6));
  for (int j = 0; j < c; ++j) CHECK(dw[j] == Approx(-2.0f + dw_fresh[j]).margin(1e-6));
}

// ---------------------------------------------------------------- SwiGLU

TEST_CASE("swiglu is silu(gate)·up, worked by hand", "[kernels][swiglu]") {
  // One row, f = 4: gates [0, 1, −1, 20], ups [5, 2, 3, 0.5].
  // silu(0) = 0; silu(1) = 1/(1 + e⁻¹) = 0.7310585786; silu(−1) = −1/(1 + e) = −0.2689414214;
  // silu(20) = 20·σ(20) = 20·(1 − 2.06e−9).
  const std::vector<float> inp = {0.0f, 1.0f, -1.0f, 20.0f, 5.0f, 2.0f, 3.0f, 0.5f};
  std::vector<float> out(4);
  cpu::swiglu_forward(out.data(), inp.data(), 1, 4);
  CHECK(out[0] == 0.0f);
  CHECK(out[1] == Approx(2.0 * 0.7310585786).epsilon(1e-7));
  CHECK(out[2] == Approx(3.0 * -0.2689414214).epsilon(1e-7));
  CHECK(out[3] == Approx(10.0).epsilon(1e-7));
}

TEST_CASE("swiglu backward by hand at gate 0 and matches finite differences", "[kernels][swiglu]") {
  SECTION("gate 0: silu'(0) = 1/2, silu(0) = 0") {
    const std::vector<float> inp = {0.0f, 3.0f}, dout = {2.0f};
    std::vector<float> din(2, 0.0f);
    cpu::swiglu_backward(din.data(), inp.data(), dout.data(), 1, 1);
    CHECK(din[0] == Approx(2.0 * 3.0 * 0.5).epsilon(1e-7));  // dout·up·silu'(0)
    CHECK(din[1] == 0.0f);                                     // dout·silu(0)
  }
  SECTION("finite differences") {
    const int n = 3, f = 6;
    auto inp = random_vector(n * 2 * f, 41, 2.0f);
    auto dout = random_vector(n * f, 42);
    std::vector<float> out(n * f), din(inp.size(), 0.0f);
    auto loss = [&] {
      cpu::swiglu_forward(out.data(), inp.data(), n, f);
      return weighted_sum(out, dout);
    };
    cpu::swiglu_backward(din.data(), inp.data(), dout.data(), n, f);
    check_gradient(inp, loss, din, "swiglu dinp", 1e-3f);
  }
}

TEST_CASE("swiglu backward accumulates", "[kernels][swiglu]") {
  const int n = 2, f = 5;
  auto inp = random_vector(n * 2 * f, 51), dout = random_vector(n * f, 52);
  std::vector<float> fresh(inp.size(), 0.0f), din(inp.size(), 1.25f);
  cpu::swiglu_backward(fresh.data(), inp.data(), dout.data(), n, f);
  cpu::swiglu_backward(din.data(), inp.data(), dout.data(), n, f);
  for (std::size_t i = 0; i < din.size(); ++i) CHECK(din[i] == Approx(1.25f + fresh[i]).margin(1e-6));
}

// ---------------------------------------------------------------- RoPE

namespace {
double dot(const float* a, const float* b, int len) {
  double s = 0.0;
  for (int i = 0; i < len; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}
}  // namespace

TEST_CASE("rope at position 0 is the identity", "[kernels][rope]") {
  const int n = 2, hd = 8, heads = 3;
  auto x = random_vector(n * heads * hd, 61);
  auto y = x;
  const std::vector<std::int32_t> pos = {0, 0};
  cpu::rope_forward(y.data(), pos.data(), n, heads * hd, heads, hd, 10000.0f);
  CHECK(y == x);
}

TEST_CASE("rope with hd = 2 is the plane rotation by p radians", "[kernels][rope]") {
  // θ^0 = 1 whatever θ: the single pair (x0, x1) turns by the angle p.
  const std::vector<std::int32_t> pos = {1, 2, 3, 7};
  std::vector<float> x = {1.0f, 0.0f, 0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 0.25f};
  const auto x0 = x;
  cpu::rope_forward(x.data(), pos.data(), 4, 2, 1, 2, 500000.0f);
  for (int r = 0; r < 4; ++r) {
    const double c = std::cos(static_cast<double>(pos[r])), s = std::sin(static_cast<double>(pos[r]));
    CHECK(x[2 * r] == Approx(x0[2 * r] * c - x0[2 * r + 1] * s).margin(1e-6));
    CHECK(x[2 * r + 1] == Approx(x0[2 * r + 1] * c + x0[2 * r] * s).margin(1e-6));
  }
  // Position 1 on (1, 0): (cos 1, sin 1) = (0.5403023, 0.8414710).
  CHECK(x[0] == Approx(0.5403023059).epsilon(1e-6));
  CHECK(x[1] == Approx(0.8414709848).epsilon(1e-6));
}

TEST_CASE("rope with hd = 4, θ = 10000: pair 0 turns by p, pair 1 by p/100", "[kernels][rope]") {
  // Channels pair as (0, 2) and (1, 3); frequencies θ^0 = 1 and θ^(−2/4) = 1/100.
  const std::vector<std::int32_t> pos = {50};
  std::vector<float> x = {1.0f, 1.0f, 0.0f, 0.0f};
  cpu::rope_forward(x.data(), pos.data(), 1, 4, 1, 4, 10000.0f);
  CHECK(x[0] == Approx(std::cos(50.0)).margin(1e-6));
  CHECK(x[2] == Approx(std::sin(50.0)).margin(1e-6));
  CHECK(x[1] == Approx(std::cos(0.5)).margin(1e-6));  // 0.8775826
  CHECK(x[3] == Approx(std::sin(0.5)).margin(1e-6));  // 0.4794255
}

TEST_CASE("rope touches only the first `heads` heads of each row", "[kernels][rope]") {
  // Row [Q: 2 heads | K: 1 head | V: 1 head] of hd = 4: rotate Q, then K through the
  // offset nh·hd; V is never touched and K turns as a Q head at the same position would.
  const int hd = 4, nh = 2, stride = (nh + 2) * hd, n = 2;
  auto row = random_vector(n * stride, 62);
  for (int r = 0; r < n; ++r)
    for (int d = 0; d < hd; ++d) row[r * stride + nh * hd + d] = row[r * stride + d];  // K = Q head 0
  const auto before = row;
  const std::vector<std::int32_t> pos = {3, 11};
  cpu::rope_forward(row.data(), pos.data(), n, stride, nh, hd, 10000.0f);
  cpu::rope_forward(row.data() + nh * hd, pos.data(), n, stride, 1, hd, 10000.0f);
  for (int r = 0; r < n; ++r) {
    for (int d = 0; d < hd; ++d) {
      CHECK(row[r * stride + (nh + 1) * hd + d] == before[r * stride + (nh + 1) * hd + d]);  // V
      CHECK(row[r * stride + nh * hd + d] == row[r * stride + d]);                            // K = Q head 0
      CHECK(row[r * stride + d] != before[r * stride + d]);
    }
  }
}

TEST_CASE("rope preserves each pair's norm and backward undoes forward", "[kernels][rope]") {
  const int n = 5, heads = 2, hd = 16, half = hd / 2;
  auto x = random_vector(n * heads * hd, 63);
  auto y = x;
  const std::vector<std::int32_t> pos = {0, 1, 17, 255, 4095};
  cpu::rope_forward(y.data(), pos.data(), n, heads * hd, heads, hd, 10000.0f);
  for (int h = 0; h < n * heads; ++h) {
    for (int i = 0; i < half; ++i) {
      const float* a = x.data() + h * hd;
      const float* b = y.data() + h * hd;
      CHECK(std::hypot(b[i], b[i + half]) == Approx(std::hypot(a[i], a[i + half])).epsilon(1e-6));
    }
  }
  // Rotations are orthogonal: Rᵀ·R = I.
  cpu::rope_backward(y.data(), pos.data(), n, heads * hd, heads, hd, 10000.0f);
  for (std::size_t i = 0; i < x.size(); ++i) CHECK(y[i] == Approx(x[i]).margin(2e-6));
}

TEST_CASE("rope: q_m·k_n depends only on m − n (RoFormer §3.2)", "[kernels][rope]") {
  const int hd = 32;
  const auto q = random_vector(hd, 64), k = random_vector(hd, 65);
  auto score = [&](std::int32_t m, std::int32_t nn) {
    auto qm = q, kn = k;
    const std::vector<std::int32_t> pm = {m}, pn = {nn};
    cpu::rope_forward(qm.data(), pm.data(), 1, hd, 1, hd, 10000.0f);
    cpu::rope_forward(kn.data(), pn.data(), 1, hd, 1, hd, 10000.0f);
    return dot(qm.data(), kn.data(), hd);
  };
  const double s = score(5, 2);
  CHECK(score(13, 10) == Approx(s).margin(1e-5));
  CHECK(score(103, 100) == Approx(s).margin(1e-5));
  CHECK(score(3, 0) == Approx(s).margin(1e-5));
  CHECK(std::abs(score(6, 2) - s) > 1e-2);  // a different offset gives a different score
}

TEST_CASE("rope backward matches finite differences of a weighted sum", "[kernels][rope]") {
  const int n = 3, heads = 2, hd = 8, stride = 20;  // row padding beyond heads·hd = 16
  auto x = random_vector(n * stride, 66);
  const auto w = random_vector(n * stride, 67);
  const std::vector<std::int32_t> pos = {2, 9, 40};
  auto loss = [&] {
    auto y = x;
    cpu::rope_forward(y.data(), pos.data(), n, stride, heads, hd, 10000.0f);
    return weighted_sum(y, w);
  };
  auto dx = w;  // ∂L/∂y = w; backward turns it in place into ∂L/∂x (padding passes through)
  cpu::rope_backward(dx.data(), pos.data(), n, stride, heads, hd, 10000.0f);
  check_gradient(x, loss, dx, "rope dx");
}

TEST_CASE("rope rejects an odd head dimension", "[kernels][rope]") {
  std::vector<float> x(6);
  const std::vector<std::int32_t> pos = {1};
  CHECK_THROWS_AS(cpu::rope_forward(x.data(), pos.data(), 1, 6, 2, 3, 10000.0f), std::invalid_argument);
  CHECK_THROWS_AS(cpu::rope_backward(x.data(), pos.data(), 1, 4, 2, 4, 10000.0f), std::invalid_argument);
}

// ---------------------------------------------------------------- kv_repeat

TEST_CASE("kv_repeat with kv = nh copies the row unchanged", "[kernels][kv_repeat]") {
  const int n = 3, nh = 4, hd = 5;
  const auto inp = random_vector(n * 3 * nh * hd, 71);
  std::vector<float> out(inp.size(), -1.0f);
  cpu::kv_repeat_forward(out.data(), inp.data(), n, nh, nh, hd);
  CHECK(out == inp);
}

TEST_CASE("kv_repeat nh = 4, kv = 2: heads placed as repeat_interleave, by hand", "[kernels][kv_repeat]") {
  // Row r: Q heads [0..7] (+100r), K heads k0 = [8, 9], k1 = [10, 11], V heads v0 = [12, 13], v1 = [14, 15].
  const int n = 2, nh = 4, kv = 2, hd = 2;
  std::vector<float> inp(n * 16);
  for (int r = 0; r < n; ++r)
    for (int j = 0; j < 16; ++j) inp[r * 16 + j] = static_cast<float>(100 * r + j);
  std::vector<float> out(n * 24);
  cpu::kv_repeat_forward(out.data(), inp.data(), n, nh, kv, hd);
  const std::vector<float> row0 = {0, 1, 2, 3, 4, 5, 6, 7,            // Q
                                   8, 9, 8, 9, 10, 11, 10, 11,        // K: k0 k0 k1 k1
                                   12, 13, 12, 13, 14, 15, 14, 15};   // V: v0 v0 v1 v1
  for (int j = 0; j < 24; ++j) {
    CHECK(out[j] == row0[j]);
    CHECK(out[24 + j] == row0[j] + 100.0f);
  }
}

TEST_CASE("kv_repeat backward sums the repeated heads, by hand, and accumulates", "[kernels][kv_repeat]") {
  // dout row = 1..24 for nh = 4, kv = 2, hd = 2: K grads (9,10) (11,12) (13,14) (15,16)
  // → k0 = (9+11, 10+12) = (20, 22), k1 = (28, 30); V (17,18)..(23,24) → v0 = (36, 38), v1 = (44, 46).
  std::vector<float> dout(24);
  for (int j = 0; j < 24; ++j) dout[j] = static_cast<float>(j + 1);
  std::vector<float> dinp(16, 0.5f);
  cpu::kv_repeat_backward(dinp.data(), dout.data(), 1, 4, 2, 2);
  const std::vector<float> expect = {1, 2, 3, 4, 5, 6, 7, 8, 20, 22, 28, 30, 36, 38, 44, 46};
  for (int j = 0; j < 16; ++j) CHECK(dinp[j] == expect[j] + 0.5f);
}

TEST_CASE("kv_repeat backward is the adjoint of forward", "[kernels][kv_repeat]") {
  // <repeat(x), y> = <x, repeat_backward(y)> for any x, y (backward is the transpose).
  for (const int kv : {1, 2, 8}) {
    const int n = 3, nh = 8, hd = 3;
    const auto x = random_vector(static_cast<std::size_t>(n) * (nh + 2 * kv) * hd, 72);
    const auto y = random_vector(static_cast<std::size_t>(n) * 3 * nh * hd, 73);
    std::vector<float> rx(y.size()), bty(x.size(), 0.0f);
    cpu::kv_repeat_forward(rx.data(), x.data(), n, nh, kv, hd);
    cpu::kv_repeat_backward(bty.data(), y.data(), n, nh, kv, hd);
    INFO("kv = " << kv);
    CHECK(dot(rx.data(), y.data(), static_cast<int>(y.size())) ==
          Approx(dot(x.data(), bty.data(), static_cast<int>(x.size()))).epsilon(1e-6));
  }
}

TEST_CASE("kv_repeat rejects kv not dividing nh", "[kernels][kv_repeat]") {
  std::vector<float> a(64), b(64);
  CHECK_THROWS_AS(cpu::kv_repeat_forward(a.data(), b.data(), 1, 4, 3, 1), std::invalid_argument);
  CHECK_THROWS_AS(cpu::kv_repeat_backward(a.data(), b.data(), 1, 4, 3, 1), std::invalid_argument);
}

TEST_CASE("rope with rot_dims < hd turns only the first rot_dims channels of each head", "[kernels][rope]") {
  // hd = 4, rot_dims = 2 (GPT-NeoX's rotary_pct 0.5): channels 0 and 1 form the one
  // pair and turn by p·θ^0 = p radians; channels 2 and 3 pass; the second head too.
  std::vector<float> x{1.0f, 0.0f, 5.0f, 6.0f, 0.0f, 1.0f, 7.0f, 8.0f};
  const std::vector<std::int32_t> pos{1};
  cpu::rope_forward(x.data(), pos.data(), 1, 8, 2, 4, 10000.0f, 2);
  CHECK(x[0] == Approx(std::cos(1.0)).margin(1e-6));
  CHECK(x[1] == Approx(std::sin(1.0)).margin(1e-6));
  CHECK((x[2] == 5.0f && x[3] == 6.0f));
  CHECK(x[4] == Approx(-std::sin(1.0)).margin(1e-6));
  CHECK(x[5] == Approx(std::cos(1.0)).margin(1e-6));
  CHECK((x[6] == 7.0f && x[7] == 8.0f));
  cpu::rope_backward(x.data(), pos.data(), 1, 8, 2, 4, 10000.0f, 2);
  CHECK(x[0] == Approx(1.0f).margin(1e-6));
  CHECK(x[1] == Approx(0.0f).margin(1e-6));
  CHECK_THROWS_AS(cpu::rope_forward(x.data(), pos.data(), 1, 8, 2, 4, 10000.0f, 3), std::invalid_argument);
  CHECK_THROWS_AS(cpu::rope_forward(x.data(), pos.data(), 1, 8, 2, 4, 10000.0f, 6), std::invalid_argument);
}

