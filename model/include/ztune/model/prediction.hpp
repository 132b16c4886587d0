#pragma once
// The cost model's answer for one plan: memory per GPU (named lines that sum to
// the total), host and NVMe bytes, and iteration time (named parts that sum to
// the total). This is the contract the tuner, simulator and GUI use; it is
// implemented in memory_model.cpp / time_model.cpp. Lines are fixed enums (not
// strings) so one prediction allocates nothing: the tuner evaluates millions.
#include <array>
#include <cstdint>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

struct HardwareProfile;  // hardware_profile.hpp
class LayerCostMemo;     // layer_cost_memo.hpp

/// GPU memory lines (bytes per GPU, on the most loaded device).
enum class MemLine : std::uint8_t {
  params,          // 16-bit (or fp32) parameters resident on the GPU
  grads,           // gradients resident on the GPU
  optimizer,       // fp32 master weights + Adam momentum and variance on the GPU
  activations,     // stored activations of the micro-batches in flight
  comm_buckets,    // reduce / all-gather buckets (doubled with overlap)
  zero3_gathered,  // ZeRO-3 gathered parameters: largest layer, prefetch, live, persistent
  workspace,       // temporary buffers of the largest op (GEMM workspace, attention scores)
  logits,          // LM-head logits and loss buffers
  runtime,         // CUDA context and NCCL buffers
  fragmentation,   // allocator fragmentation allowance
  count
};
inline constexpr std::array<const char*, static_cast<std::size_t>(MemLine::count)> kMemLineNames{
    "params", "grads", "optimizer", "activations", "comm_buckets", "zero3_gathered",
    "workspace", "logits", "runtime", "fragmentation"};

/// Parts of one iteration's wall time (seconds); they sum to the iteration time.
enum class TimePart : std::uint8_t {
  forward,          // forward compute
  backward,         // backward compute
  recompute,        // recomputed forward
  optimizer,        // optimizer step exposed on the critical path (GPU or host)
  tp_comm,          // exposed tensor-parallel collectives
  pp_comm,          // exposed pipeline send/recv
  cp_comm,          // exposed context-parallel ring exchange of K/V (and dK/dV) beside the attention blocks
  ulysses_comm,     // DeepSpeed-Ulysses all-to-alls of Q, K, V and the attention output (blocking)
  dp_comm,          // exposed data-parallel gradient reduction / ZeRO-1/2 gathers
  zero3_gather,     // exposed ZeRO-3 parameter all-gathers
  bubble,           // pipeline bubble
  offload_stall,    // exposed PCIe / NVMe transfers
  overhead,         // framework overhead: host dispatch the GPU waits on, per-micro-batch and per-step fixed costs
  count
};
inline constexpr std::array<const char*, static_cast<std::size_t>(TimePart::count)> kTimePartNames{
    "forward", "backward", "recompute", "optimizer", "tp_comm", "pp_comm", "cp_comm", "ulysses_comm", "dp_comm",
    "zero3_gather", "bubble", "offload_stall", "overhead"};

struct MemoryPrediction {
  std::array<double, static_cast<std::size_t>(MemLine::count)> gpu{};  // bytes per line
  double gpu_total_bytes = 0;      // sum of gpu lines
  int stage = 0;                   // the pipeline stage (0-based) the lines are of: the most loaded
  double gpu_capacity_bytes = 0;
  double gpu_usable_bytes = 0;     // capacity less the headroom the user keeps free (MemoryOptions)
  double host_bytes_per_node = 0;  // offloaded states, pinned buffers
  double host_capacity_bytes = 0;
  double nvme_bytes_per_node = 0;
  double nvme_capacity_bytes = 0;
  bool fits_gpu = false;
  bool fits_host = false;
  bool fits_nvme = false;
  [[nodiscard]] bool fits() const { return fits_gpu && fits_host && fits_nvme; }
  [[nodiscard]] double line(MemLine l) const { return gpu[static_cast<std::size_t>(l)]; }
};

struct TimePrediction {
  std::array<double, static_cast<std::size_t>(TimePart::count)> parts{};  // seconds; sum = iteration_s
  double iteration_s = 0;
  double tokens_per_s = 0;
  double model_flops = 0;          // per iteration, whole job (Korthikanti eq. 7)
  double hardware_flops = 0;       // including recomputation
  double model_tflops_per_gpu = 0;
  double hardware_tflops_per_gpu = 0;
  double mfu = 0;
  double hfu = 0;
  [[nodiscard]] double part(TimePart p) const { return parts[static_cast<std::size_t>(p)]; }
};

struct Prediction {
  MemoryPrediction memory;
  TimePrediction time;
};

/// Memory alone (the tuner prunes by memory before timing anything).
MemoryPrediction predict_memory(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw);
/// Analytical iteration time. With a memo that serves m, c and hw (a search's
/// rank pass: layer_cost_memo.hpp) the layer and edge costs come from it; the
/// result is the same.
TimePrediction predict_time(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw,
                            LayerCostMemo* memo = nullptr);
/// Both. The plan must satisfy check_plan(); behaviour is unspecified otherwise.
Prediction predict(const Transformer& m, const Plan& p, const Cluster& c, const HardwareProfile& hw);

}  // namespace ztune
