// sendrecv (nccl-tests' point-to-point test): every rank sends its array to the
// next rank of the ring and receives the previous rank's, at once. S = the
// array one rank sends; bus factor 1 (the pipeline's activation send).
#include <algorithm>

#include "ztune/calibration/collective_test.hpp"

namespace ztune::calibration {
namespace {

constexpr int kTag = 7101;

CollectiveCounts counts(std::size_t bytes, int) {
  const std::size_t n = std::max<std::size_t>(1, bytes / sizeof(float));
  return {n, n, n};
}
void init(float* send, float* recv, const CollectiveCounts& c, int rank, int) {
  for (std::size_t i = 0; i < c.send; ++i) send[i] = verifiable_value(rank, i);
  std::fill(recv, recv + c.recv, -1.0f);
}
float expected(std::size_t i, const CollectiveCounts&, int rank, int n) {
  return verifiable_value((rank + n - 1) % n, i);
}
void run(executor::Communicator& comm, float* send, float* recv, const CollectiveCounts& c) {
  const int n = comm.size(), r = comm.rank();
  auto rx = comm.recv_async(recv, c.recv, (r + n - 1) % n, kTag);
  auto tx = comm.send_async(send, c.send, (r + 1) % n, kTag);
  rx->wait();
  tx->wait();
}

}  // namespace

const CollectiveTest& sendrecv_test() {
  static const CollectiveTest t{"sendrecv", Collective::send, false, counts, init, expected, run};
  return t;
}

}  // namespace ztune::calibration
