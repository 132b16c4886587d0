#include "ztune/model/hardware_profile.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ztune/model/catalog.hpp"
#include "ztune/model/json_reader.hpp"

namespace ztune {

double HardwareProfile::gemm_efficiency_at(double flops) const {
  // Rows are descending in size (checked at load).
  const auto& t = gemm_efficiency;
  if (t.empty()) return 1.0;
  if (flops >= t.front().size) return t.front().efficiency;
  if (flops <= t.back().size) return t.back().efficiency;
  for (std::size_t i = 1; i < t.size(); ++i) {
    if (flops >= t[i].size) {
      const double w = std::log(flops / t[i].size) / std::log(t[i - 1].size / t[i].size);
      return t[i].efficiency + w * (t[i - 1].efficiency - t[i].efficiency);
    }
  }
  return t.back().efficiency;
}

namespace {

double fraction(ObjectReader& r, std::string_view key) {
  double v = r.positive(key);
  if (v > 1.0) throw r.error(key, "expected a fraction in (0, 1], got " + std::to_string(v));
  return v;
}
double overlap(ObjectReader& r, std::string_view key) {
  double v = r.positive(key, true);
  if (v > 1.0) throw r.error(key, "expected a fraction in [0, 1], got " + std::to_string(v));
  return v;
}

FabricProfile read_fabric(ObjectReader r) {
  FabricProfile f;
  f.busbw_efficiency = fraction(r, "busbw_efficiency");
  f.latency_s = r.positive("latency_us", true) * 1e-6;
  f.base_latency_s = r.positive("base_latency_us", true) * 1e-6;
  r.finish();
  return f;
}

std::vector<EfficiencyPoint> read_table(ObjectReader& r, std::string_view key) {
  const nlohmann::json& arr = r.raw(key);
  const std::string path = r.path_of(key);
  if (!arr.is_array() || arr.empty())
    throw InputError(r.file() + ": " + path + ": expected a non-empty array of [size, efficiency] rows, got " +
                     describe_json(arr));
  std::vector<EfficiencyPoint> rows;
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const auto& row = arr[i];
    const std::string at = r.file() + ": " + path + "[" + std::to_string(i) + "]: ";
    if (!row.is_array() || row.size() != 2 || !row[0].is_number() || !row[1].is_number())
      throw InputError(at + "expected [size, efficiency], got " + describe_json(row));
    EfficiencyPoint p{row[0].get<double>(), row[1].get<double>()};
    if (!(p.size > 0)) throw InputError(at + "expected a size > 0, got " + describe_json(row[0]));
    if (!(p.efficiency > 0 && p.efficiency <= 1))
      throw InputError(at + "expected an efficiency in (0, 1], got " + describe_json(row[1]));
    if (!rows.empty() && !(p.size < rows.back().size))
      throw InputError(at + "expected sizes strictly descending (previous row " + std::to_string(rows.back().size) +
                       "), got " + describe_json(row[0]));
    rows.push_back(p);
  }
  return rows;
}

std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

HardwareProfile profile_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  r.schema("ztune.profile/1");
  HardwareProfile p;
  p.name = r.string("name");
  p.source = r.string("source");
  p.gpu = r.string("gpu");
  {
    auto g = r.object("gemm");
    p.gemm_efficiency = read_table(g, "efficiency_by_flops");
    p.attention_gemm_factor = fraction(g, "attention_factor");
    g.finish();
  }
  {
    auto mb = r.object("memory_bound");
    p.memory_bandwidth_efficiency = fraction(mb, "bandwidth_efficiency");
    p.kernel_launch_s = mb.positive("kernel_launch_us", true) * 1e-6;
    mb.finish();
  }
  {
    auto fw = r.object("framework");
    p.host_op_s = fw.positive("host_op_us", true) * 1e-6;
    p.microbatch_overhead_s = fw.positive("microbatch_overhead_us", true) * 1e-6;
    p.step_overhead_s = fw.positive("step_overhead_ms", true) * 1e-3;
    fw.finish();
  }
  {
    auto f = r.object("fabric");
    p.intra_node = read_fabric(f.object("intra_node"));
    p.inter_node = read_fabric(f.object("inter_node"));
    f.finish();
  }
  {
    auto io = r.object("io");
    p.pcie_efficiency = fraction(io, "pcie_efficiency");
    p.nvme_efficiency = fraction(io, "nvme_efficiency");
    io.finish();
  }
  {
    auto o = r.object("overlap");
    p.dp_overlap = overlap(o, "dp");
    p.zero3_prefetch_overlap = overlap(o, "zero3_prefetch");
    p.offload_overlap = overlap(o, "offload");
    p.tp_overlap = overlap(o, "tp");
    o.finish();
  }
  r.finish();
  return p;
}

nlohmann::json profile_to_json(const HardwareProfile& p) {
  nlohmann::json table = nlohmann::json::array();
  for (const auto& row : p.gemm_efficiency) table.push_back({row.size, row.efficiency});
  auto fabric = [](const FabricProfile& f) {
    return nlohmann::json{{"busbw_efficiency", f.busbw_efficiency}, {"latency_us", f.latency_s * 1e6},
                          {"base_latency_us", f.base_latency_s * 1e6}};
  };
  return nlohmann::json{
      {"schema", "ztune.profile/1"},
      {"name", p.name},
      {"source", p.source},
      {"gpu", p.gpu},
      {"gemm", {{"efficiency_by_flops", table}, {"attention_factor", p.attention_gemm_factor}}},
      {"memory_bound",
       {{"bandwidth_efficiency", p.memory_bandwidth_efficiency},
        {"kernel_launch_us", p.kernel_launch_s * 1e6}}},
      {"framework",
       {{"host_op_us", p.host_op_s * 1e6},
        {"microbatch_overhead_us", p.microbatch_overhead_s * 1e6},
        {"step_overhead_ms", p.step_overhead_s * 1e3}}},
      {"fabric", {{"intra_node", fabric(p.intra_node)}, {"inter_node", fabric(p.inter_node)}}},
      {"io", {{"pcie_efficiency", p.pcie_efficiency}, {"nvme_efficiency", p.nvme_efficiency}}},
      {"overlap",
       {{"dp", p.dp_overlap},
        {"zero3_prefetch", p.zero3_prefetch_overlap},
        {"offload", p.offload_overlap},
        {"tp", p.tp_overlap}}}};
}

HardwareProfile load_profile(const std::string& path) {
  if (!std::filesystem::is_regular_file(path)) throw InputError("--profile " + path + ": no such file");
  return profile_from_json(read_json_file(path), path);
}

HardwareProfile default_profile_for(const Cluster& c) {
  // The family is the GPU name up to its first '-' ("A100-SXM4-80GB" → "a100");
  // a CPU-rank cluster uses cpu.json.
  std::string family = c.device_kind == DeviceKind::cpu ? std::string("cpu") : lower(c.node.gpu.name);
  if (auto dash = family.find('-'); dash != std::string::npos) family.resize(dash);
  namespace fs = std::filesystem;
  fs::path file = fs::path(data_dir()) / "profiles" / (family + ".json");
  if (!fs::is_regular_file(file)) {
    std::string known;
    for (const auto& n : catalog_names("profiles")) known += (known.empty() ? "" : ", ") + n;
    throw InputError(c.name + ": $.node.gpu.name: no hardware profile for GPU \"" + c.node.gpu.name + "\" (looked for " +
                     file.string() + "; profiles: " + (known.empty() ? "none" : known) +
                     "); pass --profile FILE or add data/profiles/" + family + ".json");
  }
  return profile_from_json(read_json_file(file.string()), file.string());
}

}  // namespace ztune
