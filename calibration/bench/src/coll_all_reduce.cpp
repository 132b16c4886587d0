// all_reduce, in place: S = the array; every rank ends with Σ_r input_r.
// Bus factor 2(n−1)/n (nccl-tests doc/PERFORMANCE.md).
#include <algorithm>

#include "ztune/calibration/collective_test.hpp"

namespace ztune::calibration {
namespace {

CollectiveCounts counts(std::size_t bytes, int) {
  const std::size_t n = std::max<std::size_t>(1, bytes / sizeof(float));
  return {n, n, 0};
}
void init(float* send, float*, const CollectiveCounts& c, int rank, int) {
  for (std::size_t i = 0; i < c.send; ++i) send[i] = verifiable_value(rank, i);
}
float expected(std::size_t i, const CollectiveCounts&, int, int n) {
  double sum = 0;
  for (int r = 0; r < n; ++r) sum += verifiable_value(r, i);
  return static_cast<float>(sum);
}
void run(executor::Communicator& comm, float* send, float*, const CollectiveCounts& c) {
  comm.all_reduce(send, c.send);
}

}  // namespace

const CollectiveTest& all_reduce_test() {
  static const CollectiveTest t{"all_reduce", Collective::all_reduce, true, counts, init, expected, run};
  return t;
}

}  // namespace ztune::calibration
