#pragma once
// What executes operations. Compute streams and the host CPU run one operation
// at a time; links (a GPU's share of NVLink/NVSwitch or of the node's NICs,
// its PCIe lane set, the node's NVMe) carry several transfers at once and
// split their bandwidth equally among them (processor sharing).
#include <cstdint>
#include <string>

namespace ztune::sim {

enum class ResourceKind : std::uint8_t {
  compute,     // a GPU's compute stream
  intra_link,  // intra-node fabric (NVLink / NVSwitch), this GPU's port
  inter_link,  // inter-node fabric (InfiniBand), this GPU's share of the node's NICs
  pcie_h2d,    // this GPU's PCIe link, host → GPU
  pcie_d2h,    // the same link, GPU → host: PCIe is full duplex, each direction has its own lanes
  nvme,        // this GPU's share of the node's NVMe bandwidth
  host_cpu,    // this GPU's share of the host CPU (CPU Adam)
  count
};

[[nodiscard]] const char* to_string(ResourceKind k);

/// True when concurrent operations share the resource's bandwidth; false when
/// the resource runs them one after the other.
[[nodiscard]] constexpr bool shares_bandwidth(ResourceKind k) {
  return k == ResourceKind::intra_link || k == ResourceKind::inter_link || k == ResourceKind::pcie_h2d ||
         k == ResourceKind::pcie_d2h ||
         k == ResourceKind::nvme;
}

struct Resource {
  ResourceKind kind = ResourceKind::compute;
  int stage = 0;  // the pipeline stage (GPU of the simulated replica) it belongs to
};

/// "stage 3 compute", "stage 0 inter-node link", ...
[[nodiscard]] std::string resource_name(const Resource& r);

}  // namespace ztune::sim
