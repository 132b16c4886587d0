#pragma once
// The cost model's answer for one plan: memory per GPU (named lines that sum to
// the total), host and NVMe bytes, and iteration time (named parts that sum to
// the total). Declared here as the contract the tuner, simulator and GUI use;
// implemented by memory_model.cpp / time_model.cpp.
#include <string>
#include <utility>
#include <vector>

#include "ztune/model/cluster.hpp"
#include "ztune/model/plan.hpp"
#include "ztune/model/transformer.hpp"

namespace ztune {

struct HardwareProfile;  // hardware_profile.hpp: efficiency curves, α/β, overlap factors

/// One named line of a breakdown ("params", "activations", ...), in bytes or seconds.
struct Line {
  std::string name;
  double value = 0;
};

struct MemoryPrediction {
  std::vector<Line> gpu;          // bytes per GPU on the most loaded device; sums to gpu_total_bytes
  double gpu_total_bytes = 0;
  double gpu_capacity_bytes = 0;
  double host_bytes_per_node = 0; // offloaded states, pinned buffers
  double host_capacity_bytes = 0;
  double nvme_bytes_per_node = 0;
  double nvme_capacity_bytes = 0;
  bool fits_gpu = false;
  bool fits_host = false;
  bool fits_nvme = false;
  [[nodiscard]] bool fits() const { return fits_gpu && fits_host && fits_nvme; }
};

struct TimePrediction {
  std::vector<Line> breakdown;    // seconds; sums to iteration_s
  double iteration_s = 0;
  double tokens_per_s = 0;
  double model_flops = 0;         // per iteration, whole job (Korthikanti eq. 7)
  double hardware_flops = 0;      // including recomputation
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
};

struct Prediction {
  MemoryPrediction memory;
  TimePrediction time;
};

}  // namespace ztune
