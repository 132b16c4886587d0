// cpu::flash_attention_* against independent oracles: the standard kernel (which stores
// att and has its own finite-difference tests), lse from its definition in double
// precision, and central differences of Σ w∘out through the flash pair itself.
#include <algorithm>
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "ztune/kernels/attention.hpp"
#include "ztune/kernels/thread_pool.hpp"

using namespace ztune::kernels;

namespace {

struct Shape {
  int b, t, nh, hd;
  [[nodiscard]] int c() const { return nh * hd; }
};

// Counts elements outside atol + rtol·|ref| (STYLE #4), reports the first 10.
int count_mismatches(const std::vector<float>& got, const std::vector<float>& ref, double atol, double rtol,
                     const char* what) {
  REQUIRE(got.size() == ref.size());
  int wrong = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double err = std::abs(static_cast<double>(got[i]) - ref[i]);
    if (err > atol + rtol * std::abs(ref[i]) && ++wrong <= 10)
      UNSCOPED_INFO(what << "[" << i << "]: got " << got[i] << " expected " << ref[i]);
  }
  return wrong;
}

double max_abs(const std::vector<float>& v) {
  double m = 0.0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

// lse_i = log Σ_{j≤i} exp(q_i·k_j/√hd) in double, straight from the definition, [B,NH,T].
std::vector<double> lse_reference(const std::vector<float>& qkv, const Shape& s) {
  const int c = s.c();
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.hd));
  std::vector<double> lse(static_cast<std::size_t>(s.b) * s.nh * s.t);
  std::vector<double> scores(static_cast<std::size_t>(s.t));
  for (int bi = 0; bi < s.b; ++bi)
    for (int h = 0; h < s.nh; ++h)
      for (int i = 0; i < s.t; ++i) {
        const float* q = qkv.data() + (static_cast<long>(bi) * s.t + i) * 3 * c + h * s.hd;
        double mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          const float* k = qkv.data() + (static_cast<long>(bi) * s.t + j) * 3 * c + c + h * s.hd;
          double dot = 0.0;
          for (int d = 0; d < s.hd; ++d) dot += static_cast<double>(q[d]) * k[d];
          scores[static_cast<std::size_t>(j)] = dot * scale;
          mx = std::max(mx, dot * scale);
        }
        double sum = 0.0;
        for (int j = 0; j <= i; ++j) sum += std::exp(scores[static_cast<std::size_t>(j)] - mx);
        lse[(static_cast<std::size_t>(bi) * s.nh + h) * s.t + i] = mx + std::log(sum);
      }
  return lse;
}

}  // namespace

TEST_CASE("flash attention gives the standard kernel's out and dqkv (tiles of 64 rows, ragged ends)",
          "[kernels][attention][flash]") {
  ThreadPool pool(2);
  for (const int t : {1, 7, 64, 130}) {
    for (const int hd : {16, 64}) {
      const Shape s{2, t, 3, hd};
      const int c = s.c();
      CAPTURE(t, hd);
      const auto qkv = ztune::test::random_vector(static_cast<std::size_t>(s.b) * t * 3 * c, 11);
      const auto dout = ztune::test::random_vector(static_cast<std::size_t>(s.b) * t * c, 12);
      const std::size_t n_out = static_cast<std::size_t>(s.b) * t * c;

      std::vector<float> out_ref(n_out), att(static_cast<std::size_t>(s.b) * s.nh * t * t);
      std::vector<float> dqkv_ref(qkv.size(), 0.0f);
      cpu::attention_forward(out_ref.data(), att.data(), qkv.data(), s.b, t, c, s.nh, nullptr);
      cpu::attention_backward(dqkv_ref.data(), dout.data(), qkv.data(), att.data(), s.b, t, c, s.nh, nullptr);

      std::vector<float> out(n_out), lse(static_cast<std::size_t>(s.b) * s.nh * t), dqkv(qkv.size(), 0.0f);
      cpu::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.b, t, c, s.nh, nullptr);
      cpu::flash_attention_backward(dqkv.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.b, t, c, s.nh,
                                    nullptr);

      // Same products and the same softmax order as the standard kernel: out is bit-equal
      // at these shapes as measured (max |Δout| 3.0e-7 at t = 1024, |out| ≤ 3.1), so
      // 1e-6 + 1e-6·|ref| only allows for a different GEMM blocking.
      CHECK(count_mismatches(out, out_ref, 1e-6, 1e-6, "out") == 0);
      // P recomputed as exp(s − lse) instead of exp(s − m)/Σ and D = dO·O instead of
      // rowsum(P∘dP): fp32 rounding of sums of up to T terms. Measured max |Δdqkv|
      // 2.4e-6 with max |dqkv| 5.2 (4.6e-7 of it); the tolerance, 1e-5 of the tensor's
      // largest entry plus 1e-5·|ref|, is 20× that. (Per element, small entries that
      // cancel differ by up to 8e-5 relative, so a purely relative bound would not do.)
      CHECK(count_mismatches(dqkv, dqkv_ref, 1e-5 * std::max(1.0, max_abs(dqkv_ref)), 1e-5, "dqkv") == 0);

      // Heads are independent, so the pool changes nothing, bit for bit.
      std::vector<float> out_p(n_out), lse_p(lse.size()), dqkv_p(qkv.size(), 0.0f);
      cpu::flash_attention_forward(out_p.data(), lse_p.data(), qkv.data(), s.b, t, c, s.nh, &pool);
      cpu::flash_attention_backward(dqkv_p.data(), dout.data(), qkv.data(), out_p.data(), lse_p.data(), s.b, t, c,
                                    s.nh, &pool);
      CHECK(out_p == out);
      CHECK(lse_p == lse);
      CHECK(dqkv_p == dqkv);
    }
  }
}

TEST_CASE("flash attention lse is log Σ_j≤i exp(q_i·k_j/√hd), computed in double from the definition",
          "[kernels][attention][flash]") {
  for (const int hd : {16, 64}) {
    const Shape s{2, 130, 3, hd};
    const int c = s.c();
    CAPTURE(hd);
    const auto qkv = ztune::test::random_vector(static_cast<std::size_t>(s.b) * s.t * 3 * c, 21);
    std::vector<float> out(static_cast<std::size_t>(s.b) * s.t * c), lse(static_cast<std::size_t>(s.b) * s.nh * s.t);
    cpu::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.b, s.t, c, s.nh, nullptr);
    const auto ref = lse_reference(qkv, s);
    // fp32 scores (hd-term dots) and an fp32 sum of ≤ 130 exponentials: measured max
    // |Δlse| 9.1e-7 with |lse| ≤ 5.8 (1.2e-6 at t = 64); 1e-5 absolute is 8× that.
    int wrong = 0;
    for (std::size_t i = 0; i < lse.size(); ++i) {
      if (std::abs(lse[i] - ref[i]) > 1e-5 && ++wrong <= 10)
        UNSCOPED_INFO("lse[" << i << "]: got " << lse[i] << " expected " << ref[i]);
    }
    CHECK(wrong == 0);
  }
}

TEST_CASE("flash attention row 0 sees only itself: lse_0 = q_0·k_0/√hd and out_0 = v_0 exactly",
          "[kernels][attention][flash]") {
  // Small integers in q_0 and k_0 make q_0·k_0 exact in fp32, and 1/√16 = 1/4 is exact,
  // so the expected lse_0 is known bit for bit (exp(0) = 1, log 1 = 0).
  const Shape s{2, 9, 3, 16};
  const int c = s.c();
  auto qkv = ztune::test::random_vector(static_cast<std::size_t>(s.b) * s.t * 3 * c, 31);
  for (int bi = 0; bi < s.b; ++bi)
    for (int h = 0; h < s.nh; ++h)
      for (int d = 0; d < s.hd; ++d) {
        const long row0 = static_cast<long>(bi) * s.t * 3 * c;
        qkv[static_cast<std::size_t>(row0 + h * s.hd + d)] = static_cast<float>((d + h) % 5 - 2);
        qkv[static_cast<std::size_t>(row0 + c + h * s.hd + d)] = static_cast<float>((d + bi) % 3 - 1);
      }
  std::vector<float> out(static_cast<std::size_t>(s.b) * s.t * c), lse(static_cast<std::size_t>(s.b) * s.nh * s.t);
  cpu::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.b, s.t, c, s.nh, nullptr);
  for (int bi = 0; bi < s.b; ++bi)
    for (int h = 0; h < s.nh; ++h) {
      int dot = 0;
      for (int d = 0; d < s.hd; ++d) dot += ((d + h) % 5 - 2) * ((d + bi) % 3 - 1);
      CAPTURE(bi, h, dot);
      CHECK(lse[static_cast<std::size_t>((bi * s.nh + h) * s.t)] == static_cast<float>(dot) / 4.0f);
      const long row0 = static_cast<long>(bi) * s.t;
      for (int d = 0; d < s.hd; ++d)
        CHECK(out[static_cast<std::size_t>(row0 * c + h * s.hd + d)] ==
              qkv[static_cast<std::size_t>(row0 * 3 * c + 2 * c + h * s.hd + d)]);
    }
}

TEST_CASE("flash attention backward matches finite differences of Σ w∘out", "[kernels][attention][flash]") {
  // The tiny shape of the standard kernel's check, and one whose 67 rows cross the
  // forward's 64-row and the backward's 32-row tile boundaries.
  for (const Shape s : {Shape{2, 5, 2, 3}, Shape{1, 67, 2, 2}}) {
    const int c = s.c();
    CAPTURE(s.b, s.t, s.nh, s.hd);
    auto qkv = ztune::test::random_vector(static_cast<std::size_t>(s.b) * s.t * 3 * c, 41);
    const auto w = ztune::test::random_vector(static_cast<std::size_t>(s.b) * s.t * c, 42);
    std::vector<float> out(w.size()), lse(static_cast<std::size_t>(s.b) * s.nh * s.t), dqkv(qkv.size(), 0.0f);
    auto loss = [&] {
      cpu::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.b, s.t, c, s.nh, nullptr);
      return ztune::test::weighted_sum(out, w);
    };
    loss();
    cpu::flash_attention_backward(dqkv.data(), w.data(), qkv.data(), out.data(), lse.data(), s.b, s.t, c, s.nh,
                                  nullptr);
    ztune::test::check_gradient(qkv, loss, dqkv, "dqkv", 1e-3f);
  }
}

TEST_CASE("flash attention backward accumulates: two calls give twice one call", "[kernels][attention][flash]") {
  const Shape s{2, 70, 3, 16};
  const int c = s.c();
  const auto qkv = ztune::test::random_vector(static_cast<std::size_t>(s.b) * s.t * 3 * c, 51);
  const auto dout = ztune::test::random_vector(static_cast<std::size_t>(s.b) * s.t * c, 52);
  std::vector<float> out(dout.size()), lse(static_cast<std::size_t>(s.b) * s.nh * s.t);
  cpu::flash_attention_forward(out.data(), lse.data(), qkv.data(), s.b, s.t, c, s.nh, nullptr);
  std::vector<float> once(qkv.size(), 0.0f), twice(qkv.size(), 0.0f);
  cpu::flash_attention_backward(once.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.b, s.t, c, s.nh,
                                nullptr);
  for (int call = 0; call < 2; ++call)
    cpu::flash_attention_backward(twice.data(), dout.data(), qkv.data(), out.data(), lse.data(), s.b, s.t, c, s.nh,
                                  nullptr);
  std::vector<float> doubled(once.size());
  std::transform(once.begin(), once.end(), doubled.begin(), [](float x) { return 2.0f * x; });
  // The second call adds tile by tile onto the first call's sums, so the rounding
  // differs from 2× (a few ulps of the largest entry).
  CHECK(count_mismatches(twice, doubled, 1e-6 * max_abs(doubled), 1e-6, "dqkv") == 0);
  CHECK(max_abs(once) > 0.1);  // the check above is not vacuous
}
