// The trace opens as Chrome trace JSON: every operation has a start, a
// duration and a resource, and no two operations overlap on a compute stream.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <sstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim_fixture.hpp"
#include "ztune/simulator/chrome_trace.hpp"

using namespace ztune;
using namespace ztune::sim;
using namespace ztune::sim::test;

namespace {

void check_trace(const SimResult& r) {
  std::stringstream out;
  write_chrome_trace(out, r);
  const auto doc = nlohmann::json::parse(out.str());  // throws on invalid JSON
  REQUIRE(doc.contains("traceEvents"));
  std::size_t ops = 0;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> compute;  // (pid, tid) → intervals
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++ops;
    REQUIRE(e.contains("ts"));
    REQUIRE(e.contains("dur"));
    REQUIRE(e["dur"].get<double>() >= 0);
    REQUIRE(e["args"].contains("resource"));
    REQUIRE(!e["name"].get<std::string>().empty());
    if (e["args"]["resource"].get<std::string>().find("compute") != std::string::npos)
      compute[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
          {e["ts"].get<double>(), e["ts"].get<double>() + e["dur"].get<double>()});
  }
  CHECK(ops == r.graph.size());
  for (auto& [stream, iv] : compute) {
    std::sort(iv.begin(), iv.end());
    for (std::size_t i = 1; i < iv.size(); ++i) CHECK(iv[i].first >= iv[i - 1].second - 1e-6);
  }
}

}  // namespace

TEST_CASE("the Chrome trace of an interleaved tp×dp×pp iteration is valid", "[simulator][trace]") {
  Plan p = pipeline_plan(4, 8, Schedule::interleaved, 2);
  p.tp = 2;
  p.dp = 2;
  p.zero_stage = 1;
  p.global_batch = 16;
  p.reduce_bucket_elems = 1.5e8;
  FixedCosts c;
  c.layer_times.forward_s = 1.0;
  c.layer_times.backward_s = 2.0;
  c.layer_times.tp_forward_s = 0.1;
  c.layer_times.tp_backward_s = 0.05;
  c.layer_times.tp_backward_async_s = 0.15;
  c.layer_times.tp_backward_window_s = 0.5;
  c.layer_times.params = 1e8;
  c.layer_times.stored_activation_bytes = 10;
  c.embedding_sync = 0.3;
  c.edge_times.head_forward_s = 0.5;
  c.edge_times.head_backward_s = 1.0;
  c.p2p_intra_s = 0.05;
  c.dp_reduce_s_per_byte = 1e-9;
  c.dp_gather_s_per_byte = 1e-9;
  c.gpu_optimizer_s_per_param = 1e-9;
  const auto r = run(16, p, c);
  check_trace(r);
}
