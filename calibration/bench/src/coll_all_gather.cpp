// all_gather, out of place: S = the gathered array (n·count elements);
// recv[q·count + j] = rank q's input[j]. Bus factor (n−1)/n.
#include <algorithm>

#include "ztune/calibration/collective_test.hpp"

namespace ztune::calibration {
namespace {

CollectiveCounts counts(std::size_t bytes, int n) {
  const std::size_t count = std::max<std::size_t>(1, bytes / sizeof(float) / static_cast<std::size_t>(n));
  return {count * static_cast<std::size_t>(n), count, count * static_cast<std::size_t>(n)};
}
void init(float* send, float* recv, const CollectiveCounts& c, int rank, int) {
  for (std::size_t i = 0; i < c.send; ++i) send[i] = verifiable_value(rank, i);
  std::fill(recv, recv + c.recv, -1.0f);
}
float expected(std::size_t i, const CollectiveCounts& c, int, int) {
  return verifiable_value(static_cast<int>(i / c.send), i % c.send);
}
void run(executor::Communicator& comm, float* send, float* recv, const CollectiveCounts& c) {
  comm.all_gather(send, recv, c.send);
}

}  // namespace

const CollectiveTest& all_gather_test() {
  static const CollectiveTest t{"all_gather", Collective::all_gather, false, counts, init, expected, run};
  return t;
}

}  // namespace ztune::calibration
