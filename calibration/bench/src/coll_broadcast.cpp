// broadcast from rank 0, in place: S = the array; every rank ends with rank 0's
// input. Bus factor 1.
#include <algorithm>

#include "ztune/calibration/collective_test.hpp"

namespace ztune::calibration {
namespace {

CollectiveCounts counts(std::size_t bytes, int) {
  const std::size_t n = std::max<std::size_t>(1, bytes / sizeof(float));
  return {n, n, 0};
}
void init(float* send, float*, const CollectiveCounts& c, int rank, int) {
  for (std::size_t i = 0; i < c.send; ++i) send[i] = rank == 0 ? verifiable_value(0, i) : -1.0f;
}
float expected(std::size_t i, const CollectiveCounts&, int, int) { return verifiable_value(0, i); }
void run(executor::Communicator& comm, float* send, float*, const CollectiveCounts& c) {
  comm.broadcast(send, c.send, 0);
}

}  // namespace

const CollectiveTest& broadcast_test() {
  static const CollectiveTest t{"broadcast", Collective::broadcast, true, counts, init, expected, run};
  return t;
}

}  // namespace ztune::calibration
