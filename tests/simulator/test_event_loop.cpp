// The engine on hand-built graphs whose timings follow from the rules alone:
// dependencies, one-at-a-time compute streams, equal bandwidth sharing on links.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <stdexcept>

#include "ztune/vocab/input_error.hpp"
#include "ztune/simulator/event_loop.hpp"

using namespace ztune::sim;

namespace {

OpId op(OpGraph& g, int stage, ResourceKind r, double d) {
  Op o;
  o.kind = r == ResourceKind::compute ? OpKind::forward : OpKind::dp_reduce;
  o.stage = static_cast<std::int16_t>(stage);
  o.resource = g.resource_index(stage, r);
  o.duration_s = d;
  return add_op(g, o);
}

// Builds the DAG (once) and simulates it.
Timeline finished(OpGraph& g) {
  if (!g.finalized()) finalize_graph(g);
  return run_event_loop(g);
}

OpGraph graph(int stages) {
  OpGraph g;
  g.stages = stages;
  add_stage_resources(g, stages);
  return g;
}

}  // namespace

TEST_CASE("a chain runs back to back across resources", "[simulator][engine]") {
  OpGraph g = graph(2);
  const OpId a = op(g, 0, ResourceKind::compute, 1.0);
  const OpId b = op(g, 0, ResourceKind::inter_link, 0.5);
  const OpId c = op(g, 1, ResourceKind::compute, 2.0);
  add_dependency(g, a, b);
  add_dependency(g, b, c);
  const Timeline t = finished(g);
  CHECK(t.start_s[b] == Approx(1.0));
  CHECK(t.start_s[c] == Approx(1.5));
  CHECK(t.iteration_s == Approx(3.5));
  CHECK(t.resource_busy_s[static_cast<std::size_t>(g.resource_index(1, ResourceKind::compute))] == Approx(2.0));
}

TEST_CASE("a compute stream runs one operation at a time, lower id first on ties", "[simulator][engine]") {
  OpGraph g = graph(1);
  const OpId a = op(g, 0, ResourceKind::compute, 1.0);
  const OpId b = op(g, 0, ResourceKind::compute, 2.0);
  const Timeline t = finished(g);
  CHECK(t.start_s[a] == 0.0);
  CHECK(t.start_s[b] == Approx(1.0));
  CHECK(t.iteration_s == Approx(3.0));
}

TEST_CASE("transfers on one link share its bandwidth equally", "[simulator][engine]") {
  SECTION("two equal transfers started together both take twice as long") {
    OpGraph g = graph(1);
    const OpId a = op(g, 0, ResourceKind::inter_link, 1.0);
    const OpId b = op(g, 0, ResourceKind::inter_link, 1.0);
    const Timeline t = finished(g);
    CHECK(t.end_s[a] == Approx(2.0));
    CHECK(t.end_s[b] == Approx(2.0));
    CHECK(t.resource_busy_s[static_cast<std::size_t>(g.resource_index(0, ResourceKind::inter_link))] ==
          Approx(2.0));
  }
  SECTION("a short and a long transfer: the short ends at 2x, the long gets the link back") {
    OpGraph g = graph(1);
    const OpId a = op(g, 0, ResourceKind::inter_link, 1.0);
    const OpId b = op(g, 0, ResourceKind::inter_link, 3.0);
    const Timeline t = finished(g);
    CHECK(t.end_s[a] == Approx(2.0));
    CHECK(t.end_s[b] == Approx(4.0));
  }
  SECTION("a transfer joining later slows the first from then on") {
    OpGraph g = graph(1);
    const OpId delay = op(g, 0, ResourceKind::compute, 1.0);
    const OpId a = op(g, 0, ResourceKind::inter_link, 2.0);
    const OpId b = op(g, 0, ResourceKind::inter_link, 1.0);
    add_dependency(g, delay, b);
    const Timeline t = finished(g);
    // a: 1 s alone, then 1 s of work at half speed; b: 1 s at half speed.
    CHECK(t.start_s[b] == Approx(1.0));
    CHECK(t.end_s[a] == Approx(3.0));
    CHECK(t.end_s[b] == Approx(3.0));
  }
  SECTION("links of different fabric levels do not share") {
    OpGraph g = graph(1);
    const OpId a = op(g, 0, ResourceKind::inter_link, 1.0);
    const OpId b = op(g, 0, ResourceKind::intra_link, 1.0);
    const Timeline t = finished(g);
    CHECK(t.end_s[a] == Approx(1.0));
    CHECK(t.end_s[b] == Approx(1.0));
  }
}

// Regression: at a large absolute time (here 3·10^4 s, where one ulp of t is
// 3.6·10^-12 s) the last transfer on a link can be left a remainder below the
// resolution of t but above the completion tolerance; its finish event then
// fell at the same t forever (a 405B ZeRO-3 offload plan hung the search).
TEST_CASE("a transfer finishing below the resolution of the clock still finishes", "[simulator][engine]") {
  OpGraph g = graph(1);
  const OpId delay = op(g, 0, ResourceKind::compute, 3.0e4);
  const OpId a = op(g, 0, ResourceKind::inter_link, 1.0e-6);
  const OpId b = op(g, 0, ResourceKind::inter_link, 1.0e-6 + 1.5e-12);
  add_dependency(g, delay, a);
  add_dependency(g, delay, b);
  const Timeline t = finished(g);
  CHECK(t.end_s[a] == Approx(3.0e4 + 2.0e-6).epsilon(1e-15));
  CHECK(t.end_s[b] == Approx(3.0e4 + 2.0e-6).epsilon(1e-15));
}

TEST_CASE("the engine is deterministic", "[simulator][engine]") {
  OpGraph g = graph(2);
  std::vector<OpId> ids;
  for (int i = 0; i < 200; ++i) {
    const auto r = i % 3 == 0 ? ResourceKind::compute : ResourceKind::inter_link;
    ids.push_back(op(g, i % 2, r, 0.1 * (i % 7 + 1)));
    if (i >= 3) add_dependency(g, ids[static_cast<std::size_t>(i - 3)], ids.back());
  }
  const Timeline t1 = finished(g);
  const Timeline t2 = finished(g);
  CHECK(t1.start_s == t2.start_s);
  CHECK(t1.end_s == t2.end_s);
}

TEST_CASE("a cycle is reported, not simulated", "[simulator][engine]") {
  OpGraph g = graph(1);
  const OpId a = op(g, 0, ResourceKind::compute, 1.0);
  const OpId b = op(g, 0, ResourceKind::compute, 1.0);
  add_dependency(g, a, b);
  add_dependency(g, b, a);
  CHECK_THROWS_AS(finished(g), std::logic_error);
}

TEST_CASE("a duration that is not finite is refused, not simulated forever", "[simulator][engine][hardening]") {
  // A bandwidth of 5e-324 GB/s in a cluster file makes a transfer take inf s; the
  // engine used to loop on events at t = inf.
  for (const double bad : {std::numeric_limits<double>::infinity(), std::nan("")}) {
    OpGraph g = graph(1);
    const OpId a = op(g, 0, ResourceKind::compute, 1.0);
    const OpId b = op(g, 0, ResourceKind::inter_link, bad);
    add_dependency(g, a, b);
    finalize_graph(g);
    REQUIRE_THROWS_AS(run_event_loop(g), ztune::InputError);
    REQUIRE_THROWS_WITH(run_event_loop(g), Catch::Matchers::StartsWith("simulator: operation \"") &&
                                           Catch::Matchers::Contains("for a finite time"));
  }
  // Finite durations whose sum overflows a double are refused too.
  OpGraph g = graph(1);
  const OpId a = op(g, 0, ResourceKind::compute, 1e308);
  const OpId b = op(g, 0, ResourceKind::compute, 1e308);
  add_dependency(g, a, b);
  finalize_graph(g);
  REQUIRE_THROWS_WITH(run_event_loop(g), Catch::Matchers::Contains("add up to more than a double holds"));
}
