// Reading ztune-calibrate-worker's measurements (schema "ztune.measurements/1"):
// strict like every ztune file (unknown keys rejected, numbers range-checked),
// the informational fields (spread of the rounds, bandwidths, environment)
// read and kept out of the fit.
#include <optional>

#include <nlohmann/json.hpp>

#include "ztune/calibration/profile_fit.hpp"
#include "ztune/vocab/collective.hpp"
#include "ztune/vocab/json_reader.hpp"

namespace ztune {

namespace {

// Ceilings of a measurement's numbers, far past any machine (a PiB message, a
// rate of 1e18, a timed round of 11 days): past them the fit's latencies and
// bandwidths come out NaN and the profile is nonsense.
constexpr double kMaxBytes = 1125899906842624.0;  // 2^50
constexpr double kMaxCount = 1e18;
constexpr double kMaxSeconds = 1e6;


// Timing fields every row carries besides its own. The spread (IQR / median
// of the rounds) is written by workers since issue 21; an older file's rows
// have none, and their spread is read off the fastest and slowest rounds.
struct RowTiming {
  double time_s = 0;
  double spread = 0;
  int repeats = 0;
};
RowTiming read_timing(ObjectReader& r) {
  RowTiming t;
  t.time_s = r.positive("time_s", false, kMaxSeconds);
  const double lo = r.positive("time_min_s", false, kMaxSeconds);
  const double hi = r.positive("time_max_s", false, kMaxSeconds);
  r.integer("iters", 1, 1'000'000'000);
  t.repeats = static_cast<int>(r.integer("repeats", 1, 1'000'000'000));
  if (r.has("spread")) t.spread = r.number("spread", 0, 1e6);
  else t.spread = t.time_s > 0 ? (hi - lo) / t.time_s / 2 : 0;
  return t;
}
// The same, into a sample's time_s, spread and repeats.
template <class Sample>
void read_timing_into(ObjectReader& r, Sample& s) {
  const RowTiming t = read_timing(r);
  s.time_s = t.time_s;
  s.spread = t.spread;
  s.repeats = t.repeats;
}

int read_wrong(ObjectReader& r) {
  return static_cast<int>(r.integer("wrong", 0, 1'000'000'000'000));
}

const nlohmann::json& array_of(ObjectReader& r, std::string_view key) {
  const nlohmann::json& a = r.raw(key);
  if (!a.is_array()) throw r.error(key, "expected an array of measurement rows, got " + describe_json(a));
  return a;
}

std::string row_path(ObjectReader& r, std::string_view key, std::size_t i) {
  return r.path_of(key) + "[" + std::to_string(i) + "]";
}

// The collective a measurement row names: the kinds ztune-calibrate-worker
// benchmarks, by their run-record names (vocab/collective.hpp), and nccl-tests'
// "sendrecv" for the point-to-point transfer.
Collective measured_collective(ObjectReader& r, const std::string& name) {
  const std::optional<Collective> k = name == "sendrecv" ? Collective::send : collective_named(name);
  if (k == Collective::all_reduce || k == Collective::reduce_scatter || k == Collective::all_gather ||
      k == Collective::broadcast || (k == Collective::send && name == "sendrecv"))
    return *k;
  throw r.error("collective", "expected all_reduce, reduce_scatter, all_gather, broadcast or sendrecv, got \"" +
                                  name + "\"");
}

}  // namespace

Measurements measurements_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  r.schema("ztune.measurements/1");
  Measurements m;
  m.backend = r.choice("backend", {"cpu", "cuda"});
  (void)r.optional_string("backend_detail");  // e.g. "cuda-bf16gemm": informative
  if (auto g = r.optional_string("gemm_precision")) {
    if (*g == "fp32") m.gemm_precision = Precision::fp32;
    else if (*g == "bf16") m.gemm_precision = Precision::bf16;
    else if (*g == "fp16") m.gemm_precision = Precision::fp16;
    else throw r.error("gemm_precision", "expected \"fp32\", \"bf16\" or \"fp16\", got \"" + *g + "\"");
  }
  if (m.backend == "cpu" && m.gemm_precision != Precision::fp32)
    throw r.error("gemm_precision", "the CPU backend measures fp32 GEMMs only");
  m.ranks = static_cast<int>(r.integer("ranks", 1, 1 << 24));
  m.nodes = static_cast<int>(r.integer("nodes", 1, 1 << 20));
  m.ranks_per_node = static_cast<int>(r.integer("ranks_per_node", 1, 1 << 20));
  m.threads_per_rank = static_cast<int>(r.integer("threads_per_rank", 1, 1 << 16));
  r.raw("protocol");
  r.raw("environment");
  m.wrong = r.integer("wrong", 0, std::int64_t{1} << 62);
  m.elapsed_s = r.positive("elapsed_s", true);
  {
    const auto& notes = array_of(r, "notes");
    for (const auto& n : notes)
      if (n.is_string()) m.notes.push_back(n.get<std::string>());
  }
  const auto& gemm = array_of(r, "gemm");
  for (std::size_t i = 0; i < gemm.size(); ++i) {
    ObjectReader row(gemm[i], file, row_path(r, "gemm", i));
    GemmSample s;
    s.m = static_cast<double>(row.integer("m", 1, 1 << 30));
    s.n = static_cast<double>(row.integer("n", 1, 1 << 30));
    s.k = static_cast<double>(row.integer("k", 1, 1 << 30));
    row.choice("op", {"NN", "NT", "TN"});
    s.flops = row.positive("flops", false, kMaxCount);
    read_timing_into(row, s);
    row.positive("gflops", false, kMaxCount);
    read_wrong(row);
    row.finish();
    m.gemm.push_back(s);
  }
  const auto& att = array_of(r, "attention");
  for (std::size_t i = 0; i < att.size(); ++i) {
    ObjectReader row(att[i], file, row_path(r, "attention", i));
    for (const char* k : {"b", "s", "c", "heads"}) row.integer(k, 1, 1 << 30);
    AttentionSample s;
    s.flops = row.positive("flops", false, kMaxCount);
    read_timing_into(row, s);
    row.positive("gflops", false, kMaxCount);
    read_wrong(row);
    row.finish();
    m.attention.push_back(s);
  }
  const auto& mem = array_of(r, "memory_bound");
  for (std::size_t i = 0; i < mem.size(); ++i) {
    ObjectReader row(mem[i], file, row_path(r, "memory_bound", i));
    MemorySample s;
    s.kernel = row.string("kernel");
    row.integer("elements", 1, std::int64_t{1} << 50);
    s.bytes = row.positive("bytes", false, kMaxBytes);
    s.kernels = static_cast<int>(row.integer("kernels", 1, 1000));
    read_timing_into(row, s);
    row.positive("gbps", false, kMaxCount);
    read_wrong(row);
    row.finish();
    m.memory.push_back(s);
  }
  const auto& copies = array_of(r, "copies");
  for (std::size_t i = 0; i < copies.size(); ++i) {
    ObjectReader row(copies[i], file, row_path(r, "copies", i));
    CopySample s;
    s.direction = row.choice("direction", {"h2d", "d2h"});
    s.bytes = row.positive("bytes", false, kMaxBytes);
    read_timing_into(row, s);
    row.positive("gbps", false, kMaxCount);
    read_wrong(row);
    row.finish();
    m.copies.push_back(s);
  }
  const auto& adam = r.raw("host_adam");
  if (!adam.is_null()) {
    ObjectReader row(adam, file, r.path_of("host_adam"));
    row.integer("params", 1, std::int64_t{1} << 50);
    row.integer("threads_per_rank", 1, 1 << 16);
    row.integer("ranks_per_node", 1, 1 << 20);
    read_timing(row);
    row.positive("params_per_s_per_rank", false, kMaxCount);
    m.host_adam_node_params_per_s = row.positive("node_params_per_s", false, kMaxCount);
    read_wrong(row);
    row.finish();
  }
  const auto& coll = array_of(r, "collectives");
  for (std::size_t i = 0; i < coll.size(); ++i) {
    ObjectReader row(coll[i], file, row_path(r, "collectives", i));
    CollectiveSample s;
    s.name = row.string("collective");
    s.kind = measured_collective(row, s.name);
    s.group = row.string("group");
    s.ranks = static_cast<int>(row.integer("ranks", 2, 1 << 24));
    s.per_node = static_cast<int>(row.integer("ranks_per_node", 1, 1 << 24));
    s.crosses_nodes = row.boolean("crosses_nodes");
    row.boolean("in_place");
    s.bytes = row.positive("bytes", false, kMaxBytes);
    row.integer("count", 1, std::int64_t{1} << 50);
    row.choice("type", {"float"});
    read_timing_into(row, s);
    row.positive("algbw_gbps", true, kMaxCount);
    row.positive("busbw_gbps", true, kMaxCount);
    read_wrong(row);
    row.finish();
    m.collectives.push_back(s);
  }
  r.finish();
  return m;
}

Measurements load_measurements(const std::string& path) { return measurements_from_json(read_json_file(path), path); }

}  // namespace ztune
