// GEMM against a naive triple loop in double, every transpose combination, with
// padded leading dimensions, alpha/beta, and with a thread pool.
#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "ztune/kernels/gemm.hpp"
#include "ztune/kernels/thread_pool.hpp"

using namespace ztune::kernels;

namespace {
// Element (i, j) of op(X) for X stored row-major with stride ld.
float at(const std::vector<float>& x, bool trans, int ld, int i, int j) {
  return trans ? x[static_cast<std::size_t>(j) * ld + i] : x[static_cast<std::size_t>(i) * ld + j];
}
}  // namespace

TEST_CASE("gemm matches the naive product for every transpose", "[kernels][gemm]") {
  ThreadPool pool(2);
  const int m = 37, n = 53, k = 129;  // > 1 MFLOP so the pool splits it
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (ThreadPool* p : {static_cast<ThreadPool*>(nullptr), &pool}) {
        const int lda = (ta ? m : k) + 3, ldb = (tb ? k : n) + 2, ldc = n + 5;
        auto a = ztune::test::random_vector(static_cast<std::size_t>(ta ? k : m) * lda, 1);
        auto b = ztune::test::random_vector(static_cast<std::size_t>(tb ? n : k) * ldb, 2);
        auto c = ztune::test::random_vector(static_cast<std::size_t>(m) * ldc, 3);
        auto c0 = c;
        cpu::gemm({ta, tb, m, n, k, lda, ldb, ldc}, 0.5f, a.data(), b.data(), 2.0f, c.data(), p);
        int wrong = 0;
        for (int i = 0; i < m; ++i) {
          for (int j = 0; j < n; ++j) {
            double s = 0;
            for (int q = 0; q < k; ++q) s += static_cast<double>(at(a, ta, lda, i, q)) * at(b, tb, ldb, q, j);
            const double want = 0.5 * s + 2.0 * c0[static_cast<std::size_t>(i) * ldc + j];
            if (std::abs(c[static_cast<std::size_t>(i) * ldc + j] - want) > 1e-4 * (1 + std::abs(want))) ++wrong;
          }
          // The padding columns of C are untouched.
          for (int j = n; j < ldc; ++j)
            if (c[static_cast<std::size_t>(i) * ldc + j] != c0[static_cast<std::size_t>(i) * ldc + j]) ++wrong;
        }
        INFO("trans_a " << ta << " trans_b " << tb << " pool " << (p != nullptr));
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("gemm with beta 0 ignores NaNs in C, threaded result equals single-threaded bit for bit",
          "[kernels][gemm]") {
  ThreadPool pool(2);
  const int m = 64, n = 96, k = 80;
  auto a = ztune::test::random_vector(static_cast<std::size_t>(m) * k, 4);
  auto b = ztune::test::random_vector(static_cast<std::size_t>(k) * n, 5);
  std::vector<float> c1(static_cast<std::size_t>(m) * n, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> c2(c1.size());
  cpu::gemm({false, false, m, n, k, k, n, n}, 1.0f, a.data(), b.data(), 0.0f, c1.data(), nullptr);
  for (float x : c1) REQUIRE(std::isfinite(x));
  cpu::gemm({false, false, m, n, k, k, n, n}, 1.0f, a.data(), b.data(), 0.0f, c2.data(), &pool);
  cpu::gemm_eigen_reference(m, n, k, a.data(), b.data(), c2.data());
  for (std::size_t i = 0; i < c1.size(); ++i) REQUIRE(std::abs(c1[i] - c2[i]) <= 1e-4f * (1 + std::abs(c1[i])));
}
