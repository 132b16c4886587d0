// Activations in flight per stage against Korthikanti et al. 2022 §4.2.3: under
// 1F1B stage s holds p−s micro-batches (the first stage p); interleaving
// multiplies the first stage's by (1 + (p−1)/(p·v)).
#include <catch2/catch.hpp>

#include "sim_fixture.hpp"

using namespace ztune;
using namespace ztune::sim;
using namespace ztune::sim::test;

TEST_CASE("1F1B: stage s peaks at p−s micro-batches of its layers", "[simulator][memory]") {
  const int p = 4;
  const int m = 8;
  const int layers = 2 * p;
  FixedCosts c;
  c.layer_times.forward_s = 1;
  c.layer_times.backward_s = 2;
  c.layer_times.stored_activation_bytes = 100;
  const auto r = run(layers, pipeline_plan(p, m), c);
  for (int s = 0; s < p; ++s) CHECK(r.memory[static_cast<std::size_t>(s)].peak_activation_bytes == Approx((p - s) * 2 * 100));
  // Everything stored is freed by the end of the iteration.
  CHECK(r.memory[0].samples.back().activation_bytes == Approx(0).margin(1e-9));
}

TEST_CASE("interleaving: the first stage holds (1 + (p−1)/(p·v)) times p micro-batches", "[simulator][memory]") {
  const int p = 4;
  const int v = 2;
  const int m = 8;
  const int layers = 2 * p * v;
  FixedCosts c;
  c.layer_times.forward_s = 1;
  c.layer_times.backward_s = 2;
  c.layer_times.stored_activation_bytes = 100;
  const auto r = run(layers, pipeline_plan(p, m, Schedule::interleaved, v), c);
  const double per_microbatch = (layers / p) * 100.0;
  CHECK(r.memory[0].peak_activation_bytes == Approx(p * per_microbatch * (1.0 + double(p - 1) / (p * v))));
}

TEST_CASE("full recomputation keeps layer inputs plus one layer's working set", "[simulator][memory]") {
  const int p = 2;
  const int m = 4;
  const int layers = 4;
  FixedCosts c;
  c.layer_times.forward_s = 1;
  c.layer_times.backward_s = 2;
  c.layer_times.recompute_s = 1;
  c.layer_times.stored_activation_bytes = 2;   // the layer input, 2sbh
  c.layer_times.recompute_extra_bytes = 32;    // the rest of sbh(34 + 5as/h), recomputed
  const auto r = run(layers, pipeline_plan(p, m), c);
  CHECK(r.memory[0].peak_activation_bytes == Approx(p * 2 * 2 + 32));
  CHECK(part(r.breakdown, TimePart::recompute) == Approx(m * 2 * 1.0));
}

// Uneven stages (issue 19): each stage stores its own layers' activations,
// min(p − s, m) micro-batches of them under 1F1B.
TEST_CASE("uneven stages: stage s peaks at p−s micro-batches of its own layers", "[simulator][memory][stages]") {
  FixedCosts c;
  c.layer_times.forward_s = 1;
  c.layer_times.backward_s = 2;
  c.layer_times.stored_activation_bytes = 100;
  Plan p = pipeline_plan(3, 8);
  p.stage_layers = {1, 3, 2};
  const auto r = run(6, p, c);
  CHECK(r.memory[0].peak_activation_bytes == Approx(3 * 1 * 100));
  CHECK(r.memory[1].peak_activation_bytes == Approx(2 * 3 * 100));
  CHECK(r.memory[2].peak_activation_bytes == Approx(1 * 2 * 100));
}
