// The `ztune run --json` summary the Run panel reads (issue 6: losses, step_time_s, peak_memory_bytes per rank).
#include <catch2/catch.hpp>

#include "ztune/gui/run_summary.hpp"

using namespace ztune::gui;

TEST_CASE("run summary: the JSON after the log lines", "[gui][run]") {
  const QByteArray out =
      "step 1 loss 10.9\nstep 2 loss 10.1\n"
      "{\"losses\": [10.9, 10.1], \"step_time_s\": 0.25, \"peak_memory_bytes\": [1000, 3000]}\n";
  const auto r = parse_run_summary(out);
  REQUIRE(r.has_value());
  REQUIRE(r->step_time_s.has_value());
  CHECK(*r->step_time_s == Approx(0.25));
  CHECK(r->losses.size() == 2);
  CHECK(*r->peak_memory_bytes == Approx(3000));
  // Predicted 0.2 s against measured 0.25 s: 20 % under.
  CHECK(compare_run(*r, 0.2) == "measured 250 ms per step, predicted 200 ms (-20.0 % off)");
}

TEST_CASE("run summary: none when the run printed no JSON", "[gui][run]") {
  CHECK_FALSE(parse_run_summary("ztune run: error: the plan needs 256 ranks\n").has_value());
  const auto r = parse_run_summary("{\"losses\": []}");
  REQUIRE(r.has_value());
  CHECK(compare_run(*r, 1.0) == "the run printed no step time");
}
