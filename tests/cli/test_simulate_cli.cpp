// ztune predict --simulate and --trace end to end: the trace as a user opens it
// (Chrome trace JSON ending at the time printed), --trace as an output file
// (refused like every other one before any work), and the simulator's bounds
// said at once instead of a process that runs out of memory.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "run_command.hpp"
#include "../tuner/temp_files.hpp"

using Catch::Matchers::Contains;
using ztune::test::read_file;
using ztune::test::scratch;

namespace {

// A 4-stage pipeline of the 20B model (dp 8, 128 micro-batches), as Megatron
// runs it: its trace (about 2.3 MB) passes the writer's 1 MiB flush twice.
const std::string kPipeline =
    " predict --cluster dgx-a100-80gbx64 --model 20b --tp 2 --pp 4 --micro-batch 1 --global-batch 1024 --recompute full"
    " --engine megatron";

}  // namespace

TEST_CASE("predict --trace: Chrome trace JSON - one process per stage - ending at the iteration time printed",
          "[cli][simulate]") {
  const std::string trace = (scratch() / "pipeline-trace.json").string();
  const auto r = run_command(ztune_bin() + kPipeline + " --json --trace '" + trace + "'");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j["time"]["method"] == "simulated");
  CHECK(j["time"]["trace"] == trace);
  const std::string text = read_file(trace);
  CHECK(text.size() > 2u * 1024 * 1024);  // written in more than one piece
  const auto doc = nlohmann::json::parse(text);  // throws on invalid JSON
  CHECK(doc["displayTimeUnit"] == "ms");
  double end_us = 0;
  std::size_t complete = 0;
  std::set<int> stages;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    ++complete;
    CHECK(e["dur"].get<double>() >= 0);
    stages.insert(e["pid"].get<int>());
    end_us = std::max(end_us, e["ts"].get<double>() + e["dur"].get<double>());
  }
  CHECK(complete == j["time"]["simulated_operations"].get<std::size_t>());
  CHECK(stages == std::set<int>{0, 1, 2, 3});
  CHECK(end_us == Approx(j["time"]["iteration_s"].get<double>() * 1e6).epsilon(1e-9));
  CHECK(doc["otherData"]["iteration_s"].get<double>() == j["time"]["iteration_s"].get<double>());
}

TEST_CASE("predict --trace is an output file: an empty name - a missing directory and an input file are refused",
          "[cli][simulate]") {
  // An empty name (an unset shell variable) had been taken as no --trace: exit 0, no file.
  auto r = run_command(ztune_bin() + kPipeline + " --trace ''");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--trace: expected a file name, got an empty one"));
  r = run_command(ztune_bin() + kPipeline + " --trace -");  // had made a file named "-"
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--trace: -: expected a file name (for standard output, /dev/stdout)"));
  // Every output flag takes the same check (search --out, export --out, calibrate --out).
  r = run_command(ztune_bin() + " search --cluster dgx2x16 --model gpt2-1.5b --no-db --out -");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--out: -: expected a file name (for standard output, /dev/stdout)"));
  r = run_command(ztune_bin() + kPipeline + " --trace /nonexistent-dir/trace.json");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("the directory /nonexistent-dir does not exist"));
  // The model file it reads is not overwritten by the trace.
  const std::string model = (scratch() / "model-read.json").string();
  {
    std::ifstream in(std::string(ZTUNE_TEST_DATA_DIR) + "/models/20b.json");
    std::ofstream(model) << in.rdbuf();
  }
  const std::string before = read_file(model);
  r = run_command(ztune_bin() + " predict --cluster dgx-a100-80gbx64 --model '" + model + "' --trace '" + model + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--trace " + model + ": is the file --model reads"));
  CHECK(read_file(model) == before);
}

TEST_CASE("predict --simulate beyond the simulator operation limit is refused at once in a 1 GB address space",
          "[cli][simulate]") {
  // 8 stages × 31 chunks × 32,768 micro-batches: at least 2 · 8 · 31 · 32,768 =
  // 16,252,928 operations, past the 8,000,000 the simulator builds. It had
  // aborted on std::bad_alloc (a core dump) after filling memory.
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_command("true; ( ulimit -v 1000000; export ZTUNE_DATA_DIR='" + std::string(ZTUNE_TEST_DATA_DIR) +
                             "'; " + ztune_bin() +
                             " predict --cluster dgx-a100-80gbx64 --model 200b --tp 8 --pp 8 --dp 8 --micro-batch 1"
                             " --virtual-stages 31 --recompute full --engine megatron --global-batch 262144"
                             " --simulate )");
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));
  CHECK_THAT(r.err, Contains("needs at least 16252928 operations to simulate") &&
                        Contains("use the analytical estimate: no --simulate"));
}
