// Data-parallel gradient reduction, tensor-parallel collectives, ZeRO-3 gathers
// and offload, with hand-set durations whose iteration time is known by hand.
#include <catch2/catch.hpp>

#include "sim_fixture.hpp"

using namespace ztune;
using namespace ztune::sim;
using namespace ztune::sim::test;

namespace {

// 8 layers of 1e8 parameters (this GPU's share); forward 1 s, backward 2 s per
// layer and micro-batch; 2 micro-batches; dp 4.
constexpr int kLayers = 8;
constexpr int kMicro = 2;
constexpr double kCompute = kMicro * kLayers * 3.0;

Plan dp_plan(int zero) {
  Plan p;
  p.dp = 4;
  p.zero_stage = zero;
  p.grad_accum = kMicro;
  p.global_batch = 4 * kMicro;
  p.reduce_bucket_elems = 2e8;  // one bucket per two layers: 4 buckets
  return p;
}

FixedCosts dp_costs() {
  FixedCosts c;
  c.layer_times.forward_s = 1.0;
  c.layer_times.backward_s = 2.0;
  c.layer_times.params = 1e8;
  c.dp_reduce_s_per_byte = 1.5 / 4e8;  // a 2e8-element bucket of 16-bit gradients: 1.5 s
  return c;
}

}  // namespace

TEST_CASE("overlap hides the gradient reduction except the last bucket", "[simulator][dp]") {
  const auto r = run(kLayers, dp_plan(0), dp_costs());
  CHECK(r.iteration_s == Approx(kCompute + 1.5));
  CHECK(part(r.breakdown, TimePart::dp_comm) == Approx(1.5));
  CHECK(sum(r.breakdown) == Approx(r.iteration_s));
  // Four buckets of 1.5 s were reduced in all.
  const int link = r.graph.resource_index(0, ResourceKind::intra_link);
  CHECK(r.busy_s(link) == Approx(4 * 1.5));
}

TEST_CASE("without overlap every bucket is exposed", "[simulator][dp]") {
  Plan p = dp_plan(0);
  p.overlap_comm = false;
  const auto r = run(kLayers, p, dp_costs());
  CHECK(r.iteration_s == Approx(kCompute + 4 * 1.5));
  CHECK(part(r.breakdown, TimePart::dp_comm) == Approx(4 * 1.5));
}

TEST_CASE("ZeRO-2 reduces every micro-batch and gathers parameters after the step", "[simulator][dp]") {
  FixedCosts c = dp_costs();
  c.dp_gather_s_per_byte = 1.0 / 1e9;
  c.gpu_optimizer_s_per_param = 1e-9;  // 0.2 s for the 2e8-parameter partition
  const auto r = run(kLayers, dp_plan(2), c);
  // Each micro-batch's backward returns only when its last bucket is reduced
  // (DeepSpeed's independent_gradient_partition_epilogue): 1.5 s after each;
  // the step then runs the optimizer and all-gathers 8e8 16-bit parameters
  // (5e8 + 3e8 elements: 1.6 s in all).
  CHECK(r.iteration_s == Approx(kCompute + 2 * 1.5 + 0.2 + 1.6));
  CHECK(part(r.breakdown, TimePart::dp_comm) == Approx(2 * 1.5 + 1.6));
  CHECK(part(r.breakdown, TimePart::optimizer) == Approx(0.2));
  CHECK(sum(r.breakdown) == Approx(r.iteration_s));
}

TEST_CASE("tensor-parallel collectives sit on the critical path", "[simulator][tp]") {
  Plan p;
  p.tp = 2;
  p.grad_accum = kMicro;
  p.global_batch = kMicro;
  FixedCosts c = dp_costs();
  c.layer_times.tp_forward_s = 0.1;
  c.layer_times.tp_backward_s = 0.2;
  const auto r = run(kLayers, p, c);
  CHECK(r.iteration_s == Approx(kCompute + kMicro * kLayers * 0.3));
  CHECK(part(r.breakdown, TimePart::tp_comm) == Approx(kMicro * kLayers * 0.3));
}

TEST_CASE("ZeRO-3 prefetch hides all but the first gather", "[simulator][zero3]") {
  Plan p = dp_plan(3);
  p.grad_accum = 1;
  p.global_batch = 4;
  FixedCosts c = dp_costs();
  c.dp_reduce_s_per_byte = 0;
  c.dp_gather_s_per_byte = 0.5 / 2e8;  // one layer's 1e8 16-bit parameters: 0.5 s
  SECTION("with prefetch") {
    const auto r = run(kLayers, p, c);
    CHECK(r.iteration_s == Approx(kLayers * 3.0 + 0.5));
    CHECK(part(r.breakdown, TimePart::zero3_gather) == Approx(0.5));
    // One layer in use and one prefetched.
    CHECK(r.memory[0].peak_gathered_param_bytes == Approx(2 * 2e8));
  }
  SECTION("without prefetch every gather is exposed") {
    p.prefetch_bucket_elems = 0;
    const auto r = run(kLayers, p, c);
    CHECK(r.iteration_s == Approx(kLayers * 3.0 + 2 * kLayers * 0.5));
    CHECK(part(r.breakdown, TimePart::zero3_gather) == Approx(2 * kLayers * 0.5));
    CHECK(r.memory[0].peak_gathered_param_bytes == Approx(2e8));
  }
  SECTION("a regathering engine gathers a recomputed layer again for its backward") {
    // DeepSpeed with full recomputation (op_costs zero3_backward_regather_share):
    // the recomputation gathers the layer, releases half of it, and the
    // backward gathers that half again. Without prefetch every gather waits:
    // per layer 0.5 (forward) + 0.5 (recomputation) + 0.25 (backward).
    p.prefetch_bucket_elems = 0;
    c.layer_times.recompute_s = 1.0;
    const double compute = kLayers * 4.0;
    const auto held = run(kLayers, p, c);
    CHECK(held.iteration_s == Approx(compute + 2 * kLayers * 0.5));
    c.layer_times.regather_share = 0.5;
    const auto r = run(kLayers, p, c);
    CHECK(r.iteration_s == Approx(compute + kLayers * (0.5 + 0.5 + 0.25)));
    CHECK(part(r.breakdown, TimePart::zero3_gather) == Approx(kLayers * 1.25));
    CHECK(sum(r.breakdown) == Approx(r.iteration_s));
  }
  SECTION("gathers and reductions share the data-parallel link") {
    c.dp_reduce_s_per_byte = 1.0 / 4e8;  // a 2-layer bucket: 1 s alone
    const auto r = run(kLayers, p, c);
    // Shared, a gather and a bucket still finish within one 2 s backward;
    // only the first gather and the last bucket are exposed.
    CHECK(r.iteration_s == Approx(kLayers * 3.0 + 0.5 + 1.0));
    CHECK(sum(r.breakdown) == Approx(r.iteration_s));
  }
}

// The profile's overlap factor f: a transfer of t seconds hidden behind compute
// still costs the compute stream (1 − f)·t (time_model.hpp exposed() in a long
// window); one the schedule leaves exposed costs its t, no more (its stall runs
// while the stream waits for it anyway).
TEST_CASE("overlapped transfers charge the compute stream their overlap loss", "[simulator][overlap]") {
  SECTION("gradient buckets") {
    FixedCosts c = dp_costs();
    c.dp_loss = 0.1;
    const auto r = run(kLayers, dp_plan(0), c);
    // Three buckets hide behind the backward; the last is exposed.
    CHECK(r.iteration_s == Approx(kCompute + 1.5 + 0.1 * 3 * 1.5));
    CHECK(part(r.breakdown, TimePart::dp_comm) == Approx(1.5 + 0.1 * 3 * 1.5));
    CHECK(sum(r.breakdown) == Approx(r.iteration_s));
  }
  SECTION("without overlap the loss does not apply: every bucket is exposed whole") {
    FixedCosts c = dp_costs();
    c.dp_loss = 0.1;
    Plan p = dp_plan(0);
    p.overlap_comm = false;
    CHECK(run(kLayers, p, c).iteration_s == Approx(kCompute + 4 * 1.5));
  }
  SECTION("prefetched ZeRO-3 gathers") {
    Plan p = dp_plan(3);
    p.grad_accum = 1;
    p.global_batch = 4;
    FixedCosts c = dp_costs();
    c.dp_reduce_s_per_byte = 0;
    c.dp_gather_s_per_byte = 0.5 / 2e8;
    c.zero3_loss = 0.2;
    const auto r = run(kLayers, p, c);
    // 2 gathers per layer (forward, backward) of 0.5 s; the first is exposed.
    CHECK(r.iteration_s == Approx(kLayers * 3.0 + 0.5 + 0.2 * (2 * kLayers - 1) * 0.5));
    CHECK(part(r.breakdown, TimePart::zero3_gather) == Approx(0.5 + 0.2 * (2 * kLayers - 1) * 0.5));
  }
}

TEST_CASE("optimizer offload: copies and the CPU step follow the last bucket", "[simulator][offload]") {
  Plan p = dp_plan(2);
  p.offload_optimizer = OffloadTarget::cpu;
  p.reduce_bucket_elems = 1e9;  // one bucket for all 8e8 gradients
  p.allgather_bucket_elems = 1e9;
  FixedCosts c = dp_costs();
  c.dp_reduce_s_per_byte = 1.0 / 1.6e9;   // 1 s per reduction
  c.dp_gather_s_per_byte = 0.5 / 1.6e9;   // 0.5 s parameter all-gather
  c.pcie_s_per_byte = 0.4 / 4e8;          // the 2e8-element 16-bit partition: 0.4 s each way
  c.host_optimizer_s_per_param = 3.0 / 2e8;  // CPU Adam on the partition: 3 s
  const auto r = run(kLayers, p, c);
  // Each micro-batch's backward ends with its reduction (1 s) and the copy
  // of the partition to the host (0.4 s); after the last: Adam 3 + h2d 0.4 +
  // all-gather 0.5.
  CHECK(r.iteration_s == Approx(kCompute + 2 * (1.0 + 0.4) + 3.0 + 0.4 + 0.5));
  CHECK(part(r.breakdown, TimePart::offload_stall) == Approx(2 * 0.4 + 0.4));
  CHECK(part(r.breakdown, TimePart::optimizer) == Approx(3.0));
  CHECK(part(r.breakdown, TimePart::dp_comm) == Approx(2 * 1.0 + 0.5));
  CHECK(sum(r.breakdown) == Approx(r.iteration_s));
}

// PCIe is full duplex: each direction has its own lanes (PCIe base
// specification; a Gen4 x16 link carries ~32 GB/s each way at once). With
// ZeRO-3 parameter offload and optimizer offload, the parameter fetches
// (host → GPU) and the gradient partitions (GPU → host) cross the link in
// opposite directions, so they must not queue behind one another: a one-lane
// (half-duplex) model would need at least the sum of both directions' busy
// time, here 24 s + 12 s = 36 s, and make this plan PCIe-bound.
TEST_CASE("ZeRO-Infinity: fetches and gradient copies use the two directions of PCIe at once",
          "[simulator][offload]") {
  Plan p = dp_plan(3);
  p.grad_accum = 1;
  p.global_batch = 4;
  p.offload_optimizer = OffloadTarget::cpu;
  p.offload_params = OffloadTarget::cpu;
  FixedCosts c = dp_costs();
  c.dp_reduce_s_per_byte = 0;
  c.dp_gather_s_per_byte = 0;
  c.pcie_s_per_byte = 1.5 / 5e7;  // a layer's 16-bit partition (1e8 × 2 B / dp 4): 1.5 s; a 2-layer bucket's: 3 s
  c.host_optimizer_s_per_param = 0.1 / 2e8;
  const auto r = run(kLayers, p, c);
  const double h2d = r.busy_s(r.graph.resource_index(0, ResourceKind::pcie_h2d));
  const double d2h = r.busy_s(r.graph.resource_index(0, ResourceKind::pcie_d2h));
  // Every layer's partition comes up twice (forward, backward): 16 × 1.5 s.
  CHECK(h2d == Approx(2 * kLayers * 1.5));
  // Four 2-layer buckets of reduced gradient partitions go down: 4 × 3 s.
  CHECK(d2h == Approx(4 * 3.0));
  // Compute (24 s) and the fetches (24 s) overlap with the copies down.
  CHECK(r.iteration_s < h2d + d2h);
  CHECK(r.iteration_s >= std::max(kLayers * 3.0, h2d));
}

// ZeRO-Infinity on one data-parallel rank (ZeRO-Offload's single-GPU case):
// nothing is gathered, but each use still fetches its parameters from the
// host, and they occupy GPU memory only while in use.
TEST_CASE("ZeRO-3 parameter offload with dp = 1 still fetches every use from the host", "[simulator][offload]") {
  Plan p = dp_plan(3);
  p.dp = 1;
  p.grad_accum = 1;
  p.global_batch = 1;
  p.offload_params = OffloadTarget::cpu;
  p.offload_optimizer = OffloadTarget::cpu;
  p.prefetch_bucket_elems = 0;  // no prefetch: every fetch is exposed
  FixedCosts c = dp_costs();
  c.dp_gather_s_per_byte = 1.0;  // would be visible if a gather were charged
  c.pcie_s_per_byte = 0.25 / 2e8;  // a layer's 1e8 16-bit parameters: 0.25 s
  const auto r = run(kLayers, p, c);
  const double h2d = r.busy_s(r.graph.resource_index(0, ResourceKind::pcie_h2d));
  CHECK(h2d == Approx(2 * kLayers * 0.25));  // forward and backward, every layer
  // Compute 8 × 3 s with each layer's two fetches exposed, then the
  // gradients' copy down and the host step.
  CHECK(r.part(TimePart::zero3_gather) == Approx(0.0));
  CHECK(r.iteration_s >= kLayers * 3.0 + 2 * kLayers * 0.25);
  CHECK(r.memory[0].peak_gathered_param_bytes == Approx(2e8));
}
