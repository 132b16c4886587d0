#pragma once
// Hardware efficiency as data (STYLE.md #12): GEMM efficiency by shape,
// achieved bandwidth of memory-bound kernels, α/β per fabric level, overlap
// factors, host Adam rate. Defaults per GPU type live in data/profiles/;
// calibration writes fitted ones. (Skeleton: the cost-model work fills it in.)
#include <string>

#include "ztune/model/cluster.hpp"

namespace ztune {

struct HardwareProfile {
  std::string name;     // e.g. "default-a100"
  std::string source;   // where the numbers come from
};

/// The default profile for the cluster's GPU type (data/profiles/).
HardwareProfile default_profile_for(const Cluster& c);
/// A profile file (schema "ztune.profile/1"); InputError names file and path.
HardwareProfile load_profile(const std::string& path);

}  // namespace ztune
