// Schedules as published: the 1F1B bubble (p−1)/(m+p−1) and the interleaved
// bubble (p−1)/(v·m) of compute (Narayanan et al. 2021, §2.2), GPipe's fill
// and drain, micro-batches in flight, and a slow stage setting the pace.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "sim_fixture.hpp"
#include "ztune/vocab/pipeline_schedule.hpp"

using namespace ztune;
using namespace ztune::sim;
using namespace ztune::sim::test;

namespace {

FixedCosts uniform_layers(double f, double b) {
  FixedCosts c;
  c.layer_times.forward_s = f;
  c.layer_times.backward_s = b;
  c.layer_times.stored_activation_bytes = 1;
  return c;
}

}  // namespace

TEST_CASE("each stage runs every forward and backward exactly once, forward first", "[simulator][schedule]") {
  for (const auto& [schedule, p, v, m] : {std::tuple{Schedule::gpipe, 4, 1, 6}, std::tuple{Schedule::one_f_one_b, 4, 1, 6},
                                         std::tuple{Schedule::one_f_one_b, 4, 1, 2},
                                         std::tuple{Schedule::interleaved, 4, 2, 8},
                                         std::tuple{Schedule::interleaved, 4, 3, 4}}) {
    for (int s = 0; s < p; ++s) {
      const auto steps = pipeline_schedule(schedule, p, s, m, v);
      REQUIRE(steps.size() == static_cast<std::size_t>(2 * m * v));
      std::set<std::tuple<int, int, int>> seen;
      for (const auto& st : steps) {
        CHECK(seen.insert({st.forward ? 1 : 0, st.microbatch, st.chunk}).second);
        if (!st.forward) CHECK(seen.count({1, st.microbatch, st.chunk}) == 1);
      }
    }
  }
}

TEST_CASE("1F1B: stage s keeps p−s micro-batches in flight (PipeDream-flush)", "[simulator][schedule]") {
  const int p = 4;
  const int m = 8;
  for (int s = 0; s < p; ++s) {
    int in_flight = 0;
    int peak = 0;
    for (const auto& st : pipeline_schedule(Schedule::one_f_one_b, p, s, m)) {
      in_flight += st.forward ? 1 : -1;
      peak = std::max(peak, in_flight);
    }
    CHECK(peak == p - s);
  }
}

// The memory model's closed form (chunks_in_flight) against the schedule it
// summarises: the peak of forwards not yet matched by their backward.
TEST_CASE("chunks in flight: the closed form is the schedule's peak, every schedule and stage", "[simulator][schedule]") {
  for (const auto& [schedule, p, v, m] :
       {std::tuple{Schedule::gpipe, 4, 1, 6}, std::tuple{Schedule::one_f_one_b, 4, 1, 6},
        std::tuple{Schedule::one_f_one_b, 4, 1, 2}, std::tuple{Schedule::one_f_one_b, 7, 1, 64},
        std::tuple{Schedule::interleaved, 4, 2, 8}, std::tuple{Schedule::interleaved, 4, 3, 4},
        std::tuple{Schedule::interleaved, 2, 2, 4}, std::tuple{Schedule::interleaved, 8, 4, 64},
        std::tuple{Schedule::interleaved, 3, 2, 3}}) {
    for (int s = 0; s < p; ++s) {
      int in_flight = 0;
      int peak = 0;
      for (const auto& st : pipeline_schedule(schedule, p, s, m, v)) {
        in_flight += st.forward ? 1 : -1;
        peak = std::max(peak, in_flight);
      }
      INFO(to_string(schedule) << " p " << p << " v " << v << " m " << m << " stage " << s);
      CHECK(chunks_in_flight(schedule, p, s, m, v) == peak);
    }
  }
}

// The same with chunks of different sizes (Plan::chunk_layers): the closed
// form's run-by-run walk (interleaved_peak_layers) against the schedule's own
// passes, each adding or freeing its chunk's layers.
TEST_CASE("layers in flight with stated chunks: the walk is the schedule's peak, every stage",
          "[simulator][schedule][chunks]") {
  struct Case {
    int p, v, m;
    std::vector<int> chunks;
  };
  const std::vector<Case> cases{
      {2, 4, 8, {0, 1, 1, 1, 1, 1, 1, 0}},       // both ends empty: stage 1 peaks after its warm-up
      {2, 2, 4, {1, 2, 2, 1}},                   // Megatron-Core's 6 + 2 over 2 × 2
      {4, 2, 8, {3, 4, 4, 4, 4, 4, 4, 3}},       // GPT-3 cut to 30 layers
      {4, 3, 4, {1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1}},  // m = p: every forward first
      {3, 2, 9, {2, 1, 1, 1, 1, 2}},             // uneven, not Megatron's
      {2, 3, 6, {2, 2, 2, 2, 2, 2}},             // equal chunks
  };
  for (const auto& c : cases) {
    for (int s = 0; s < c.p; ++s) {
      double held = 0, peak = 0;
      for (const auto& st : pipeline_schedule(Schedule::interleaved, c.p, s, c.m, c.v)) {
        const double layers = c.chunks[static_cast<std::size_t>(st.chunk * c.p + s)];
        held += st.forward ? layers : -layers;
        peak = std::max(peak, held);
      }
      INFO("p " << c.p << " v " << c.v << " m " << c.m << " stage " << s);
      CHECK(interleaved_peak_layers(c.p, s, c.m, c.chunks) == Approx(peak));
    }
  }
}

TEST_CASE("1F1B bubble fraction is (p−1)/(m+p−1) for uniform stages", "[simulator][schedule]") {
  const double f = 1.0;
  const double b = 2.0;
  for (const auto& [p, m] : {std::pair{4, 8}, std::pair{8, 32}, std::pair{2, 1}, std::pair{4, 4}}) {
    const int layers = 2 * p;  // two layers per stage
    const auto r = run(layers, pipeline_plan(p, m), uniform_layers(f, b));
    const double stage = 2 * (f + b);  // one micro-batch through one stage
    CHECK(r.iteration_s == Approx((m + p - 1) * stage));
    CHECK(part(r.breakdown, TimePart::bubble) / r.iteration_s == Approx(double(p - 1) / (m + p - 1)));
    CHECK(sum(r.breakdown) == Approx(r.iteration_s));
  }
}

TEST_CASE("GPipe has the same bubble as 1F1B with uniform stages", "[simulator][schedule]") {
  const int p = 4;
  const int m = 6;
  const auto r = run(p, pipeline_plan(p, m, Schedule::gpipe), uniform_layers(1.0, 2.0));
  CHECK(r.iteration_s == Approx((m + p - 1) * 3.0));
  CHECK(part(r.breakdown, TimePart::bubble) == Approx((p - 1) * 3.0));
}

TEST_CASE("interleaving shrinks the bubble to (p−1)/(v·m) of compute", "[simulator][schedule]") {
  const double f = 1.0;
  const double b = 2.0;
  for (const auto& [p, v, m] : {std::tuple{4, 2, 8}, std::tuple{4, 3, 8}, std::tuple{8, 2, 16}, std::tuple{2, 4, 4}}) {
    const int layers = p * v;  // one layer per model chunk
    const auto r = run(layers, pipeline_plan(p, m, Schedule::interleaved, v), uniform_layers(f, b));
    const double compute = m * v * (f + b);  // per stage
    const double bubble = part(r.breakdown, TimePart::bubble);
    CHECK(bubble / compute == Approx(double(p - 1) / (v * m)));
    CHECK(r.iteration_s == Approx(compute + bubble));
    CHECK(sum(r.breakdown) == Approx(r.iteration_s));
  }
}

TEST_CASE("the slowest stage sets the pace", "[simulator][schedule]") {
  // The last stage also runs the LM head: t_last = t + h per micro-batch. For
  // a pipeline of m identical jobs, makespan = Σ_s t_s + (m−1)·max_s t_s
  // (permutation flow shop with identical jobs; here per forward+backward).
  const int p = 4;
  const int m = 8;
  FixedCosts c = uniform_layers(1.0, 2.0);
  c.edge_times.head_forward_s = 1.0;
  c.edge_times.head_backward_s = 2.0;
  const auto r = run(p, pipeline_plan(p, m, Schedule::gpipe), c);
  const double t = 3.0;
  const double slow = t + 3.0;
  CHECK(r.iteration_s == Approx((p - 1) * t + slow + (m - 1) * slow));
  CHECK(r.pacing_stage == 0);
  // The last stage computes all the time the pipeline is full.
  const auto& last = r.stages.back();
  CHECK(part(last, TimePart::forward) + part(last, TimePart::backward) == Approx(m * slow));
  // 1F1B: the slow last stage is never idle between its first forward and last backward.
  const auto r1 = run(p, pipeline_plan(p, m), c);
  CHECK(r1.iteration_s == Approx((p - 1) * 1.0 + m * slow + (p - 1) * 2.0));
}

TEST_CASE("pipeline sends add to the bubble, not to compute", "[simulator][schedule]") {
  const int p = 4;
  const int m = 8;
  FixedCosts c = uniform_layers(1.0, 2.0);
  c.p2p_intra_s = 0.25;
  const auto r = run(p, pipeline_plan(p, m), c);
  // Fill and drain cross p−1 sends each way (a lower bound); 1F1B's steady
  // state couples neighbours, so a send can also delay it, at most by one
  // round trip per micro-batch.
  const double no_comm = (m + p - 1) * 3.0;
  CHECK(r.iteration_s >= Approx(no_comm + 2 * (p - 1) * 0.25));
  CHECK(r.iteration_s <= Approx(no_comm + 2 * (p - 1 + m) * 0.25));
  // p = 2 by hand, the sender waiting for its send (Megatron): s0 F0 [0, 1]
  // send [1, 1.25] F1 [1.25, 2.25] send [2.25, 2.5]; s1 F0 [1.25, 2.25] B0
  // [2.25, 4.25] send [4.25, 4.5] F1 [4.5, 5.5] B1 [5.5, 7.5] send [7.5, 7.75];
  // s0 B0 [4.5, 6.5] B1 [7.75, 9.75].
  CHECK(run(2, pipeline_plan(2, 2), c).iteration_s == Approx(9.75));
  // Sends overlapping the sender's compute: s1 F1 [4.25, 5.25] B1 [5.25, 7.25],
  // s0 B1 [7.5, 9.5].
  BuildOptions async;
  async.blocking_p2p = false;
  CHECK(run(2, pipeline_plan(2, 2), c, async).iteration_s == Approx(9.5));
  CHECK(part(r.breakdown, TimePart::forward) == Approx(m * 1.0));
  CHECK(part(r.breakdown, TimePart::pp_comm) > 0);
  CHECK(sum(r.breakdown) == Approx(r.iteration_s));
}

// Uneven stages (issue 19): chunk sizes follow the plan's stage_layers. With
// f = 1, b = 2 per layer a stage of n layers takes 3n per micro-batch.
TEST_CASE("uneven stages: each stage runs its own layers, the slowest sets the pace", "[simulator][schedule][stages]") {
  const int m = 8;
  const FixedCosts c = uniform_layers(1.0, 2.0);
  // GPipe is a permutation flow shop of m identical jobs: Σ_s T_s + (m−1)·max_s T_s.
  Plan p = pipeline_plan(2, m, Schedule::gpipe);
  p.stage_layers = {3, 2};
  auto r = run(5, p, c);
  CHECK(r.iteration_s == Approx((9 + 6) + (m - 1) * 9.0));
  CHECK(r.pacing_stage == 0);
  CHECK(part(r.breakdown, TimePart::forward) + part(r.breakdown, TimePart::backward) == Approx(m * 9.0));
  // 1F1B, first stage slowest: it runs F0, its one warm-up forward F1 (3),
  // then waits for the round trip of micro-batch 0 through stage 1 (2 + 4 = 6)
  // — idle 3 — and is busy from then on: 9m + 3.
  p.schedule = Schedule::one_f_one_b;
  r = run(5, p, c);
  CHECK(r.iteration_s == Approx(9.0 * m + 3));
  // Last stage slowest: the first stage's forward before it, its backward
  // after: 9m + 6 (= Σ_{i≠k} T_i).
  p.stage_layers = {2, 3};
  r = run(5, p, c);
  CHECK(r.iteration_s == Approx(9.0 * m + 6));
  // The balanced default of 5 layers on 2 stages is 3 + 2.
  Plan q = pipeline_plan(2, m);
  CHECK(run(5, q, c).iteration_s == Approx(9.0 * m + 3));
}

// Issue 22: the simulator builds its graph from the schedule the executor
// trains by (vocab/pipeline_schedule.hpp). The oracle here is that schedule
// as the executor runs it (tests/executor/test_pipeline_schedule.cpp replays it
// against the executor's send/receive rules); the simulated timeline must run
// each stage's passes in exactly that order, uneven stages included
// (interleaved too: each stage cut into equal chunks).
TEST_CASE("each simulated stage runs its passes in the executor's order", "[simulator][schedule]") {
  struct Case {
    Schedule schedule;
    int p, v, m, layers;
    std::vector<int> stage_layers;
  };
  for (const Case& c : {Case{Schedule::gpipe, 4, 1, 6, 8, {}}, Case{Schedule::one_f_one_b, 4, 1, 6, 8, {}},
                        Case{Schedule::one_f_one_b, 3, 1, 5, 4, {2, 1, 1}}, Case{Schedule::gpipe, 3, 1, 4, 4, {1, 2, 1}},
                        Case{Schedule::interleaved, 4, 2, 8, 16, {}}, Case{Schedule::interleaved, 2, 3, 4, 12, {}},
                        Case{Schedule::interleaved, 2, 2, 4, 6, {4, 2}},
                        Case{Schedule::interleaved, 3, 2, 6, 12, {2, 4, 6}}}) {
    INFO(to_string(c.schedule) << " p " << c.p << " v " << c.v << " m " << c.m);
    Plan plan = pipeline_plan(c.p, c.m, c.schedule, c.v);
    plan.stage_layers = c.stage_layers;
    const SimResult r = run(c.layers, plan, uniform_layers(1.0, 2.0));
    for (int s = 0; s < c.p; ++s) {
      std::vector<std::pair<double, PipeAction>> passes;
      for (std::size_t id = 0; id < r.graph.size(); ++id) {
        const Op& op = r.graph.op(static_cast<OpId>(id));
        if (op.stage != s || (op.kind != OpKind::forward && op.kind != OpKind::backward)) continue;
        passes.push_back({r.timeline.start_s[id],
                          PipeAction{op.kind == OpKind::forward, op.microbatch, std::max<int>(op.chunk, 0)}});
      }
      std::stable_sort(passes.begin(), passes.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
      std::vector<PipeAction> order;  // one entry per pass (a pass may be several layer-group ops)
      for (const auto& [t, a] : passes)
        if (order.empty() || !(order.back() == a)) order.push_back(a);
      INFO("stage " << s);
      CHECK(order == pipeline_schedule(c.schedule, c.p, s, c.m, c.v));
    }
  }
}

// Uneven interleaved stages (issue 19): chunk c of stage r holds the stage's
// layers / v, the closed-form layer count of each virtual stage's passes.
TEST_CASE("uneven interleaved stages: each virtual stage runs its chunk's layers", "[simulator][schedule][stages]") {
  Plan p = pipeline_plan(2, 4, Schedule::interleaved, 2);
  p.stage_layers = {4, 2};  // virtual stages 0..3 hold 2, 1, 2, 1 layers
  const FixedCosts c = uniform_layers(1.0, 2.0);
  const SimResult r = run(6, p, c);
  // Busy time per stage: every micro-batch's forward and backward of its layers, 3 per layer.
  std::vector<double> busy(2, 0.0);
  for (std::size_t id = 0; id < r.graph.size(); ++id) {
    const Op& op = r.graph.op(static_cast<OpId>(id));
    if (op.kind == OpKind::forward || op.kind == OpKind::backward)
      busy[static_cast<std::size_t>(op.stage)] += r.timeline.end_s[id] - r.timeline.start_s[id];
  }
  CHECK(busy[0] == Approx(4 * 3.0 * 4));  // 4 micro-batches × 4 layers × (1 + 2)
  CHECK(busy[1] == Approx(4 * 3.0 * 2));
  CHECK(r.pacing_stage == 0);
}
