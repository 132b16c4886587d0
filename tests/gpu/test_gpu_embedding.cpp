// Embedding forward/backward against kernels/embedding.hpp's CPU reference, on a
// vocabulary shard (ids outside it give zero rows and no gradient).
#include <catch2/catch.hpp>

#include "gpu_support.hpp"
#include "ztune/kernels/cuda/embedding.hpp"
#include "ztune/kernels/embedding.hpp"

using namespace ztune::kernels;
using namespace ztune::test;

TEMPLATE_TEST_CASE("embedding forward and backward on a vocabulary shard", "[gpu][embedding]", float, __half,
                   __nv_bfloat16) {
  using T = TestType;
  const int n = 300, c = 96, row_begin = 50, rows = 100;  // full vocabulary 0..199
  std::vector<std::int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = (i * 37 + 11) % 200;  // hits, misses and repeats
  auto table = rounded<T>(uniform(static_cast<std::size_t>(rows) * c, 1));
  auto dout = rounded<T>(uniform(static_cast<std::size_t>(n) * c, 2));
  DeviceIds d_ids(ids);
  DeviceArray<T> d_table(table), d_out(static_cast<std::size_t>(n) * c), d_dout(dout);
  cuda::embedding_forward<T>(d_out.get(), d_ids.get(), d_table.get(), n, c, row_begin, rows, nullptr);
  std::vector<float> ref(static_cast<std::size_t>(n) * c);
  cpu::embedding_forward(ref.data(), ids.data(), table.data(), n, c, row_begin, rows);
  CHECK(mismatches("embedding_forward", d_out.download(), ref, 0.0f, 0.0f) == 0);  // a copy: exact

  auto dtable_start = uniform(static_cast<std::size_t>(rows) * c, 3);
  DeviceArray<float> d_dtable(dtable_start);
  cuda::embedding_backward<T>(d_dtable.get(), d_dout.get(), d_ids.get(), n, c, row_begin, rows, nullptr);
  auto dref = dtable_start;
  cpu::embedding_backward(dref.data(), dout.data(), ids.data(), n, c, row_begin, rows);
  // Each row sums ≤ 2 repeats in any order (fp32 atomics): a few fp32 ulps.
  CHECK(mismatches("embedding_backward", d_dtable.download(), dref, 1e-6f, 4 * eps_of<float>()) == 0);
}
