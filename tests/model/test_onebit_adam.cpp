// 1-bit Adam in the cost model against closed forms: the bytes each rank sends
// (ring all-reduce 2(n−1)/n·bΨ; all-to-all and all-gather (n−1)/n·(Ψ/8 + 4n)
// each), the error-feedback state (fp32 worker error Ψ + server error Ψ/n, as
// DeepSpeed's OnebitAdam allocates), the run-averaged volume reduction
// 1/(w + (1−w)/16) with Tang et al. 2021's "up to 5x", and the iteration's
// parts (the compressed exchange fully exposed in place of the all-reduce).
#include <catch2/catch.hpp>

#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/onebit_adam.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/prediction.hpp"

using namespace ztune;

namespace {

// DeepSpeed's OnebitAdam is the oracle: its engine (16-bit gradients on the
// wire; ztune's executor moves fp32 whatever the precision).
HardwareProfile deepspeed_profile(const Cluster& c) {
  HardwareProfile hw = default_profile_for(c);
  hw.engine = load_engine_profile("deepspeed");
  return hw;
}

Plan data_parallel(int dp, int micro_batch, int global_batch) {
  Plan p;
  p.dp = dp;
  p.micro_batch = micro_batch;
  p.global_batch = global_batch;
  p.grad_accum = global_batch / (dp * micro_batch);
  p.precision = Precision::fp16;
  return p;
}

}  // namespace

TEST_CASE("1-bit Adam: wire bytes per rank fall to 1/16 of the fp16 all-reduce (1/32 of fp32)", "[model][onebit]") {
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx2x16");
  const HardwareProfile hw = deepspeed_profile(c);
  Plan p = data_parallel(256, 2, 512);
  p.onebit_adam = true;
  const double psi = stage_params(m, p);
  const double n = 256;
  const OnebitAdamCost o = onebit_adam_cost(m, p, c, hw);
  CHECK(o.warmup_wire_bytes == Approx(2 * (n - 1) / n * 2 * psi));
  CHECK(o.compressed_wire_bytes == Approx(2 * (n - 1) / n * (psi / 8 + 4 * n)));
  CHECK(o.compressed_wire_bytes / o.warmup_wire_bytes == Approx(1.0 / 16).epsilon(1e-4));
  CHECK(o.error_feedback_bytes == Approx(4 * psi + 4 * psi / n));

  p.precision = Precision::fp32;
  const OnebitAdamCost o32 = onebit_adam_cost(m, p, c, hw);
  CHECK(o32.compressed_wire_bytes / o32.warmup_wire_bytes == Approx(1.0 / 32).epsilon(1e-4));
}

TEST_CASE("1-bit Adam: the error-feedback state is an optimizer-line addition of 4Ψ + 4Ψ/n", "[model][onebit]") {
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx2x16");
  const HardwareProfile hw = deepspeed_profile(c);
  Plan p = data_parallel(64, 1, 512);
  const MemoryPrediction plain = predict_memory(m, p, c, hw);
  p.onebit_adam = true;
  const MemoryPrediction onebit = predict_memory(m, p, c, hw);
  const double psi = stage_params(m, p);
  CHECK(onebit.line(MemLine::optimizer) - plain.line(MemLine::optimizer) == Approx(4 * psi + 4 * psi / 64));
  CHECK(onebit.line(MemLine::comm_buckets) - plain.line(MemLine::comm_buckets) == Approx(3 * psi / 8));
  CHECK(onebit.line(MemLine::params) == plain.line(MemLine::params));
}

TEST_CASE("1-bit Adam: a run with 15% warm-up saves 1/(w + (1-w)/16) of the volume (Tang et al.: up to 5x)",
          "[model][onebit]") {
  // GPT-2 1.5B's budget: 157.3B tokens at 512 × 1024 per step = 300,000 steps.
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx2x16");
  const HardwareProfile hw = deepspeed_profile(c);
  Plan p = data_parallel(256, 2, 512);
  p.onebit_adam = true;
  p.onebit_freeze_step = 45000;
  const OnebitAdamPhases ph = onebit_adam_phases(m, p, c, hw);
  CHECK(ph.run_steps == 300000);
  CHECK(ph.warmup_fraction == Approx(0.15));
  const double w = 0.15;
  CHECK(ph.average_volume_reduction == Approx(1.0 / (w + (1 - w) * ph.volume_ratio)));
  CHECK(ph.average_volume_reduction == Approx(1.0 / (w + (1 - w) / 16)).epsilon(1e-3));
  CHECK(ph.average_volume_reduction == Approx(4.92).epsilon(0.01));
  CHECK(ph.average_iteration_s == Approx(w * ph.warmup_iteration_s + (1 - w) * ph.compressed_iteration_s));
  // The warm-up is a plain Adam step; the compressed step is what predict_time reports.
  Plan plain = p;
  plain.onebit_adam = false;
  CHECK(ph.warmup_iteration_s == Approx(predict_time(m, plain, c, hw).iteration_s));
  CHECK(ph.compressed_iteration_s == Approx(predict_time(m, p, c, hw).iteration_s));
}

TEST_CASE("1-bit Adam: the compressed step exposes the all-to-all + all-gather instead of the all-reduce",
          "[model][onebit]") {
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx2x16");
  const HardwareProfile hw = deepspeed_profile(c);
  Plan p = data_parallel(256, 2, 512);
  const TimePrediction plain = predict_time(m, p, c, hw);
  p.onebit_adam = true;
  const TimePrediction onebit = predict_time(m, p, c, hw);
  const OnebitAdamCost o = onebit_adam_cost(m, p, c, hw);
  const GroupLayout l = place_groups(p, c);
  const double psi = stage_params(m, p);
  const double a2a = psi / 8 + 4 * 256;
  CHECK(o.compressed_s == Approx(collective_time(Collective::all_to_all, a2a, l.dp, c, hw) +
                                 collective_time(Collective::all_gather, a2a, l.dp, c, hw)));
  CHECK(onebit.part(TimePart::dp_comm) == Approx(o.compressed_s));
  CHECK(onebit.part(TimePart::optimizer) == Approx(plain.part(TimePart::optimizer) + o.compress_kernels_s));
  CHECK(onebit.part(TimePart::forward) == plain.part(TimePart::forward));
  CHECK(onebit.part(TimePart::backward) == plain.part(TimePart::backward));
  double sum = 0;
  for (double v : onebit.parts) sum += v;
  CHECK(sum == Approx(onebit.iteration_s));
}
