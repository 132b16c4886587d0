// fp16 dynamic loss scaling in the Trainer (issue 7, DeepSpeed's rules), on the
// CPU backend, 2 ranks (dp 2, so the scaled gradients go through the
// all-reduce). With fp32 storage (TrainOptions::fp32_storage) the CPU backend
// computes the fp16 plan in fp32, which makes the oracle exact:
// every backward operation is linear in the incoming gradient, and scaling by a
// power of two commutes with IEEE rounding (no overflow, no denormals), so an
// fp16 plan trained with loss scale 2^16 and unscaled before the optimizer must
// give bit-identical losses and gradient norms to the same plan in fp32.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ztune/executor/cpu_backend.hpp"
#include "ztune/executor/host_adam.hpp"
#include "ztune/executor/optimizer_states.hpp"
#include "ztune/executor/mpi_communicator.hpp"
#include "ztune/executor/token_source.hpp"
#include "ztune/executor/trainer.hpp"
#include "ztune/vocab/catalog.hpp"

using namespace ztune;
using namespace ztune::executor;

namespace {

Plan dp2_plan(Precision precision) {
  Plan p;
  p.dp = 2;
  p.micro_batch = 2;
  p.grad_accum = 2;
  p.global_batch = 8;
  p.precision = precision;
  return p;
}

// One initialised training job of the tiny model on this process's ranks.
struct Job {
  std::unique_ptr<MpiCommunicator> world = MpiCommunicator::world();
  Transformer model = load_transformer("tiny");
  std::unique_ptr<TokenSource> data;
  CpuBackend backend{1};
  std::unique_ptr<Trainer> trainer;
  Job(const Plan& plan, const TrainOptions& opt) : data(synthetic_tokens(opt.seed, model.vocab)) {
    trainer = std::make_unique<Trainer>(model, plan, opt, *world, backend, *data);
    trainer->initialise();
  }
};

std::vector<StepResult> train(const Plan& plan, const TrainOptions& opt, int steps) {
  Job job(plan, opt);
  std::vector<StepResult> out;
  for (int s = 0; s < steps; ++s) out.push_back(job.trainer->step(s));
  return out;
}

}  // namespace

TEST_CASE("fp16 loss scaling is exact: the same losses as fp32", "[executor][loss_scale]") {
  TrainOptions opt;
  opt.steps = 4;
  opt.fp32_storage = true;
  const auto fp32 = train(dp2_plan(Precision::fp32), opt, 4);
  const auto fp16 = train(dp2_plan(Precision::fp16), opt, 4);
  for (std::size_t i = 0; i < fp32.size(); ++i) {
    INFO("step " << i + 1);
    CHECK(fp16[i].loss == fp32[i].loss);
    CHECK(fp16[i].grad_norm == fp32[i].grad_norm);
    CHECK(fp16[i].loss_scale == 65536.0);  // DeepSpeed's initial_scale_power 16
    CHECK_FALSE(fp16[i].skipped);
    CHECK(fp32[i].loss_scale == 1.0);
  }
}

// An infinite weight makes every gradient non-finite: each step overflows.
// With DeepSpeed's defaults (2^16, hysteresis 2) the first overflow only spends
// the hysteresis and every later one halves the scale; a skipped step changes
// no parameter and does not count as an Adam step. Once the weight is repaired
// the next step applies: its loss and gradient norm (taken before the update)
// equal a fresh fp32 trainer's on the same batch, bit for bit.
TEST_CASE("an overflow skips the step, the scale follows DeepSpeed's rules", "[executor][loss_scale]") {
  TrainOptions opt;
  opt.steps = 8;
  opt.fp32_storage = true;
  Job job(dp2_plan(Precision::fp16), opt);
  Trainer& trainer = *job.trainer;
  auto params = [&] {
    std::vector<float> all;
    for (const auto& t : trainer.collect_full(false)) all.insert(all.end(), t.values.begin(), t.values.end());
    return all;
  };
  float* poisoned = trainer.store().param(0).f32();
  const float kept = poisoned[0];
  poisoned[0] = std::numeric_limits<float>::infinity();
  const auto before = params();
  const double expected_scale[] = {65536, 65536, 32768, 16384};
  for (int step = 0; step < 4; ++step) {
    INFO("step " << step + 1);
    const StepResult r = trainer.step(step);
    CHECK(r.skipped);
    CHECK(r.loss_scale == expected_scale[step]);
    CHECK(params() == before);
  }
  poisoned[0] = kept;
  const StepResult applied = trainer.step(4);
  CHECK_FALSE(applied.skipped);
  CHECK(applied.loss_scale == 8192);

  Job reference(dp2_plan(Precision::fp32), opt);
  const StepResult same_batch = reference.trainer->step(4);
  CHECK(applied.loss == same_batch.loss);
  CHECK(applied.grad_norm == same_batch.grad_norm);
}

TEST_CASE("with fp16 storage the scaled run trains near fp32, and an overflow is still skipped", "[executor][loss_scale]") {
  // fp16 parameters, gradients and activations: 4 steps' losses stay within
  // fp16 rounding of the fp32 plan's (storage rounds each stored value to 11
  // significant bits, relative 2⁻¹¹ ≈ 4.9e-4; the tiny model's losses differ
  // by far less), no step overflows at 2^16, and an infinite fp16 weight makes
  // the gradients non-finite and the step skipped.
  TrainOptions opt;
  opt.steps = 4;
  const auto fp32 = train(dp2_plan(Precision::fp32), opt, 4);
  Job job(dp2_plan(Precision::fp16), opt);
  REQUIRE(job.trainer->store().storage() == StorageDtype::fp16);
  for (int step = 0; step < 4; ++step) {
    INFO("step " << step + 1);
    const StepResult r = job.trainer->step(step);
    CHECK_FALSE(r.skipped);
    CHECK(r.loss_scale == 65536);
    CHECK(std::abs(r.loss - fp32[static_cast<std::size_t>(step)].loss) <= 4.9e-4 * fp32[static_cast<std::size_t>(step)].loss);
  }
  Job poisoned(dp2_plan(Precision::fp16), opt);
  const std::uint16_t inf = 0x7c00;
  poisoned.backend.from_host(poisoned.trainer->store().param(0), &inf, 1);
  const StepResult r = poisoned.trainer->step(0);
  CHECK(r.skipped);
  CHECK_FALSE(std::isfinite(r.grad_norm));
}

TEST_CASE("gradients that overflow at the minimum scale stop training", "[executor][loss_scale]") {
  TrainOptions opt;
  opt.loss_scale.initial_scale_power = 1;  // 2
  opt.loss_scale.hysteresis = 1;           // halve on every overflow: 2, then the minimum 1
  opt.fp32_storage = true;
  Job job(dp2_plan(Precision::fp16), opt);
  Trainer& trainer = *job.trainer;
  trainer.store().param(0).f32()[0] = std::numeric_limits<float>::infinity();
  CHECK(trainer.step(0).skipped);
  CHECK_THROWS_AS(trainer.step(1), LossScaleAtMinimum);
}

TEST_CASE("offloaded optimizer states unscale 16-bit gradients on their fp32 way to host Adam", "[executor][loss_scale][offload]") {
  // ZeRO-Offload with bf16 storage: the gradients cross to the host as fp32
  // copies multiplied by grad_scale (1/loss scale), host Adam updates the fp32
  // masters, and the parameters come back as their bf16 rounding. Oracle:
  // host_adamw on the masters with the stored gradients times the scale (a
  // power of two: exact), then rounded. Adam's update m̂/(√v̂ + ε) does not
  // see a constant factor on every gradient but through ε, so the loss tests
  // could not tell a missing unscale: ε = 0.1 against gradients of order 1
  // makes the factor 1024 show.
  auto world = MpiCommunicator::world();
  CpuBackend be(1);
  kernels::ThreadPool pool(1);
  const std::size_t n = 1000;
  const float scale = 1.0f / 1024.0f;
  OptimizerStateOptions o;
  o.offload = true;
  o.storage = StorageDtype::bf16;
  o.grad_storage = StorageDtype::bf16;
  OptimizerStates states(n, o, *world, be, pool);
  REQUIRE(states.has_master());
  std::vector<float> p(n), g(n);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = std::sin(0.37f * static_cast<float>(i));
    g[i] = 1024.0f * std::cos(0.11f * static_cast<float>(i));
  }
  auto to16 = [&](const std::vector<float>& v) {
    std::vector<std::uint16_t> h(v.size());
    convert_host(h.data(), StorageDtype::bf16, v.data(), StorageDtype::fp32, v.size());
    return h;
  };
  auto to32 = [&](const std::vector<std::uint16_t>& h) {
    std::vector<float> v(h.size());
    convert_host(v.data(), StorageDtype::fp32, h.data(), StorageDtype::bf16, h.size());
    return v;
  };
  Buffer params = be.allocate(n, MemCategory::params, StorageDtype::bf16);
  Buffer grads = be.allocate(n, MemCategory::grads, StorageDtype::bf16);
  be.from_host(params.ref(), to16(p).data(), n);
  be.from_host(grads.ref(), to16(g).data(), n);
  states.initialise_master(0, params.ref(), n);
  const kernels::AdamWParams h{1e-2f, 0.9f, 0.95f, 0.1f, 0.1f, 1};
  states.step(params.ref(), grads.ref(), 0, n, h, scale);
  std::vector<float> master = to32(to16(p)), grad = to32(to16(g)), m(n, 0.0f), v(n, 0.0f);
  for (float& x : grad) x *= scale;
  host_adamw(master.data(), grad.data(), m.data(), v.data(), n, h, pool);
  std::vector<std::uint16_t> got(n);
  be.to_host(got.data(), params.ref(), n);
  CHECK(got == to16(master));
}

TEST_CASE("16-bit states whose master is the parameters' own dtype update the parameters in place",
          "[executor][optimizer][storage]") {
  // NeMo's optim.dtype bf16 beside bf16 parameters: Apex's DistributedFusedAdam
  // with store_params false keeps no master copy and updates the model's
  // parameters. Oracle: the backend's fused AdamW with a separate bf16 master
  // (checked against adamw_update in test_storage), whose parameters are that
  // master's copy: the in-place step must give the same bits, and keep only
  // the two moments (2 + 2 bytes a parameter).
  auto world = MpiCommunicator::world();
  kernels::ThreadPool pool(1);
  const std::size_t n = 1000;
  std::vector<float> p(n), g(n);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = std::sin(0.37f * static_cast<float>(i));
    g[i] = std::cos(0.11f * static_cast<float>(i));
  }
  const kernels::AdamWParams h{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1};
  const AdamWStates bf16_states{StorageDtype::bf16, StorageDtype::bf16};
  auto upload16 = [](CpuBackend& be, const std::vector<float>& v, MemCategory c) {
    Buffer b = be.allocate(v.size(), c, StorageDtype::bf16);
    be.copy(b.ref(), ConstTensorRef(v.data(), StorageDtype::fp32), v.size());
    return b;
  };
  auto download = [](CpuBackend& be, const Buffer& b) {
    std::vector<float> v(b.size());
    be.copy(TensorRef(v.data(), StorageDtype::fp32), b.ref(), b.size());
    return v;
  };
  // The oracle: a separate bf16 master, two steps.
  CpuBackend ref_be(1);
  Buffer ref_p = upload16(ref_be, p, MemCategory::params), ref_g = upload16(ref_be, g, MemCategory::grads);
  Buffer ref_master = upload16(ref_be, p, MemCategory::optimizer);
  Buffer ref_m = ref_be.allocate(n, MemCategory::optimizer, StorageDtype::bf16);
  Buffer ref_v = ref_be.allocate(n, MemCategory::optimizer, StorageDtype::bf16);
  ref_be.copy(ref_m.ref(), ConstTensorRef(std::vector<float>(n, 0.0f).data(), StorageDtype::fp32), n);
  ref_be.copy(ref_v.ref(), ConstTensorRef(std::vector<float>(n, 0.0f).data(), StorageDtype::fp32), n);
  const AdamWSpan span{ref_master.raw(), ref_m.raw(), ref_v.raw(), ref_g.raw(), ref_p.raw(), static_cast<long>(n)};
  // The states under test.
  CpuBackend be(1);
  OptimizerStateOptions o;
  o.storage = StorageDtype::bf16;
  o.grad_storage = StorageDtype::bf16;
  o.states = bf16_states;
  OptimizerStates states(n, o, *world, be, pool);
  CHECK(states.params_are_master());
  CHECK_FALSE(states.has_master());
  CHECK(be.memory().current(MemCategory::optimizer) == n * 2 * 2);
  CHECK(states.state_bytes() == n * 2 * 2);
  Buffer params = upload16(be, p, MemCategory::params), grads = upload16(be, g, MemCategory::grads);
  for (int step = 1; step <= 2; ++step) {
    kernels::AdamWParams hs = h;
    hs.step = step;
    ref_be.adamw_fused(std::span(&span, 1), StorageDtype::bf16, StorageDtype::bf16, hs, 1.0f, bf16_states);
    states.step({{params.ref(), grads.ref(), 0, n}}, hs);
    CHECK(download(be, params) == download(ref_be, ref_p));
  }
  // A checkpoint of the states holds the moments only; one written before
  // kCheckpointMasterInParams also holds the master copy, read past.
  std::ostringstream now;
  states.write_state(now);
  CHECK(now.str().size() == states.state_bytes());
  const std::string master_copy(n * 2, '\x7f');
  std::istringstream legacy(master_copy + now.str());
  CHECK(states.state_bytes(true) == n * 3 * 2);
  OptimizerStates resumed(n, o, *world, be, pool);
  resumed.read_state(legacy, true);
  std::ostringstream again;
  resumed.write_state(again);
  CHECK(again.str() == now.str());
  std::istringstream short_legacy(master_copy);
  CHECK_THROWS_WITH(resumed.read_state(short_legacy, true), Catch::Contains("ends early"));
}
