// GELU against kernels/gelu.hpp; SwiGLU against kernels/swiglu.hpp (Shazeer 2020,
// eq. 6; checked by hand and by finite differences in tests/kernels/test_llama_kernels.cpp).
#include <catch2/catch.hpp>

#include <cmath>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/gelu.hpp"
#include "ztune/kernels/cuda/swiglu.hpp"
#include "ztune/kernels/gelu.hpp"
#include "ztune/kernels/swiglu.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEMPLATE_TEST_CASE("GELU forward and backward match the CPU", "[gpu][activation]", float, __half, __nv_bfloat16) {
  using T = TestType;
  const long n = 70001;
  auto x = rounded<T>(uniform(n, 1, -6.0f, 6.0f));
  auto dy = rounded<T>(uniform(n, 2));
  auto dx0 = rounded<T>(uniform(n, 3));
  DeviceArray<T> d_x(x), d_y(n), d_dy(dy), d_dx(dx0);
  cuda::gelu_forward<T>(d_y.get(), d_x.get(), n, nullptr);
  cuda::gelu_backward<T>(d_dx.get(), d_x.get(), d_dy.get(), n, nullptr);
  std::vector<float> y(n);
  auto dx = dx0;
  cpu::gelu_forward(y.data(), x.data(), n);
  cpu::gelu_backward(dx.data(), x.data(), dy.data(), n);
  // tanhf/expf on the device differ from the host's libm by a few fp32 ulps.
  CHECK(mismatches("gelu", d_y.download(), y, 1e-6f, eps_of<T>() + 4e-7f) == 0);
  CHECK(mismatches("gelu_backward", d_dx.download(), dx, 1e-6f, eps_of<T>() + 4e-7f) == 0);
}

TEMPLATE_TEST_CASE("SwiGLU forward and backward match the CPU", "[gpu][activation]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  const int n = 33, f = 300;
  auto inp = rounded<T>(uniform(static_cast<std::size_t>(n) * 2 * f, 4, -4.0f, 4.0f));
  auto dy = rounded<T>(uniform(static_cast<std::size_t>(n) * f, 5));
  DeviceArray<T> d_in(inp), d_out(static_cast<std::size_t>(n) * f), d_dy(dy), d_din(inp.size());
  cuda::swiglu_forward<T>(d_out.get(), d_in.get(), n, f, nullptr);
  cuda::swiglu_backward<T>(d_din.get(), d_in.get(), d_dy.get(), n, f, nullptr);
  std::vector<float> out(static_cast<std::size_t>(n) * f), din(inp.size(), 0.0f);
  cpu::swiglu_forward(out.data(), inp.data(), n, f);
  cpu::swiglu_backward(din.data(), inp.data(), dy.data(), n, f);
  CHECK(mismatches("swiglu", d_out.download(), out, 1e-6f, eps_of<T>() + 4e-7f) == 0);
  CHECK(mismatches("swiglu_backward", d_din.download(), din, 1e-6f, eps_of<T>() + 4e-7f) == 0);
}
