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

namespace {

/// One compute row running 512 alternating 1 ms forwards and backwards back to
/// back (a long 1F1B steady state), then one 100 ms optimizer step.
TimelineData long_pipeline_row() {
  TimelineData d;
  d.rows.push_back({QStringLiteral("stage 0 compute"), 0, true, 1.0});
  double t = 0;
  for (int i = 0; i < 512; ++i) {
    d.items.push_back({0, QStringLiteral("op %1").arg(i), i % 2 == 0 ? TimelineKind::forward : TimelineKind::backward,
                       t, t + 0.001});
    t += 0.001;
  }
  d.items.push_back({0, QStringLiteral("optimizer"), TimelineKind::optimizer, t, t + 0.1});
  d.end_s = t + 0.1;
  return d;
}

}  // namespace

TEST_CASE("zoomed out, runs of narrow operations merge into bands, and zoomed in each is its own bar", "[gui][timeline]") {
  const TimelineData d = long_pipeline_row();
  // The whole 0.612 s on 612 px: 1 ms a pixel, so a 3 px band spans 3 operations.
  const TimeAxis whole{0, d.end_s, 0, 612};
  const auto bars = timeline_bars(d, whole, 3);
  int covered = 0;
  double last_end = 0;
  for (const auto& b : bars) {
    covered += b.count;
    CHECK(b.start_s >= last_end - 1e-12);  // in time order, no overlap
    last_end = b.end_s;
    if (b.kind != TimelineKind::optimizer) CHECK((b.end_s - b.start_s) <= 0.003 + 1e-12);
  }
  CHECK(covered == 513);  // every operation in exactly one bar
  CHECK(bars.size() == 171 + 1);  // 512 narrow ones in runs of 3 (170 of 3, one of 2), the optimizer alone
  CHECK(bars.back().kind == TimelineKind::optimizer);
  CHECK(bars.back().count == 1);
  // A run of forward, backward, forward is named by the kind that took most of its time
  // and carries each kind's share, which the widget stacks.
  CHECK(bars.front().count == 3);
  CHECK(bars.front().kind == TimelineKind::forward);
  CHECK(timeline_bar_mix(bars.front()) == "forward 67 %, backward 33 %");
  CHECK(bars.front().time[static_cast<std::size_t>(TimelineKind::forward)] == Approx(0.002));
  CHECK(bars.front().time[static_cast<std::size_t>(TimelineKind::backward)] == Approx(0.001));

  // Zoomed into the first 10 ms on 1000 px (100 px a millisecond): every operation its own bar.
  const TimeAxis close{0, 0.010, 0, 1000};
  const auto each = timeline_bars(d, close, 3);
  REQUIRE(each.size() == 11);  // ops 0..10 touch [0, 10 ms] (op 10 starts at its right edge)
  for (std::size_t i = 0; i < each.size(); ++i) {
    CHECK(each[i].count == 1);
    CHECK(each[i].first == i);
    CHECK(each[i].kind == (i % 2 == 0 ? TimelineKind::forward : TimelineKind::backward));
  }
}

TEST_CASE("bands never cross rows", "[gui][timeline]") {
  TimelineData d;
  d.rows = {{QStringLiteral("a"), 0, true, 1}, {QStringLiteral("b"), 0, false, 1}};
  d.items = {{0, "x", TimelineKind::forward, 0, 0.0001}, {0, "y", TimelineKind::forward, 0.0001, 0.0002},
             {1, "z", TimelineKind::communication, 0.0001, 0.0002}};
  d.end_s = 1;
  const auto bars = timeline_bars(d, TimeAxis{0, 1, 0, 100}, 3);
  REQUIRE(bars.size() == 2);
  CHECK(bars[0].row == 0);
  CHECK(bars[0].count == 2);
  CHECK(bars[1].row == 1);
  CHECK(bars[1].count == 1);
}

TEST_CASE("a merged band says how busy it keeps its row", "[gui][timeline]") {
  // A link's collectives: 1 ms every 10 ms, merged on a 100 px view of 1 s
  // into bands of up to 30 ms (3 px) - busy a tenth of each band's span; the
  // compute stream beside it, back to back, is busy all of it.
  TimelineData d;
  d.rows = {{QStringLiteral("compute"), 0, true, 1}, {QStringLiteral("link"), 0, false, 0.1}};
  for (int i = 0; i < 100; ++i) {
    d.items.push_back({0, "c", TimelineKind::forward, i * 0.01, (i + 1) * 0.01});
    d.items.push_back({1, "l", TimelineKind::communication, i * 0.01, i * 0.01 + 0.001});
  }
  std::stable_sort(d.items.begin(), d.items.end(),
                   [](const TimelineItem& a, const TimelineItem& b) { return a.row < b.row; });
  d.end_s = 1;
  const auto bars = timeline_bars(d, TimeAxis{0, 1, 0, 100}, 3);
  int link_bands = 0;
  for (const auto& b : bars) {
    if (b.count < 2) continue;
    if (b.row == 0) CHECK(b.occupancy() == Approx(1.0));
    if (b.row == 1) {
      ++link_bands;
      // 3 collectives over [t, t + 21 ms]: 3 ms busy of 21.
      CHECK(b.occupancy() == Approx(3.0 / 21.0).epsilon(1e-9));
    }
  }
  CHECK(link_bands > 0);
  TimelineBar one;
  one.start_s = one.end_s = 2;
  CHECK(one.occupancy() == 1.0);  // a zero-length bar is drawn as full as any
}
