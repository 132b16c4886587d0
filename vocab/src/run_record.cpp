// The one run-record reader (run_record.hpp): strict key sets through
// ObjectReader, arrays element by element with their index in the path, and the
// cross-checks between the parts that a hand-edited or truncated record breaks.
#include "ztune/vocab/run_record.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ztune/vocab/collective.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"

namespace ztune {
namespace {

constexpr std::int64_t kMaxCount = 1'000'000'000'000'000;  // 1e15 calls: beyond any run
constexpr double kMaxGbps = 1e9;                            // GB/s
constexpr double kMaxLoss = 1e6;
constexpr double kMaxLr = 1e6;
constexpr double kMaxLossScale = 1e300;

std::string range_text(double lo, double hi) {
  char buf[96];
  std::snprintf(buf, sizeof buf, "[%.17g, %.17g]", lo, hi);
  return buf;
}

// A number of an array element (or any value at `path`) in [lo, hi].
double element(const nlohmann::json& v, const std::string& file, const std::string& path, double lo, double hi) {
  const double d = v.is_number() ? v.get<double>() : std::nan("");
  if (!(d >= lo && d <= hi))
    throw InputError(file + ": " + path + ": expected a number in " + range_text(lo, hi) + ", got " + describe_json(v));
  return d;
}

const nlohmann::json& array(ObjectReader& r, const char* key) {
  const auto& v = r.raw(key);
  if (!v.is_array()) throw r.error(key, "expected an array, got " + describe_json(v));
  return v;
}

// The relative mismatch test of two figures the worker derives from each other.
bool differs(double a, double b) { return std::fabs(a - b) > 1e-9 * std::max(std::fabs(a), std::fabs(b)); }

std::string fmt(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

RunRecordStep read_step(const nlohmann::json& v, const std::string& file, const std::string& path) {
  ObjectReader s(v, file, path);
  RunRecordStep out;
  out.step = static_cast<int>(s.integer("step", 1, 1'000'000'000));
  out.loss = s.number("loss", 0, kMaxLoss);
  // An fp16 overflow makes the norm infinite, which JSON writes as null.
  if (s.has("grad_norm")) out.grad_norm = s.number("grad_norm", 0, 1e300);
  else (void)s.raw("grad_norm");
  out.lr = s.number("lr", 0, kMaxLr);
  out.time_s = s.number("time_s", 0, kMaxRecordStepSeconds);
  // Fields a later executor added: absent in older records.
  if (s.has("loss_scale")) out.loss_scale = s.number("loss_scale", 0, kMaxLossScale);
  else (void)s.optional_object("loss_scale");
  out.skipped = s.optional_boolean("skipped").value_or(false);
  s.finish();
  return out;
}

std::map<std::string, RunRecordOp> read_ops(ObjectReader r) {
  std::map<std::string, RunRecordOp> out;
  for (const char* kind : {"gemm", "attention", "memory_bound", "host_adam", "offload_copy"}) {
    auto o = r.optional_object(kind);
    if (!o) continue;
    RunRecordOp op;
    op.time_s = o->number("time_s", 0, kMaxRecordRunSeconds);
    op.count = o->integer("count", 0, kMaxCount);
    if (o->has("bytes")) op.bytes = o->number("bytes", 0, kMaxRecordBytes);
    else (void)o->optional_object("bytes");
    o->finish();
    out[kind] = op;
  }
  r.finish();
  return out;
}

std::map<std::string, RunRecordGroup> read_collectives(ObjectReader r) {
  std::map<std::string, RunRecordGroup> out;
  for (const char* group : kRunRecordGroups) {
    auto g = r.optional_object(group);
    if (!g) continue;
    RunRecordGroup rg;
    rg.ranks = static_cast<int>(g->integer("ranks", 1, 1 << 24));
    // Every kind the executor counts (vocab/collective.hpp; the list here had
    // no all_to_all, so a Ulysses run's record was refused as an unknown field).
    for (const Collective k : all_collectives()) {
      const char* kind = to_string(k);
      auto c = g->optional_object(kind);
      if (!c) continue;
      RunRecordCollective rc;
      rc.count = c->integer("count", 0, kMaxCount);
      rc.bytes = c->number("bytes", 0, kMaxRecordBytes);
      rc.time_s = c->number("time_s", 0, kMaxRecordRunSeconds);
      rc.algbw_gbps = c->number("algbw_gbps", 0, kMaxGbps);
      rc.busbw_gbps = c->number("busbw_gbps", 0, kMaxGbps);
      c->finish();
      rg.collectives[kind] = rc;
    }
    g->finish();
    out[group] = rg;
  }
  r.finish();
  return out;
}

RunRecordRankMemory read_rank_memory(const nlohmann::json& v, const std::string& file, const std::string& path) {
  ObjectReader m(v, file, path);
  RunRecordRankMemory out;
  out.rank = static_cast<int>(m.integer("rank", 0, 1 << 24));
  out.peak_bytes = m.number("peak_bytes", 0, kMaxRecordBytes);
  out.peak_host_bytes = m.number("peak_host_bytes", 0, kMaxRecordBytes);
  ObjectReader cats = m.object("by_category");
  // The lines every executor records, then those later ones added (offload).
  constexpr const char* kDeviceLines[] = {"params",         "grads",     "optimizer", "activations", "comm_buckets",
                                          "zero3_gathered", "workspace", "logits"};
  for (const char* c : kDeviceLines) out.by_category[c] = cats.number(c, 0, kMaxRecordBytes);
  for (const char* c : {"host_optimizer", "host_staging", "host_params"})
    if (cats.has(c)) out.by_category[c] = cats.number(c, 0, kMaxRecordBytes);
    else (void)cats.optional_object(c);
  cats.finish();
  if (auto at = m.optional_object("at_peak")) {
    double sum = 0;
    for (const char* c : kDeviceLines) sum += out.at_peak[c] = at->number(c, 0, kMaxRecordBytes);
    at->finish();
    // Byte counts below 2^53 add exactly: a composition that is not the peak
    // was written by something else.
    if (sum != out.peak_bytes)
      throw InputError(file + ": " + path + ".at_peak: the lines sum to " + fmt(sum) + " bytes, not peak_bytes " +
                       fmt(out.peak_bytes));
  }
  m.finish();
  return out;
}

nlohmann::json read_environment(ObjectReader e) {
  nlohmann::json out = nlohmann::json::object();
  for (const char* k : {"backend", "host", "mpi", "compiler", "eigen"}) out[k] = e.string(k);
  out["hardware_threads"] = e.integer("hardware_threads", 0, 1 << 24);
  out["threads_per_rank"] = e.integer("threads_per_rank", 1, 1 << 24);
  e.finish();
  return out;
}

std::string reanchored(const InputError& e, const std::string& under) {
  std::string msg = e.what();
  if (auto pos = msg.find(": $"); pos != std::string::npos) msg.replace(pos, 3, ": $." + under);
  return msg;
}

}  // namespace

double RunRecord::op_seconds_per_step(const std::string& kind) const {
  const auto it = ops_rank0.find(kind);
  if (it == ops_rank0.end() || steps.empty()) return 0;
  return it->second.time_s / static_cast<double>(steps.size());
}

std::size_t RunRecord::peak_rank() const {
  std::size_t best = 0;
  for (std::size_t i = 1; i < memory.size(); ++i)
    if (memory[i].peak_bytes > memory[best].peak_bytes) best = i;
  return best;
}

std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h) {
  for (char c : bytes) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ULL;
  return h;
}

std::string digest_hex(std::uint64_t digest) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(digest));
  return buf;
}

std::uint64_t json_fnv1a(const nlohmann::json& doc) { return fnv1a(doc.dump()); }

std::string json_fnv1a_hex(const nlohmann::json& doc) { return digest_hex(json_fnv1a(doc)); }

RunRecord run_record_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  r.schema("ztune.runrecord/1");
  RunRecord rec;
  rec.file = file;
  const auto& plan_file = r.raw("plan_file");
  try {
    rec.plan_file = plan_file_from_json(plan_file, file);
  } catch (const InputError& e) {
    throw InputError(reanchored(e, "plan_file"));
  }
  if (!rec.plan_file.model) throw r.error("plan_file", "the plan file that ran has no model (ztune-worker embeds it)");
  rec.plan_digest = r.string("plan_digest");
  rec.model_digest = r.string("model_digest");
  // The digests are of the plan and model the record carries: a record edited
  // by hand (another plan, fewer layers) no longer matches and is not fitted.
  if (rec.plan_digest != json_fnv1a_hex(plan_file.at("plan")))
    throw r.error("plan_digest", "\"" + rec.plan_digest + "\" is not the digest of $.plan_file.plan (" +
                                     json_fnv1a_hex(plan_file.at("plan")) + "): the record was changed after its run");
  if (rec.model_digest != json_fnv1a_hex(plan_file.at("model")))
    throw r.error("model_digest", "\"" + rec.model_digest + "\" is not the digest of $.plan_file.model (" +
                                      json_fnv1a_hex(plan_file.at("model")) + "): the record was changed after its run");
  rec.data = r.string("data");

  const auto& steps = array(r, "steps");
  for (std::size_t i = 0; i < steps.size(); ++i) {
    const std::string path = "$.steps[" + std::to_string(i) + "]";
    rec.steps.push_back(read_step(steps[i], file, path));
    if (i > 0 && rec.steps[i].step <= rec.steps[i - 1].step)
      throw InputError(file + ": " + path + ".step: " + std::to_string(rec.steps[i].step) +
                       " does not follow step " + std::to_string(rec.steps[i - 1].step));
    // Only fp16 scales its loss (DeepSpeed's dynamic scaler, a positive
    // scale); bf16 and fp32 steps carry 1.
    const double scale = rec.steps[i].loss_scale;
    if (rec.plan_file.plan.precision == Precision::fp16 ? !(scale > 0) : scale != 1)
      throw InputError(file + ": " + path + ".loss_scale: " + fmt(scale) +
                       (rec.plan_file.plan.precision == Precision::fp16
                            ? " on an fp16 plan; expected a scale > 0"
                            : " on a plan in " + to_string(rec.plan_file.plan.precision) +
                                  ", which scales no loss; expected 1"));
  }
  const auto& losses = array(r, "losses");
  if (losses.size() != steps.size())
    throw r.error("losses", std::to_string(losses.size()) + " losses for " + std::to_string(steps.size()) +
                                " steps (expected one per step)");
  for (std::size_t i = 0; i < losses.size(); ++i) {
    const std::string path = "$.losses[" + std::to_string(i) + "]";
    rec.losses.push_back(element(losses[i], file, path, 0, kMaxLoss));
    if (rec.losses[i] != rec.steps[i].loss)
      throw InputError(file + ": " + path + ": " + fmt(rec.losses[i]) + " is not $.steps[" + std::to_string(i) +
                       "].loss " + fmt(rec.steps[i].loss));
  }

  rec.step_time_s = r.number("step_time_s", 0, kMaxRecordStepSeconds);
  std::vector<double> times;
  for (const auto& s : rec.steps) times.push_back(s.time_s);
  const double median = median_step_time(std::move(times));
  if (differs(rec.step_time_s, median))
    throw r.error("step_time_s", fmt(rec.step_time_s) + " is not the median of $.steps[].time_s (" + fmt(median) + ")");
  rec.tokens_per_step = r.integer("tokens_per_step", 1, std::int64_t{1} << 53);
  rec.tokens_per_s = r.number("tokens_per_s", 0, kMaxRecordTokensPerS);
  const double throughput = median > 0 ? static_cast<double>(rec.tokens_per_step) / median : 0;
  if (differs(rec.tokens_per_s, throughput))
    throw r.error("tokens_per_s", fmt(rec.tokens_per_s) + " is not $.tokens_per_step / $.step_time_s (" +
                                      fmt(throughput) + ")");

  rec.ops_rank0 = read_ops(r.object("ops_rank0"));
  rec.collectives_rank0 = read_collectives(r.object("collectives_rank0"));

  const auto& memory = array(r, "memory");
  const int ranks = rec.plan_file.plan.gpus();
  // Each group lies within the run, and each collective's bandwidths are what
  // its bytes and time give (nccl-tests: algbw = S/t, busbw = algbw · the bus
  // factor of the group's size): a hand-edited figure contradicts them.
  for (const auto& [group, g] : rec.collectives_rank0) {
    const std::string at = "$.collectives_rank0." + group;
    if (g.ranks > ranks)
      throw InputError(file + ": " + at + ".ranks: " + std::to_string(g.ranks) + " ranks in a group of a run of " +
                       std::to_string(ranks));
    for (const auto& [kind, c] : g.collectives) {
      const double algbw = c.time_s > 0 ? c.bytes / c.time_s / 1e9 : 0;
      if (differs(c.algbw_gbps, algbw))
        throw InputError(file + ": " + at + "." + kind + ".algbw_gbps: " + fmt(c.algbw_gbps) +
                         " is not bytes / time_s (" + fmt(algbw) + ")");
      const double busbw = algbw * bus_factor(*collective_named(kind), g.ranks);
      if (differs(c.busbw_gbps, busbw))
        throw InputError(file + ": " + at + "." + kind + ".busbw_gbps: " + fmt(c.busbw_gbps) +
                         " is not algbw_gbps · the bus factor of " + std::to_string(g.ranks) + " ranks (" +
                         fmt(busbw) + ")");
    }
  }
  if (memory.size() != static_cast<std::size_t>(ranks))
    throw r.error("memory", std::to_string(memory.size()) + " ranks' memory for a plan of " + std::to_string(ranks) +
                                " ranks (expected one per rank)");
  for (std::size_t i = 0; i < memory.size(); ++i) {
    const std::string path = "$.memory[" + std::to_string(i) + "]";
    rec.memory.push_back(read_rank_memory(memory[i], file, path));
    if (rec.memory[i].rank != static_cast<int>(i))
      throw InputError(file + ": " + path + ".rank: expected " + std::to_string(i) + " (ranks in order), got " +
                       std::to_string(rec.memory[i].rank));
  }
  const auto& peaks = array(r, "peak_memory_bytes");
  if (peaks.size() != memory.size())
    throw r.error("peak_memory_bytes", std::to_string(peaks.size()) + " peaks for " + std::to_string(memory.size()) +
                                           " ranks (expected one per rank)");
  for (std::size_t i = 0; i < peaks.size(); ++i) {
    const std::string path = "$.peak_memory_bytes[" + std::to_string(i) + "]";
    rec.peak_memory_bytes.push_back(element(peaks[i], file, path, 0, kMaxRecordBytes));
    if (rec.peak_memory_bytes[i] != rec.memory[i].peak_bytes)
      throw InputError(file + ": " + path + ": " + fmt(rec.peak_memory_bytes[i]) + " is not $.memory[" +
                       std::to_string(i) + "].peak_bytes " + fmt(rec.memory[i].peak_bytes));
  }
  rec.environment = read_environment(r.object("environment"));
  if (r.has("nvme_io")) rec.nvme_io = r.choice("nvme_io", {"direct", "buffered"});
  else (void)r.optional_object("nvme_io");
  r.finish();
  rec.document = doc;
  return rec;
}

RunRecord read_run_record(const std::string& path) { return run_record_from_json(read_json_file(path), path); }

double median_step_time(std::vector<double> times) {
  if (times.empty()) return 0;
  std::sort(times.begin(), times.end());
  const std::size_t n = times.size();
  return n % 2 == 1 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
}

}  // namespace ztune
