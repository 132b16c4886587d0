#include "ztune/simulator/resource.hpp"

#include <array>

namespace ztune::sim {

const char* to_string(ResourceKind k) {
  static constexpr std::array<const char*, static_cast<std::size_t>(ResourceKind::count)> kNames{
      "compute", "intra-node link", "inter-node link", "PCIe host→GPU", "PCIe GPU→host", "NVMe", "host CPU"};
  return kNames[static_cast<std::size_t>(k)];
}

std::string resource_name(const Resource& r) { return "stage " + std::to_string(r.stage) + " " + to_string(r.kind); }

}  // namespace ztune::sim
