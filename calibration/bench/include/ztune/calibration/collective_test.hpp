#pragma once
// One record per collective, filled by one small file each (STYLE.md #3,
// nccl-tests' testColl): how many elements the send and receive buffers hold
// for a message of nccl-tests size S, the verifiable initial data (small
// integers, so every reduction is exact in fp32) and the closed-form expected
// result, the bus factor (vocab/collective.hpp, THE one definition), and the call.
// The shared driver (collective_bench.hpp) runs every registered test.
#include <cstddef>
#include <span>
#include <string>

#include "ztune/executor/communicator.hpp"
#include "ztune/vocab/collective.hpp"

namespace ztune::calibration {

/// Element counts of one message: nccl-tests' S = size_elems · 4 bytes.
struct CollectiveCounts {
  std::size_t size_elems = 0;  // S / sizeof(float) after rounding to the group
  std::size_t send = 0;        // send buffer elements
  std::size_t recv = 0;        // receive buffer elements (0: in place in the send buffer)
};

/// rank r's input element i: (r + 1) + (i mod 5). Sums over n ranks stay exact integers in fp32.
inline float verifiable_value(int rank, std::size_t i) { return static_cast<float>(rank + 1 + static_cast<int>(i % 5)); }

struct CollectiveTest {
  const char* name;   // nccl-tests' name (all_reduce, reduce_scatter, all_gather, broadcast, sendrecv)
  Collective kind;    // for bus_factor()
  bool in_place;      // result lands in the send buffer
  /// Rounds `bytes` to what the group can carry (RS/AG need a multiple of n elements).
  CollectiveCounts (*counts)(std::size_t bytes, int n);
  /// Fills the send buffer of `rank` (and poisons recv with -1).
  void (*init)(float* send, float* recv, const CollectiveCounts& c, int rank, int n);
  /// The expected value of result element i on `rank`.
  float (*expected)(std::size_t i, const CollectiveCounts& c, int rank, int n);
  /// Issues the collective on `comm` (blocking).
  void (*run)(executor::Communicator& comm, float* send, float* recv, const CollectiveCounts& c);
};

const CollectiveTest& all_reduce_test();
const CollectiveTest& reduce_scatter_test();
const CollectiveTest& all_gather_test();
const CollectiveTest& broadcast_test();
const CollectiveTest& sendrecv_test();

/// Every registered test, in report order.
std::span<const CollectiveTest* const> collective_tests();
/// The test called `name`, or nullptr.
const CollectiveTest* find_collective_test(const std::string& name);

}  // namespace ztune::calibration
