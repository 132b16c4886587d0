// The one run-record reader (issue 20): a record ztune-worker wrote reads back
// with the values its text holds; each mutation a careless or hostile edit makes
// (unknown field, wrong type, missing part, negative, huge or non-finite value,
// parts that contradict each other) is an InputError naming the file and the
// JSON path. The fixture is a real worker record (tiny model, dp 2, 2 steps:
// tests/vocab/fixtures/run_record/tiny_dp2.json); the expected values below
// are copied from its text.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <string>

#include "ztune/vocab/json_reader.hpp"
#include "ztune/calibration/profile_fit.hpp"
#include "ztune/vocab/run_record.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;
using ztune::InputError;

namespace {

const std::string kFixture = std::string(ZTUNE_SOURCE_DIR) + "/tests/vocab/fixtures/run_record/tiny_dp2.json";

json fixture() {
  std::ifstream in(kFixture);
  return json::parse(in);
}

// One directory per test process, removed when it ends (hundreds had been left in /tmp).
fs::path scratch() {
  struct Dir {
    fs::path path = fs::temp_directory_path() / ("ztune-run-record-" + std::to_string(::getpid()));
    Dir() { fs::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Writes the mutated record and reads it back from disk: the message of the
// refusal, or "" when it was accepted.
std::string refusal(const std::string& name, const std::function<void(json&)>& mutate) {
  json doc = fixture();
  mutate(doc);
  const std::string path = (scratch() / (name + ".json")).string();
  std::ofstream(path) << doc.dump(1) << "\n";
  std::string message;
  try {
    (void)ztune::read_run_record(path);
  } catch (const InputError& e) {
    message = e.what();
  }
  fs::remove(path);
  return message;
}

std::string path_of(const std::string& name) { return (scratch() / (name + ".json")).string(); }

// The fixture with each rank's peak composition as today's worker writes it
// (at_peak): the fixture predates it, so its peak is put on params.
json with_at_peak(json doc) {
  for (auto& m : doc["memory"]) {
    m["at_peak"] = json::object();
    for (const char* c : {"params", "grads", "optimizer", "activations", "comm_buckets", "zero3_gathered", "workspace",
                          "logits"})
      m["at_peak"][c] = 0.0;
    m["at_peak"]["params"] = m["peak_bytes"];
  }
  return doc;
}

}  // namespace

TEST_CASE("run record: the worker's record reads back with the values its text holds", "[model][run_record]") {
  const ztune::RunRecord r = ztune::read_run_record(kFixture);
  CHECK(r.file == kFixture);
  REQUIRE(r.steps.size() == 2);
  CHECK(r.steps[0].step == 1);
  CHECK(r.steps[1].step == 2);
  REQUIRE(r.losses.size() == 2);
  CHECK(r.losses[0] == 5.54868071898818);
  CHECK(r.losses[1] == 5.5477940402925014);
  CHECK(r.steps[1].time_s == 0.017457889);
  REQUIRE(r.steps[0].grad_norm.has_value());
  CHECK(*r.steps[0].grad_norm == 1.8269471115011051);
  CHECK(r.step_time_s == 0.018669393);
  CHECK(r.tokens_per_step == 256);
  CHECK(r.tokens_per_s == 13712.282986383114);
  CHECK(r.peak_memory_bytes == std::vector<double>{6554624.0, 6554624.0});
  CHECK(r.memory[r.peak_rank()].by_category.at("optimizer") == 1764352.0);
  CHECK(r.peak_rank() == 0);  // equal peaks: the lowest rank
  CHECK(r.op_seconds_per_step("gemm") == Approx(0.014359524999999995 / 2));
  CHECK(r.collectives_rank0.at("dp").ranks == 2);
  CHECK(r.collectives_rank0.at("dp").collectives.at("all_reduce").count == 2);
  CHECK(r.collectives_rank0.at("world").collectives.empty());
  REQUIRE(r.plan_file.model.has_value());
  CHECK(r.plan_file.plan.dp == 2);
  CHECK(r.environment.at("backend") == "cpu");
  CHECK_FALSE(r.nvme_io.has_value());
  CHECK(r.document == fixture());

  const ztune::RunObservation o = ztune::run_observation_from_record(r);
  CHECK(o.measured_iteration_s == 0.018669393);
  CHECK(o.steps == 2);
  CHECK(o.op_seconds.at("attention") == 0.003992249);
}

TEST_CASE("run record: the sequence slot's all-to-alls and the replicas' all-reduce read back", "[vocab][run_record]") {
  // The executor counts every kind of vocab/collective.hpp and records every
  // group of kRunRecordGroups. Before, the worker left the sequence slot and
  // the replica group out of its record, and the reader knew neither
  // all_to_all nor these groups (it would have refused them as unknown fields).
  json doc = fixture();
  // algbw = S/t; busbw = algbw · nccl-tests' factor for 2 ranks: 1/2 for an
  // all-to-all, 1 for a send, a receive and a 2-rank all-reduce.
  const json one = {{"count", 4}, {"bytes", 4096.0}, {"time_s", 0.002}, {"algbw_gbps", 0.002048}, {"busbw_gbps", 0.001024}};
  json whole = one;
  whole["busbw_gbps"] = 0.002048;
  doc["collectives_rank0"]["ulysses"] = {{"ranks", 2}, {"all_to_all", one}};
  doc["collectives_rank0"]["cp"] = {{"ranks", 2}, {"send", whole}, {"recv", whole}};
  doc["collectives_rank0"]["dp_replica"] = {{"ranks", 2}, {"all_reduce", whole}};
  const std::string path = (scratch() / "ulysses.json").string();
  std::ofstream(path) << doc.dump(1) << "\n";
  const ztune::RunRecord r = ztune::read_run_record(path);
  fs::remove(path);
  CHECK(r.collectives_rank0.at("ulysses").collectives.at("all_to_all").count == 4);
  CHECK(r.collectives_rank0.at("cp").collectives.at("recv").bytes == 4096.0);
  CHECK(r.collectives_rank0.at("dp_replica").ranks == 2);
  CHECK_THAT(refusal("unknown-kind", [&](json& d) { d["collectives_rank0"]["dp"]["all_to_everyone"] = one; }),
             Catch::Matchers::Contains("all_to_everyone"));
}

TEST_CASE("run record: an fp16 overflow's null gradient norm and an older record's missing fields read",
          "[model][run_record]") {
  CHECK(refusal("null-grad-norm", [](json& d) { d["steps"][0]["grad_norm"] = nullptr; }).empty());
  CHECK(refusal("no-loss-scale", [](json& d) {
          for (auto& s : d["steps"]) {
            s.erase("loss_scale");
            s.erase("skipped");
          }
        }).empty());
  CHECK(refusal("buffered", [](json& d) { d["nvme_io"] = "buffered"; }).empty());
}

TEST_CASE("run record: the peak's composition reads back, and one that is not the peak is refused",
          "[vocab][run_record]") {
  const json doc = with_at_peak(fixture());
  const ztune::RunRecord r = ztune::run_record_from_json(doc, "r.json");
  REQUIRE(r.memory.size() == 2);
  CHECK(r.memory[1].at_peak.at("params") == doc["memory"][1]["peak_bytes"].get<double>());
  CHECK(r.memory[1].at_peak.at("logits") == 0.0);
  CHECK(r.memory[1].at_peak.size() == 8);
  CHECK(ztune::run_record_from_json(fixture(), "r.json").memory[0].at_peak.empty());  // an older record
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* message;
  };
  const std::vector<Case> cases{
      {"a line moved", [](json& d) { d["memory"][0]["at_peak"]["grads"] = 1.0; },
       "r.json: $.memory[0].at_peak: the lines sum to"},
      {"a host line", [](json& d) { d["memory"][1]["at_peak"]["host_staging"] = 0.0; },
       "r.json: $.memory[1].at_peak.host_staging: unknown field"},
      {"a line missing", [](json& d) { d["memory"][0]["at_peak"].erase("logits"); },
       "r.json: $.memory[0].at_peak.logits: missing"},
      {"negative", [](json& d) { d["memory"][0]["at_peak"]["workspace"] = -1.0; },
       "r.json: $.memory[0].at_peak.workspace: expected a number in [0,"},
      {"not an object", [](json& d) { d["memory"][0]["at_peak"] = 5; }, "r.json: $.memory[0].at_peak: expected an object"},
  };
  for (const auto& c : cases) {
    INFO(c.what);
    json bad = doc;
    c.mutate(bad);
    CHECK_THROWS_WITH(ztune::run_record_from_json(bad, "r.json"), StartsWith(c.message));
  }
}

TEST_CASE("run record: each mutation is refused naming the file and the JSON path", "[model][run_record]") {
  struct Case {
    const char* name;
    std::function<void(json&)> mutate;
    const char* where;  // the JSON path and what the message says
  };
  const std::vector<Case> cases{
      {"unknown-top", [](json& d) { d["tokens"] = 5; }, "$.tokens: unknown field"},
      {"unknown-step", [](json& d) { d["steps"][1]["note"] = "x"; }, "$.steps[1].note: unknown field"},
      {"unknown-op", [](json& d) { d["ops_rank0"]["softmax"] = {{"time_s", 1}, {"count", 1}}; },
       "$.ops_rank0.softmax: unknown field"},
      {"unknown-collective", [](json& d) { d["collectives_rank0"]["dp"]["allreduce"] = json::object(); },
       "$.collectives_rank0.dp.allreduce: unknown field"},
      {"unknown-category", [](json& d) { d["memory"][1]["by_category"]["cache"] = 1.0; },
       "$.memory[1].by_category.cache: unknown field"},
      {"type-step-time", [](json& d) { d["step_time_s"] = "0.0187"; }, "$.step_time_s: expected a number"},
      {"type-losses", [](json& d) { d["losses"] = 5.5; }, "$.losses: expected an array"},
      {"type-loss", [](json& d) { d["losses"][0] = "5.5"; }, "$.losses[0]: expected a number"},
      {"type-steps", [](json& d) { d["steps"] = json::object(); }, "$.steps: expected an array"},
      {"type-step", [](json& d) { d["steps"][0] = 1; }, "$.steps[0]: expected an object"},
      {"type-skipped", [](json& d) { d["steps"][0]["skipped"] = 0; }, "$.steps[0].skipped: expected true or false"},
      {"type-plan", [](json& d) { d["plan_file"]["plan"]["dp"] = "2"; }, "$.plan_file.plan.dp"},
      {"type-environment", [](json& d) { d["environment"]["hardware_threads"] = "two"; },
       "$.environment.hardware_threads: expected an integer"},
      {"missing-steps", [](json& d) { d.erase("steps"); }, "$.steps: missing required field"},
      {"missing-losses", [](json& d) { d.erase("losses"); }, "$.losses: missing required field"},
      {"missing-memory", [](json& d) { d.erase("memory"); }, "$.memory: missing required field"},
      {"missing-step-time", [](json& d) { d["steps"][0].erase("time_s"); }, "$.steps[0].time_s: missing"},
      {"missing-category", [](json& d) { d["memory"][0]["by_category"].erase("params"); },
       "$.memory[0].by_category.params: missing"},
      {"missing-model", [](json& d) { d["plan_file"].erase("model"); }, "$.plan_file: the plan file that ran has no model"},
      {"schema", [](json& d) { d["schema"] = "ztune.runrecord/2"; }, "$.schema: expected \"ztune.runrecord/1\""},
      {"tokens-negative", [](json& d) { d["tokens_per_s"] = -5; }, "$.tokens_per_s: expected a number in [0,"},
      {"step-time-huge", [](json& d) { d["step_time_s"] = 1e308; }, "$.step_time_s: expected a number in [0,"},
      {"step-time-null", [](json& d) { d["step_time_s"] = nullptr; }, "$.step_time_s: expected a number in [0,"},
      {"step-negative", [](json& d) { d["steps"][1]["time_s"] = -0.01; }, "$.steps[1].time_s: expected a number"},
      {"peak-negative", [](json& d) { d["peak_memory_bytes"][1] = -1.0; }, "$.peak_memory_bytes[1]: expected a number"},
      {"bytes-huge", [](json& d) { d["memory"][0]["peak_bytes"] = 1e300; }, "$.memory[0].peak_bytes: expected a number"},
      {"op-negative", [](json& d) { d["ops_rank0"]["gemm"]["time_s"] = -1; }, "$.ops_rank0.gemm.time_s"},
      {"count-fraction", [](json& d) { d["ops_rank0"]["gemm"]["count"] = 1.5; }, "$.ops_rank0.gemm.count"},
      {"busbw-huge", [](json& d) { d["collectives_rank0"]["dp"]["all_reduce"]["busbw_gbps"] = 1e308; },
       "$.collectives_rank0.dp.all_reduce.busbw_gbps"},
      // Parts that contradict each other: what a hand edit of one figure leaves.
      {"loss-edited", [](json& d) { d["losses"][1] = 1.0; }, "$.losses[1]: 1 is not $.steps[1].loss"},
      {"loss-dropped", [](json& d) { d["losses"].erase(1); }, "$.losses: 1 losses for 2 steps"},
      {"step-time-edited", [](json& d) { d["step_time_s"] = 0.5; }, "$.step_time_s: 0.5 is not the median"},
      {"tokens-edited", [](json& d) { d["tokens_per_s"] = 20000; }, "$.tokens_per_s: 20000 is not"},
      {"rank-dropped", [](json& d) { d["memory"].erase(1); }, "$.memory: 1 ranks' memory for a plan of 2 ranks"},
      {"rank-order", [](json& d) { d["memory"][1]["rank"] = 0; }, "$.memory[1].rank: expected 1"},
      {"peak-edited", [](json& d) { d["peak_memory_bytes"][0] = 1.0; }, "$.peak_memory_bytes[0]: 1 is not"},
      {"step-order", [](json& d) { d["steps"][1]["step"] = 1; }, "$.steps[1].step: 1 does not follow step 1"},
      // A collective's bandwidths are its bytes over its time, and a group lies within the run.
      {"algbw-edited", [](json& d) { d["collectives_rank0"]["dp"]["all_reduce"]["algbw_gbps"] = 0.0; },
       "$.collectives_rank0.dp.all_reduce.algbw_gbps: 0 is not bytes / time_s"},
      {"busbw-edited", [](json& d) { d["collectives_rank0"]["dp"]["all_reduce"]["busbw_gbps"] = 7.0; },
       "$.collectives_rank0.dp.all_reduce.busbw_gbps: 7 is not algbw_gbps"},
      {"group-too-big", [](json& d) { d["collectives_rank0"]["dp"]["ranks"] = 3; },
       "$.collectives_rank0.dp.ranks: 3 ranks in a group of a run of 2"},
      {"loss-scale-fp32", [](json& d) { d["steps"][0]["loss_scale"] = 0.0; },
       "$.steps[0].loss_scale: 0 on a plan in fp32, which scales no loss; expected 1"},
      // The digests are of the plan and model the record carries (FNV-1a 64 of
      // their compact text): an edited plan or model no longer matches them.
      {"plan-edited", [](json& d) { d["plan_file"]["plan"]["recompute"] = "full"; },
       "$.plan_digest: \""},
      {"model-edited", [](json& d) { d["plan_file"]["model"]["layers"] = 2; }, "$.model_digest: \""},
      {"digest-edited", [](json& d) { d["plan_digest"] = "x"; },
       "$.plan_digest: \"x\" is not the digest of $.plan_file.plan"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    const std::string msg = refusal(c.name, c.mutate);
    CHECK_THAT(msg, StartsWith(path_of(c.name) + ": "));
    CHECK_THAT(msg, Contains(c.where));
  }
}

TEST_CASE("run record: NaN is refused, in a document and in a file's text", "[model][run_record]") {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (const char* key : {"tokens_per_s", "step_time_s"}) {
    json doc = fixture();
    doc[key] = nan;
    INFO(key);
    CHECK_THROWS_WITH(ztune::run_record_from_json(doc, "results.db run 7"),
                      StartsWith(std::string("results.db run 7: $.") + key + ": expected a number in [0,"));
  }
  json doc = fixture();
  doc["steps"][0]["loss"] = nan;
  CHECK_THROWS_WITH(ztune::run_record_from_json(doc, "r.json"), StartsWith("r.json: $.steps[0].loss: expected a number"));
  doc = fixture();
  doc["memory"][0]["by_category"]["grads"] = -nan;
  CHECK_THROWS_WITH(ztune::run_record_from_json(doc, "r.json"),
                    StartsWith("r.json: $.memory[0].by_category.grads: expected a number"));
  // JSON has no NaN: in a file it is a syntax error naming the file.
  std::string text = fixture().dump(1);
  const auto at = text.find("\"tokens_per_s\": ");
  REQUIRE(at != std::string::npos);
  const auto end = text.find_first_of(",\n}", at + 16);
  text.replace(at + 16, end - (at + 16), "NaN");
  const std::string path = (scratch() / "nan-text.json").string();
  std::ofstream(path) << text;
  CHECK_THROWS_WITH(ztune::read_run_record(path), StartsWith(path + ":"));
  std::error_code ec;
  fs::remove_all(scratch(), ec);
}

TEST_CASE("run record: the fit refuses a record that measured no step", "[model][run_record]") {
  json doc = fixture();
  doc["steps"] = json::array();
  doc["losses"] = json::array();
  doc["step_time_s"] = 0;
  doc["tokens_per_s"] = 0;
  const ztune::RunRecord r = ztune::run_record_from_json(doc, "resumed.json");  // a resume with nothing left
  CHECK(r.steps.empty());
  CHECK(r.op_seconds_per_step("gemm") == 0);
  CHECK_THROWS_WITH(ztune::run_observation_from_record(r), StartsWith("resumed.json: $.step_time_s: expected a time > 0"));
}

TEST_CASE("run record: multi-threaded ranks beyond the host's threads are marked oversubscribed", "[model][run_record]") {
  // The fixture: 2 ranks of local-cpu (8 a node), 1 thread each, on a host of 2
  // hardware threads. Single-threaded ranks are priced however many share the
  // cores (oversubscribed_view); a rank's threads sharing them are not.
  auto observed = [](int threads_per_rank, int hardware_threads) {
    json doc = fixture();
    doc["environment"]["threads_per_rank"] = threads_per_rank;
    doc["environment"]["hardware_threads"] = hardware_threads;
    return ztune::run_observation_from_record(ztune::run_record_from_json(doc, "r.json"));
  };
  CHECK_FALSE(observed(1, 2).oversubscribed);
  CHECK_FALSE(observed(1, 1).oversubscribed);   // 2 single-threaded ranks on one core: priced
  CHECK_FALSE(observed(2, 4).oversubscribed);   // 2 × 2 = 4 threads on 4
  CHECK_FALSE(observed(4, 0).oversubscribed);   // the host's count unknown: not judged
  const auto o = observed(1024, 2);             // `ztune run --threads 1024` on this VM
  REQUIRE(o.oversubscribed);
  CHECK(*o.oversubscribed == "2 rank(s) × 1024 thread(s) on a host of 2 hardware threads");
  CHECK(observed(2, 3).oversubscribed);
}

// Every value of the worker's record replaced by each hostile value, every member
// removed, every object given an unknown member: each mutated record is either
// refused naming the file and a JSON path, or read with finite, non-negative
// figures (never a crash, never a negative or non-finite number let through).
TEST_CASE("run record: thousands of mutations are refused or read with sane figures", "[model][run_record]") {
  const json base = with_at_peak(fixture());
  std::vector<json::json_pointer> pointers;
  std::function<void(const json&, const json::json_pointer&)> walk = [&](const json& v, const json::json_pointer& at) {
    pointers.push_back(at);
    if (v.is_object())
      for (const auto& [k, child] : v.items()) walk(child, at / k);
    if (v.is_array())
      for (std::size_t i = 0; i < v.size(); ++i) walk(v[i], at / i);
  };
  walk(base, json::json_pointer());
  std::vector<json> hostile{-5,   -1e-300, 1e308,          -1e308, 0,    1.5,  9007199254740993.0,
                                  "x",  "",      nullptr,        true,   false, json::object(), json::array(),
                                  json::array({1, 2}), 18446744073709551615ULL, -9223372036854775807LL - 1};
  const double inf = std::numeric_limits<double>::infinity();
  for (const json& h : std::vector<json>{std::nan(""), inf, -inf, 5e-324, -0.0, 1, 2, 3, -1, -0.5, 0.5, 1e-9, 2147483648.0,
                                         1e6 + 1, 1e9 + 1, 1e12, 1e15 + 1, 2e18, 1e300, 1e100, 4, 65536, 1e-6, -1e-9, "5", " ", "null", "NaN",
                                         std::string(1000, 'x'), json::array({nullptr}), json::array({json::array()}),
                                         json::array({json::object()}), json::object({{"k", 1}})})
    hostile.push_back(h);
  json deep = json::array();
  for (int i = 0; i < 100; ++i) deep = json::array({deep});
  hostile.push_back(deep);
  // Values derived from the one they replace: sign, scale, off by one, as text, wrapped.
  auto derived = [](const json& v) {
    std::vector<json> out;
    if (v.is_number()) {
      const double d = v.get<double>();
      for (double x : {-d, 2 * d, d / 2, d + 1, d - 1, d * 1e300, d * 1e-300, std::nextafter(d, 1e300)}) out.emplace_back(x);
      out.emplace_back(v.dump());
    }
    if (v.is_string()) out.emplace_back(v.get<std::string>() + "x");
    out.push_back(json::array({v}));
    out.push_back(json::object({{"value", v}}));
    return out;
  };
  int refused = 0, accepted = 0;
  auto attempt = [&](const json& doc) {
    try {
      const ztune::RunRecord r = ztune::run_record_from_json(doc, "m.json");
      ++accepted;
      auto sane = [](double v) { return std::isfinite(v) && v >= 0; };
      CHECK(sane(r.step_time_s));
      CHECK(sane(r.tokens_per_s));
      for (double v : r.losses) CHECK(sane(v));
      for (double v : r.peak_memory_bytes) CHECK(sane(v));
      for (const auto& s : r.steps) CHECK((sane(s.time_s) && sane(s.lr) && sane(s.loss_scale)));
      for (const auto& [k, op] : r.ops_rank0) CHECK((sane(op.time_s) && op.count >= 0));
      for (const auto& m : r.memory) {
        for (const auto& [k, b] : m.by_category) CHECK(sane(b));
        for (const auto& [k, b] : m.at_peak) CHECK(sane(b));
      }
    } catch (const InputError& e) {
      ++refused;
      const std::string msg = e.what();
      if (msg.rfind("m.json: $", 0) != 0) FAIL_CHECK("refusal without the file and a JSON path: " << msg);
    }
  };
  for (const auto& at : pointers) {
    if (at.empty()) continue;
    for (const auto& h : hostile) {
      json doc = base;
      doc[at] = h;
      attempt(doc);
    }
    for (const auto& h : derived(base[at])) {
      json doc = base;
      doc[at] = h;
      attempt(doc);
    }
    json removed = base;
    const std::string last = at.back();
    const json::json_pointer parent = at.parent_pointer();
    if (removed[parent].is_object()) removed[parent].erase(last);
    else removed[parent].erase(static_cast<std::size_t>(std::stoul(last)));
    attempt(removed);
    if (base[at].is_object()) {
      json extra = base;
      extra[at]["unexpected"] = 1;
      attempt(extra);
    }
  }
  INFO(refused << " refused, " << accepted << " read");
  CHECK(refused + accepted > 10000);
  CHECK(refused > accepted);
  WARN(refused << " mutations refused, " << accepted << " read with sane figures");
}
