// Memory model against independent oracles: the ZeRO paper's Table 1 (printed
// values typed in here), DeepSpeed's estimator formulas, Korthikanti et al.'s
// activation formulas in closed form, and structural invariants.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "cost_model_fixtures.hpp"
#include "ztune/vocab/engine_profile.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/op_costs.hpp"

using namespace ztune;

namespace {

using test::gpt;
using test::a100_nodes;

HardwareProfile flat_profile() {
  HardwareProfile hw;
  hw.name = "flat";
  hw.gemm_efficiency = {{1e9, 0.5}};
  return hw;
}

// Korthikanti's 22B batch of 4 on 8 data-parallel GPUs, ZeRO-1, bf16, every
// layer recomputed: the plan the checkpoint variants are counted on.
Plan full_recompute_dp8() {
  Plan p = test::zero_plan(8, 1, 1, 4, 1);
  p.recompute = Recompute::full;
  p.precision = Precision::bf16;
  return p;
}

}  // namespace

TEST_CASE("ZeRO Table 1: model-state GB per device, to the printed precision", "[memory][zero]") {
  // Rajbhandari et al. 2020, Table 1 (K = 12): {Ψ, stage, {Nd=1,4,16,64,256,1024}}.
  struct Row { double psi; int stage; double gb[6]; int decimals[6]; };
  const int nd[6] = {1, 4, 16, 64, 256, 1024};
  const Row rows[] = {
      {7.5e9, 1, {120, 52.5, 35.6, 31.4, 30.4, 30.1}, {0, 1, 1, 1, 1, 1}},
      {7.5e9, 2, {120, 41.3, 21.6, 16.6, 15.4, 15.1}, {0, 1, 1, 1, 1, 1}},
      {7.5e9, 3, {120, 30, 7.5, 1.88, 0.47, 0.12}, {0, 0, 1, 2, 2, 2}},
      {128e9, 1, {2048, 896, 608, 536, 518, 513}, {0, 0, 0, 0, 0, 0}},
      {128e9, 2, {2048, 704, 368, 284, 263, 257}, {0, 0, 0, 0, 0, 0}},
      {128e9, 3, {2048, 512, 128, 32, 8, 2}, {0, 0, 0, 0, 0, 0}},
      {1e12, 1, {16000, 7000, 4750, 4187, 4046, 4011}, {0, 0, 0, 0, 0, 0}},
      {1e12, 2, {16000, 5500, 2875, 2218, 2054, 2013}, {0, 0, 0, 0, 0, 0}},
      {1e12, 3, {16000, 4000, 1000, 250, 62.5, 15.6}, {0, 0, 0, 0, 0, 1}},
  };
  for (const auto& r : rows) {
    for (int i = 0; i < 6; ++i) {
      const double gb = model_state_bytes(r.psi, nd[i], r.stage, StateAccounting::paper, Precision::fp16).total() / 1e9;
      INFO("Ψ " << r.psi << " stage " << r.stage << " Nd " << nd[i] << ": " << gb << " GB vs printed " << r.gb[i]);
      // The paper rounds or truncates: within one unit of the last printed digit.
      CHECK(std::abs(gb - r.gb[i]) < std::pow(10.0, -r.decimals[i]));
    }
  }
}

TEST_CASE("ZeRO stages split params, grads and optimizer states as the paper says", "[memory][zero]") {
  const double psi = 1e9;
  auto s0 = model_state_bytes(psi, 8, 0, StateAccounting::paper, Precision::fp16);
  CHECK(s0.params == 2 * psi);
  CHECK(s0.grads == 2 * psi);
  CHECK(s0.optimizer == 12 * psi);
  auto s2 = model_state_bytes(psi, 8, 2, StateAccounting::paper, Precision::fp16);
  CHECK(s2.params == 2 * psi);
  CHECK(s2.grads == Approx(2 * psi / 8));
  CHECK(s2.optimizer == Approx(12 * psi / 8));
  auto s3 = model_state_bytes(psi, 8, 3, StateAccounting::paper, Precision::fp16);
  CHECK(s3.total() == Approx(16 * psi / 8));
}

TEST_CASE("DeepSpeed accounting: 2Ψ + 18Ψ/N for stages 1-2, 18Ψ/N for stage 3", "[memory][zero][deepspeed]") {
  // estimate_zero2_model_states_mem_needs / estimate_zero3_model_states_mem_needs (DeepSpeed 2024+).
  const double psi = 7e9;
  for (int n : {1, 2, 8, 64}) {
    CHECK(model_state_bytes(psi, n, 1, StateAccounting::deepspeed, Precision::fp16).total() == Approx(2 * psi + 18 * psi / n));
    CHECK(model_state_bytes(psi, n, 2, StateAccounting::deepspeed, Precision::fp16).total() == Approx(2 * psi + 18 * psi / n));
    CHECK(model_state_bytes(psi, n, 3, StateAccounting::deepspeed, Precision::fp16).total() == Approx(18 * psi / n));
  }
}

TEST_CASE("DeepSpeed without ZeRO: FP16_Optimizer keeps 16Ψ, a bf16 pipeline's BF16_Optimizer 8Ψ + 12Ψ/N", "[memory][deepspeed]") {
  // DeepSpeed 0.18–0.19 runtime/engine.py: with the default data types bf16
  // accumulates in bf16 (get_data_types), and _do_optimizer_sanity_check wraps
  // a bf16 pipeline without ZeRO in BF16_Optimizer, which keeps the 16-bit
  // gradients, a full fp32 gradient buffer and the fp32 master and Adam
  // moments of this rank's data-parallel partition; bf16 without a pipeline
  // gets DDP_BFLOAT16 and fp16 FP16_Optimizer, whose fp32 states are whole.
  const double psi = 7e9;
  CHECK(deepspeed_runs_bf16_optimizer(Precision::bf16, 2, 0));
  CHECK_FALSE(deepspeed_runs_bf16_optimizer(Precision::bf16, 1, 0));
  CHECK_FALSE(deepspeed_runs_bf16_optimizer(Precision::bf16, 4, 1));
  CHECK_FALSE(deepspeed_runs_bf16_optimizer(Precision::fp16, 4, 0));
  for (int n : {1, 2, 8, 64}) {
    INFO("N = " << n);
    const auto bf = model_state_bytes(psi, n, 0, StateAccounting::deepspeed, Precision::bf16, 4);
    CHECK(bf.params == Approx(2 * psi));
    CHECK(bf.grads == Approx(6 * psi));
    CHECK(bf.optimizer == Approx(12 * psi / n));
    CHECK(model_state_bytes(psi, n, 0, StateAccounting::deepspeed, Precision::bf16, 1).total() == Approx(16 * psi));
    CHECK(model_state_bytes(psi, n, 0, StateAccounting::deepspeed, Precision::fp16, 4).total() == Approx(16 * psi));
  }
}

TEST_CASE("Megatron accounting: Megatron-Core's bytes per parameter, by precision and optimizer", "[memory][megatron]") {
  // Megatron-Core docs, "Distributed Optimizer": bytes per parameter, d the
  // data-parallel size. bf16 parameters with fp32 gradients: 18, distributed
  // 6 + 12/d; fp16 parameters and gradients: 20, distributed 4 + 16/d. ztune's
  // ZeRO-1 is Megatron's distributed optimizer.
  const double psi = 7e9;
  for (int d : {1, 2, 8, 64}) {
    INFO("d = " << d);
    CHECK(model_state_bytes(psi, d, 0, StateAccounting::megatron, Precision::bf16).total() == Approx(18 * psi));
    CHECK(model_state_bytes(psi, d, 1, StateAccounting::megatron, Precision::bf16).total() ==
          Approx(6 * psi + 12 * psi / d));
    CHECK(model_state_bytes(psi, d, 0, StateAccounting::megatron, Precision::fp16).total() == Approx(20 * psi));
    CHECK(model_state_bytes(psi, d, 1, StateAccounting::megatron, Precision::fp16).total() ==
          Approx(4 * psi + 16 * psi / d));
  }
  // The gradient buffer is fp32 for bf16: twice the paper's 16-bit gradients.
  CHECK(model_state_bytes(psi, 8, 1, StateAccounting::megatron, Precision::bf16).grads ==
        Approx(2 * model_state_bytes(psi, 8, 1, StateAccounting::paper, Precision::bf16).grads));
  // A stated reduction dtype is the main_grad buffer's (Megatron-Core's
  // grad_reduce_in_fp32): bf16 with --grad-reduce-in-bf16 keeps fp16's layout
  // (16-bit gradients, an fp32 copy of the optimizer's shard of them), fp16
  // with --accumulate-allreduce-grads-in-fp32 bf16's (fp32 gradients).
  for (int d : {1, 8}) {
    INFO("d = " << d);
    CHECK(model_state_bytes(psi, d, 1, StateAccounting::megatron, Precision::bf16, 1, Precision::bf16).total() ==
          Approx(4 * psi + 16 * psi / d));
    CHECK(model_state_bytes(psi, d, 1, StateAccounting::megatron, Precision::fp16, 1, Precision::fp32).total() ==
          Approx(6 * psi + 12 * psi / d));
    CHECK(model_state_bytes(psi, d, 1, StateAccounting::megatron, Precision::bf16, 1, Precision::fp32).total() ==
          Approx(6 * psi + 12 * psi / d));
  }
  // The other accountings keep their buffers (DeepSpeed and FSDP cast a bucket to reduce it).
  CHECK(model_state_bytes(psi, 8, 1, StateAccounting::paper, Precision::bf16, 1, Precision::fp32).total() ==
        Approx(model_state_bytes(psi, 8, 1, StateAccounting::paper, Precision::bf16).total()));
}

TEST_CASE("Korthikanti activations per layer: every recompute / tp / sp case in closed form", "[memory][activations]") {
  // 22B of Korthikanti Table 3: s 2048, h 6144, a 64; b 4; t 8.
  const Transformer m = gpt(48, 6144, 64, 2048, 51200);
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8;
  const double sbh = s * b * h;
  // No parallelism: s·b·h·(34 + 5as/h).
  CHECK(layer_activation_bytes(m, 4, 1, false, Recompute::none) == Approx(sbh * (34 + 5 * a * s / h)));
  // Tensor parallel: s·b·h·(10 + 24/t + 5as/(ht)).
  CHECK(layer_activation_bytes(m, 4, 8, false, Recompute::none) == Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t))));
  // Tensor + sequence parallel: s·b·h·(34 + 5as/h)/t.
  CHECK(layer_activation_bytes(m, 4, 8, true, Recompute::none) == Approx(sbh * (34 + 5 * a * s / h) / t));
  // Selective recompute drops the 5as/h term.
  CHECK(layer_activation_bytes(m, 4, 8, false, Recompute::selective) == Approx(sbh * (10 + 24 / t)));
  CHECK(layer_activation_bytes(m, 4, 8, true, Recompute::selective) == Approx(sbh * 34 / t));
  CHECK(layer_activation_bytes(m, 4, 1, false, Recompute::selective) == Approx(sbh * 34));
  // Full recompute keeps the layer input: 2sbh, /t with sequence parallelism.
  CHECK(layer_activation_bytes(m, 4, 8, false, Recompute::full) == Approx(2 * sbh));
  CHECK(layer_activation_bytes(m, 4, 8, true, Recompute::full) == Approx(2 * sbh / t));
}

TEST_CASE("flash attention stores the log-sum-exp instead of the s×s scores", "[memory][activations][flash]") {
  // Dao et al. 2022 §3.1: memory linear in s. Per layer, the 5·a·s²·b/t bytes
  // of softmax output, dropout mask and dropout output become the fp32
  // log-sum-exp of each query row, 4·a·s·b/t; the rest of Korthikanti's count
  // (Q, K, V and the attention output included) is unchanged.
  const Transformer m = gpt(48, 6144, 64, 2048, 51200);
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8;
  const double sbh = s * b * h, lse = 4 * a * s * b / t;
  const auto flash = [&](bool sp, Recompute r) {
    return layer_activation_bytes(m, 4, 8, sp, r, 1.0, AttentionKernel::flash);
  };
  CHECK(flash(false, Recompute::none) == Approx(sbh * (10 + 24 / t) + lse));
  CHECK(flash(true, Recompute::none) == Approx(sbh * 34 / t + lse));
  // Selective recomputation has nothing left to drop.
  CHECK(flash(true, Recompute::selective) == Approx(flash(true, Recompute::none)));
  // Full recomputation keeps the layer input only, as before.
  CHECK(flash(false, Recompute::full) == Approx(2 * sbh));
  // The 22B layer of Korthikanti Table 3 on tp 8 with SP: 9.09 MiB of lse and
  // 272 MiB of the rest, against 1.33 GB of scores without flash.
  CHECK(layer_activation_bytes(m, 4, 8, true, Recompute::none) - flash(true, Recompute::none) ==
        Approx(5 * a * s * s * b / t - lse));
}

TEST_CASE("parallel attention and MLP (GPT-NeoX) store one norm input fewer", "[memory][activations]") {
  // Both norms read the layer input, so the residual after attention (2·s·b·h,
  // outside the tensor-parallel region) is never stored; full recompute keeps the
  // layer input either way.
  Transformer m = gpt(48, 6144, 64, 2048, 51200);
  m.parallel_residual = true;
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8;
  const double sbh = s * b * h;
  CHECK(layer_activation_bytes(m, 4, 8, false, Recompute::none) == Approx(sbh * (8 + 24 / t + 5 * a * s / (h * t))));
  CHECK(layer_activation_bytes(m, 4, 8, true, Recompute::selective) == Approx(sbh * 32 / t));
  CHECK(layer_activation_bytes(m, 4, 8, false, Recompute::full) == Approx(2 * sbh));
}

TEST_CASE("Korthikanti Figure 1: 22B activations 59.25 GiB with tp 8, no recompute", "[memory][activations]") {
  const Transformer m = gpt(48, 6144, 64, 2048, 51200);
  Plan p;
  p.tp = 8;
  p.micro_batch = 4;
  p.global_batch = 4;
  const MemoryPrediction mp = predict_memory(m, p, a100_nodes(1), flat_profile());
  // Published (as transcribed by calculon): 59.25 GiB; the layer formula gives exactly
  // that, plus the embedding dropout mask (s·b·h bytes), which the figure leaves out.
  const double sbh = 2048.0 * 4 * 6144;
  CHECK((mp.line(MemLine::activations) - sbh) / (1024.0 * 1024 * 1024) == Approx(59.25).epsilon(1e-3));
}

TEST_CASE("micro-batches in flight: 1F1B holds p, interleaving multiplies by 1 + (p-1)/(p·v)", "[memory][pipeline]") {
  Plan p;
  p.pp = 8;
  p.grad_accum = 64;
  CHECK(microbatches_in_flight(p) == 8);
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 3;
  CHECK(microbatches_in_flight(p) == Approx(8 * (1 + 7.0 / 24)));
  p.schedule = Schedule::gpipe;
  p.virtual_stages = 1;
  CHECK(microbatches_in_flight(p) == 64);
  p.schedule = Schedule::one_f_one_b;
  p.grad_accum = 3;  // fewer micro-batches than stages
  CHECK(microbatches_in_flight(p) == 3);
  p.pp = 1;
  CHECK(microbatches_in_flight(p) == 1);
}

TEST_CASE("memory lines sum to the total, fits follows capacity, offload moves states to host and NVMe",
          "[memory]") {
  const Transformer m = gpt(24, 2048, 16, 1024, 50304);
  const Cluster c = a100_nodes(2);
  Plan p;
  p.dp = 16;
  p.zero_stage = 2;
  p.micro_batch = 2;
  p.grad_accum = 4;
  p.global_batch = 128;
  const MemoryPrediction mp = predict_memory(m, p, c, flat_profile());
  double sum = 0;
  for (double v : mp.gpu) sum += v;
  CHECK(sum == Approx(mp.gpu_total_bytes));
  CHECK(mp.gpu_capacity_bytes == c.node.gpu.memory_bytes());
  CHECK(mp.fits_gpu == (mp.gpu_total_bytes <= mp.gpu_capacity_bytes));
  CHECK(mp.host_bytes_per_node == 0);
  CHECK(mp.nvme_bytes_per_node == 0);

  Plan off = p;
  off.offload_optimizer = OffloadTarget::cpu;
  const MemoryPrediction mo = predict_memory(m, off, c, flat_profile());
  CHECK(mo.line(MemLine::optimizer) == 0);
  CHECK(mo.line(MemLine::grads) == 0);
  const double psi = stage_params(m, p);
  // ZeRO-Offload: fp32 master, momentum, variance and gradients (16 B) of each GPU's partition.
  CHECK(mo.host_bytes_per_node == Approx(8 * 16.0 * psi / 16));

  Plan inf = p;
  inf.zero_stage = 3;
  inf.offload_optimizer = OffloadTarget::nvme;
  inf.offload_params = OffloadTarget::nvme;
  const MemoryPrediction mi = predict_memory(m, inf, c, flat_profile());
  CHECK(mi.line(MemLine::params) == 0);
  CHECK(mi.line(MemLine::optimizer) == 0);
  CHECK(mi.nvme_bytes_per_node == Approx(8 * (16.0 + 2.0) * psi / 16));
  CHECK(mi.line(MemLine::zero3_gathered) > 0);
}

// DeepSpeed's ZeRO-1 (stage_1_and_2.py with partition_gradients false) frees
// a gradient only once it is reduced at the accumulation boundary (or in the
// backward's epilogue without overlap_comm): every 16-bit gradient is whole
// until then, beside the 2Ψ/N partition it is reduced into. Its estimator's
// 6Ψ/N (stage 2's) holds only for one micro-batch with overlap_comm. The ZeRO
// paper's Pos with the optimizer offloaded keeps its 2Ψ gradients on the GPU.
TEST_CASE("ZeRO-1 keeps every gradient until the boundary: DeepSpeed's 2Ψ + 2Ψ/N and the paper's 2Ψ with offload",
          "[memory][zero][deepspeed]") {
  const Transformer m = gpt(24, 2048, 16, 1024, 50304);
  const Cluster c = a100_nodes(2);
  Plan p;
  p.dp = 16;
  p.zero_stage = 1;
  p.micro_batch = 2;
  p.grad_accum = 4;
  p.global_batch = 128;
  p.precision = Precision::fp16;
  const double psi = stage_params(m, p);
  MemoryOptions ds;
  ds.accounting = StateAccounting::deepspeed;
  CHECK(predict_memory(m, p, c, flat_profile(), ds).line(MemLine::grads) == Approx(2 * psi + 2 * psi / 16));
  Plan one = p;  // one micro-batch, reduced as the backward produces them
  one.grad_accum = 1;
  one.global_batch = 32;
  CHECK(predict_memory(m, one, c, flat_profile(), ds).line(MemLine::grads) == Approx(6 * psi / 16));
  one.overlap_comm = false;  // reduced in the epilogue: all whole first
  CHECK(predict_memory(m, one, c, flat_profile(), ds).line(MemLine::grads) == Approx(2 * psi + 2 * psi / 16));

  Plan off = p;
  off.offload_optimizer = OffloadTarget::cpu;
  MemoryOptions paper;
  paper.accounting = StateAccounting::paper;
  const auto po = predict_memory(m, off, c, flat_profile(), paper);
  CHECK(po.line(MemLine::grads) == Approx(2 * psi));
  CHECK(po.line(MemLine::optimizer) == 0);
  CHECK(predict_memory(m, off, c, flat_profile(), ds).line(MemLine::grads) == Approx(2 * psi + 2 * psi / 16));
  off.grad_accum = 1;
  off.global_batch = 32;
  CHECK(predict_memory(m, off, c, flat_profile(), ds).line(MemLine::grads) == 0);  // streamed to the host as stage 2
}

TEST_CASE("a plan that does not fit names its largest lines, the largest micro-batch is the fitting edge",
          "[memory]") {
  const Transformer m = gpt(48, 6144, 64, 2048, 51200);
  const Cluster c = a100_nodes(1);
  Plan p;
  p.tp = 8;
  p.micro_batch = 16;
  p.global_batch = 16;
  const MemoryPrediction mp = predict_memory(m, p, c, flat_profile());
  REQUIRE_FALSE(mp.fits_gpu);
  MemLine lines[10];
  const int n = overflowing_lines(mp, lines, 10);
  REQUIRE(n >= 1);
  CHECK(lines[0] == MemLine::activations);  // 16 × ~15 GiB of activations dominate

  const int best = largest_fitting_micro_batch(m, p, c, flat_profile());
  REQUIRE(best >= 1);
  Plan q = p;
  q.micro_batch = best;
  CHECK(predict_memory(m, q, c, flat_profile()).fits_gpu);
  q.micro_batch = best + 1;
  CHECK_FALSE(predict_memory(m, q, c, flat_profile()).fits_gpu);
}

TEST_CASE("recompute none keeps more activations than selective, selective more than full", "[memory]") {
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  for (int tp : {1, 2, 8}) {
    for (bool sp : {false, true}) {
      if (sp && tp == 1) continue;
      const double none = layer_activation_bytes(m, 2, tp, sp, Recompute::none);
      const double sel = layer_activation_bytes(m, 2, tp, sp, Recompute::selective);
      const double full = layer_activation_bytes(m, 2, tp, sp, Recompute::full);
      CHECK(none > sel);
      CHECK(sel > full);
    }
  }
}

// Uneven pipeline stages (issue 19): the most loaded stage's memory, with its
// own layer count. Oracles: 2 bytes per 16-bit parameter of 12h² + 13h per GPT
// layer plus (V + s)·h for the embedding; Korthikanti et al. 2022's
// s·b·h·(34 + 5·a·s/h) bytes per layer and micro-batch; 1F1B stage i holds
// min(p − i, m) micro-batches (Narayanan et al. 2021, §2.2).
TEST_CASE("uneven stages: memory is the most loaded stage's", "[memory][stages]") {
  const double h = 4096, s = 2048, a = 32, V = 32000;
  const Transformer m = gpt(5, 4096, 32, 2048, 32000);
  const double layer_params = 12 * h * h + 13 * h;
  const double layer_act = s * h * (34 + 5 * a * s / h);  // b = 1
  Plan p;
  p.pp = 2;
  p.micro_batch = 1;
  p.grad_accum = 4;
  p.global_batch = 4;
  p.stage_layers = {3, 2};
  const MemoryPrediction mp = predict_memory(m, p, a100_nodes(1), flat_profile());
  // The first stage: three layers and the embedding, two micro-batches in flight
  // (and their embedding dropout masks, s·b·h bytes each).
  CHECK(mp.line(MemLine::params) == Approx(2 * (3 * layer_params + (V + s) * h)));
  CHECK(mp.line(MemLine::activations) == Approx(2 * 3 * layer_act + 2 * s * h));
  // The balanced default of 5 layers on 2 stages is the same 3 + 2.
  Plan q = p;
  q.stage_layers.clear();
  CHECK(predict_memory(m, q, a100_nodes(1), flat_profile()).gpu_total_bytes == Approx(mp.gpu_total_bytes));

  // 1 + 3 + 1: the middle stage holds three layers and min(3 − 1, 4) = 2
  // micro-batches, no embedding or head: it is the most loaded.
  p.pp = 3;
  p.stage_layers = {1, 3, 1};
  const MemoryPrediction mid = predict_memory(m, p, a100_nodes(1), flat_profile());
  CHECK(mid.line(MemLine::params) == Approx(2 * 3 * layer_params));
  CHECK(mid.line(MemLine::activations) == Approx(2 * 3 * layer_act));
  CHECK(mid.line(MemLine::logits) == 0);
}

// ZeRO-R's partitioned activation checkpoints (Rajbhandari et al. 2020, §6.1):
// with full recomputation each rank keeps 1/t of every saved layer input.
// Oracle: Korthikanti et al.'s 2·s·b·h bytes per checkpoint, divided by t; the
// one layer re-materialised at a time (s·b·h·(10 + 24/t + 5as/(ht)), no SP) is
// not partitioned.
TEST_CASE("partitioned activations (ZeRO-R Pa) divide the full-recompute checkpoints by tp", "[memory][activations][pa]") {
  const double h = 6144, s = 2048, a = 64, b = 4, t = 8, L = 48;
  const Transformer m = gpt(48, 6144, 64, 2048, 51200);
  Plan p;
  p.tp = 8;
  p.micro_batch = 4;
  p.global_batch = 4;
  p.recompute = Recompute::full;
  p.precision = Precision::bf16;
  const double sbh = s * b * h;
  const double working = sbh * (10 + 24 / t + 5 * a * s / (h * t));
  const double embedding_mask = sbh;
  const MemoryPrediction whole = predict_memory(m, p, a100_nodes(1), flat_profile());
  CHECK(whole.line(MemLine::activations) == Approx(L * 2 * sbh + working + embedding_mask));
  p.partition_activations = true;
  const MemoryPrediction split = predict_memory(m, p, a100_nodes(1), flat_profile());
  CHECK(split.line(MemLine::activations) == Approx(L * 2 * sbh / t + working + embedding_mask));
  // Only the activations move.
  CHECK(split.gpu_total_bytes - split.line(MemLine::activations) - split.line(MemLine::fragmentation) ==
        Approx(whole.gpu_total_bytes - whole.line(MemLine::activations) - whole.line(MemLine::fragmentation)));
}

// Context parallelism (issue 19): every rank holds s/cp of each sequence, so
// Korthikanti et al.'s per-layer activations divide by cp (the scores: s/cp
// query rows against all s keys); the weights are whole on each cp rank and
// ZeRO partitions them over dp × cp.
TEST_CASE("context parallelism: Korthikanti's activations divided by cp, states over dp × cp", "[memory][cp]") {
  const double s = 4096, b = 1, h = 1024, a = 16, t = 2;
  const Transformer m = gpt(4, 1024, 16, 4096, 50304);
  Plan p = test::zero_plan(2, 2, 1, 1, 4);
  p.sequence_parallel = true;
  const double sbh = s * b * h;
  for (int cp : {1, 2, 4}) {
    p.cp = cp;
    INFO("cp " << cp);
    // Korthikanti Table 2, tensor + sequence parallel: s·b·h·(34 + 5·a·s/h)/t.
    CHECK(layer_activation_bytes(m, p, Recompute::none) == Approx(sbh * (34 + 5 * a * s / h) / t / cp));
    CHECK(layer_activation_bytes(m, p, Recompute::selective) == Approx(sbh * 34 / t / cp));
    CHECK(layer_activation_bytes(m, p, Recompute::full) == Approx(2 * sbh / t / cp));
    Plan f = p;
    f.attention = AttentionKernel::flash;  // the fp32 log-sum-exp of each of the rank's query rows
    CHECK(layer_activation_bytes(m, f, Recompute::none) == Approx((sbh * 34 + 4 * a * s * b) / t / cp));
    // The whole line: 4 layers, one micro-batch in flight, plus the embedding's dropout mask.
    const auto mp = predict_memory(m, p, a100_nodes(1), flat_profile());
    CHECK(mp.line(MemLine::activations) == Approx(4 * sbh * (34 + 5 * a * s / h) / t / cp + sbh / t / cp));
    // Model states: 16-bit params and grads whole, the optimizer's 12Ψ over dp × cp (ZeRO-1).
    const double psi = stage_params(m, p);
    CHECK(mp.line(MemLine::params) == Approx(2 * psi));
    CHECK(mp.line(MemLine::grads) == Approx(2 * psi));
    CHECK(mp.line(MemLine::optimizer) == Approx(12 * psi / (2 * cp)));
  }
  // ZeRO-3 shards the parameters too: Ψ/(dp·cp) each.
  p.cp = 4;
  p.zero_stage = 3;
  const auto z3 = predict_memory(m, p, a100_nodes(2), flat_profile());
  const double psi = stage_params(m, p);
  CHECK(z3.line(MemLine::params) == Approx(2 * psi / 8));
  CHECK(z3.line(MemLine::grads) == Approx(2 * psi / 8));
  CHECK(z3.line(MemLine::optimizer) == Approx(12 * psi / 8));
}

// DeepSpeed-Ulysses (issue 19 item 3; Jacobs et al. 2023 §3): outside
// attention every rank holds s/u tokens; after the all-to-all Q, K, V and the
// attention output are s tokens of h/u (the same s·h/u elements) and the
// scores a/u heads of s × s. So Korthikanti's per-layer activations divide by
// u, term by term; the weights are whole and ZeRO partitions them over dp × u.
TEST_CASE("ulysses: Korthikanti's activations divided by u, states over dp × u", "[memory][ulysses]") {
  const double s = 4096, b = 1, h = 1024, a = 16, t = 2;
  const Transformer m = gpt(4, 1024, 16, 4096, 50304);
  Plan p = test::zero_plan(2, 2, 1, 1, 4);  // tp 2 without Megatron's SP (Ulysses refuses it)
  const double sbh = s * b * h;
  const auto base = predict_memory(m, p, a100_nodes(2), flat_profile());
  for (int u : {1, 2, 4}) {
    p.ulysses = u;
    INFO("ulysses " << u);
    REQUIRE_FALSE(check_plan(p, m, a100_nodes(2)).has_value());
    // Korthikanti Table 2, tensor parallel without SP: s·b·h·(10 + 24/t + 5·a·s/(h·t)).
    CHECK(layer_activation_bytes(m, p, Recompute::none) == Approx(sbh * (10 + 24 / t + 5 * a * s / (h * t)) / u));
    CHECK(layer_activation_bytes(m, p, Recompute::selective) == Approx(sbh * (10 + 24 / t) / u));
    CHECK(layer_activation_bytes(m, p, Recompute::full) == Approx(2 * sbh / u));
    Plan f = p;
    f.attention = AttentionKernel::flash;  // the fp32 log-sum-exp of each row of the rank's a/(t·u) heads
    CHECK(layer_activation_bytes(m, f, Recompute::none) == Approx((sbh * (10 + 24 / t) + 4 * a * s * b / t) / u));
    const auto mp = predict_memory(m, p, a100_nodes(2), flat_profile());
    // 4 layers, one micro-batch in flight, plus the embedding's dropout mask of s/u rows.
    CHECK(mp.line(MemLine::activations) ==
          Approx(4 * sbh * (10 + 24 / t + 5 * a * s / (h * t)) / u + sbh / u));
    const double psi = stage_params(m, p);
    CHECK(mp.line(MemLine::params) == Approx(2 * psi));
    CHECK(mp.line(MemLine::grads) == Approx(2 * psi));
    CHECK(mp.line(MemLine::optimizer) == Approx(12 * psi / (2 * u)));
    // The standard kernel's score gradient (two live): b·a/(t·u)·s² 16-bit, so
    // the workspace shrinks by 2·2·b·a/t·s²·(1 − 1/u).
    CHECK(base.line(MemLine::workspace) - mp.line(MemLine::workspace) ==
          Approx(2.0 * 2.0 * b * a / t * s * s * (1.0 - 1.0 / u)));
  }
}

// Hybrid sharding (issue 19 item 4): ZeRO-3's partitions over the shard group
// of dp_shard ranks instead of all dp ranks (the ZeRO paper's Ψ/Nd with
// Nd = dp_shard; FSDP HYBRID_SHARD, MiCS), the activations unchanged.
TEST_CASE("hybrid sharding: ZeRO-3 states divided by dp_shard, not dp", "[memory][hsdp]") {
  const Transformer m = gpt(8, 2048, 16, 2048, 50304);
  const Cluster c = a100_nodes(4);
  Plan p = test::zero_plan(32, 1, 3, 1, 1);
  const auto full = predict_memory(m, p, c, flat_profile());
  p.dp_shard = 8;
  const auto hybrid = predict_memory(m, p, c, flat_profile());
  const double psi = stage_params(m, p);
  CHECK(full.line(MemLine::params) == Approx(2 * psi / 32));
  CHECK(hybrid.line(MemLine::params) == Approx(2 * psi / 8));
  CHECK(hybrid.line(MemLine::grads) == Approx(2 * psi / 8));
  CHECK(hybrid.line(MemLine::optimizer) == Approx(12 * psi / 8));
  CHECK(hybrid.line(MemLine::activations) == Approx(full.line(MemLine::activations)));
  CHECK(hybrid.line(MemLine::zero3_gathered) == Approx(full.line(MemLine::zero3_gathered)));
  // With cp the weights' group is dp × cp; the shard group still divides the states.
  p.dp = 16;
  p.global_batch = 16;
  p.cp = 2;
  p.attention = AttentionKernel::flash;
  const auto cp = predict_memory(m, p, c, flat_profile());
  CHECK(cp.line(MemLine::params) == Approx(2 * psi / 8));
  CHECK(cp.line(MemLine::optimizer) == Approx(12 * psi / 8));
}

// ZeRO-R CPU checkpointing (Rajbhandari et al. 2020, §6.1, Pa+cpu): the
// checkpoints of full recomputation move to host memory. Oracle: Korthikanti's
// 2·s·b·h bytes per layer checkpoint; the GPU keeps the one copied back for
// its layer's recomputation beside the layer being re-materialised, and each
// GPU's L checkpoints go to its node's host memory.
TEST_CASE("cpu checkpointing moves the full-recompute checkpoints to the host", "[memory][activations][offload]") {
  const double h = 6144, s = 2048, a = 64, b = 4, L = 48;
  const Transformer m = gpt(48, 6144, 64, 2048, 51200);
  Plan p = full_recompute_dp8();
  const double sbh = s * b * h;
  const double working = sbh * (34 + 5 * a * s / h);
  const double embedding_mask = sbh;
  const MemoryPrediction on_gpu = predict_memory(m, p, a100_nodes(1), flat_profile());
  CHECK(on_gpu.line(MemLine::activations) == Approx(L * 2 * sbh + working + embedding_mask));
  CHECK(on_gpu.host_bytes_per_node == 0);
  p.cpu_checkpointing = true;
  const MemoryPrediction on_host = predict_memory(m, p, a100_nodes(1), flat_profile());
  CHECK(on_host.line(MemLine::activations) == Approx(2 * sbh + working + embedding_mask));
  CHECK(on_host.host_bytes_per_node == Approx(8 * L * 2 * sbh));
  // The model states do not move.
  CHECK(on_host.line(MemLine::optimizer) == Approx(on_gpu.line(MemLine::optimizer)));
  CHECK(on_host.line(MemLine::params) == Approx(on_gpu.line(MemLine::params)));
}

// DeepSpeed gathers a ZeRO-3 module's weight whole: stage3_max_live_parameters
// bounds prefetch, not one module. Oracle: FC1 of a hidden-32768 layer holds
// 32768 × 131072 (+ bias) elements, above the 1e9 default.
TEST_CASE("ZeRO-3 gathers the largest module whole above max_live_parameters", "[memory][zero3]") {
  const Transformer m = gpt(4, 32768, 128, 1024, 50304);
  Plan p;
  p.dp = 8;
  p.zero_stage = 3;
  p.micro_batch = 1;
  p.global_batch = 8;
  p.precision = Precision::bf16;
  REQUIRE(p.max_live_params < 32768.0 * 131072);
  const MemoryPrediction mp = predict_memory(m, p, a100_nodes(1), flat_profile());
  CHECK(mp.line(MemLine::zero3_gathered) >= 2.0 * 32768 * 131072);
}

TEST_CASE("engines' selective policies keep the tensors they save, closed form", "[memory][activations][recompute]") {
  // Llama 3 8B's layer (GQA 32/8 heads of 128, SwiGLU 14336), one sequence of
  // 8192, flash attention, 16-bit tensors, per layer.
  Transformer m = gpt(32, 4096, 32, 8192, 128256);
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.activation = Activation::swiglu;
  const double s = 8192, h = 4096, kvd = 1024, f = 14336, a = 32;
  Plan p;
  p.global_batch = 1;
  p.attention = AttentionKernel::flash;
  p.recompute = Recompute::selective;
  // torchtitan's op SAC: the block input, wq, wv, SDPA's output (and its
  // log-sum-exp), w1 and w2 (every other matmul of wq wk wv wo w1 w3 w2).
  p.recompute_policy = SelectivePolicy::alternate_mm;
  CHECK(layer_activation_bytes(m, p, p.recompute) ==
        Approx(2 * s * h + s * (2 * h + 2 * kvd + 2 * h + 2 * f + 2 * h) + 4 * a * s));
  // MaxText's save_dot_except_mlpwi: the block input, q, k, v, out_proj and mlpwo.
  p.recompute_policy = SelectivePolicy::mlp_in;
  CHECK(layer_activation_bytes(m, p, p.recompute) == Approx(2 * s * h + s * (2 * h + 4 * kvd + 2 * h + 2 * h)));
  // JAX's dots_saveable (PaxML SAVE_DOT_ONLY): mlp_in's and the MLP input
  // projections' outputs (gate and up, 2f), every matmul's.
  p.recompute_policy = SelectivePolicy::dots;
  CHECK(layer_activation_bytes(m, p, p.recompute) ==
        Approx(2 * s * h + s * (2 * h + 4 * kvd + 2 * h + 2 * 2 * f + 2 * h)));
  // Every second layer whole: half full recomputation's, half none's.
  p.recompute_policy = SelectivePolicy::alternate_layers;
  CHECK(layer_activation_bytes(m, p, p.recompute) ==
        Approx(0.5 * (layer_activation_bytes(m, p, Recompute::full) + layer_activation_bytes(m, p, Recompute::none))));
  // Every third (torchtitan selective_ac_option "3"): a third and two thirds.
  p.recompute_every = 3;
  CHECK(layer_activation_bytes(m, p, p.recompute) ==
        Approx(layer_activation_bytes(m, p, Recompute::full) / 3 + 2 * layer_activation_bytes(m, p, Recompute::none) / 3));
  p.recompute_every = 2;
  // Each keeps less than no recomputation and more than full.
  for (const auto policy : {SelectivePolicy::alternate_mm, SelectivePolicy::mlp_in, SelectivePolicy::alternate_layers,
                            SelectivePolicy::dots}) {
    p.recompute_policy = policy;
    const double kept = layer_activation_bytes(m, p, p.recompute);
    CHECK(kept < layer_activation_bytes(m, p, Recompute::none));
    CHECK(kept > layer_activation_bytes(m, p, Recompute::full));
  }
  // Context parallelism divides every tensor by cp, as Korthikanti's count.
  p.recompute_policy = SelectivePolicy::mlp_in;
  const double whole = layer_activation_bytes(m, p, p.recompute);
  p.cp = 2;
  CHECK(layer_activation_bytes(m, p, p.recompute) == Approx(whole / 2));
}

TEST_CASE("Megatron's unfused softmax keeps its probabilities in fp32: 2 bytes per score more", "[memory][activations]") {
  // tp 8 of 16 heads at micro-batch 1: 2 score matrices per rank, not a
  // multiple of 4, so is_kernel_available refuses the fused kernel
  // (op_costs megatron_fused_softmax_available) and forward_torch_softmax
  // saves fp32 probabilities for its backward: 2·(b·a/t)·s² bytes more per
  // layer and micro-batch, for every one whose scores are stored.
  const Transformer m = gpt(8, 1024, 16, 1024, 51200);
  Plan p = test::zero_plan(1, 8, 0, 1, 4);
  p.precision = Precision::fp16;
  HardwareProfile always = flat_profile();
  HardwareProfile rule = flat_profile();
  rule.engine.megatron_softmax_rule = true;
  const double extra = 2.0 * (1.0 * 16 / 8) * 1024.0 * 1024.0;
  CHECK(attention_score_elements(m, p) == Approx(2.0 * 1024 * 1024));
  REQUIRE(megatron_softmax_fallback(m, p, rule));
  CHECK_FALSE(megatron_softmax_fallback(m, p, always));
  const Cluster c = a100_nodes(1);
  auto act = [&](const HardwareProfile& hw) { return predict_memory(m, p, c, hw).line(MemLine::activations); };
  CHECK(act(rule) - act(always) == Approx(8 * extra));  // 8 layers, one micro-batch in flight
  // Full recomputation stores no scores: only the layer being recomputed holds them.
  p.recompute = Recompute::full;
  CHECK(act(rule) - act(always) == Approx(extra));
  // Micro-batch 2: 4 score matrices per rank, the fused kernel runs, nothing more.
  p = test::zero_plan(1, 8, 0, 2, 2);
  p.precision = Precision::fp16;
  CHECK_FALSE(megatron_softmax_fallback(m, p, rule));
  CHECK(act(rule) == Approx(act(always)));
}

TEST_CASE("Megatron-Core reduces and gathers in its own buffers: no bucket beside them at ZeRO 0 and 1",
          "[memory][buckets]") {
  // DeepSpeed copies gradients into a reduce bucket (reduce_bucket_size,
  // doubled with overlap_comm) and gathers the updated parameters into an
  // all-gather bucket (allgather_bucket_size, ZeRO-1/2): eb·(2R + A) bytes.
  // Megatron-Core's start_grad_sync reduce-scatters bucket.grad_data into its
  // own shard view and start_param_sync all-gathers bucket.param_data from
  // its shard: nothing beside the gradient and parameter buffers.
  const Transformer m = gpt(8, 1024, 16, 1024, 51200);
  const Cluster c = a100_nodes(1);
  HardwareProfile buckets = flat_profile();
  HardwareProfile in_place = flat_profile();
  in_place.engine.dp_buffers_in_place = true;
  auto line = [&](const Plan& p, const HardwareProfile& hw) {
    return predict_memory(m, p, c, hw).line(MemLine::comm_buckets);
  };
  for (int zero : {0, 1}) {
    Plan p = test::zero_plan(8, 1, zero, 1, 4);
    p.precision = Precision::bf16;
    p.reduce_bucket_elems = 1e6;
    p.allgather_bucket_elems = 3e6;
    INFO("ZeRO " << zero);
    REQUIRE(p.overlap_comm);
    CHECK(line(p, buckets) == Approx(2.0 * (2.0 * 1e6 + (zero == 1 ? 3e6 : 0.0))));
    CHECK(line(p, in_place) == 0.0);
  }
  // ZeRO-2 and 3 (Megatron-FSDP under the megatron engine) keep theirs.
  Plan z2 = test::zero_plan(8, 1, 2, 1, 4);
  z2.precision = Precision::bf16;
  CHECK(line(z2, in_place) == Approx(line(z2, buckets)));
  CHECK(line(z2, in_place) > 0.0);
  // The shipped megatron engine states it; DeepSpeed and FSDP copy.
  CHECK(load_engine_profile("megatron").dp_buffers_in_place);
  for (const char* name : {"deepspeed", "fsdp", "ztune"}) CHECK_FALSE(load_engine_profile(name).dp_buffers_in_place);
}

TEST_CASE("uneven interleaved stages: each stage's chunks in flight × its layers / v", "[memory][stages]") {
  // pp 2, v 2, m 4 on 6 layers stated 2 + 4 (chunks of 1 and 2 layers).
  // Megatron's interleaved warm-up: stage 0 (p−1)·2 + (v−1)·p = 4 chunk
  // forwards, 5 in flight × 1 layer; stage 1 2 forwards, 3 in flight × 2
  // layers = 6 layers' worth: the second stage is the most loaded.
  const Transformer m = gpt(6, 1024, 16, 1024, 51200);
  Plan p = test::zero_plan(1, 1, 0, 1, 4);
  p.pp = 2;
  p.virtual_stages = 2;
  p.schedule = Schedule::interleaved;
  p.stage_layers = {2, 4};
  const double layer = layer_activation_bytes(m, p, Recompute::none);
  const MemoryPrediction mp = predict_memory(m, p, a100_nodes(1), flat_profile());
  // The last stage also stores nothing else per layer; its activations line is 6 layers' worth.
  CHECK(mp.line(MemLine::activations) == Approx(6 * layer));
  // Stated the other way (4 + 2), stage 0 is the most loaded: 5 chunks × 2 layers
  // (+ the embedding's dropout mask per micro-batch in flight).
  p.stage_layers = {4, 2};
  const double sbh = 1024.0 * 1 * 1024;
  CHECK(predict_memory(m, p, a100_nodes(1), flat_profile()).line(MemLine::activations) ==
        Approx(10 * layer + 2.5 * sbh));
}

TEST_CASE("a model without dropout keeps no masks: Korthikanti's count less 2·s·b·h and 3 bytes a score",
          "[memory][activations][dropout]") {
  // Korthikanti et al. 2022 §4.1 count two 1-byte masks outside the tensor-
  // parallel region (attention and MLP dropout) and, per score, the dropout
  // mask (1) and its output (2) beside the softmax output (2). PyTorch's
  // dropout returns its input at p = 0 (Llama, Nemotron, OLMo): none of them.
  Transformer m = gpt(48, 6144, 64, 2048, 51200);
  m.dropout = 0;
  const double s = 2048, b = 4, h = 6144, a = 64, t = 8;
  const double sbh = s * b * h;
  CHECK(layer_activation_bytes(m, 4, 1, false, Recompute::none) == Approx(sbh * (32 + 2 * a * s / h)));
  CHECK(layer_activation_bytes(m, 4, 8, false, Recompute::none) == Approx(sbh * (8 + 24 / t + 2 * a * s / (h * t))));
  CHECK(layer_activation_bytes(m, 4, 8, true, Recompute::selective) == Approx(sbh * 32 / t));
  CHECK(layer_activation_bytes(m, 4, 8, true, Recompute::none, 1.0, AttentionKernel::flash) ==
        Approx(sbh * 32 / t + 4 * a * s * b / t));
  CHECK(layer_activation_bytes(m, 4, 8, true, Recompute::full) == Approx(2 * sbh / t));  // the input only, as before
  // Parallel blocks (GPT-NeoX 20B trains without dropout): 6 outside instead of 8.
  m.parallel_residual = true;
  CHECK(layer_activation_bytes(m, 4, 8, false, Recompute::selective) == Approx(sbh * (6 + 24 / t)));
  CHECK(attention_score_bytes(m) == 2.0);
  m.dropout = 0.1;
  CHECK(attention_score_bytes(m) == 5.0);
}

TEST_CASE("without dropout the first stage keeps no embedding mask", "[memory][activations][dropout]") {
  // The embedding output's dropout mask (s·b·h bytes a micro-batch in flight)
  // is the only activation difference a full-recompute plan sees.
  Transformer m = gpt(8, 1024, 16, 1024, 51200);
  const Cluster c = a100_nodes(1);
  const HardwareProfile hw = flat_profile();
  Plan p = test::zero_plan(1, 1, 0, 2, 1);
  p.recompute = Recompute::full;
  const double with = predict_memory(m, p, c, hw).line(MemLine::activations);
  m.dropout = 0;
  const double without = predict_memory(m, p, c, hw).line(MemLine::activations);
  // The recomputed layer also drops its two masks and its scores' mask and dropout output.
  const double sbh = 1024.0 * 2 * 1024;
  CHECK(with - without == Approx(sbh + 2 * sbh + 3.0 * 16 * 1024.0 * 1024 * 2));
}

// 16-bit optimizer states. Oracle: ZeRO's (2 + 2 + K)Ψ with K the bytes of the
// states (Rajbhandari et al. 2020, §3.1: K = 12 for fp32 master, momentum and
// variance): K = 4 with bf16 masters and moments beside bf16 parameters (NeMo's
// distributed_fused_adam optim.dtype bf16, where NeMo's setup_optimization sets
// store_params false: the master is the parameters, only the moments are
// kept), 6 with fp16 masters beside them (a copy of another dtype) and with
// fp16 masters beside fp16 parameters under the ZeRO paper's and the engines'
// accountings (Megatron-Core's Transformer Engine FusedAdam keeps its
// master_weights copy), 8 with fp32
// masters and bf16 moments (DeepSeek-V3), 6 with
// those masters kept as 16-bit remainders (Megatron-Core's default under its
// precision-aware optimizer), 4 for an fp32 model's bf16 moments alone.
TEST_CASE("16-bit optimizer states: ZeRO's K at the states' width", "[memory][optimizer]") {
  const Transformer m = gpt(8, 2048, 16, 2048, 50304);
  const Cluster c = a100_nodes(1);
  Plan p = test::zero_plan(8, 1, 1, 1, 1);
  p.precision = Precision::bf16;
  const double psi = stage_params(m, p);
  auto optimizer = [&](Precision master, Precision moments, bool remainders) {
    p.master_dtype = master;
    p.moments_dtype = moments;
    p.param_remainders = remainders;
    REQUIRE_FALSE(check_plan(p, m, c).has_value());
    return predict_memory(m, p, c, flat_profile()).line(MemLine::optimizer);
  };
  CHECK(optimizer(Precision::fp32, Precision::fp32, false) == Approx(12 * psi / 8));
  CHECK(optimizer(Precision::bf16, Precision::bf16, false) == Approx(4 * psi / 8));
  CHECK(optimizer(Precision::fp32, Precision::bf16, false) == Approx(8 * psi / 8));
  CHECK(optimizer(Precision::fp32, Precision::bf16, true) == Approx(6 * psi / 8));
  CHECK(optimizer(Precision::fp16, Precision::fp16, false) == Approx(6 * psi / 8));
  // The parameters and gradients are the training precision's whatever the states.
  CHECK(predict_memory(m, p, c, flat_profile()).line(MemLine::params) == Approx(2 * psi));
  CHECK(predict_memory(m, p, c, flat_profile()).line(MemLine::grads) == Approx(2 * psi));
  // fp16 parameters: an fp16 master is Megatron-Core's copy, a bf16 one too.
  p.precision = Precision::fp16;
  CHECK(optimizer(Precision::fp16, Precision::fp16, false) == Approx(6 * psi / 8));
  CHECK(optimizer(Precision::bf16, Precision::bf16, false) == Approx(6 * psi / 8));
  // ztune's executor keeps no copy of a master of its parameters' own dtype,
  // fp16 or bf16 (OptimizerStates::params_are_master).
  HardwareProfile executor = flat_profile();
  executor.engine.executor = true;
  p.master_dtype = p.moments_dtype = Precision::fp16;
  CHECK(predict_memory(m, p, c, executor).line(MemLine::optimizer) == Approx(4 * psi / 8));
  p.precision = Precision::bf16;
  p.master_dtype = p.moments_dtype = Precision::bf16;
  CHECK(predict_memory(m, p, c, executor).line(MemLine::optimizer) == Approx(4 * psi / 8));
  // fp32 training: the parameters are the master, Adam keeps its two moments.
  p.precision = Precision::fp32;
  CHECK(optimizer(Precision::fp32, Precision::bf16, false) == Approx(4 * psi / 8));
  CHECK(optimizer(Precision::fp32, Precision::fp32, false) == Approx(8 * psi / 8));
}

// Megatron's distributed optimizer with 16-bit main gradients keeps an fp32
// copy of its gradient shard for the fp32 optimizer (16 bytes a parameter); a
// precision-aware optimizer reads the 16-bit shard (TE FusedAdam's decoupled
// gradients, Apex DistributedFusedAdam with dtype = grad_sync_dtype): no copy.
TEST_CASE("Megatron accounting with 16-bit states: no fp32 copy of the gradient shard",
          "[memory][megatron][optimizer]") {
  const double psi = 1e9;
  for (int d : {1, 2, 8}) {
    CHECK(model_state_bytes(psi, d, 1, StateAccounting::megatron, Precision::bf16, 1, Precision::bf16).optimizer ==
          Approx(16 * psi / d));
    const auto nemo = model_state_bytes(psi, d, 1, StateAccounting::megatron, Precision::bf16, 1, Precision::bf16,
                                        {Precision::bf16, Precision::bf16, false});
    CHECK(nemo.optimizer == Approx(6 * psi / d));
    CHECK(nemo.grads == Approx(2 * psi));
    CHECK(nemo.params == Approx(2 * psi));
    // fp32 main gradients (Megatron's bf16 default) and fp32 masters, bf16 moments.
    CHECK(model_state_bytes(psi, d, 1, StateAccounting::megatron, Precision::bf16, 1, std::nullopt,
                            {Precision::fp32, Precision::bf16, false})
              .total() == Approx(2 * psi + 4 * psi + 8 * psi / d));
    // DeepSpeed's and the paper's accountings take the same K.
    CHECK(model_state_bytes(psi, d, 1, StateAccounting::paper, Precision::bf16, 1, std::nullopt,
                            {Precision::bf16, Precision::bf16, false})
              .total() == Approx(4 * psi + 6 * psi / d));
    CHECK(model_state_bytes(psi, d, 2, StateAccounting::deepspeed, Precision::fp16, 1, std::nullopt,
                            {Precision::fp16, Precision::fp16, false})
              .total() == Approx(2 * psi + 6 * psi / d + 6 * psi / d));
  }
}

// With whole-layer recomputation the layer being re-materialised (its whole
// Korthikanti activations, W) and the logits with their fp32 softmax
// (L = s·b·V/t · (2 + 4) bytes) take turns: the loss's backward frees L
// before the last layer is recomputed when each micro-batch's backward follows
// its forward (no pipeline, 1F1B). The stage then peaks at the checkpoints +
// max(W, L): the logits line keeps max(0, L − W). Interleaved and GPipe
// schedules run other forwards in between: L counted whole there, as without
// recomputation.
TEST_CASE("full recomputation's working layer and the logits take turns on a 1F1B last stage",
          "[memory][activations][logits]") {
  const double s = 1024, b = 8, h = 1024, a = 16, V = 50304, t = 1;
  const Transformer m = gpt(8, 1024, 16, 1024, 50304);
  const Cluster c = a100_nodes(1);
  Plan p = test::zero_plan(1, 1, 0, 8, 1);
  p.precision = Precision::bf16;
  const double logits = s * b * V / t * 6;
  const double working = s * b * h * (34 + 5 * a * s / h) / t;  // Korthikanti's count, no recomputation
  REQUIRE(logits > working);
  CHECK(predict_memory(m, p, c, flat_profile()).line(MemLine::logits) == Approx(logits));  // nothing recomputed
  p.recompute = Recompute::full;
  const MemoryPrediction full = predict_memory(m, p, c, flat_profile());
  CHECK(full.line(MemLine::logits) == Approx(logits - working));
  CHECK(full.line(MemLine::activations) == Approx(8 * 2 * s * b * h + working + s * b * h));  // + embedding mask
  // Two stages, 1F1B: the last stage's turns are the same; GPipe counts both.
  p = test::zero_plan(1, 1, 0, 8, 2);
  p.pp = 2;
  p.precision = Precision::bf16;
  p.recompute = Recompute::full;
  CHECK(predict_memory(m, p, c, flat_profile()).line(MemLine::logits) == Approx(logits - working));
  p.schedule = Schedule::gpipe;
  CHECK(predict_memory(m, p, c, flat_profile()).line(MemLine::logits) == Approx(logits));
}

TEST_CASE("Megatron's block recomputation: N layers a chunk as checkpoints, the rest whole", "[memory][activations][block]") {
  // Korthikanti's 22B (s 2048, h 6144, a 64, b 4), no tp: a whole layer
  // keeps s·b·h·(34 + 5as/h), a recomputed one its 2·s·b·h input.
  const double h = 6144, s = 2048, a = 64, b = 4, L = 48;
  const Transformer m = gpt(48, 6144, 64, 2048, 51200);
  Plan p = full_recompute_dp8();
  const double sbh = s * b * h;
  const double whole = sbh * (34 + 5 * a * s / h);
  const double checkpoint = 2 * sbh;
  const double embedding_mask = sbh;
  const HardwareProfile hw = flat_profile();
  // N = 10 of the 48 layers: 10 checkpoints and 38 whole layers. Backward
  // reaches the 10 recomputed layers last, when the 38 are freed: the layer
  // re-materialised then is not on top of them (full recomputation's is).
  p.recompute_num_layers = 10;
  CHECK(predict_memory(m, p, a100_nodes(1), hw).line(MemLine::activations) ==
        Approx(10 * checkpoint + (L - 10) * whole + embedding_mask));
  // N at or above the chunk's layers is every layer: full recomputation.
  p.recompute_num_layers = 48;
  const double full = predict_memory(m, p, a100_nodes(1), hw).line(MemLine::activations);
  CHECK(full == Approx(L * checkpoint + whole + embedding_mask));
  p.recompute_num_layers = 500;
  CHECK(predict_memory(m, p, a100_nodes(1), hw).line(MemLine::activations) == Approx(full));

  // Pipelined, 1F1B: pp 4 × 12 layers, stage 0 holds 4 micro-batches, each
  // its chunk's first N checkpoints and the rest whole. Interleaved with v 2:
  // chunks of 6 layers, N of each (min(N, 6)), Korthikanti §4.2.3's
  // 4·(1 + 3/8) = 5.5 micro-batches of 12 layers in flight on stage 0.
  p.dp = 1;
  p.pp = 4;
  p.zero_stage = 0;
  p.grad_accum = 8;
  p.global_batch = 32;
  p.recompute_num_layers = 2;
  CHECK(predict_memory(m, p, a100_nodes(1), hw).line(MemLine::activations) ==
        Approx(4 * (2 * checkpoint + 10 * whole) + 4 * embedding_mask));
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 2;
  CHECK(recomputed_layers(p, 12) == 4);
  CHECK(predict_memory(m, p, a100_nodes(1), hw).line(MemLine::activations) ==
        Approx(5.5 * (4 * checkpoint + 8 * whole) + 5.5 * embedding_mask));
  p.recompute_num_layers = 7;  // more than a chunk's 6: every layer
  CHECK(recomputed_layers(p, 12) == 12);
}

TEST_CASE("the fewest layers a chunk recomputes that fit: bisection equals the brute-force scan",
          "[memory][recompute][block]") {
  // GPT-3 175B's shape (96 layers), tp 8 × pp 8 on 80 GB, 1F1B and
  // interleaved, micro-batches 1..8: the oracle tries every N of the chunk.
  const Transformer m = gpt(96, 12288, 96, 2048, 51200);
  const Cluster c = a100_nodes(8);
  const HardwareProfile hw = flat_profile();
  int found = 0;
  for (const int v : {1, 3}) {
    for (const int mb : {1, 2, 4, 8}) {
      Plan p = test::zero_plan(1, 8, 1, mb, 16 * mb);
      p.pp = 8;
      p.sequence_parallel = true;
      p.virtual_stages = v;
      p.schedule = v > 1 ? Schedule::interleaved : Schedule::one_f_one_b;
      p.recompute = Recompute::full;
      const int chunk = 12 / v;
      int expected = 0;
      for (int n = 1; n < chunk && expected == 0; ++n) {
        Plan q = p;
        q.recompute_num_layers = n;
        if (predict_memory(m, q, c, hw).fits()) expected = n;
      }
      MemoryPrediction fitted;
      INFO("v " << v << " mb " << mb);
      CHECK(fewest_recomputed_layers(m, p, c, hw, MemoryOptions{}, &fitted) == expected);
      if (expected > 0) {
        Plan q = p;
        q.recompute_num_layers = expected;
        CHECK(fitted.gpu_total_bytes == Approx(predict_memory(m, q, c, hw).gpu_total_bytes));
        ++found;
      }
    }
  }
  CHECK(found >= 2);
  // Stated chunks differing by one (Megatron-Core's accounting layout: 96 + 2
  // over pp 2 × v 7, chunks of 7, the ends 6): N runs to the largest chunk's
  // 7 − 1, not to the average's rounded-down 6 − 1 (an audit's find: N = 6
  // fit and was never offered).
  const Cluster wide = a100_nodes(64);
  for (const int mb : {1, 2, 3, 4}) {
    Plan p = test::zero_plan(32, 8, 1, mb, 14);
    p.pp = 2;
    p.sequence_parallel = true;
    p.virtual_stages = 7;
    p.schedule = Schedule::interleaved;
    p.recompute = Recompute::full;
    p.chunk_layers = chunk_layers_accounting(96, 2, 7, true, true);
    p.stage_layers = stage_sums_of_chunks(p.chunk_layers, 2);
    REQUIRE_FALSE(check_plan(p, m, wide).has_value());
    int expected = 0;
    for (int n = 1; n < 7 && expected == 0; ++n) {
      Plan q = p;
      q.recompute_num_layers = n;
      if (predict_memory(m, q, wide, hw).fits()) expected = n;
    }
    INFO("chunks, mb " << mb << ": brute force " << expected);
    CHECK(fewest_recomputed_layers(m, p, wide, hw, MemoryOptions{}) == expected);
    if (expected == 6) ++found;
  }
  CHECK(found >= 3);
}

TEST_CASE("the executor's largest gradient bucket: whole layers up to the size, the word embedding's unit, the stage",
          "[memory][executor][zero]") {
  // ParamStore's greedy grouping of whole units: 2.5 layers' worth holds 2
  // layers; less than a layer is one layer; a word embedding larger than the
  // layers' buckets is a bucket of its own; never more than the stage.
  const Transformer m = gpt(8, 1024, 16, 1024, 51200);
  Plan p = test::zero_plan(4, 1, 3, 1, 1);
  const double layer = m.params_per_layer(), word = 51200.0 * 1024;
  p.reduce_bucket_elems = 2.5 * layer;
  CHECK(executor_bucket_elems(m, p, 1e12) == Approx(word));  // 52.4 M elements > 2 layers (25.2 M)
  p.reduce_bucket_elems = 6.5 * layer;
  CHECK(executor_bucket_elems(m, p, 1e12) == Approx(6 * layer));
  p.reduce_bucket_elems = 0.3 * layer;
  p.tp = 8;  // a layer and the embedding split 8 ways
  CHECK(executor_bucket_elems(m, p, 1e12) == Approx(word / 8));
  p.reduce_bucket_elems = 5e8;
  CHECK(executor_bucket_elems(m, p, 3e6) == Approx(3e6));
}

// ZeRO-3 under a pipeline (Plan::zero3_held_through_step, FSDP2 under
// torch.distributed.pipelining): the ZeRO paper's stage-3 partitions (2Ψ/N,
// 2Ψ/N, 12Ψ/N), plus what the pipeline keeps through the step: the stage's
// whole 16-bit parameters, gathered once (reshard_after_forward False), and
// its whole gradients accumulated in the reduction dtype (FSDP2's
// unsharded_accumulated_grad, upcast to reduce_dtype).
TEST_CASE("ZeRO-3 under a pipeline: the stage's parameters and gradients whole beside the partitions",
          "[memory][zero][pipeline]") {
  const Transformer m = gpt(8, 2048, 16, 2048, 50304);
  const Cluster c = a100_nodes(4);
  Plan p = test::zero_plan(8, 1, 3, 1, 8);
  p.pp = 4;
  p.precision = Precision::bf16;
  p.recompute = Recompute::full;
  REQUIRE_FALSE(check_plan(p, m, c).has_value());
  REQUIRE(p.zero3_held_through_step());
  // The most loaded stage is the last (the logits outweigh stage 0's four
  // checkpoints in flight): 2 layers of 12h² + 13h, the tied word embedding
  // and the final LayerNorm.
  const double h = 2048;
  const double psi = 2 * (12 * h * h + 13 * h) + 50304 * h + 2 * h;
  const auto mp = predict_memory(m, p, c, flat_profile());
  CHECK(mp.line(MemLine::params) == Approx(2 * psi / 8));
  CHECK(mp.line(MemLine::optimizer) == Approx(12 * psi / 8));
  CHECK(mp.line(MemLine::grads) == Approx(2 * psi / 8 + 2 * psi));  // bf16 reduction: the stored precision
  CHECK(mp.line(MemLine::zero3_gathered) == Approx(2 * psi));
  p.grad_reduce_dtype = Precision::fp32;  // torchtitan's mixed_precision_reduce
  CHECK(predict_memory(m, p, c, flat_profile()).line(MemLine::grads) == Approx(2 * psi / 8 + 4 * psi));
  // Without the pipeline ZeRO-3 gathers layer by layer and reduces per micro-batch: no whole copies.
  Plan flat = test::zero_plan(32, 1, 3, 1, 8);
  flat.precision = Precision::bf16;
  const auto mf = predict_memory(m, flat, c, flat_profile());
  CHECK(mf.line(MemLine::grads) == Approx(2 * stage_params(m, flat) / 32));
  CHECK(mf.line(MemLine::zero3_gathered) < stage_params(m, flat));
}

TEST_CASE("the search's bounded memory prediction: nullopt only for a plan that does not fit, above the bar",
          "[memory][search]") {
  // The contract predict_memory_unless_above gives the search's prune pass:
  // it answers predict_memory's prediction, or nullopt for a plan whose GPU
  // total exceeds the usable memory and `bar` times it. With no bar
  // (-inf) it is nullopt exactly when the plan does not fit on the GPU; with
  // +inf never. Plans: GPT-3 175B's shape on 80 GB, 1F1B with balanced
  // uneven stages (96 layers on pp 7 and 10) and equal ones, each with and
  // without full recomputation, and stated interleaved chunks (Megatron-Core's
  // accounting layout), micro-batches 1..16:
  // some fit, some overflow by a little, some by far.
  const Transformer m = gpt(96, 12288, 96, 2048, 51200);
  const Cluster c = a100_nodes(64);
  const HardwareProfile hw = flat_profile();
  std::vector<Plan> plans;
  for (const int mb : {1, 2, 4, 8, 16}) {
    for (const int pp : {7, 8, 10}) {
      Plan p = test::zero_plan(1, 8, 1, mb, 16 * mb);
      p.pp = pp;
      p.sequence_parallel = true;
      plans.push_back(p);
      p.recompute = Recompute::full;
      plans.push_back(p);
    }
    Plan q = test::zero_plan(32, 8, 1, mb, 14 * mb);
    q.pp = 2;
    q.sequence_parallel = true;
    q.virtual_stages = 7;
    q.schedule = Schedule::interleaved;
    q.chunk_layers = chunk_layers_accounting(96, 2, 7, true, true);
    q.stage_layers = stage_sums_of_chunks(q.chunk_layers, 2);
    plans.push_back(q);
  }
  const double inf = std::numeric_limits<double>::infinity();
  int fit = 0, over = 0, cut = 0;
  for (const Plan& p : plans) {
    REQUIRE_FALSE(check_plan(p, m, c).has_value());
    const MemoryPrediction full = predict_memory(m, p, c, hw);
    (full.fits_gpu ? fit : over) += 1;
    const double pressure = full.gpu_total_bytes / full.gpu_usable_bytes;
    for (const double bar : {-inf, 0.5, 1.0, 1.2, 2.0, 4.0, inf}) {
      INFO("mb " << p.micro_batch << " pp " << p.pp << " v " << p.virtual_stages << " bar " << bar << " pressure "
                 << pressure);
      const auto bounded = predict_memory_unless_above(m, p, c, hw, MemoryOptions{}, bar);
      if (bounded) {
        CHECK(bounded->gpu_total_bytes == full.gpu_total_bytes);
        CHECK(bounded->stage == full.stage);
        CHECK(bounded->fits() == full.fits());
      } else {
        ++cut;
        CHECK_FALSE(full.fits_gpu);
        CHECK(pressure > bar);
      }
      if (bar == -inf) CHECK(bounded.has_value() == full.fits_gpu);
      if (bar == inf) CHECK(bounded.has_value());
    }
  }
  // The set holds both kinds, and the bound cut some plans short.
  CHECK(fit >= 3);
  CHECK(over >= 3);
  CHECK(cut >= 6);
}
