#include "ztune/model/finite_check.hpp"

#include <cmath>
#include <cstdio>

#include "ztune/vocab/input_error.hpp"

namespace ztune {

namespace {

std::string show(const char* name, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s = %g", name, v);
  return buf;
}

bool bad(double v) { return !std::isfinite(v) || v < 0; }

/// The inputs a time part is computed from, for the message.
const char* fed_by(TimePart p) {
  switch (p) {
    case TimePart::forward:
    case TimePart::backward:
    case TimePart::recompute:
    case TimePart::bubble:
      return "the GPU's peak_tflops and hbm_bandwidth_gbps, or the profile's gemm and memory_bound efficiencies";
    case TimePart::optimizer:
      return "the GPU's hbm_bandwidth_gbps, the node's cpu_adam_gparams_per_s, or the profile's efficiencies";
    case TimePart::tp_comm:
    case TimePart::pp_comm:
    case TimePart::cp_comm:
    case TimePart::ulysses_comm:
    case TimePart::dp_comm:
    case TimePart::zero3_gather:
      return "the fabric's bandwidth_gbps and latency_us, or the profile's fabric efficiencies";
    case TimePart::offload_stall:
      return "the node's pcie_bandwidth_gbps and nvme_bandwidth_gbps, or the profile's io efficiencies";
    case TimePart::overhead:
    case TimePart::count:
      break;
  }
  return "the profile's framework overheads";
}

}  // namespace

std::string non_finite_time(const TimePrediction& t) {
  for (std::size_t i = 0; i < t.parts.size(); ++i)
    if (bad(t.parts[i])) return show(kTimePartNames[i], t.parts[i]);
  if (bad(t.iteration_s)) return show("iteration_s", t.iteration_s);
  if (bad(t.tokens_per_s)) return show("tokens_per_s", t.tokens_per_s);
  if (bad(t.mfu)) return show("mfu", t.mfu);
  if (bad(t.hfu)) return show("hfu", t.hfu);
  return "";
}

std::string unpriced_precision(const Cluster& c, Precision p) {
  const GpuSpec& gpu = c.node.gpu;
  if (gpu.peak_flops(p) > 0) return "";
  const std::string dt = to_string(p);
  return "cluster " + c.name + " states no " + dt + " throughput for its " + gpu.name + " (node.gpu.peak_tflops." + dt +
         " is 0)";
}

void require_finite_time(const TimePrediction& t, const std::string& where) {
  const std::string what = non_finite_time(t);
  if (what.empty()) return;
  const char* cause = "a bandwidth, peak or efficiency in the cluster or profile";
  for (std::size_t i = 0; i < t.parts.size(); ++i)
    if (bad(t.parts[i])) {
      cause = fed_by(static_cast<TimePart>(i));
      break;
    }
  throw InputError(where + ": the predicted time is not finite (" + what + "): check " + cause +
                   " (a value such as 5e-324 is read as > 0 but makes the time infinite)");
}

}  // namespace ztune
