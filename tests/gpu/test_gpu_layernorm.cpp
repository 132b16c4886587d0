// LayerNorm and RMSNorm (Zhang & Sennrich 2019, eq. 4) against kernels/layernorm.hpp
// (the CPU RMSNorm is checked by hand and by finite differences in
// tests/kernels/test_llama_kernels.cpp).
#include <catch2/catch.hpp>

#include <cmath>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/layernorm.hpp"
#include "ztune/kernels/layernorm.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEMPLATE_TEST_CASE("layernorm forward and backward match the CPU", "[gpu][layernorm]", float, __half, __nv_bfloat16) {
  using T = TestType;
  const int n = 257, c = 800;  // c not a multiple of 32·k
  const float eps = GENERATE(cpu::kLayerNormEps, 0.5f);  // GPT-2's, and one far from it
  auto x = rounded<T>(uniform(static_cast<std::size_t>(n) * c, 1, -2.0f, 3.0f));
  auto w = rounded<T>(uniform(c, 2, 0.5f, 1.5f)), b = rounded<T>(uniform(c, 3));
  auto dy = rounded<T>(uniform(x.size(), 4));
  auto dinp0 = rounded<T>(uniform(x.size(), 5));
  DeviceArray<T> d_x(x), d_w(w), d_b(b), d_out(x.size()), d_dy(dy), d_dinp(dinp0);
  DeviceArray<float> d_mean(n), d_rstd(n), d_dw(c), d_db(c);
  cuda::layernorm_forward<T>(d_out.get(), d_mean.get(), d_rstd.get(), d_x.get(), d_w.get(), d_b.get(), n, c, eps,
                             nullptr);
  std::vector<float> out(x.size()), mean(n), rstd(n);
  cpu::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), n, c, eps);
  // Outputs are O(1): one rounding to T plus fp32 statistics over 800 terms.
  CHECK(mismatches("layernorm out", d_out.download(), out, 2e-5f, eps_of<T>()) == 0);
  CHECK(mismatches("layernorm mean", d_mean.download(), mean, 1e-5f, 1e-5f) == 0);
  CHECK(mismatches("layernorm rstd", d_rstd.download(), rstd, 0.0f, 1e-5f) == 0);

  cuda::layernorm_backward<T>(d_dinp.get(), d_dw.get(), d_db.get(), d_dy.get(), d_x.get(), d_w.get(), d_mean.get(),
                              d_rstd.get(), n, c, nullptr);
  auto dinp = dinp0;
  std::vector<float> dw(c), db(c);
  cpu::layernorm_backward(dinp.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), mean.data(), rstd.data(),
                          n, c);
  CHECK(mismatches("layernorm dinp", d_dinp.download(), dinp, 1e-4f, 2 * eps_of<T>()) == 0);
  // Column sums of 257 products of O(1) terms: reordering error ~257·2^-24·|terms|.
  CHECK(mismatches("layernorm dweight", d_dw.download(), dw, 2e-4f, 1e-5f) == 0);
  CHECK(mismatches("layernorm dbias", d_db.download(), db, 2e-4f, 1e-5f) == 0);
}

TEMPLATE_TEST_CASE("RMSNorm forward and backward match the CPU", "[gpu][layernorm]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  const int n = 129, c = 512;
  const float eps = 1e-6f;
  auto x = rounded<T>(uniform(static_cast<std::size_t>(n) * c, 11, -2.0f, 2.0f));
  auto w = rounded<T>(uniform(c, 12, 0.5f, 1.5f));
  auto dy = rounded<T>(uniform(x.size(), 13));
  DeviceArray<T> d_x(x), d_w(w), d_out(x.size()), d_dy(dy), d_dinp(x.size());
  DeviceArray<float> d_rstd(n), d_dw(c);
  cuda::rmsnorm_forward<T>(d_out.get(), d_rstd.get(), d_x.get(), d_w.get(), n, c, eps, nullptr);
  cuda::rmsnorm_backward<T>(d_dinp.get(), d_dw.get(), d_dy.get(), d_x.get(), d_w.get(), d_rstd.get(), n, c, nullptr);
  std::vector<float> out(x.size()), rstd(n), dinp(x.size()), dw(c);
  cpu::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), n, c, eps);
  cpu::rmsnorm_backward(dinp.data(), dw.data(), dy.data(), x.data(), w.data(), rstd.data(), n, c);
  CHECK(mismatches("rmsnorm out", d_out.download(), out, 2e-5f, eps_of<T>()) == 0);
  CHECK(mismatches("rmsnorm rstd", d_rstd.download(), rstd, 0.0f, 1e-5f) == 0);
  CHECK(mismatches("rmsnorm dinp", d_dinp.download(), dinp, 1e-4f, 2 * eps_of<T>()) == 0);
  CHECK(mismatches("rmsnorm dweight", d_dw.download(), dw, 2e-4f, 1e-5f) == 0);
}
