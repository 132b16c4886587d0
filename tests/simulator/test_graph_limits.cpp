// The simulator's bounds: a graph's operations are counted, and a plan whose
// graph would pass the limit is refused before anything is built, or the
// moment the graph passes it, instead of growing until the process dies
// (a pipeline of 8 stages × 31 chunks × 32,768 micro-batches ran out of memory).
#include <catch2/catch.hpp>

#include <atomic>
#include <string>
#include <tuple>

#include "sim_fixture.hpp"
#include "ztune/simulator/simulate.hpp"
#include "ztune/vocab/input_error.hpp"

using namespace ztune;
using namespace ztune::sim;
using namespace ztune::sim::test;
using Catch::Matchers::Contains;

namespace {

FixedCosts two_pass_layers() {
  FixedCosts c;
  c.layer_times.forward_s = 1;
  c.layer_times.backward_s = 2;
  c.layer_times.stored_activation_bytes = 1;
  return c;
}

}  // namespace

TEST_CASE("fewest_ops: a forward and a backward per model chunk and micro-batch - a lower bound of the graph",
          "[simulator][limits]") {
  // 2 · pp · chunks · micro-batches (closed form), and every built graph has at least that many.
  for (const auto& [pp, m, v] : {std::tuple{1, 1, 1}, std::tuple{4, 8, 1}, std::tuple{4, 8, 2}, std::tuple{2, 16, 4}}) {
    const Plan p = pipeline_plan(pp, m, v > 1 ? Schedule::interleaved : Schedule::one_f_one_b, v);
    INFO("pp " << pp << " m " << m << " v " << v);
    CHECK(fewest_ops(p) == 2.0 * pp * v * m);
    const OpGraph g = build_iteration_graph(8 * v, p, single_node_placement(p), two_pass_layers());
    CHECK(static_cast<double>(g.size()) >= fewest_ops(p));
  }
}

TEST_CASE("too_large_to_simulate: micro-batches over 65536 or operations over the graph's limit however grouped",
          "[simulator][limits]") {
  Plan p = pipeline_plan(8, 32768, Schedule::interleaved, 31);
  const auto why = too_large_to_simulate(p);
  REQUIRE(why.has_value());
  // 2 · 8 · 31 · 32,768 = 16,252,928 > 8,000,000.
  CHECK_THAT(*why, Contains("needs at least 16252928 operations") && Contains("248 model chunks") &&
                       Contains("at most 8000000"));
  p = pipeline_plan(8, 16384, Schedule::interleaved, 31);  // 8,126,464: still over
  CHECK(too_large_to_simulate(p).has_value());
  p = pipeline_plan(8, 8192, Schedule::interleaved, 31);  // 4,063,232: under
  CHECK_FALSE(too_large_to_simulate(p).has_value());
  p = pipeline_plan(1, 65537);
  CHECK_THAT(too_large_to_simulate(p).value_or(""), Contains("65537 micro-batches per step"));
}

TEST_CASE("the graph stops at its operation limit while it is built - with the reason", "[simulator][limits]") {
  const Plan p = pipeline_plan(4, 8);
  BuildOptions o;
  o.op_limit = 100;  // the plan's graph has at least 2 · 4 · 8 = 64 operations, and more with its transfers
  const OpGraph whole = build_iteration_graph(16, p, single_node_placement(p), two_pass_layers());
  REQUIRE(whole.size() > 100);
  REQUIRE_THROWS_AS(build_iteration_graph(16, p, single_node_placement(p), two_pass_layers(), o), GraphTooLarge);
  REQUIRE_THROWS_WITH(build_iteration_graph(16, p, single_node_placement(p), two_pass_layers(), o),
                      Contains("needs more than 100 operations to simulate (8 micro-batches through 4 model chunks)"));
  o.op_limit = whole.size();  // exactly enough
  CHECK(build_iteration_graph(16, p, single_node_placement(p), two_pass_layers(), o).size() == whole.size());
}

TEST_CASE("a stop request ends the building and the event loop with SimulationStopped", "[simulator][limits]") {
  // A pipeline of 4 stages × 20,000 micro-batches: 160,000 compute operations,
  // past kStopCheckEvery, so both the builder and the loop reach a check.
  const Plan p = pipeline_plan(4, 20000);
  std::atomic<bool> stop{true};
  BuildOptions o;
  o.stop = &stop;
  CHECK_THROWS_AS(build_iteration_graph(16, p, single_node_placement(p), two_pass_layers(), o), SimulationStopped);
  stop = false;  // built whole, then stopped in the loop
  OpGraph g = build_iteration_graph(16, p, single_node_placement(p), two_pass_layers(), o);
  REQUIRE(g.size() > 2 * kStopCheckEvery);
  stop = true;
  CHECK_THROWS_AS(run_event_loop(g, &stop), SimulationStopped);
  // Not stopped, the same graph runs to its end.
  stop = false;
  CHECK(run_event_loop(g, &stop).iteration_s > 0);
}
