#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "ztune/kernels/gelu.hpp"

using namespace ztune::kernels;

TEST_CASE("gelu matches known values of the tanh approximation", "[kernels][gelu]") {
  std::vector<float> x{0.0f, 1.0f, -1.0f, 3.0f}, y(4);
  cpu::gelu_forward(y.data(), x.data(), 4);
  CHECK(y[0] == 0.0f);
  // ½·1·(1 + tanh(√(2/π)·1.044715)) = 0.841192
  CHECK(y[1] == Approx(0.841192).epsilon(1e-5));
  CHECK(y[2] == Approx(-0.158808).epsilon(1e-4));
  CHECK(y[3] == Approx(2.996363).epsilon(1e-5));
}

TEST_CASE("gelu backward matches finite differences", "[kernels][gelu]") {
  auto x = ztune::test::random_vector(50, 1, 2.0f);
  auto dout = ztune::test::random_vector(50, 2);
  std::vector<float> y(50), dx(50, 0.0f);
  auto loss = [&] {
    cpu::gelu_forward(y.data(), x.data(), 50);
    return ztune::test::weighted_sum(y, dout);
  };
  cpu::gelu_backward(dx.data(), x.data(), dout.data(), 50);
  ztune::test::check_gradient(x, loss, dx, "dinp", 1e-3f);
}
