// cuBLASLt GEMMs against kernels/gemm.hpp's CPU GEMM (row-major, cuBLAS shape):
// every transpose combination with padded row strides and beta ≠ 0, the bias and
// GELU epilogues (GELU against kernels/gelu.hpp), and strided batches.
#include <catch2/catch.hpp>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/gemm.hpp"
#include "ztune/kernels/gelu.hpp"
#include "ztune/kernels/gemm.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

namespace {

// K-term dot products of values in [-1, 1): fp32 accumulation in another order
// (and, for TF32, 10-bit products) differs by ~√K·|terms|·u; 16-bit outputs add one
// rounding. Absolute tolerance in units of √K.
template <typename T>
float gemm_atol(int k, bool tf32) {
  const float root_k = std::sqrt(static_cast<float>(k));
  if (std::is_same_v<T, float>) return (tf32 ? 2e-3f : 1e-5f) * root_k;
  return 2e-3f * root_k;
}

}  // namespace

TEMPLATE_TEST_CASE("GEMM matches the CPU for every transpose, padded strides, beta", "[gpu][gemm]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  cuda::Gemm gemm;
  const int m = 131, n = 72, k = 200;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      INFO("trans_a " << ta << " trans_b " << tb << " " << type_name<T>());
      GemmShape s{ta, tb, m, n, k, (ta ? m : k) + 8, (tb ? k : n) + 8, n + 8};
      const std::size_t a_rows = ta ? k : m, b_rows = tb ? n : k;
      auto a = rounded<T>(uniform(a_rows * s.lda, 1));
      auto b = rounded<T>(uniform(b_rows * s.ldb, 2));
      auto c = rounded<T>(uniform(static_cast<std::size_t>(m) * s.ldc, 3));
      DeviceArray<T> da(a), db(b), dc(c);
      gemm.run<T>(s, 0.75f, da.get(), db.get(), 0.5f, dc.get(), nullptr);
      auto ref = c;
      cpu::gemm(s, 0.75f, a.data(), b.data(), 0.5f, ref.data(), nullptr);
      CHECK(mismatches("gemm", dc.download(), ref, gemm_atol<T>(k, false), eps_of<T>()) == 0);
    }
  }
}

TEST_CASE("fp32 GEMM with TF32 allowed stays within TF32 accuracy", "[gpu][gemm]") {
  cuda::Gemm gemm;
  gemm.set_allow_tf32(true);
  const int m = 256, n = 128, k = 512;
  auto a = uniform(static_cast<std::size_t>(m) * k, 4), b = uniform(static_cast<std::size_t>(k) * n, 5);
  DeviceArray<float> da(a), db(b), dc(static_cast<std::size_t>(m) * n);
  gemm.run<float>({false, false, m, n, k, k, n, n}, 1.0f, da.get(), db.get(), 0.0f, dc.get(), nullptr);
  std::vector<float> ref(static_cast<std::size_t>(m) * n);
  cpu::gemm({false, false, m, n, k, k, n, n}, 1.0f, a.data(), b.data(), 0.0f, ref.data(), nullptr);
  CHECK(mismatches("gemm tf32", dc.download(), ref, gemm_atol<float>(k, true), 0.0f) == 0);
}

TEMPLATE_TEST_CASE("GEMM epilogues: bias, GELU(bias), GELU(bias) keeping the pre-activation", "[gpu][gemm]", float,
                   __half, __nv_bfloat16) {
  using T = TestType;
  cuda::Gemm gemm;
  const int m = 96, n = 192, k = 128;  // aux_ld = n: a multiple of 8
  const GemmShape s{false, false, m, n, k, k, n, n};
  auto a = rounded<T>(uniform(static_cast<std::size_t>(m) * k, 6));
  auto b = rounded<T>(uniform(static_cast<std::size_t>(k) * n, 7));
  auto bias = rounded<T>(uniform(n, 8));
  DeviceArray<T> da(a), db(b), dbias(bias), dc(static_cast<std::size_t>(m) * n), daux(static_cast<std::size_t>(m) * n);
  std::vector<float> pre(static_cast<std::size_t>(m) * n);
  cpu::gemm(s, 1.0f, a.data(), b.data(), 0.0f, pre.data(), nullptr);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) pre[static_cast<std::size_t>(i) * n + j] += bias[j];
  std::vector<float> act(pre.size());
  cpu::gelu_forward(act.data(), pre.data(), static_cast<long>(pre.size()));
  const float atol = gemm_atol<T>(k, false);

  gemm.run<T>(s, 1.0f, da.get(), db.get(), 0.0f, dc.get(), nullptr, {cuda::GemmEpilogue::bias, dbias.get()});
  CHECK(mismatches("bias epilogue", dc.download(), pre, atol, eps_of<T>()) == 0);
  gemm.run<T>(s, 1.0f, da.get(), db.get(), 0.0f, dc.get(), nullptr, {cuda::GemmEpilogue::gelu_bias, dbias.get()});
  CHECK(mismatches("gelu_bias epilogue", dc.download(), act, atol, eps_of<T>()) == 0);
  gemm.run<T>(s, 1.0f, da.get(), db.get(), 0.0f, dc.get(), nullptr,
              {cuda::GemmEpilogue::gelu_aux_bias, dbias.get(), daux.get(), n});
  CHECK(mismatches("gelu_aux_bias output", dc.download(), act, atol, eps_of<T>()) == 0);
  CHECK(mismatches("gelu_aux_bias pre-activation", daux.download(), pre, atol, eps_of<T>()) == 0);
}

TEMPLATE_TEST_CASE("strided batched GEMM equals one GEMM per batch", "[gpu][gemm]", float, __half, __nv_bfloat16) {
  using T = TestType;
  cuda::Gemm gemm;
  const int batch = 5, m = 40, n = 24, k = 56;
  const GemmShape s{false, true, m, n, k, k, k, n};  // A·Bᵀ as attention's scores
  auto a = rounded<T>(uniform(static_cast<std::size_t>(batch) * m * k, 9));
  auto b = rounded<T>(uniform(static_cast<std::size_t>(batch) * n * k, 10));
  DeviceArray<T> da(a), db(b), dc(static_cast<std::size_t>(batch) * m * n);
  gemm.run<T>(s, 1.0f, da.get(), db.get(), 0.0f, dc.get(), nullptr, {},
              {batch, static_cast<long long>(m) * k, static_cast<long long>(n) * k, static_cast<long long>(m) * n});
  std::vector<float> ref(static_cast<std::size_t>(batch) * m * n);
  for (int i = 0; i < batch; ++i)
    cpu::gemm(s, 1.0f, a.data() + static_cast<std::size_t>(i) * m * k, b.data() + static_cast<std::size_t>(i) * n * k,
              0.0f, ref.data() + static_cast<std::size_t>(i) * m * n, nullptr);
  CHECK(mismatches("batched gemm", dc.download(), ref, gemm_atol<T>(k, false), eps_of<T>()) == 0);
  CHECK(gemm.cached_algorithms() == 1);
}
