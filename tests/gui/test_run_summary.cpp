// What the Run panel shows of a run: the figures of its run record (read by the
// one strict reader, vocab/run_record.hpp) against the prediction. The record is
// a real worker record (tests/vocab/fixtures/run_record/tiny_dp2.json); the
// expected figures are copied from its text.
#include <catch2/catch.hpp>

#include <fstream>

#include <nlohmann/json.hpp>

#include "ztune/gui/run_summary.hpp"
#include "ztune/vocab/run_record.hpp"

using namespace ztune::gui;

namespace {
const std::string kRecord = std::string(ZTUNE_SOURCE_DIR) + "/tests/vocab/fixtures/run_record/tiny_dp2.json";
}

TEST_CASE("run summary: the figures of the run record", "[gui][run]") {
  const MeasuredRun r = measured_run(ztune::read_run_record(kRecord));
  REQUIRE(r.step_time_s.has_value());
  CHECK(*r.step_time_s == 0.018669393);
  CHECK(r.losses == std::vector<double>{5.54868071898818, 5.5477940402925014});
  REQUIRE(r.peak_memory_bytes.has_value());
  CHECK(*r.peak_memory_bytes == 6554624.0);
}

TEST_CASE("run summary: measured against predicted", "[gui][run]") {
  MeasuredRun r;
  r.step_time_s = 0.25;
  // Predicted 0.2 s against measured 0.25 s: 20 % under.
  CHECK(compare_run(r, 0.2) == "measured 250 ms per step, predicted 200 ms (-20.0 % off)");
}

TEST_CASE("run summary: no step time when the run ran no step", "[gui][run]") {
  std::ifstream in(kRecord);
  nlohmann::json doc = nlohmann::json::parse(in);
  doc["steps"] = nlohmann::json::array();
  doc["losses"] = nlohmann::json::array();
  doc["step_time_s"] = 0;
  doc["tokens_per_s"] = 0;
  const MeasuredRun r = measured_run(ztune::run_record_from_json(doc, "resumed.json"));
  CHECK_FALSE(r.step_time_s.has_value());
  CHECK(compare_run(r, 1.0) == "the run printed no step time");
}

// Oracle: the signal numbers of Linux (signal(7)) and `ztune run`'s exit
// status after a signal it handles, 128 + the signal (cli/cmd_run.cpp).
TEST_CASE("run summary: a run ended by a signal names it", "[gui][run]") {
  CHECK(run_ending(9, true) == "ztune run was killed by SIGKILL (signal 9)");
  CHECK(run_ending(11, true) == "ztune run was killed by SIGSEGV (signal 11)");
  CHECK(run_ending(143, false) == "ztune run was interrupted by SIGTERM and ended its ranks (exit 143)");
  CHECK(run_ending(130, false) == "ztune run was interrupted by SIGINT and ended its ranks (exit 130)");
  CHECK(run_ending(2, false) == "ztune run failed (exit 2)");
  CHECK(run_ending(137, false) == "ztune run failed (exit 137)");  // not a signal ztune run handles
}
