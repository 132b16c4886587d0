// reduce_scatter, out of place: S = the input array (n·count elements); rank r
// receives Σ_q input_q[r·count, (r+1)·count). Bus factor (n−1)/n.
#include <algorithm>

#include "ztune/calibration/collective_test.hpp"

namespace ztune::calibration {
namespace {

CollectiveCounts counts(std::size_t bytes, int n) {
  const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float) / static_cast<std::size_t>(n));
  return {count * static_cast<std::size_t>(n), count * static_cast<std::size_t>(n), count};
}
void init(float* send, float* recv, const CollectiveCounts& c, int rank, int) {
  for (std::size_t i = 0; i < c.send; ++i) send[i] = verifiable_value(rank, i);
  std::fill(recv, recv + c.recv, -1.0f);
}
float expected(std::size_t i, const CollectiveCounts& c, int rank, int n) {
  double sum = 0;
  for (int q = 0; q < n; ++q) sum += verifiable_value(q, static_cast<std::size_t>(rank) * c.recv + i);
  return static_cast<float>(sum);
}
void run(executor::Communicator& comm, float* send, float* recv, const CollectiveCounts& c) {
  comm.reduce_scatter(send, recv, c.recv);
}

}  // namespace

const CollectiveTest& reduce_scatter_test() {
  static const CollectiveTest t{"reduce_scatter", Collective::reduce_scatter, false, counts, init, expected, run};
  return t;
}

}  // namespace ztune::calibration
