#include "ztune/tuner/candidate.hpp"

#include <algorithm>

namespace ztune {

double Candidate::memory_pressure() const {
  const auto& m = prediction.memory;
  auto ratio = [](double used, double cap) { return cap > 0 ? used / cap : (used > 0 ? 1e30 : 0.0); };
  return std::max({ratio(m.gpu_total_bytes, m.gpu_usable_bytes), ratio(m.host_bytes_per_node, m.host_capacity_bytes),
                   ratio(m.nvme_bytes_per_node, m.nvme_capacity_bytes)});
}

}  // namespace ztune
