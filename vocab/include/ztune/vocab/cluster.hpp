#pragma once
// The hardware a plan runs on: identical nodes, each with GPUs (or CPU ranks for
// the CPU backend), host memory, PCIe, NVMe, and a two-level fabric.
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "ztune/vocab/text.hpp"

namespace ztune {

enum class Precision { fp16, bf16, fp32 };
/// The names of the precisions, in the enum's order: what plan files, the
/// CLI's --precision and --grad-reduce-dtype and validation.json spell.
inline constexpr const char* kPrecisionNames[] = {"fp16", "bf16", "fp32"};
std::string to_string(Precision p);
/// "fp16", "bf16" or "fp32"; nothing for any other text. THE parser of the
/// name (plan files, --precision, the planner).
[[nodiscard]] std::optional<Precision> precision_of(const std::string& name);

enum class DeviceKind { gpu, cpu };

struct GpuSpec {
  std::string name;              // e.g. "V100-SXM3-32GB"
  double memory_gb = 0;          // device memory as datasheets print it ("32GB", "80GB")
  double peak_tflops_fp16 = 0;   // dense tensor-core peak, TFLOP/s; 0 = unsupported
  double peak_tflops_bf16 = 0;   // 0 = unsupported (V100)
  double peak_tflops_fp32 = 0;   // non-tensor-core fp32 peak
  double hbm_bandwidth_gbps = 0; // GB/s
  /// Dense FP8 tensor-core peak (E4M3/E5M2 inputs, fp32 accumulation), TFLOP/s;
  /// 0 = no FP8 units (before Ada and Hopper). What plan.fp8's GEMMs run at.
  /// Last, so the brace-initialised specs (name, memory, peaks, HBM) keep their order.
  double peak_tflops_fp8 = 0;

  /// Peak dense FLOP/s for `p`, 0 when the device has no such unit.
  [[nodiscard]] double peak_flops(Precision p) const;
  /// Capacity in bytes. Datasheet HBM sizes are binary ("32GB" V100 = 32 GiB,
  /// "80GB" A100 = 81920 MiB in nvidia-smi), so GB here means 2^30 bytes.
  [[nodiscard]] double memory_bytes() const { return memory_gb * kBytesPerGiB; }
};

/// One level of the interconnect hierarchy.
struct FabricLevel {
  std::string name;               // "NVSwitch", "EDR InfiniBand"
  double bandwidth_gbps = 0;      // GB/s per GPU (intra) or per NIC (inter), one direction
  double latency_us = 0;          // per message step
  int nics_per_node = 0;          // inter-node only; 0 for intra-node
  std::string topology;           // "nvswitch", "fat-tree", ...
  std::optional<double> collective_efficiency;  // measured busbw / bandwidth, if known
};

struct NodeSpec {
  int gpus = 0;                   // devices per node (CPU ranks for the CPU backend)
  GpuSpec gpu;
  double host_memory_gb = 0;
  int cpu_cores = 0;
  double cpu_adam_gparams_per_s = 0;  // host Adam rate, 1e9 parameters updated per second
  double pcie_bandwidth_gbps = 0;     // GB/s per GPU, one direction
  double nvme_bandwidth_gbps = 0;     // GB/s per node, read or write
  double nvme_size_tb = 0;            // per node
};

/// Bounds of a cluster file (and of --nodes): nodes × GPUs per node stays below
/// 2^31, so total_devices() is an exact int.
inline constexpr int kMaxClusterNodes = 1000000;
inline constexpr int kMaxNodeGpus = 1024;

struct Cluster {
  std::string name;
  std::string source;   // where the figures come from
  std::string file;     // the file it was read from, for messages ("" when built in code; not written back)
  DeviceKind device_kind = DeviceKind::gpu;
  int nodes = 0;
  NodeSpec node;
  FabricLevel intra_node;
  FabricLevel inter_node;

  /// Devices in the cluster: GPUs, or CPU ranks for the CPU backend (the node's
  /// `gpus` counts either).
  [[nodiscard]] int total_devices() const { return nodes * node.gpus; }
  /// Aggregate inter-node bandwidth per GPU (GB/s): NICs × bandwidth / GPUs per node.
  [[nodiscard]] double inter_node_gbps_per_gpu() const;
};

/// The precision a plan trains in when none is given, THE one default (predict,
/// search, run, the planner): fp32 on CPU ranks (the CPU backend's only
/// one); 16-bit mixed precision on GPUs, bf16 where the GPU has it (no loss
/// scaling), fp16 where it does not (V100).
[[nodiscard]] Precision default_precision(const Cluster& c);

/// Whether the cluster's devices run a FlashAttention kernel: FlashAttention-2
/// (Dao 2023) needs Ampere (sm_80) or newer, the first generation with bf16
/// tensor cores, so a GPU that lists a bf16 peak qualifies and a V100 does not.
/// ztune's CPU executor has its own (flash_attention_forward in kernels/).
[[nodiscard]] bool supports_flash_attention(const Cluster& c);
/// Whether Transformer Engine runs on c's devices (what its userbuffers TP
/// overlap, plan.tp_comm_overlap, needs): GPUs with bf16 tensor cores (Ampere
/// or newer); TE has no V100 or CPU path.
[[nodiscard]] bool supports_transformer_engine(const Cluster& c);

/// Parses a cluster document; `file` names it in error messages.
Cluster cluster_from_json(const nlohmann::json& doc, const std::string& file);
nlohmann::json cluster_to_json(const Cluster& c);
/// Loads a cluster from a path or a catalog name (data/clusters/NAME.json).
Cluster load_cluster(const std::string& name_or_path);

}  // namespace ztune
