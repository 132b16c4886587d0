#include "ztune/vocab/hardware_profile.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/text.hpp"

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

// ⌈x⌉ and ⌊x⌋ of a positive x below 2^62 by truncation (a cast, where std::ceil
// and std::floor are library calls without SSE4.1): the search prices millions
// of GEMM shapes.
double ceil_positive(double x) {
  const double t = static_cast<double>(static_cast<std::int64_t>(x));
  return t < x ? t + 1.0 : t;
}
double floor_positive(double x) { return static_cast<double>(static_cast<std::int64_t>(x)); }

}  // namespace

double GemmWaves::utilization(double m, double n, double k, double batch) const {
  constexpr double kLargest = 4e18;  // beyond it the casts overflow; no GEMM is that large
  if (units_ <= 0 || !(m > 0) || !(n > 0) || !(batch > 0) || m * n * batch > kLargest) return 1.0;
  double tiles = ceil_positive(m * inv_tile_m_) * ceil_positive(n * inv_tile_n_) * ceil_positive(batch);
  const double sms = units_;
  if (tiles < sms) {
    // split-K: as many slices as the idle SMs allow, each at least split_k_depth deep.
    const double depth_slices = k > 0 ? floor_positive(std::min(k * inv_depth_, kLargest)) : 0.0;
    tiles *= std::max(1.0, std::min(floor_positive(sms / tiles), depth_slices));
  }
  return tiles / (ceil_positive(tiles * inv_units_) * sms);
}

double HardwareProfile::gemm_efficiency_of(double m, double n, double k, double batch) const {
  return gemm_efficiency_at(2.0 * m * n * k * batch) * gemm_waves.utilization(m, n, k, batch);
}

namespace {

constexpr double kMaxGemmFlops = 1e18;

GemmWaves read_waves(ObjectReader w) {
  // Bounds: no GPU has more than a few hundred SMs; cuBLAS tiles are 16-512 wide.
  const auto sms = static_cast<int>(w.integer("sms", 1, 4096));
  const auto tile_m = static_cast<int>(w.integer("tile_m", 8, 1024));
  const auto tile_n = static_cast<int>(w.integer("tile_n", 8, 1024));
  const auto depth = static_cast<int>(w.integer("split_k_depth", 1, 1 << 20));
  w.finish();
  return GemmWaves(sms, tile_m, tile_n, depth);
}

MeasuredFigures::Level read_measured_level(ObjectReader r) {
  MeasuredFigures::Level l;
  l.fitted = r.boolean("fitted");
  l.bandwidth_gbps = r.optional_rate("bandwidth_gbps");
  l.latency_us = r.optional_positive("latency_us", true, kMaxLatencyUs);
  r.finish();
  return l;
}

MeasuredFigures read_measured(ObjectReader r) {
  MeasuredFigures m;
  m.cluster = r.string("cluster");
  // The same ranges as the cluster file's figures they replace (cluster.cpp).
  m.peak_tflops_fp32 = r.optional_rate("peak_tflops_fp32");
  m.hbm_bandwidth_gbps = r.optional_rate("hbm_bandwidth_gbps");
  m.pcie_bandwidth_gbps = r.optional_rate("pcie_bandwidth_gbps");
  m.cpu_adam_gparams_per_s = r.optional_rate("cpu_adam_gparams_per_s");
  if (auto l = r.optional_object("intra_node")) m.intra_node = read_measured_level(std::move(*l));
  if (auto l = r.optional_object("inter_node")) m.inter_node = read_measured_level(std::move(*l));
  r.finish();
  return m;
}

nlohmann::json measured_to_json(const MeasuredFigures& m) {
  nlohmann::json j{{"cluster", m.cluster}};
  auto put = [&](nlohmann::json& o, const char* key, const std::optional<double>& v) {
    if (v) o[key] = *v;
  };
  put(j, "peak_tflops_fp32", m.peak_tflops_fp32);
  put(j, "hbm_bandwidth_gbps", m.hbm_bandwidth_gbps);
  put(j, "pcie_bandwidth_gbps", m.pcie_bandwidth_gbps);
  put(j, "cpu_adam_gparams_per_s", m.cpu_adam_gparams_per_s);
  auto level = [&](const char* key, const MeasuredFigures::Level& l) {
    if (l.empty()) return;
    nlohmann::json o{{"fitted", l.fitted}};
    put(o, "bandwidth_gbps", l.bandwidth_gbps);
    put(o, "latency_us", l.latency_us);
    j[key] = o;
  };
  level("intra_node", m.intra_node);
  level("inter_node", m.inter_node);
  return j;
}

FabricProfile read_fabric(ObjectReader r) {
  FabricProfile f;
  f.busbw_efficiency = r.fraction("busbw_efficiency");
  f.latency_s = r.positive("latency_us", true, kMaxLatencyUs) * 1e-6;
  f.base_latency_s = r.positive("base_latency_us", true, kMaxLatencyUs) * 1e-6;
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
    // FLOPs of one GEMM call: a 1-FLOP call and a 1e18-FLOP one (an hour on
    // any GPU) bound every table; past them the interpolation overflows.
    if (!(p.size >= 1 && p.size <= kMaxGemmFlops))
      throw InputError(at + "expected a size (FLOPs of one GEMM) from 1 to 1e+18, got " + describe_json(row[0]));
    if (!(p.efficiency > 0 && p.efficiency <= 1))
      throw InputError(at + "expected an efficiency in (0, 1], got " + describe_json(row[1]));
    if (!rows.empty() && !(p.size < rows.back().size))
      throw InputError(at + "expected sizes strictly descending (previous row " + describe_json(arr[i - 1][0]) +
                       "), got " + describe_json(row[0]));
    rows.push_back(p);
  }
  return rows;
}

}  // namespace

HardwareProfile profile_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  r.schema("ztune.profile/1");
  HardwareProfile p;
  p.file = file;
  p.name = r.name("name");
  p.source = r.string("source");
  p.gpu = r.string("gpu");
  {
    auto g = r.object("gemm");
    p.gemm_efficiency = read_table(g, "efficiency_by_flops");
    p.attention_gemm_factor = g.fraction("attention_factor");
    // Added with the cudnn kernel: absent, cuDNN is priced as FlashAttention-2.
    p.cudnn_attention_factor = g.optional_fraction("cudnn_attention_factor").value_or(p.attention_gemm_factor);
    // Absent (CPU ranks, profiles from before it): GEMMs are not wave-quantized.
    if (auto w = g.optional_object("waves")) p.gemm_waves = read_waves(std::move(*w));
    g.finish();
  }
  {
    auto mb = r.object("memory_bound");
    p.memory_bandwidth_efficiency = mb.fraction("bandwidth_efficiency");
    p.kernel_launch_s = mb.positive("kernel_launch_us", true, kMaxLatencyUs) * 1e-6;
    mb.finish();
  }
  // A calibrated profile's measurement of ztune's own executor (both or neither).
  auto fw = r.optional_object("framework");
  auto ov = r.optional_object("overlap");
  if (fw.has_value() != ov.has_value())
    throw r.error(fw ? "overlap" : "framework",
                  "expected \"framework\" and \"overlap\" together (what ztune's executor was measured to do), or "
                  "neither (the engine profile of data/engines/ says it)");
  if (fw) {
    EngineProfile e = load_engine_profile("ztune");
    e.name = "ztune";
    e.source = "measured with this hardware profile: " + p.source;
    read_host_costs(*fw, "host_op_us", e);
    fw->finish();
    e.dp_overlap = ov->fraction("dp", true);
    e.zero3_prefetch_overlap = ov->fraction("zero3_prefetch", true);
    e.offload_overlap = ov->fraction("offload", true);
    e.tp_overlap = ov->fraction("tp", true);
    ov->finish();
    p.measured_engine = e;
  }
  {
    auto f = r.object("fabric");
    p.intra_node = read_fabric(f.object("intra_node"));
    p.inter_node = read_fabric(f.object("inter_node"));
    f.finish();
  }
  {
    auto io = r.object("io");
    p.pcie_efficiency = io.fraction("pcie_efficiency");
    p.nvme_efficiency = io.fraction("nvme_efficiency");
    io.finish();
  }
  if (auto m = r.optional_object("measured")) p.measured = read_measured(std::move(*m));
  if (auto f = r.optional_object("runs_fit")) {
    HardwareProfile::RunsFit rf;
    rf.runs = static_cast<int>(f->integer("runs", 1, 1 << 30));
    // Errors as fractions (0.08: 8 %); calibrate refuses a fit beyond 0.5 in sample.
    rf.in_sample_error = f->positive("in_sample_error", true, 1e6);
    rf.held_out_error = f->optional_positive("held_out_error", true, 1e6);
    f->finish();
    p.runs_fit = rf;
  }
  r.finish();
  return with_engine(std::move(p), load_engine_profile("ztune"));
}

nlohmann::json runs_fit_to_json(const HardwareProfile::RunsFit& f) {
  return {{"runs", f.runs},
          {"in_sample_error", f.in_sample_error},
          {"held_out_error", f.held_out_error ? nlohmann::json(*f.held_out_error) : nlohmann::json()}};
}

nlohmann::json profile_to_json(const HardwareProfile& p) {
  nlohmann::json table = nlohmann::json::array();
  for (const auto& row : p.gemm_efficiency) table.push_back({row.size, row.efficiency});
  auto fabric = [](const FabricProfile& f) {
    return nlohmann::json{{"busbw_efficiency", f.busbw_efficiency}, {"latency_us", f.latency_s * 1e6},
                          {"base_latency_us", f.base_latency_s * 1e6}};
  };
  nlohmann::json j{
      {"schema", "ztune.profile/1"},
      {"name", p.name},
      {"source", p.source},
      {"gpu", p.gpu},
      {"gemm",
       {{"efficiency_by_flops", table},
        {"attention_factor", p.attention_gemm_factor},
        {"cudnn_attention_factor", p.cudnn_attention_factor}}},
      {"memory_bound",
       {{"bandwidth_efficiency", p.memory_bandwidth_efficiency},
        {"kernel_launch_us", p.kernel_launch_s * 1e6}}},
      {"fabric", {{"intra_node", fabric(p.intra_node)}, {"inter_node", fabric(p.inter_node)}}},
      {"io", {{"pcie_efficiency", p.pcie_efficiency}, {"nvme_efficiency", p.nvme_efficiency}}}};
  if (const GemmWaves& w = p.gemm_waves; w.units() > 0)
    j["gemm"]["waves"] = {{"sms", w.units()},
                          {"tile_m", w.tile_m()},
                          {"tile_n", w.tile_n()},
                          {"split_k_depth", w.split_k_depth()}};
  if (p.measured_engine) {
    const EngineProfile& e = *p.measured_engine;
    j["framework"] = {{"host_op_us", e.host_op_s * 1e6},
                      {"microbatch_overhead_us", e.microbatch_overhead_s * 1e6},
                      {"step_overhead_ms", e.step_overhead_s * 1e3}};
    j["overlap"] = {{"dp", e.dp_overlap},
                    {"zero3_prefetch", e.zero3_prefetch_overlap},
                    {"offload", e.offload_overlap},
                    {"tp", e.tp_overlap}};
  }
  if (!p.measured.empty()) j["measured"] = measured_to_json(p.measured);
  if (p.runs_fit) j["runs_fit"] = runs_fit_to_json(*p.runs_fit);
  return j;
}

HardwareProfile load_profile(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(path)) return profile_from_json(read_json_file(path), path);
  const bool is_name = path.find('/') == std::string::npos && !path.ends_with(".json") && !path.empty();
  if (!is_name)
    throw InputError("--profile " + path + (fs::exists(path) ? ": not a regular file (expected a profile JSON file)"
                                                              : ": no such file"));
  // A name: the user's calibrated profiles first, then the catalog's.
  std::vector<fs::path> looked;
  try {
    looked.push_back(fs::path(user_data_dir()) / "profiles" / (path + ".json"));
  } catch (const InputError&) {
  }
  looked.push_back(fs::path(data_dir()) / "profiles" / (path + ".json"));
  for (const auto& f : looked)
    if (fs::is_regular_file(f)) return profile_from_json(read_json_file(f.string()), f.string());
  std::string where;
  for (const auto& f : looked) where += (where.empty() ? "" : ", ") + f.string();
  std::string known;
  for (const auto& n : catalog_names("profiles")) known += (known.empty() ? "" : ", ") + n;
  throw InputError("--profile " + path + ": not a file and not a profile name (looked for " + where +
                   "; catalog profiles: " + (known.empty() ? "none" : known) + ")");
}

namespace {

/// A GPU's family: its name up to the first '-', lower case ("A100-SXM4-80GB"
/// → "a100"); a CPU-rank cluster's is "cpu".
std::string gpu_family(std::string name) {
  name = ascii_lower(std::move(name));
  if (auto dash = name.find('-'); dash != std::string::npos) name.resize(dash);
  return name;
}
std::string gpu_family(const Cluster& c) {
  return c.device_kind == DeviceKind::cpu ? std::string("cpu") : gpu_family(c.node.gpu.name);
}

}  // namespace

namespace {

/// The catalog file of the cluster's GPU family (the GPU name up to its first
/// '-', "A100-SXM4-80GB" → "a100"; a CPU-rank cluster uses cpu.json), and
/// whether the family is a plain catalog name at all: one with '/', NUL or 300
/// bytes (which makes the filesystem throw "File name too long") has no profile.
std::pair<std::filesystem::path, bool> catalog_profile_file(const Cluster& c) {
  const std::string family = gpu_family(c);
  const bool plain = !family.empty() && family.size() <= 64 &&
                     family.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_.") == std::string::npos;
  return {std::filesystem::path(data_dir()) / "profiles" / ((plain ? family : std::string("?")) + ".json"), plain};
}

}  // namespace

std::optional<HardwareProfile> catalog_profile_for(const Cluster& c) {
  const auto [file, plain] = catalog_profile_file(c);
  std::error_code ec;
  if (!plain || !std::filesystem::is_regular_file(file, ec)) return std::nullopt;
  return profile_from_json(read_json_file(file.string()), file.string());
}

HardwareProfile default_profile_for(const Cluster& c) {
  if (auto p = catalog_profile_for(c)) return std::move(*p);
  {
    const std::string family = gpu_family(c);
    const auto [file, plain] = catalog_profile_file(c);
    std::string known;
    for (const auto& n : catalog_names("profiles")) known += (known.empty() ? "" : ", ") + n;
    throw InputError((c.file.empty() ? c.name : c.file) + ": $.node.gpu.name: no hardware profile for GPU " +
                     describe_json(c.node.gpu.name) +
                     (plain ? " (looked for " + file.string() + "; " : " (not a catalog name; ") +
                     "profiles: " + (known.empty() ? "none" : known) + "); pass --profile FILE or add data/profiles/" +
                     (plain ? family : std::string("NAME")) + ".json");
  }
}

HardwareProfile with_engine(HardwareProfile hw, const EngineProfile& e) {
  hw.engine = e.name == "ztune" && hw.measured_engine ? *hw.measured_engine : e;
  return hw;
}

HardwareProfile with_engine(HardwareProfile hw, const std::string& name, bool graph_compiled) {
  hw = with_engine(std::move(hw), load_engine_profile(name));
  if (graph_compiled) hw.engine = compiled(hw.engine);
  return hw;
}

bool MeasuredFigures::empty() const {
  return !peak_tflops_fp32 && !hbm_bandwidth_gbps && !pcie_bandwidth_gbps && !cpu_adam_gparams_per_s &&
         intra_node.empty() && inter_node.empty();
}

Cluster with_measured_figures(Cluster c, const HardwareProfile& p) {
  // A profile's efficiencies are fractions of its own GPU's datasheet, and its
  // measured figures are its machine's: a CPU rank's calibration priced an
  // A100 cluster at 0.1 % MFU without a word (and an A100's a CPU one).
  if (const std::string want = gpu_family(c), have = gpu_family(p.gpu); !p.gpu.empty() && have != want) {
    const std::string why = profile_label(p) + ": fitted on " +
                            (have == "cpu" ? std::string("CPU ranks") : p.gpu + " GPUs") + " ($.gpu), but cluster " +
                            c.name + " has " + (want == "cpu" ? std::string("CPU ranks") : c.node.gpu.name + " GPUs") +
                            ": its figures do not describe them; ";
    if (catalog_profile_for(c))
      throw InputError(why + "use the " + want + " profile (data/profiles/" + want + ".json, the default) or one calibrated on " + c.name);
    // No catalog profile for this GPU: say how to make one rather than point
    // at a file that does not exist.
    throw InputError(why + "the catalog has no " + want + " profile either. To price it with " + p.name +
                     "'s efficiencies (unchecked on " + c.node.gpu.name + "), copy that profile and set its $.gpu to \"" +
                     c.node.gpu.name + "\", then pass the copy with --profile; ztune calibrate --cluster FILE --profile "
                     "COPY fits it to your own GPUs");
  }
  const MeasuredFigures& m = p.measured;
  if (m.peak_tflops_fp32) c.node.gpu.peak_tflops_fp32 = *m.peak_tflops_fp32;
  if (m.hbm_bandwidth_gbps) c.node.gpu.hbm_bandwidth_gbps = *m.hbm_bandwidth_gbps;
  if (m.pcie_bandwidth_gbps) c.node.pcie_bandwidth_gbps = *m.pcie_bandwidth_gbps;
  if (m.cpu_adam_gparams_per_s) c.node.cpu_adam_gparams_per_s = *m.cpu_adam_gparams_per_s;
  auto level = [](FabricLevel& f, const MeasuredFigures::Level& l) {
    if (l.fitted) f.collective_efficiency.reset();
    if (l.bandwidth_gbps) f.bandwidth_gbps = *l.bandwidth_gbps;
    if (l.latency_us) f.latency_us = *l.latency_us;
  };
  level(c.intra_node, m.intra_node);
  level(c.inter_node, m.inter_node);
  return c;
}

std::string measured_elsewhere_note(const Cluster& c, const HardwareProfile& p) {
  if (p.measured.empty() || p.measured.cluster.empty() || p.measured.cluster == c.name) return "";
  nlohmann::json figures = measured_to_json(p.measured);
  figures.erase("cluster");
  return profile_label(p) + " was measured on cluster " + p.measured.cluster + ": its figures " + figures.dump() +
         " replace " + c.name + "'s (right for more nodes of the same kind, wrong for another machine)";
}

std::string profile_label(const HardwareProfile& p) {
  return "profile " + p.name + (p.file.empty() ? std::string() : " (" + p.file + ")");
}

MeasuredFigures measured_figures(const Cluster& before, const Cluster& calibrated, MeasuredFigures base) {
  if (base.cluster.empty()) base.cluster = before.name;
  auto update = [](std::optional<double>& slot, double was, double now) {
    if (was != now) slot = now;
  };
  update(base.peak_tflops_fp32, before.node.gpu.peak_tflops_fp32, calibrated.node.gpu.peak_tflops_fp32);
  update(base.hbm_bandwidth_gbps, before.node.gpu.hbm_bandwidth_gbps, calibrated.node.gpu.hbm_bandwidth_gbps);
  update(base.pcie_bandwidth_gbps, before.node.pcie_bandwidth_gbps, calibrated.node.pcie_bandwidth_gbps);
  update(base.cpu_adam_gparams_per_s, before.node.cpu_adam_gparams_per_s, calibrated.node.cpu_adam_gparams_per_s);
  auto level = [&](MeasuredFigures::Level& l, const FabricLevel& was, const FabricLevel& now) {
    update(l.bandwidth_gbps, was.bandwidth_gbps, now.bandwidth_gbps);
    update(l.latency_us, was.latency_us, now.latency_us);
  };
  level(base.intra_node, before.intra_node, calibrated.intra_node);
  level(base.inter_node, before.inter_node, calibrated.inter_node);
  return base;
}

}  // namespace ztune
