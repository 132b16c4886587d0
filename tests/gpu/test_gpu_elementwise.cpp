// Elementwise kernels against the CPU references (kernels/elementwise.hpp) or, where
// none exists, the one-line definition written out here.
#include <catch2/catch.hpp>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/elementwise.hpp"
#include "ztune/kernels/elementwise.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEMPLATE_TEST_CASE("add, accumulate, scale match the CPU", "[gpu][elementwise]", float, __half, __nv_bfloat16) {
  using T = TestType;
  const long n = 100003;  // not a multiple of the block size
  auto a = rounded<T>(uniform(n, 1)), b = rounded<T>(uniform(n, 2));
  DeviceArray<T> da(a), db(b), dout(n);
  cuda::add<T>(dout.get(), da.get(), db.get(), n, nullptr);
  std::vector<float> ref(n);
  cpu::add(ref.data(), a.data(), b.data(), n);
  // One rounding of an exact fp32 sum to T.
  CHECK(mismatches("add", dout.download(), ref, 0.0f, eps_of<T>()) == 0);

  cuda::accumulate<T>(da.get(), db.get(), n, nullptr);
  auto acc = a;
  cpu::accumulate(acc.data(), b.data(), n);
  CHECK(mismatches("accumulate", da.download(), acc, 0.0f, eps_of<T>()) == 0);

  cuda::scale<T>(db.get(), 0.375f, n, nullptr);
  auto sc = b;
  cpu::scale(sc.data(), 0.375f, n);
  CHECK(mismatches("scale", db.download(), sc, 0.0f, eps_of<T>()) == 0);
}

TEMPLATE_TEST_CASE("bias + residual in one pass, bias backward", "[gpu][elementwise]", float, __half, __nv_bfloat16) {
  using T = TestType;
  const int n = 515, c = 77;
  auto x = rounded<T>(uniform(static_cast<std::size_t>(n) * c, 3));
  auto bias = rounded<T>(uniform(c, 4));
  auto res = rounded<T>(uniform(static_cast<std::size_t>(n) * c, 5));
  DeviceArray<T> dx(x), dbias(bias), dres(res), dout(x.size());
  cuda::bias_residual_forward<T>(dout.get(), dx.get(), dbias.get(), dres.get(), n, c, nullptr);
  auto ref = x;
  cpu::add_bias(ref.data(), bias.data(), n, c);
  cpu::accumulate(ref.data(), res.data(), static_cast<long>(ref.size()));
  // Three fp32 terms, one rounding to T; fp32 needs a few ulps for the two additions.
  CHECK(mismatches("bias_residual", dout.download(), ref, 1e-6f, 2 * eps_of<T>()) == 0);

  cuda::add_bias<T>(dx.get(), dbias.get(), n, c, nullptr);
  auto xb = x;
  cpu::add_bias(xb.data(), bias.data(), n, c);
  CHECK(mismatches("add_bias", dx.download(), xb, 0.0f, eps_of<T>()) == 0);

  // Column sums over 515 rows of values in [-1, 1): fp32 partial sums in a different
  // order than the CPU's; |sum| ≤ 515, so atol = 515·2^-24·8 covers reordering.
  std::vector<float> dbias_start = uniform(c, 6);
  DeviceArray<float> d_dbias(dbias_start);
  cuda::bias_backward<T>(d_dbias.get(), dres.get(), n, c, nullptr);
  auto dbias_ref = dbias_start;
  cpu::bias_backward(dbias_ref.data(), res.data(), n, c);
  CHECK(mismatches("bias_backward", d_dbias.download(), dbias_ref, 3e-4f, 1e-6f) == 0);
}

TEMPLATE_TEST_CASE("sum of squares in double", "[gpu][elementwise]", float, __half, __nv_bfloat16) {
  using T = TestType;
  const long n = 1 << 20;
  auto x = rounded<T>(uniform(n, 7));
  DeviceArray<T> dx(x);
  DeviceArray<double> result(1);
  cuda::sum_squares<T>(result.get(), dx.get(), n, nullptr);
  double got = 0;
  ZT_CUDA_CHECK(cudaMemcpy(&got, result.get(), sizeof(double), cudaMemcpyDeviceToHost));
  const double ref = cpu::sum_squares(x.data(), n);
  // Per-thread fp32 partials of ≤ 512 terms each: relative error ≲ 512·2^-24.
  CHECK(got == Approx(ref).epsilon(1e-4));
}

TEST_CASE("casts round to nearest even, like the host conversions", "[gpu][elementwise]") {
  // Values chosen to land between representable 16-bit values, plus specials.
  std::vector<float> v = uniform(4099, 8, -70000.0f, 70000.0f);
  v.insert(v.end(), {0.0f, -0.0f, 1.0f + 1.0f / 512, 1.0f + 3.0f / 512, 65504.0f, 65520.0f, 1e-8f, -1e-40f,
                     INFINITY, -INFINITY});
  DeviceArray<float> src(v);
  DeviceArray<__nv_bfloat16> bf(v.size());
  DeviceArray<__half> hf(v.size());
  DeviceArray<float> back(v.size());
  cuda::cast<float, __nv_bfloat16>(bf.get(), src.get(), static_cast<long>(v.size()), nullptr);
  cuda::cast<float, __half>(hf.get(), src.get(), static_cast<long>(v.size()), nullptr);
  std::vector<float> bf_ref(v.size()), hf_ref(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) {
    bf_ref[i] = to_float(__float2bfloat16_rn(v[i]));
    hf_ref[i] = to_float(__float2half_rn(v[i]));
  }
  CHECK(mismatches("cast fp32→bf16", bf.download(), bf_ref, 0.0f, 0.0f) == 0);
  CHECK(mismatches("cast fp32→fp16", hf.download(), hf_ref, 0.0f, 0.0f) == 0);
  cuda::cast<__nv_bfloat16, float>(back.get(), bf.get(), static_cast<long>(v.size()), nullptr);
  CHECK(mismatches("cast bf16→fp32", back.download(), bf_ref, 0.0f, 0.0f) == 0);
}
