// The timeline built from a hand-made two-stage graph whose schedule is known in
// closed form: stage 0 forward [0, 1], its send to stage 1 [1, 1.5], stage 1
// forward [1.5, 2.5]. Stage 0's compute then idles for [1, 2.5], stage 1's for [0, 1.5].
#include <catch2/catch.hpp>

#include "ztune/gui/timeline_data.hpp"
#include "ztune/simulator/simulation.hpp"

using namespace ztune;
using namespace ztune::gui;

namespace {

sim::SimResult two_stage_pipeline() {
  sim::OpGraph g;
  g.stages = 2;
  sim::add_stage_resources(g, 2);
  sim::Op f0;
  f0.kind = sim::OpKind::forward;
  f0.stage = 0;
  f0.microbatch = 0;
  f0.resource = g.resource_index(0, sim::ResourceKind::compute);
  f0.duration_s = 1.0;
  sim::Op send = f0;
  send.kind = sim::OpKind::pp_send;
  send.peer_stage = 1;
  send.resource = g.resource_index(0, sim::ResourceKind::intra_link);
  send.duration_s = 0.5;
  sim::Op f1 = f0;
  f1.stage = 1;
  f1.resource = g.resource_index(1, sim::ResourceKind::compute);
  const auto a = sim::add_op(g, f0);
  const auto b = sim::add_op(g, send);
  const auto c = sim::add_op(g, f1);
  sim::add_dependency(g, a, b);
  sim::add_dependency(g, b, c);
  sim::finalize_graph(g);
  return sim::simulate_graph(std::move(g));
}

}  // namespace

TEST_CASE("timeline rows are the resources that ran something", "[gui][timeline]") {
  const TimelineData t = timeline_from_simulation(two_stage_pipeline());
  CHECK(t.end_s == Approx(2.5));
  REQUIRE(t.rows.size() == 3);  // stage 0 compute, stage 0 intra-node link, stage 1 compute
  CHECK(t.rows[0].stage == 0);
  CHECK(t.rows[0].compute);
  CHECK(t.rows[1].stage == 0);
  CHECK_FALSE(t.rows[1].compute);
  CHECK(t.rows[2].stage == 1);
  CHECK(t.rows[2].compute);
  CHECK(t.rows[0].label.contains("compute"));
  CHECK(t.rows[2].label.contains("1"));
  // Busy: stage 0 compute 1 of 2.5 s, its link 0.5 s, stage 1 compute 1 s.
  CHECK(t.rows[0].busy_fraction == Approx(0.4));
  CHECK(t.rows[1].busy_fraction == Approx(0.2));
  CHECK(t.rows[2].busy_fraction == Approx(0.4));
}

TEST_CASE("timeline items carry the simulated times and idle gaps", "[gui][timeline]") {
  const TimelineData t = timeline_from_simulation(two_stage_pipeline());
  // 3 operations + idle [1, 2.5] on stage 0 + idle [0, 1.5] on stage 1.
  REQUIRE(t.items.size() == 5);
  auto find = [&](int row, TimelineKind kind) -> const TimelineItem& {
    for (const auto& i : t.items)
      if (i.row == row && i.kind == kind) return i;
    FAIL("no item of that kind in row " << row);
    return t.items.front();
  };
  const auto& f0 = find(0, TimelineKind::forward);
  CHECK(f0.start_s == Approx(0));
  CHECK(f0.end_s == Approx(1));
  const auto& send = find(1, TimelineKind::communication);
  CHECK(send.start_s == Approx(1));
  CHECK(send.end_s == Approx(1.5));
  const auto& f1 = find(2, TimelineKind::forward);
  CHECK(f1.start_s == Approx(1.5));
  CHECK(f1.end_s == Approx(2.5));
  const auto& idle0 = find(0, TimelineKind::idle);
  CHECK(idle0.start_s == Approx(1));
  CHECK(idle0.end_s == Approx(2.5));
  const auto& idle1 = find(2, TimelineKind::idle);
  CHECK(idle1.start_s == Approx(0));
  CHECK(idle1.end_s == Approx(1.5));
  // Sorted by row, then start.
  for (std::size_t i = 1; i < t.items.size(); ++i) {
    const auto& p = t.items[i - 1];
    const auto& q = t.items[i];
    CHECK((p.row < q.row || (p.row == q.row && p.start_s <= q.start_s)));
  }
}
