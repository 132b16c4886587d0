// qgZ's two-level quantized reduce-scatter on 4 ranks acting as 2 nodes × 2
// (ranks_per_node = 2): every rank checks its piece against the definition
// computed serially from all ranks' inputs (each rank's bucket is a known
// function of its rank): quantize each contribution's permuted bucket, sum the
// node's ranks chunk by chunk, quantize the node partials, sum the nodes.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/executor/process_groups.hpp"
#include "ztune/executor/zeropp_reduce.hpp"
#include "ztune/kernels/quantize.hpp"

using namespace ztune;
using namespace ztune::executor;

namespace {

constexpr std::size_t kPiece = 300;  // not a multiple of the quantization group: groups straddle pieces
constexpr long kGroup = 128;
constexpr int kBits = 4;

float input(int rank, std::size_t i) {
  return std::sin(0.37f * static_cast<float>(i) + 1.3f * static_cast<float>(rank)) * (1.0f + 0.25f * static_cast<float>(rank));
}

}  // namespace

TEST_CASE("two-level int4 reduce-scatter gives each rank its piece of the definition", "[mpi][zeropp]") {
  auto world = MpiCommunicator::world();
  REQUIRE(world->size() == 4);
  GroupShape shape{4, 1, 1};
  shape.ranks_per_node = 2;
  auto groups = make_process_groups(*world, shape);
  REQUIRE(groups.dp_intra != nullptr);
  REQUIRE(groups.dp_inter != nullptr);
  const int g = groups.dp_intra->size(), k = groups.dp_inter->size();
  REQUIRE((g == 2 && k == 2));
  const int me = groups.coords.dp_rank;
  CHECK(me == groups.dp_inter->rank() * g + groups.dp_intra->rank());

  const std::size_t n = static_cast<std::size_t>(g * k) * kPiece;
  CpuBackend be(1);
  Buffer bucket = be.allocate(n, MemCategory::grads);
  for (std::size_t i = 0; i < n; ++i) bucket.data()[i] = input(me, i);
  Buffer out = be.allocate(kPiece, MemCategory::comm_buckets);
  hierarchical_quantized_reduce_scatter(be, *groups.dp_intra, *groups.dp_inter, bucket.data(), out.data(), kPiece,
                                        kBits, kGroup);

  // The definition, serially. Chunk l of rank r's permuted bucket: its pieces l, g + l, ...
  const std::size_t chunk = static_cast<std::size_t>(k) * kPiece;
  std::vector<std::vector<float>> quantized(4, std::vector<float>(n));
  for (int r = 0; r < 4; ++r) {
    for (int l = 0; l < g; ++l)
      for (int node = 0; node < k; ++node)
        for (std::size_t i = 0; i < kPiece; ++i)
          quantized[static_cast<std::size_t>(r)][static_cast<std::size_t>(l) * chunk + node * kPiece + i] =
              input(r, static_cast<std::size_t>(node * g + l) * kPiece + i);
    kernels::cpu::quantize_dequantize(quantized[static_cast<std::size_t>(r)].data(), static_cast<long>(n), kBits,
                                      kGroup);
  }
  const int my_node = me / g, my_local = me % g;
  std::vector<float> expected(kPiece, 0.0f);
  for (int node = 0; node < k; ++node) {
    // Node `node`'s partial of chunk my_local: the sum over its local ranks, quantized.
    std::vector<float> partial(chunk, 0.0f);
    for (int l = 0; l < g; ++l)
      for (std::size_t i = 0; i < chunk; ++i)
        partial[i] += quantized[static_cast<std::size_t>(node * g + l)][static_cast<std::size_t>(my_local) * chunk + i];
    kernels::cpu::quantize_dequantize(partial.data(), static_cast<long>(chunk), kBits, kGroup);
    for (std::size_t i = 0; i < kPiece; ++i) expected[i] += partial[static_cast<std::size_t>(my_node) * kPiece + i];
  }
  double worst = 0, exact_sum_err = 0;
  for (std::size_t i = 0; i < kPiece; ++i) {
    worst = std::max(worst, static_cast<double>(std::fabs(out.data()[i] - expected[i])));
    float exact = 0;
    for (int r = 0; r < 4; ++r) exact += input(r, static_cast<std::size_t>(me) * kPiece + i);
    exact_sum_err = std::max(exact_sum_err, static_cast<double>(std::fabs(out.data()[i] - exact)));
  }
  INFO("rank " << me << ": max |result − definition| " << worst << ", max |result − exact sum| " << exact_sum_err);
  CHECK(worst <= 1e-5);
  // int4 twice is lossy: the result is not the exact sum, but near it (7 levels
  // per side on values of magnitude ≤ 1.75 per rank).
  CHECK(exact_sum_err > 1e-3);
  CHECK(exact_sum_err < 2.0);
}
