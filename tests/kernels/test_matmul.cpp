#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "ztune/kernels/matmul.hpp"

using namespace ztune::kernels;

TEST_CASE("matmul forward is inp·W + b (closed form on a 2×2 case)", "[kernels][matmul]") {
  std::vector<float> inp{1, 2, 3, 4}, w{1, 0, 0, 1, 2, 3}, b{10, 20, 30}, out(6);
  // inp [2,2], w [2,3] = [[1,0,0],[1,2,3]]: row0 = 1·[1,0,0] + 2·[1,2,3] + b = [13,24,36]
  cpu::matmul_forward(out.data(), inp.data(), w.data(), b.data(), 2, 2, 3, nullptr);
  CHECK(out == std::vector<float>{13, 24, 36, 17, 28, 42});
}

TEST_CASE("matmul backward matches finite differences", "[kernels][matmul]") {
  const int n = 5, c = 4, oc = 3;
  auto inp = ztune::test::random_vector(n * c, 1);
  auto w = ztune::test::random_vector(c * oc, 2);
  auto b = ztune::test::random_vector(oc, 3);
  auto dout = ztune::test::random_vector(n * oc, 4);
  std::vector<float> out(n * oc), dinp(n * c, 0), dw(c * oc, 0), db(oc, 0);
  auto loss = [&] {
    cpu::matmul_forward(out.data(), inp.data(), w.data(), b.data(), n, c, oc, nullptr);
    return ztune::test::weighted_sum(out, dout);
  };
  cpu::matmul_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), n, c, oc, nullptr);
  ztune::test::check_gradient(inp, loss, dinp, "dinp");
  ztune::test::check_gradient(w, loss, dw, "dweight");
  ztune::test::check_gradient(b, loss, db, "dbias");
  // Backward accumulates: a second call doubles the gradients.
  auto dw1 = dw;
  cpu::matmul_backward(nullptr, dw.data(), nullptr, dout.data(), inp.data(), w.data(), n, c, oc, nullptr);
  for (std::size_t i = 0; i < dw.size(); ++i) CHECK(dw[i] == Approx(2 * dw1[i]));
}
