#include <catch2/catch.hpp>

#include "grad_check.hpp"
#include "ztune/kernels/embedding.hpp"

using namespace ztune::kernels;

TEST_CASE("embedding shards sum to the full lookup, backward scatters rows", "[kernels][embedding]") {
  const int vocab = 6, c = 3, n = 5;
  auto table = ztune::test::random_vector(vocab * c, 1);
  std::vector<std::int32_t> ids{0, 5, 2, 2, 3};
  std::vector<float> full(n * c), lo(n * c), hi(n * c);
  cpu::embedding_forward(full.data(), ids.data(), table.data(), n, c, 0, vocab);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < c; ++j) CHECK(full[i * c + j] == table[ids[i] * c + j]);
  cpu::embedding_forward(lo.data(), ids.data(), table.data(), n, c, 0, 3);
  cpu::embedding_forward(hi.data(), ids.data(), table.data() + 3 * c, n, c, 3, 3);
  for (int i = 0; i < n * c; ++i) CHECK(lo[i] + hi[i] == full[i]);

  auto dout = ztune::test::random_vector(n * c, 2);
  std::vector<float> dtable(vocab * c, 0.0f);
  cpu::embedding_backward(dtable.data(), dout.data(), ids.data(), n, c, 0, vocab);
  // Row 2 is used twice (ids 2 and 3), row 1 and 4 never.
  for (int j = 0; j < c; ++j) {
    CHECK(dtable[2 * c + j] == Approx(dout[2 * c + j] + dout[3 * c + j]));
    CHECK(dtable[1 * c + j] == 0.0f);
    CHECK(dtable[4 * c + j] == 0.0f);
  }
  std::vector<float> dhi(3 * c, 0.0f);
  cpu::embedding_backward(dhi.data(), dout.data(), ids.data(), n, c, 3, 3);
  for (int i = 0; i < 3 * c; ++i) CHECK(dhi[i] == dtable[3 * c + i]);
}
