#include <array>

#include "ztune/calibration/collective_test.hpp"

namespace ztune::calibration {

std::span<const CollectiveTest* const> collective_tests() {
  static const std::array<const CollectiveTest*, 5> all{&all_reduce_test(), &reduce_scatter_test(),
                                                        &all_gather_test(), &broadcast_test(), &sendrecv_test()};
  return all;
}

const CollectiveTest* find_collective_test(const std::string& name) {
  for (const auto* t : collective_tests())
    if (name == t->name) return t;
  return nullptr;
}

}  // namespace ztune::calibration
