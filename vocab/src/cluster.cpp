#include "ztune/vocab/cluster.hpp"

#include <sstream>

#include <nlohmann/json.hpp>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/name_table.hpp"

namespace ztune {

std::string to_string(Precision p) { return name_in(kPrecisionNames, p); }

std::optional<Precision> precision_of(const std::string& name) { return value_in<Precision>(kPrecisionNames, name); }

Precision default_precision(const Cluster& c) {
  if (c.device_kind == DeviceKind::cpu) return Precision::fp32;
  return c.node.gpu.peak_flops(Precision::bf16) > 0 ? Precision::bf16 : Precision::fp16;
}

double GpuSpec::peak_flops(Precision p) const {
  switch (p) {
    case Precision::fp16: return peak_tflops_fp16 * 1e12;
    case Precision::bf16: return peak_tflops_bf16 * 1e12;
    case Precision::fp32: return peak_tflops_fp32 * 1e12;
  }
  return 0;
}

double Cluster::inter_node_gbps_per_gpu() const {
  return inter_node.bandwidth_gbps * inter_node.nics_per_node / node.gpus;
}

namespace {

// Ceilings of the cluster file's quantities: its rates share the range every
// file's do (json_reader.hpp kMinRate, kMaxRate); a capacity of a million GB or
// TB is likewise far past any hardware (what lies past it is a typo, and the
// byte counts computed from it overflow).
constexpr double kMaxCapacity = 1e6;

/// A number as a person writes it in a message: 40, 1.5, 0.064.
std::string short_number(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

/// A capacity (GB, TB; > 0, or >= 0 when `allow_zero`) under the same floor
/// and ceiling: 1e-300 GB was read as > 0 and printed as 0.000 capacity.
double capacity(ObjectReader& r, std::string_view key, bool allow_zero = false) {
  static_assert(kMaxCapacity == kMaxRate);
  return r.rate(key, allow_zero);
}

FabricLevel read_level(ObjectReader r, bool inter) {
  FabricLevel f;
  f.name = r.name("name");
  f.bandwidth_gbps = r.rate("bandwidth_gbps");
  f.latency_us = r.positive("latency_us", true, kMaxLatencyUs);
  f.topology = r.string("topology");
  if (inter) f.nics_per_node = static_cast<int>(r.integer("nics_per_node", 1, 1024));
  f.collective_efficiency = r.optional_fraction("collective_efficiency");
  r.finish();
  return f;
}

}  // namespace

Cluster cluster_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  r.schema("ztune.cluster/1");
  Cluster c;
  c.file = file;
  c.name = r.name("name");
  c.source = r.string("source");
  c.device_kind = r.choice("device_kind", {"gpu", "cpu"}) == "cpu" ? DeviceKind::cpu : DeviceKind::gpu;
  c.nodes = static_cast<int>(r.integer("nodes", 1, kMaxClusterNodes));
  {
    auto n = r.object("node");
    c.node.gpus = static_cast<int>(n.integer("gpus", 1, kMaxNodeGpus));
    {
      auto g = n.object("gpu");
      c.node.gpu.name = g.name("name");
      c.node.gpu.memory_gb = capacity(g, "memory_gb");
      auto peak = g.object("peak_tflops");
      c.node.gpu.peak_tflops_fp16 = peak.rate("fp16", true);
      c.node.gpu.peak_tflops_bf16 = peak.rate("bf16", true);
      c.node.gpu.peak_tflops_fp32 = peak.rate("fp32");
      // Optional: a GPU without FP8 tensor cores names none (or 0).
      if (peak.optional_positive("fp8", true)) c.node.gpu.peak_tflops_fp8 = peak.rate("fp8", true);
      peak.finish();
      if (c.node.gpu.peak_tflops_fp16 == 0 && c.node.gpu.peak_tflops_bf16 == 0 && c.device_kind == DeviceKind::gpu)
        throw peak.error("", "expected a 16-bit peak > 0 (fp16 or bf16) for a GPU, got fp16 0 and bf16 0");
      c.node.gpu.hbm_bandwidth_gbps = g.rate("hbm_bandwidth_gbps");
      // Figures no GPU has, each the right one in another unit (a datasheet's
      // TB/s, PFLOP/s, nvidia-smi's MiB): refused, naming the unit meant, not
      // priced as a GPU 1,000 times slower or larger than the one described.
      if (c.device_kind == DeviceKind::gpu) {
        if (c.node.gpu.memory_gb > 4096)
          throw g.error("memory_gb", "expected the GPU's memory in GiB (the largest GPUs hold under 300; nvidia-smi's "
                                     "total MiB / 1024), got " + short_number(c.node.gpu.memory_gb) +
                                     ", which looks like MiB");
        if (c.node.gpu.hbm_bandwidth_gbps < 50)
          throw g.error("hbm_bandwidth_gbps", "expected GB/s (an H100 SXM is 3350), got " +
                                                  short_number(c.node.gpu.hbm_bandwidth_gbps) + ", which looks like TB/s");
        for (const auto& [key, v] : {std::pair{"peak_tflops.fp16", c.node.gpu.peak_tflops_fp16},
                                     std::pair{"peak_tflops.bf16", c.node.gpu.peak_tflops_bf16}})
          if (v > 0 && v < 5)
            throw g.error(key, std::string("expected dense TFLOP/s (an H100 SXM is 989.4), got ") + short_number(v) +
                                   ", which looks like PFLOP/s");
      }
      g.finish();
    }
    c.node.host_memory_gb = capacity(n, "host_memory_gb");
    c.node.cpu_cores = static_cast<int>(n.integer("cpu_cores", 1, 100000));
    c.node.cpu_adam_gparams_per_s = n.rate("cpu_adam_gparams_per_s");
    c.node.pcie_bandwidth_gbps = n.rate("pcie_bandwidth_gbps");
    c.node.nvme_bandwidth_gbps = n.rate("nvme_bandwidth_gbps", true);
    c.node.nvme_size_tb = capacity(n, "nvme_size_tb", true);
    if ((c.node.nvme_bandwidth_gbps == 0) != (c.node.nvme_size_tb == 0))
      throw n.error("nvme_size_tb", "expected NVMe size and bandwidth both 0 (no NVMe) or both > 0, got size " +
                                        short_number(c.node.nvme_size_tb) + " TB and bandwidth " +
                                        short_number(c.node.nvme_bandwidth_gbps) + " GB/s");
    n.finish();
  }
  {
    auto f = r.object("fabric");
    c.intra_node = read_level(f.object("intra_node"), false);
    auto inter = f.object("inter_node");
    c.inter_node = read_level(inter, true);
    // The fastest NICs carry 800 Gb/s, 100 GB/s a direction.
    if (c.device_kind == DeviceKind::gpu && c.inter_node.bandwidth_gbps > 200)
      throw inter.error("bandwidth_gbps", "expected GB/s per NIC in one direction (line rate in Gb/s / 8: 400 Gb/s "
                                          "NDR is 50), got " + short_number(c.inter_node.bandwidth_gbps) +
                                          ", which looks like Gb/s");
    f.finish();
  }
  r.finish();
  return c;
}

nlohmann::json cluster_to_json(const Cluster& c) {
  auto level = [](const FabricLevel& f, bool inter) {
    nlohmann::json j{{"name", f.name}, {"bandwidth_gbps", f.bandwidth_gbps},
                     {"latency_us", f.latency_us}, {"topology", f.topology}};
    if (inter) j["nics_per_node"] = f.nics_per_node;
    if (f.collective_efficiency) j["collective_efficiency"] = *f.collective_efficiency;
    return j;
  };
  const auto& g = c.node.gpu;
  nlohmann::json peaks{{"fp16", g.peak_tflops_fp16}, {"bf16", g.peak_tflops_bf16}, {"fp32", g.peak_tflops_fp32}};
  if (g.peak_tflops_fp8 > 0) peaks["fp8"] = g.peak_tflops_fp8;  // written only where the GPU has FP8 units
  return nlohmann::json{
      {"schema", "ztune.cluster/1"},
      {"name", c.name},
      {"source", c.source},
      {"device_kind", c.device_kind == DeviceKind::cpu ? "cpu" : "gpu"},
      {"nodes", c.nodes},
      {"node",
       {{"gpus", c.node.gpus},
        {"gpu",
         {{"name", g.name},
          {"memory_gb", g.memory_gb},
          {"peak_tflops", peaks},
          {"hbm_bandwidth_gbps", g.hbm_bandwidth_gbps}}},
        {"host_memory_gb", c.node.host_memory_gb},
        {"cpu_cores", c.node.cpu_cores},
        {"cpu_adam_gparams_per_s", c.node.cpu_adam_gparams_per_s},
        {"pcie_bandwidth_gbps", c.node.pcie_bandwidth_gbps},
        {"nvme_bandwidth_gbps", c.node.nvme_bandwidth_gbps},
        {"nvme_size_tb", c.node.nvme_size_tb}}},
      {"fabric", {{"intra_node", level(c.intra_node, false)}, {"inter_node", level(c.inter_node, true)}}}};
}

Cluster load_cluster(const std::string& name_or_path) {
  std::string path = resolve_catalog_path("clusters", name_or_path);
  return cluster_from_json(read_json_file(path), path);
}

bool supports_flash_attention(const Cluster& c) {
  return c.device_kind == DeviceKind::cpu || c.node.gpu.peak_tflops_bf16 > 0;
}

bool supports_transformer_engine(const Cluster& c) {
  return c.device_kind == DeviceKind::gpu && c.node.gpu.peak_tflops_bf16 > 0;
}

}  // namespace ztune
