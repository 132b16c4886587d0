// Time model against closed forms (Korthikanti eq. 7, Narayanan's 96·B·s·L·h²
// formula, the 1F1B bubble (p−1)/m and its interleaved /v), the GEMM roofline,
// and the invariants of STYLE.md #11 (parts sum to the total, tp = 1 ⇒ no TP
// communication, no recompute ⇒ no recompute time, stage 0 ⇒ no reduce-scatter).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "cost_model_fixtures.hpp"
#include "ztune/model/flops.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/time_model.hpp"

using namespace ztune;

namespace {

using test::gpt;
using test::zero_plan;
Cluster a100(int nodes) { return test::a100_nodes(nodes); }

HardwareProfile profile() {
  HardwareProfile hw;
  hw.name = "test";
  hw.gemm_efficiency = {{1e12, 0.8}, {1e9, 0.4}, {1e6, 0.05}};
  hw.attention_gemm_factor = 0.7;
  hw.kernel_launch_s = 3e-6;
  hw.engine.host_op_s = 10e-6;
  hw.engine.microbatch_overhead_s = 1e-3;
  hw.engine.step_overhead_s = 5e-3;
  hw.intra_node = {0.75, 0, 20e-6};
  hw.inter_node = {0.9, 0, 20e-6};
  return hw;
}

// One GEMM efficiency (0.6) at every size and no launch cost: time ∝ FLOPs.
HardwareProfile constant_efficiency_profile() {
  HardwareProfile hw = profile();
  hw.gemm_efficiency = {{1e15, 0.6}, {1, 0.6}};
  hw.kernel_launch_s = 0;
  return hw;
}

// One sequence through the flash kernel on tp 8.
Plan one_sequence_flash_plan() {
  Plan q;
  q.tp = 8;
  q.micro_batch = 1;
  q.global_batch = 1;
  q.attention = AttentionKernel::flash;
  return q;
}

// Two sequences on tp 8: the closed-form elementwise and attention-chain
// tests' plan (with gpt(24, 4096, 32, 2048, 51200) on one A100).
Plan two_sequences_tp8() {
  Plan p;
  p.tp = 8;
  p.micro_batch = 2;
  p.global_batch = 2;
  return p;
}

// The HBM bytes per second a memory-bound kernel moves under `hw`.
double achieved_hbm(const Cluster& c, const HardwareProfile& hw) {
  return c.node.gpu.hbm_bandwidth_gbps * 1e9 * hw.memory_bandwidth_efficiency;
}

double sum_parts(const TimePrediction& t) {
  double s = 0;
  for (double v : t.parts) s += v;
  return s;
}

}  // namespace

TEST_CASE("model FLOPs are Korthikanti eq. 7, full recompute hardware FLOPs are Narayanan's", "[time][flops]") {
  for (auto [L, h, a, s, V] : {std::tuple{96, 12288, 96, 2048, 51200}, std::tuple{24, 1024, 16, 1024, 50304}}) {
    const Transformer m = gpt(L, h, a, s, V);
    const double B = 64;
    const double hh = static_cast<double>(h) * h;
    const double eq7 = 72.0 * B * s * L * hh * (1 + s / (6.0 * h) + V / (12.0 * h * L));
    CHECK(model_flops_per_iteration(m, B) == Approx(eq7).epsilon(1e-12));
    Plan p;
    p.global_batch = 64;
    p.recompute = Recompute::full;
    const double narayanan = 96.0 * B * s * L * hh * (1 + s / (6.0 * h) + V / (16.0 * L * h));
    CHECK(hardware_flops_per_iteration(m, p) == Approx(narayanan).epsilon(1e-12));
    // Korthikanti eq. 8: selective recompute adds the attention score GEMMs, 4·B·s²·h per layer.
    p.recompute = Recompute::selective;
    CHECK(hardware_flops_per_iteration(m, p) == Approx(eq7 + 4.0 * B * s * s * h * L).epsilon(1e-12));
  }
}

TEST_CASE("flash attention: backward recomputes QKᵀ (HFU), and only the causal blocks are timed", "[time][flash]") {
  const Transformer m = gpt(96, 12288, 96, 2048, 51200);
  const double B = 64, s = 2048, h = 12288, L = 96;
  Plan p;
  p.global_batch = 64;
  p.attention = AttentionKernel::flash;
  // Model FLOPs stay Korthikanti's eq. 7 (MFU compares kernels on the same
  // count); hardware FLOPs add the backward's QKᵀ, 2·B·s²·h per layer.
  const double eq7 = model_flops_per_iteration(m, B);
  CHECK(hardware_flops_per_iteration(m, p) == Approx(eq7 + 2.0 * B * s * s * h * L).epsilon(1e-12));
  p.recompute = Recompute::full;
  const double narayanan = 96.0 * B * s * L * h * h * (1 + s / (6.0 * h) + 51200 / (16.0 * L * h));
  CHECK(hardware_flops_per_iteration(m, p) == Approx(narayanan + 2.0 * B * s * s * h * L).epsilon(1e-12));

  // One efficiency at every size, no launch cost: time ∝ FLOPs. The forward
  // computes the 17 of 32 blocks of 128×128 on or below the diagonal (s = 2048:
  // 16 blocks a side) of 4·s²·d FLOPs per head; backward 2.5× the forward.
  const HardwareProfile hw = constant_efficiency_profile();
  Plan q = one_sequence_flash_plan();
  const Cluster c = a100(1);
  const LayerCost lc = layer_cost(m, q, c, hw);
  const double heads = 96.0 / 8, d = 128;
  const double fwd = 4.0 * s * s * d * heads * 17.0 / 32.0 / (312e12 * 0.6 * hw.attention_gemm_factor);
  CHECK(lc.fwd_attention_s == Approx(fwd));
  CHECK(lc.bwd_attention_s == Approx(2.5 * fwd));
  // The standard kernel computes the whole square and moves the s×s scores
  // through HBM: more time both ways.
  q.attention = AttentionKernel::standard;
  const LayerCost std_lc = layer_cost(m, q, c, hw);
  CHECK(std_lc.fwd_attention_s > 2.0 * fwd);
  CHECK(std_lc.bwd_attention_s > 1.6 * lc.bwd_attention_s);
}

TEST_CASE("cudnn attention: flash's memory and FLOPs, timed at the profile's cudnn factor", "[time][flash][cudnn]") {
  // Closed form: with one GEMM efficiency at every size and no launch cost, a
  // compute-bound fused kernel takes FLOPs / (peak · eff · factor), so the
  // cuDNN kernel's attention time is flash's × attention_factor / cudnn factor
  // and nothing else in the layer changes.
  const Transformer m = gpt(96, 12288, 96, 2048, 51200);
  HardwareProfile hw = constant_efficiency_profile();
  hw.attention_gemm_factor = 0.5;
  hw.cudnn_attention_factor = 0.8;
  const Cluster c = a100(1);
  Plan q = one_sequence_flash_plan();
  const LayerCost flash = layer_cost(m, q, c, hw);
  q.attention = AttentionKernel::cudnn;
  const LayerCost cudnn = layer_cost(m, q, c, hw);
  CHECK(cudnn.fwd_attention_s == Approx(flash.fwd_attention_s * 0.5 / 0.8));
  CHECK(cudnn.bwd_attention_s == Approx(flash.bwd_attention_s * 0.5 / 0.8));
  CHECK(cudnn.fwd_gemm_s == Approx(flash.fwd_gemm_s));
  CHECK(cudnn.bwd_weight_s == Approx(flash.bwd_weight_s));
  CHECK(cudnn.fwd_elementwise_s == Approx(flash.fwd_elementwise_s));
  Plan p;
  p.global_batch = 64;
  p.attention = AttentionKernel::flash;
  const double flash_flops = hardware_flops_per_iteration(m, p);
  const double flash_memory = predict_memory(m, p, c, hw).line(MemLine::activations);
  p.attention = AttentionKernel::cudnn;
  CHECK(hardware_flops_per_iteration(m, p) == Approx(flash_flops));
  CHECK(predict_memory(m, p, c, hw).line(MemLine::activations) == Approx(flash_memory));
  // The context-parallel ring's blocks take the same factor.
  Plan r = one_sequence_flash_plan();
  r.tp = 1;
  r.cp = 2;
  const Cluster two = a100(1);
  const double ring_flash = layer_cost(m, r, two, hw).fwd_attention_s;
  r.attention = AttentionKernel::cudnn;
  CHECK(layer_cost(m, r, two, hw).fwd_attention_s == Approx(ring_flash * 0.5 / 0.8));
}

TEST_CASE("eager attention: standard's FLOPs and memory, two more passes over the scores each way",
          "[time][eager]") {
  // Closed form: scores = b·a/t·s² elements per layer; the eager chain runs
  // the scaling and the masking as kernels of their own, a read and a write
  // of 2 bytes each, in forward (8 bytes per score) and their gradients in
  // backward (8), at the achieved HBM bandwidth (no launch cost here).
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  const HardwareProfile hw = constant_efficiency_profile();
  const Cluster c = a100(1);
  Plan p = two_sequences_tp8();
  const LayerCost standard = layer_cost(m, p, c, hw);
  p.attention = AttentionKernel::eager;
  const LayerCost eager = layer_cost(m, p, c, hw);
  const double scores = 2.0 * 32 / 8 * 2048.0 * 2048.0;
  const double hbm = achieved_hbm(c, hw);
  CHECK(eager.fwd_attention_s - standard.fwd_attention_s == Approx(8.0 * scores / hbm));
  CHECK(eager.bwd_attention_s - standard.bwd_attention_s == Approx(8.0 * scores / hbm));
  CHECK(eager.fwd_gemm_s == Approx(standard.fwd_gemm_s));
  CHECK(eager.fwd_elementwise_s == Approx(standard.fwd_elementwise_s));
  // Selective recomputation re-runs the attention core: the eager one.
  p.recompute = Recompute::selective;
  CHECK(layer_cost(m, p, c, hw).recompute_s == Approx(eager.fwd_attention_s));
  p.recompute = Recompute::none;
  // The same FLOPs and activations as the fused kernel (autograd keeps what it keeps).
  Plan q = p;
  q.attention = AttentionKernel::standard;
  CHECK(hardware_flops_per_iteration(m, p) == Approx(hardware_flops_per_iteration(m, q)));
  CHECK(predict_memory(m, p, c, hw).line(MemLine::activations) ==
        Approx(predict_memory(m, q, c, hw).line(MemLine::activations)));
  CHECK(predict_time(m, p, c, hw).iteration_s > predict_time(m, q, c, hw).iteration_s);
}

TEST_CASE("unfused bias kernels: the bias add, dropout and residual add apart, bytes and ops counted by hand",
          "[time][fusion]") {
  // Closed form (2-byte bf16 values, tokens = b·s = 4096 per micro-batch, tp 8,
  // no sequence parallelism so the hidden-state ops run on all s·b·h):
  // each of the two bias-dropout-adds, fused 2 reads + 1 write + a 1-byte mask,
  // runs unfused as the bias add (read, write), dropout (read, write, mask)
  // and residual add (2 reads, write): 4 values more per element, so
  // 2·4·s·b·h·2 bytes; the MLP's bias add before the GeLU reads and writes its
  // 4h/t outputs once more: 2·s·b·4h/t·2 bytes. Backward moves twice that.
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  const HardwareProfile hw = constant_efficiency_profile();
  const Cluster c = a100(1);
  Plan p = two_sequences_tp8();
  const LayerCost fused = layer_cost(m, p, c, hw);
  p.bias_fusion = false;
  const LayerCost apart = layer_cost(m, p, c, hw);
  const double tokens = 2.0 * 2048;
  const double extra = 2.0 * 4.0 * tokens * 4096 * 2 + 2.0 * tokens * 4.0 * 4096 / 8 * 2;
  const double hbm = achieved_hbm(c, hw);
  CHECK(apart.fwd_elementwise_s - fused.fwd_elementwise_s == Approx(extra / hbm));
  CHECK(apart.bwd_input_s - fused.bwd_input_s == Approx(2.0 * extra / hbm));
  CHECK(apart.fwd_gemm_s == Approx(fused.fwd_gemm_s));
  CHECK(apart.fwd_attention_s == Approx(fused.fwd_attention_s));
  // Five kernels more each way (two per bias-dropout-add, the bias add): five
  // more host ops forward, in backward and in full recomputation's forward.
  CHECK(apart.host_fwd_s - fused.host_fwd_s == Approx(5 * hw.engine.host_op_s));
  CHECK(apart.host_bwd_s - fused.host_bwd_s == Approx(5 * hw.engine.host_op_s));
  // The same FLOPs and activations: autograd keeps what the fused kernels keep.
  Plan q = p;
  q.bias_fusion = true;
  CHECK(hardware_flops_per_iteration(m, p) == Approx(hardware_flops_per_iteration(m, q)));
  CHECK(predict_memory(m, p, c, hw).line(MemLine::activations) ==
        Approx(predict_memory(m, q, c, hw).line(MemLine::activations)));

  // A Llama block (no biases, SwiGLU) with sequence parallelism: the dropout
  // and the add still run apart (2 values more per element of s·b·h/t each),
  // no bias add, and SwiGLU's product is a kernel of its own: silu (read,
  // write f) and the product (2 reads, write) against the fused 3 values per
  // output: 2·s·b·f/t·2 bytes more.
  Transformer l = gpt(24, 4096, 32, 2048, 51200);
  l.bias = false;
  l.activation = Activation::swiglu;
  l.ffn_hidden = 11008;
  l.norm = NormKind::rmsnorm;
  Plan r = q;
  r.sequence_parallel = true;
  const LayerCost lf = layer_cost(l, r, c, hw);
  r.bias_fusion = false;
  const LayerCost la = layer_cost(l, r, c, hw);
  const double l_extra = 2.0 * 2.0 * tokens * 4096 / 8 * 2 + 2.0 * tokens * 11008.0 / 8 * 2;
  CHECK(la.fwd_elementwise_s - lf.fwd_elementwise_s == Approx(l_extra / hbm));
  CHECK(la.host_fwd_s - lf.host_fwd_s == Approx(3 * hw.engine.host_op_s));
}

TEST_CASE("GEMM roofline: compute-bound at the table's efficiency, memory-bound when thin", "[time][gemm]") {
  const Cluster c = a100(1);
  HardwareProfile hw = profile();
  hw.kernel_launch_s = 0;
  hw.memory_bandwidth_efficiency = 1.0;
  const GemmShape big{8192, 8192, 8192};
  CHECK(gemm_time(big, Precision::bf16, c.node.gpu, hw) == Approx(big.flops() / (312e12 * 0.8)));
  // k = 1: 2·m·n FLOPs but m·n outputs to write — HBM-bound.
  const GemmShape thin{16384, 16384, 1};
  CHECK(gemm_time(thin, Precision::bf16, c.node.gpu, hw) == Approx(thin.elements() * 2 / 2039e9));
  // Between table rows the efficiency is interpolated in log(FLOPs).
  CHECK(hw.gemm_efficiency_at(std::sqrt(1e12 * 1e9)) == Approx(0.6));
  CHECK(hw.gemm_efficiency_at(1e15) == Approx(0.8));
  CHECK(hw.gemm_efficiency_at(1) == Approx(0.05));
}

TEST_CASE("GEMM waves: tiles counted by hand, split-K under one wave, the cost follows", "[time][gemm]") {
  // An A100: 108 SMs, 128×128 tiles, split-K slices at least 256 deep.
  const GemmWaves w{108, 128, 128, 256};
  // 8 × 8 = 64 tiles, k too shallow to split twice (4096 / 256 = 16 but 108 / 64 = 1): 64 of 108 SMs busy.
  CHECK(w.utilization(1024, 1024, 4096) == Approx(64.0 / 108.0));
  // 8 tiles of a tensor-parallel wgrad (1024 × 128), k = 8192 deep: split 13 ways (108 / 8), 104 busy.
  CHECK(w.utilization(1024, 128, 8192) == Approx(104.0 / 108.0));
  // ... but not deeper than k allows: k = 512 gives 2 slices of 256.
  CHECK(w.utilization(1024, 128, 512) == Approx(16.0 / 108.0));
  // 109 tiles: one more than a wave, so two waves' time.
  CHECK(w.utilization(128 * 109, 128, 4096) == Approx(109.0 / 216.0));
  // Large and square: 64 × 64 = 4096 tiles in 38 waves.
  CHECK(w.utilization(8192, 8192, 8192) == Approx(4096.0 / (38.0 * 108.0)));
  // A partial tile is a whole tile; a batch multiplies the tiles.
  CHECK(w.utilization(129, 128, 64, 100) == Approx(200.0 / 216.0));
  // No SM count (CPU ranks): nothing is quantized.
  CHECK(GemmWaves{}.utilization(1, 1, 1) == 1.0);

  // In the cost: two GEMMs of equal FLOPs at one table efficiency take times in
  // the inverse ratio of their waves' utilization.
  const Cluster c = a100(1);
  HardwareProfile hw = constant_efficiency_profile();
  hw.gemm_waves = w;
  const GemmShape full{128 * 108, 128, 8192};      // 108 tiles: one full wave
  const GemmShape spill{128 * 109, 128, 8192 * 108.0 / 109.0};  // 109 tiles, same FLOPs: two waves
  REQUIRE(full.flops() == Approx(spill.flops()));
  CHECK(gemm_time(spill, Precision::bf16, c.node.gpu, hw) / gemm_time(full, Precision::bf16, c.node.gpu, hw) ==
        Approx(216.0 / 109.0));
  CHECK(hw.gemm_efficiency_of(128 * 108, 128, 8192) == Approx(0.6));
}

TEST_CASE("parts sum to the iteration, throughput and MFU follow from it", "[time]") {
  const Transformer m = gpt(32, 4096, 32, 2048, 51200);
  const Cluster c = a100(4);
  Plan p;
  p.tp = 4;
  p.pp = 2;
  p.dp = 4;
  p.micro_batch = 2;
  p.grad_accum = 8;
  p.global_batch = 64;
  p.recompute = Recompute::selective;
  p.sequence_parallel = true;
  p.zero_stage = 1;
  const TimePrediction t = predict_time(m, p, c, profile());
  CHECK(sum_parts(t) == Approx(t.iteration_s));
  CHECK(t.tokens_per_s == Approx(64.0 * 2048 / t.iteration_s));
  CHECK(t.mfu == Approx(model_flops_per_iteration(m, 64) / (t.iteration_s * 32 * 312e12)));
  CHECK(t.hfu > t.mfu);
  for (double v : t.parts) CHECK(v >= 0);
}

TEST_CASE("invariants: tp 1 ⇒ no TP comm, no recompute ⇒ none, pp 1 ⇒ no bubble, dp 1 ⇒ no DP comm", "[time]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  const Cluster c = a100(1);
  Plan p;
  p.micro_batch = 4;
  p.grad_accum = 2;
  p.global_batch = 8;
  const TimePrediction t = predict_time(m, p, c, profile());
  CHECK(t.part(TimePart::tp_comm) == 0);
  CHECK(t.part(TimePart::recompute) == 0);
  CHECK(t.part(TimePart::bubble) == 0);
  CHECK(t.part(TimePart::pp_comm) == 0);
  CHECK(t.part(TimePart::dp_comm) == 0);
  CHECK(t.part(TimePart::zero3_gather) == 0);
  CHECK(t.part(TimePart::offload_stall) == 0);
  CHECK(t.hfu == Approx(t.mfu));

  Plan q = p;
  q.tp = 2;
  q.recompute = Recompute::full;
  const TimePrediction u = predict_time(m, q, c, profile());
  CHECK(u.part(TimePart::tp_comm) > 0);
  CHECK(u.part(TimePart::recompute) > 0);
  CHECK(u.hfu > u.mfu);
}

TEST_CASE("stage 0/1 reduce once per step, stage 2/3 reduce-scatter every micro-batch", "[time][zero]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  const Cluster c = a100(2);
  const HardwareProfile hw = profile();
  Plan p;
  p.dp = 16;
  p.micro_batch = 1;
  p.grad_accum = 4;
  p.global_batch = 64;
  for (int stage : {0, 1}) {
    p.zero_stage = stage;
    const DpSyncCost d = dp_sync_cost(m, p, c, hw);
    CHECK(d.per_microbatch_s == 0);
    CHECK(d.per_step_s > 0);
    CHECK((d.param_allgather_s > 0) == (stage == 1));
  }
  p.zero_stage = 2;
  DpSyncCost d2 = dp_sync_cost(m, p, c, hw);
  CHECK(d2.per_microbatch_s > 0);
  CHECK(d2.per_step_s == 0);
  // About (GAS + 1)Ψ per step: GAS gradient reduce-scatters plus one parameter all-gather.
  const double psi2 = 2 * stage_params(m, p);
  CHECK(d2.bytes_per_step == Approx(psi2 * (p.grad_accum + 1)));
  p.zero_stage = 3;
  const Zero3GatherCost z = zero3_gather_cost(m, p, c, hw);
  CHECK(z.fwd_s > 0);
  CHECK(z.bwd_s > 0);
  // Stage 3 moves ≈ 3Ψ per micro-batch: forward gather, backward gather, reduce-scatter.
  CHECK(z.bytes_per_pass * 2 + dp_sync_cost(m, p, c, hw).bytes_per_microbatch == Approx(3 * psi2));
}

// DeepSpeed's reduce_scatter false (its ZeRO stage 1 before March 2020): each
// gradient bucket all-reduced whole. Oracle: nccl-tests' bus factors, 2(n−1)/n
// for the all-reduce against (n−1)/n for the reduce-scatter, over the same
// busbw: the bandwidth term doubles, the latency term goes from n−1 ring steps
// to the all-reduce's (ring or tree, the fewer).
TEST_CASE("ZeRO-1/2 with reduce_scatter false all-reduce their buckets: twice the bandwidth term", "[time][zero]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  Cluster c = a100(2);
  c.intra_node.latency_us = c.inter_node.latency_us = 0;  // the bandwidth terms alone
  HardwareProfile hw = profile();
  hw.intra_node.base_latency_s = hw.inter_node.base_latency_s = 0;
  Plan p;
  p.dp = 16;
  p.micro_batch = 1;
  p.grad_accum = 4;
  p.global_batch = 64;
  for (int stage : {1, 2}) {
    p.zero_stage = stage;
    p.reduce_scatter = true;
    const DpSyncCost rs = dp_sync_cost(m, p, c, hw);
    p.reduce_scatter = false;
    const DpSyncCost ar = dp_sync_cost(m, p, c, hw);
    INFO("stage " << stage);
    const double rs_s = stage == 1 ? rs.per_step_s : rs.per_microbatch_s;
    const double ar_s = stage == 1 ? ar.per_step_s : ar.per_microbatch_s;
    CHECK(ar_s == Approx(2 * rs_s));
    CHECK(ar.param_allgather_s == Approx(rs.param_allgather_s));  // the parameters' all-gather is unchanged
    CHECK_FALSE(check_plan(p, m, c).has_value());
  }
  p.zero_stage = 3;
  CHECK_THAT(*check_plan(p, m, c), Catch::Matchers::Contains("$.communication.reduce_scatter"));
}

// Fill and drain cost (p−1)/v stage-times (Narayanan et al. 2021, §2.2), less
// the one send that the last stage's per-micro-batch time already holds.
TEST_CASE("bubble: (p−1)/m stage-times for 1F1B, (p−1)/(v·m) interleaved", "[time][pipeline]") {
  const Transformer m = gpt(48, 4096, 32, 2048, 51200);
  const Cluster c = a100(8);
  const HardwareProfile hw = profile();
  Plan p;
  p.tp = 8;
  p.pp = 4;
  p.micro_batch = 1;
  p.grad_accum = 16;
  p.global_batch = 16;
  const MicrobatchTimes mb = microbatch_times(m, p, c, hw);
  const TimePrediction t = predict_time(m, p, c, hw);
  REQUIRE(mb.pp_send > 0);
  CHECK((t.part(TimePart::bubble) + mb.pp_send) / (p.grad_accum * mb.layers_only) == Approx(3.0 / 16));
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 3;
  const MicrobatchTimes mbi = microbatch_times(m, p, c, hw);
  const TimePrediction ti = predict_time(m, p, c, hw);
  CHECK((ti.part(TimePart::bubble) + mbi.pp_send) / (p.grad_accum * mbi.layers_only) == Approx(3.0 / (3 * 16)));
}

// Megatron's sends are synchronous and sit on the sending stage's critical
// path: the slowest stage sets the period. With two stages both are end
// stages (2v−1 sends each); with more, a middle stage has 2v sends and no
// embedding or head, so it is the slowest only when 2v sends outweigh one
// send plus the edge work.
TEST_CASE("pipeline sends on the slowest stage", "[time][pipeline]") {
  const Cluster c = a100(8);
  const HardwareProfile hw = profile();
  Plan p;
  p.tp = 2;
  p.pp = 2;
  p.micro_batch = 1;
  p.grad_accum = 8;
  p.global_batch = 8;
  const Transformer big_head = gpt(8, 1024, 16, 2048, 256000);
  MicrobatchTimes mb = microbatch_times(big_head, p, c, hw);
  CHECK(mb.pp_comm == Approx(mb.pp_send));
  p.pp = 4;
  mb = microbatch_times(big_head, p, c, hw);
  CHECK(mb.pp_comm == Approx(mb.pp_send));  // the head outweighs a send: the last stage is slowest
  p.schedule = Schedule::interleaved;
  p.virtual_stages = 2;
  mb = microbatch_times(big_head, p, c, hw);
  CHECK(mb.pp_comm == Approx(3 * mb.pp_send));
}

namespace {
// The TP cases below: a 24-layer h 4096 GPT over tp 8 of one A100 node, micro-batch 2.
Plan tp8_microbatch2() {
  Plan p;
  p.tp = 8;
  p.micro_batch = 2;
  return p;
}
}  // namespace

TEST_CASE("layer cost: TP collectives per layer, with and without sequence parallelism", "[time][tp]") {
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  Plan p = tp8_microbatch2();
  LayerCost lc = layer_cost(m, p, c, hw);
  CHECK(lc.tp_collectives_fwd == 2);
  CHECK(lc.tp_bytes == Approx(2048.0 * 2 * 4096 * 2));
  CHECK(lc.tp_fwd_s == Approx(2 * collective_time(Collective::all_reduce, lc.tp_bytes, GroupPlacement{8, 8}, c, hw)));
  CHECK(lc.recompute_s == 0);
  CHECK(lc.tp_recompute_s == 0);
  p.sequence_parallel = true;
  p.recompute = Recompute::selective;
  lc = layer_cost(m, p, c, hw);
  CHECK(lc.tp_collectives_fwd == 4);
  CHECK(lc.tp_fwd_s == Approx(2 * (collective_time(Collective::all_gather, lc.tp_bytes, GroupPlacement{8, 8}, c, hw) +
                                   collective_time(Collective::reduce_scatter, lc.tp_bytes, GroupPlacement{8, 8}, c, hw))));
  CHECK(lc.recompute_s > 0);
  CHECK(lc.recompute_s < lc.fwd_s);
  CHECK(lc.tp_recompute_s == 0);  // selective recompute repeats no collective
  p.recompute = Recompute::full;
  lc = layer_cost(m, p, c, hw);
  CHECK(lc.recompute_s == Approx(lc.fwd_s));
  CHECK(lc.tp_recompute_s == Approx(lc.tp_fwd_s));
  // Per-GPU FLOPs: (24·s·b·h² + 4·s²·b·h)/t.
  const double s = 2048, b = 2, h = 4096;
  CHECK(lc.fwd_flops == Approx((24 * s * b * h * h + 4 * s * s * b * h) / 8));
}

// Transformer Engine's userbuffers (plan tp_comm_overlap): each sequence-
// parallel collective hides behind the one GEMM it is pipelined with. Oracle:
// the GEMM times by hand, 2·m·n·k/t FLOPs at the profile's one efficiency
// (0.6 of the A100's bf16 peak, compute-bound at these sizes), against the
// all-gather and reduce-scatter the unoverlapped plan pays (1 node, tp 8).
TEST_CASE("layer cost: TP communication overlap hides each collective behind its own GEMM", "[time][tp][tp_overlap]") {
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  const Cluster c = a100(1);
  HardwareProfile hw = constant_efficiency_profile();
  Plan p = tp8_microbatch2();
  p.sequence_parallel = true;
  const LayerCost plain = layer_cost(m, p, c, hw);
  const GroupPlacement g{8, 8};
  const double ag = collective_time(Collective::all_gather, plain.tp_bytes, g, c, hw);
  const double rs = collective_time(Collective::reduce_scatter, plain.tp_bytes, g, c, hw);
  REQUIRE(plain.tp_fwd_s == Approx(2 * ag + 2 * rs));
  REQUIRE(plain.tp_bwd_s == Approx(2 * ag));

  const double tokens = 2048.0 * 2, h = 4096, rate = c.node.gpu.peak_flops(p.precision) * 0.6;
  const double qkv = 2 * tokens * h * 3 * h / 8 / rate, proj = 2 * tokens * h * h / 8 / rate;
  const double fc = 2 * tokens * h * 4 * h / 8 / rate;  // FC1 and FC2 alike
  // The fixture's link makes each collective shorter than QKV and the MLP
  // GEMMs but longer than the projection: only the reduce-scatter after the
  // projection (and, in backward, the all-gather before its dgrad) can show.
  REQUIRE(ag < qkv);
  REQUIRE(rs < fc);
  REQUIRE(rs > proj);
  REQUIRE(ag > proj);

  p.tp_comm_overlap = true;
  hw.engine.tp_comm_overlap = 0;  // an engine without the overlap: nothing changes
  CHECK(layer_cost(m, p, c, hw).tp_fwd_s == Approx(plain.tp_fwd_s));
  hw.engine.tp_comm_overlap = 1;
  LayerCost lc = layer_cost(m, p, c, hw);
  CHECK(lc.tp_fwd_s == Approx(rs - proj));
  CHECK(lc.tp_bwd_s == Approx(ag - proj));
  CHECK(lc.tp_bwd_async_s == Approx(plain.tp_bwd_async_s));  // the async ones keep tp_overlap's window
  hw.engine.tp_comm_overlap = 0.5;
  lc = layer_cost(m, p, c, hw);
  CHECK(lc.tp_fwd_s == Approx(0.5 * ag + 0.5 * ag + (rs - 0.5 * proj) + 0.5 * rs));
  CHECK(lc.tp_bwd_s == Approx((ag - 0.5 * proj) + 0.5 * ag));
  // Full recomputation repeats the forward's collectives, overlapped alike.
  p.recompute = Recompute::full;
  CHECK(layer_cost(m, p, c, hw).tp_recompute_s == Approx(lc.tp_fwd_s));
  // The step is faster by the hidden link time of every layer.
  p.recompute = Recompute::none;
  Plan q = p;
  q.tp_comm_overlap = false;
  CHECK(predict_time(m, p, c, hw).iteration_s < predict_time(m, q, c, hw).iteration_s);
}

// ZeRO-R Pa (Rajbhandari et al. 2020, §6.1 and §8): the recomputed forward of
// each layer first all-gathers its saved input, s·b·h 16-bit values split over
// the t ranks. Oracle: the ring all-gather of nccl-tests' model, worked by hand
// from the fixture's figures (NVSwitch 300 GB/s at 0.75 busbw, 5 µs per ring
// step, 20 µs base): 20 µs + 7 × 5 µs + S·7/8 / 225 GB/s.
TEST_CASE("layer cost: partitioned activations add one all-gather of the checkpoint to the recompute", "[time][tp][pa]") {
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  Plan p = tp8_microbatch2();
  p.recompute = Recompute::full;
  const LayerCost whole = layer_cost(m, p, c, hw);
  p.partition_activations = true;
  const LayerCost split = layer_cost(m, p, c, hw);
  const double S = 2048.0 * 2 * 4096 * 2;
  const double gather = 20e-6 + 7 * 5e-6 + S * 7.0 / 8.0 / (300e9 * 0.75);
  CHECK(split.tp_recompute_s - whole.tp_recompute_s == Approx(gather));
  CHECK(split.tp_collectives_recompute == whole.tp_collectives_recompute + 1);
  // Nothing else in the layer changes: the compute and the other collectives.
  CHECK(split.fwd_s == Approx(whole.fwd_s));
  CHECK(split.bwd_s == Approx(whole.bwd_s));
  CHECK(split.recompute_s == Approx(whole.recompute_s));
  CHECK(split.tp_fwd_s == Approx(whole.tp_fwd_s));
  // The iteration pays it once per layer and micro-batch.
  p.global_batch = 2;
  Plan q = p;
  q.partition_activations = false;
  CHECK(predict_time(m, p, c, hw).iteration_s - predict_time(m, q, c, hw).iteration_s == Approx(24 * gather));
}

// A masked-LM head (BERT) predicts at 15 % of the positions: the logits GEMM
// has 2·(0.15·s·b)·V·h/t FLOPs, and the logits line of memory shrinks alike.
TEST_CASE("a masked-LM head runs on its share of the positions", "[time][memory][head]") {
  Transformer m = gpt(24, 1024, 16, 128, 30522);
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  Plan p;
  p.tp = 2;
  p.micro_batch = 64;
  p.global_batch = 64;
  const double full_flops = edge_cost(m, p, c, hw).fwd_flops;
  CHECK(full_flops == Approx(2.0 * 128 * 64 * 30522 / 2 * 1024));
  const double full_logits = predict_memory(m, p, c, hw).line(MemLine::logits);
  m.head_token_fraction = 0.15;
  const EdgeCost e = edge_cost(m, p, c, hw);
  CHECK(e.fwd_flops == Approx(2.0 * 0.15 * 128 * 64 * 30522 / 2 * 1024));
  CHECK(predict_memory(m, p, c, hw).line(MemLine::logits) == Approx(0.15 * full_logits));
  // The transformer layers are unchanged.
  Transformer causal = m;
  causal.head_token_fraction = 1;
  CHECK(layer_cost(m, p, c, hw).fwd_s == Approx(layer_cost(causal, p, c, hw).fwd_s));
}

TEST_CASE("layer cost: parallel attention and MLP (GPT-NeoX) reduce their sum once", "[time][tp]") {
  // Forward, by counting the executor's gpt_block.cpp: one reduction of the two
  // branches' summed partials instead of one per branch; under SP still one
  // all-gather before each branch's first GEMM, and one blocking all-gather of the
  // shared output gradient in backward instead of two.
  Transformer m = gpt(24, 4096, 32, 2048, 51200);
  m.parallel_residual = true;
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  Plan p = tp8_microbatch2();
  LayerCost lc = layer_cost(m, p, c, hw);
  const double ar = collective_time(Collective::all_reduce, lc.tp_bytes, GroupPlacement{8, 8}, c, hw);
  CHECK(lc.tp_collectives_fwd == 1);
  CHECK(lc.tp_fwd_s == Approx(ar));
  CHECK(lc.tp_bwd_async_s == Approx(2 * ar));  // the two input gradients: unchanged
  p.sequence_parallel = true;
  lc = layer_cost(m, p, c, hw);
  const double ag = collective_time(Collective::all_gather, lc.tp_bytes, GroupPlacement{8, 8}, c, hw);
  const double rs = collective_time(Collective::reduce_scatter, lc.tp_bytes, GroupPlacement{8, 8}, c, hw);
  CHECK(lc.tp_collectives_fwd == 3);
  CHECK(lc.tp_fwd_s == Approx(2 * ag + rs));
  CHECK(lc.tp_collectives_bwd == 5);
  CHECK(lc.tp_bwd_s == Approx(ag));
}

TEST_CASE("offload: host Adam and PCIe appear only with offload", "[time][offload]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  Plan p;
  p.dp = 8;
  p.zero_stage = 2;
  p.micro_batch = 2;
  p.global_batch = 16;
  OptimizerCost o = optimizer_cost(m, p, c, hw);
  CHECK(o.gpu_step_s > 0);
  CHECK(o.host_step_s == 0);
  p.offload_optimizer = OffloadTarget::cpu;
  o = optimizer_cost(m, p, c, hw);
  CHECK(o.gpu_step_s == 0);
  // The node's Adam rate (2.7 Gparam/s) is shared by its 8 GPUs' partitions.
  CHECK(o.host_step_s == Approx(stage_params(m, p) / 8 / (2.7e9 / 8)));
  CHECK(o.pcie_grads_s > 0);
  const TimePrediction t = predict_time(m, p, c, hw);
  CHECK(t.part(TimePart::optimizer) == Approx(o.host_step_s));
  CHECK(sum_parts(t) == Approx(t.iteration_s));
}

// Rank 0's compute by the executor's operation kinds is the same work as the
// time model's compute parts, split differently: with one stage the kinds sum
// to forward + backward + recompute + optimizer, and recomputation lands on the
// kinds it repeats (selective: the attention core; full: every forward kind).
TEST_CASE("compute by operation kind on rank 0", "[time][kinds]") {
  const Transformer m = gpt(12, 2048, 16, 2048, 51200);
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  Plan p;
  p.tp = 2;
  p.dp = 4;
  p.micro_batch = 2;
  p.grad_accum = 3;
  p.global_batch = 24;
  auto compute_parts = [&](const TimePrediction& t) {
    return t.part(TimePart::forward) + t.part(TimePart::backward) + t.part(TimePart::recompute) +
           t.part(TimePart::optimizer);
  };
  auto sum = [](const ComputeByKind& k) { return k.gemm + k.attention + k.memory_bound + k.host_adam; };
  const ComputeByKind none = compute_by_kind_rank0(m, p, c, hw);
  CHECK(sum(none) == Approx(compute_parts(predict_time(m, p, c, hw))));
  CHECK(none.host_adam == 0);
  const LayerCost lc = layer_cost(m, p, c, hw);
  p.recompute = Recompute::selective;
  const ComputeByKind sel = compute_by_kind_rank0(m, p, c, hw);
  CHECK(sum(sel) == Approx(compute_parts(predict_time(m, p, c, hw))));
  CHECK(sel.attention - none.attention == Approx(p.grad_accum * m.layers * lc.fwd_attention_s));
  CHECK(sel.gemm == Approx(none.gemm));
  p.recompute = Recompute::full;
  const ComputeByKind full = compute_by_kind_rank0(m, p, c, hw);
  CHECK(full.gemm - none.gemm == Approx(p.grad_accum * m.layers * lc.fwd_gemm_s));
  // The offloaded optimizer step moves to the host.
  p.zero_stage = 2;
  p.offload_optimizer = OffloadTarget::cpu;
  const ComputeByKind off = compute_by_kind_rank0(m, p, c, hw);
  CHECK(off.host_adam == Approx(optimizer_cost(m, p, c, hw).host_step_s));
}

// DeepSpeed ZeRO-3 prefetches the next module only when two of the largest
// fit in stage3_max_live_parameters (and prefetching is on): then the profile's
// overlap hides the gathers behind compute; otherwise every gather waits in
// line, fully exposed: exactly the gathers' link time.
TEST_CASE("ZeRO-3 gathers overlap only when the next module can be prefetched", "[time][zero3]") {
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  const Cluster c = a100(8);
  const HardwareProfile hw = profile();
  Plan p;
  p.dp = 64;
  p.zero_stage = 3;
  p.micro_batch = 1;
  p.grad_accum = 1;
  p.global_batch = 64;
  const double module = 4096.0 * 4 * 4096;  // FC1: h × 4h
  REQUIRE(m.largest_module_params() == module);
  p.max_live_params = 2 * module;
  REQUIRE(zero3_can_prefetch(m, p, hw));
  const double hidden = microbatch_times(m, p, c, hw).zero3_gather;
  p.max_live_params = 2 * module - 1;
  REQUIRE_FALSE(zero3_can_prefetch(m, p, hw));
  const Zero3GatherCost z = zero3_gather_cost(m, p, c, hw);
  CHECK(microbatch_times(m, p, c, hw).zero3_gather == Approx(z.fwd_s + z.bwd_s));
  CHECK(hidden < z.fwd_s + z.bwd_s);
  p.max_live_params = 1e9;
  p.prefetch_bucket_elems = 0;  // prefetching off
  CHECK(microbatch_times(m, p, c, hw).zero3_gather == Approx(z.fwd_s + z.bwd_s));
  // FSDP has neither knob: gathering per module it prefetches the next one
  // whatever its size (backward_prefetch, FSDP2's implicit prefetch).
  HardwareProfile fsdp = hw;
  fsdp.engine.zero3_gather = GatherUnit::module;
  p.max_live_params = 2 * module - 1;
  CHECK(zero3_can_prefetch(m, p, fsdp));
}

namespace {

// A GPU so fast that compute takes next to no time: every overlapped transfer
// then outlasts its window, the saturated case of link sharing.
Cluster instant_compute(Cluster c) {
  c.node.gpu.peak_tflops_fp16 = c.node.gpu.peak_tflops_bf16 = c.node.gpu.peak_tflops_fp32 = 1e9;
  c.node.gpu.hbm_bandwidth_gbps = 1e9;
  return c;
}


// Each layer's tensor-parallel link time over one micro-batch (no TP overlap
// in the profile: the async backward collectives count in full).
double layer_tp_link(const LayerCost& lc) {
  return lc.tp_fwd_s + lc.tp_bwd_s + lc.tp_bwd_async_s + lc.tp_recompute_s;
}

}  // namespace

// Link sharing (time_model.hpp): a TP collective that meets overlapped
// data-parallel traffic on the same link moves at half rate. With the link
// saturated by ZeRO-3's prefetched gathers and overlapped reduce-scatters,
// every layer's TP collectives take twice their link time; with neither
// prefetch nor overlap nothing runs beside them; with the
// data-parallel group across nodes the two use different links.
TEST_CASE("link sharing: TP collectives beside ZeRO-3 gathers on one link take up to twice as long",
          "[time][tp][zero3]") {
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  const HardwareProfile hw = profile();
  const Plan p = zero_plan(4, 2, 3, 1, 1);
  const Cluster node = instant_compute(a100(1));
  REQUIRE(tp_shares_dp_link(p, node));
  REQUIRE(zero3_can_prefetch(m, p, hw));
  const double shared = microbatch_times(m, p, node, hw).tp_comm;
  Plan serial = p;
  serial.prefetch_bucket_elems = 0;  // every gather waits in line,
  serial.overlap_comm = false;       // so does every reduce-scatter: nothing beside the TP collectives
  const double alone = microbatch_times(m, serial, node, hw).tp_comm;
  const LayerCost lc = layer_cost(m, p, node, hw);
  CHECK(shared - alone == Approx(m.layers * layer_tp_link(lc)));

  // tp 2 inside each node, dp 4 across four nodes: IB for the gathers, NVLink for TP.
  Cluster spread = node;
  spread.node.gpus = 2;
  spread.nodes = 4;
  REQUIRE_FALSE(tp_shares_dp_link(p, spread));
  CHECK(microbatch_times(m, p, spread, hw).tp_comm == Approx(microbatch_times(m, serial, spread, hw).tp_comm));

  // At real compute speed the gathers fill part of each pass: the TP time
  // grows, by less than its link time.
  const Cluster real = a100(1);
  const double grown = microbatch_times(m, p, real, hw).tp_comm - microbatch_times(m, serial, real, hw).tp_comm;
  CHECK(grown > 0);
  CHECK(grown < m.layers * layer_tp_link(layer_cost(m, p, real, hw)));
}

// Stage 0/1 reduce once per step beside the last micro-batch's backward
// (overlap_comm): on a saturated shared link that backward's TP collectives
// take twice their link time, once per step.
TEST_CASE("link sharing: the step's gradient all-reduce slows the last backward's TP collectives",
          "[time][tp][zero]") {
  const Transformer m = gpt(24, 4096, 32, 2048, 51200);
  const HardwareProfile hw = profile();
  const Cluster node = instant_compute(a100(1));
  Plan p = zero_plan(4, 2, 1, 1, 3);
  p.overlap_comm = true;
  Plan serial = p;
  serial.overlap_comm = false;
  const LayerCost lc = layer_cost(m, p, node, hw);
  const double backward_link = lc.tp_bwd_s + lc.tp_bwd_async_s + lc.tp_recompute_s;
  CHECK(predict_time(m, p, node, hw).part(TimePart::tp_comm) -
            predict_time(m, serial, node, hw).part(TimePart::tp_comm) ==
        Approx(m.layers * backward_link));
}

// ZeRO-Infinity pipelines the NVMe→host read of one module with the
// host→device copy of the previous (Rajbhandari et al. 2021 §6.2): the fetch
// takes the slower of the two, not their sum. The node's 8 GPUs share its
// drives. Worked by hand: 16-bit partition × 2 passes.
TEST_CASE("NVMe parameter offload: reads and PCIe copies are pipelined, the slower one bounds the fetch",
          "[time][offload]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  Cluster c = a100(1);
  HardwareProfile hw = profile();
  hw.pcie_efficiency = 1;
  hw.nvme_efficiency = 1;
  Plan p = zero_plan(8, 1, 3, 1, 1);
  p.offload_params = OffloadTarget::nvme;
  const double fetch = 2.0 * 2.0 * stage_params(m, p) / 8;  // bytes per GPU per micro-batch
  const double pcie_s = fetch / 25e9;
  const double nvme_s = fetch * 8 / 40e9;  // slower: 8 GPUs on one node's 40 GB/s
  REQUIRE(nvme_s > pcie_s);
  CHECK(optimizer_cost(m, p, c, hw).zero3_param_fetch_s == Approx(nvme_s));
  c.node.nvme_bandwidth_gbps = 1000;  // now the PCIe link is the slower
  CHECK(optimizer_cost(m, p, c, hw).zero3_param_fetch_s == Approx(pcie_s));
}

// The optimizer states' NVMe swap is part of the step, read → Adam → write per
// sub-group (DeepSpeed's pipeline_read/pipeline_write default off; the
// executor's NvmeOptimizerStates::step): against the same plan with states in
// host memory, the step is longer by exactly the swap, 2 × 12 bytes of fp32
// states per parameter of the node's partitions over its drives.
TEST_CASE("NVMe optimizer offload: the swap adds to the step in full", "[time][offload]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  const Cluster c = a100(1);
  HardwareProfile hw = profile();
  hw.nvme_efficiency = 1;
  Plan p = zero_plan(8, 1, 2, 2, 1);
  p.offload_optimizer = OffloadTarget::cpu;
  const double host = predict_time(m, p, c, hw).iteration_s;
  p.offload_optimizer = OffloadTarget::nvme;
  const double swap_s = 2.0 * 12.0 * stage_params(m, p) / 8 * 8 / 40e9;
  CHECK(predict_time(m, p, c, hw).iteration_s - host == Approx(swap_s));
}

// ZeRO 2/3 reduce every micro-batch and the backward call waits for its last
// bucket (DeepSpeed's independent_gradient_partition_epilogue; the executor's
// ParamStore::finish_backward). With a single bucket it is issued when the
// backward ends, so nothing of it hides: overlap_comm changes nothing.
TEST_CASE("ZeRO-2: the last reduce bucket of every micro-batch is exposed", "[time][zero]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  const Cluster c = a100(2);
  const HardwareProfile hw = profile();
  Plan p = zero_plan(16, 1, 2, 1, 4);
  p.reduce_bucket_elems = 1e12;  // one bucket
  const DpSyncCost d = dp_sync_cost(m, p, c, hw);
  REQUIRE(d.buckets == 1);
  CHECK(microbatch_times(m, p, c, hw).dp_comm == Approx(d.per_microbatch_s));
  // Many buckets: the earlier ones hide behind the backward, never the last.
  p.reduce_bucket_elems = stage_params(m, p) / 50;
  const DpSyncCost many = dp_sync_cost(m, p, c, hw);
  const double dp = microbatch_times(m, p, c, hw).dp_comm;
  CHECK(dp < many.per_microbatch_s);
  CHECK(dp >= many.per_microbatch_s / many.buckets);
}

// Sliding-window attention (Mistral): each query attends itself and the w − 1
// tokens before it. Worked by hand at s = 2048, w = 512: the window keeps
// (w·s − w(w−1)/2)/(s(s+1)/2) = 917,760/2,098,176 of the causal pairs; the
// flash kernel touches min(i + 1, k) of the 16 key blocks in block row i,
// k = ⌈511/128⌉ + 1 = 5: 1+2+3+4+5·12 = 70 of 256 blocks (causal: 136).
TEST_CASE("sliding window: model FLOPs keep the window's pairs, flash skips the blocks outside it",
          "[time][flash][window]") {
  Transformer m = gpt(96, 12288, 96, 2048, 51200);
  const double B = 64, s = 2048, h = 12288, L = 96;
  const double full = model_flops_per_iteration(m, B);
  const double hw_std_full = hardware_flops_per_iteration(m, [] { Plan p; p.global_batch = 64; return p; }());
  m.attention_window = 512;
  REQUIRE(m.windowed());
  const double kept = 917760.0 / 2098176.0;
  CHECK(m.attended_fraction() == Approx(kept).epsilon(1e-15));
  // The model's attention math: 3 passes × 4·B·s²·h per layer, scaled by the kept share.
  const double core = 4.0 * B * s * s * h;
  CHECK(model_flops_per_iteration(m, B) == Approx(full - 3.0 * L * core * (1.0 - kept)).epsilon(1e-12));
  // The standard kernel computes every score and masks: its hardware FLOPs do not move.
  Plan p;
  p.global_batch = 64;
  CHECK(hardware_flops_per_iteration(m, p) == Approx(hw_std_full).epsilon(1e-12));
  // Flash computes the window's blocks only, plus the backward's QKᵀ on them.
  p.attention = AttentionKernel::flash;
  CHECK(hardware_flops_per_iteration(m, p) == Approx(model_flops_per_iteration(m, B) + L * core * kept / 2.0).epsilon(1e-12));

  const HardwareProfile hw = constant_efficiency_profile();
  Plan q = one_sequence_flash_plan();
  const Cluster c = a100(1);
  const double heads = 96.0 / 8, d = 128;
  const double fwd = 4.0 * s * s * d * heads * 70.0 / 256.0 / (312e12 * 0.6 * hw.attention_gemm_factor);
  CHECK(layer_cost(m, q, c, hw).fwd_attention_s == Approx(fwd));
  // A window as long as the sequence is no window.
  m.attention_window = 2048;
  CHECK_FALSE(m.windowed());
  CHECK(m.attended_fraction() == 1.0);
}

// Uneven pipeline stages (issue 19). The slowest stage's micro-batch sets the
// 1F1B period (Narayanan et al. 2021, §2.2). Fill and drain, worked by hand
// from the schedule: stage k's path is m·T_k + Σ_{i<k} T_i + max(0, Σ_{i>k}
// T_i − (p−k−1)·F_k) (its warm-up forwards F_k fill part of the first round
// trip through the later stages); the iteration is the longest path. T_i:
// stage i's layers, edge, sends and fixed per-micro-batch cost; F_i its
// forward. Per-layer and edge costs are the inputs.
TEST_CASE("uneven stages: the slowest stage's time and the schedule's fill and drain", "[time][pipeline][stages]") {
  const Transformer m = gpt(5, 4096, 32, 2048, 32000);
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  Plan p;
  p.pp = 2;
  p.micro_batch = 1;
  p.grad_accum = 8;
  p.global_batch = 8;
  p.stage_layers = {3, 2};
  const LayerCost lc = layer_cost(m, p, c, hw);
  const EdgeCost e = edge_cost(m, p, c, hw);
  // The host keeps ahead of the GPU and tp = 1: one layer's micro-batch is f + b.
  REQUIRE(lc.host_fwd_s < lc.fwd_s);
  REQUIRE(lc.host_bwd_s < lc.bwd_s);
  const double f = lc.fwd_s, b = lc.bwd_s, u = f + b;
  const double o = hw.engine.microbatch_overhead_s;
  const double E = e.embedding_fwd_s + e.embedding_bwd_s, H = e.head_fwd_s + e.head_bwd_s;
  // The head (2·s·V·h FLOPs) is lighter than a layer (24·s·h² + 4·s²·h).
  REQUIRE(H < u + E);
  const double send = pipeline_p2p(m, p, c, hw).time_s;
  REQUIRE(send > 0);
  const double mb_count = 8;

  // 3 + 2: the first stage (three layers and the embedding) is the slowest.
  MicrobatchTimes mb = microbatch_times(m, p, c, hw);
  CHECK(mb.forward == Approx(3 * f + e.embedding_fwd_s));
  CHECK(mb.backward == Approx(3 * b + e.embedding_bwd_s));
  CHECK(mb.pp_comm == Approx(send));  // an end stage: one send per micro-batch
  TimePrediction t = predict_time(m, p, c, hw);
  {
    const double T0 = 3 * u + E + send + o, F0 = 3 * f + e.embedding_fwd_s + send;
    const double T1 = 2 * u + H + send + o;
    const double path0 = mb_count * T0 + std::max(0.0, T1 - F0);
    const double path1 = mb_count * T1 + T0;
    CHECK(t.part(TimePart::bubble) == Approx(std::max(path0, path1) - mb_count * T0));
    // Less than the equal-stage formula with the slowest stage, (p−1)·T_0.
    CHECK(t.part(TimePart::bubble) < T0);
  }
  CHECK(t.part(TimePart::forward) == Approx(8 * (3 * f + e.embedding_fwd_s)));

  // 2 + 3: the last stage (three layers and the head) is the slowest; its
  // path waits for the whole first stage once: the bubble is T_0.
  p.stage_layers = {2, 3};
  mb = microbatch_times(m, p, c, hw);
  CHECK(mb.forward == Approx(3 * f + e.head_fwd_s));
  CHECK(mb.backward == Approx(3 * b + e.head_bwd_s));
  CHECK(predict_time(m, p, c, hw).part(TimePart::bubble) == Approx(2 * u + E + send + o));

  // GPipe, 2 + 3: the flow shop's Σ_{i≠k} T_i, the same T_0.
  p.schedule = Schedule::gpipe;
  CHECK(predict_time(m, p, c, hw).part(TimePart::bubble) == Approx(2 * u + E + send + o));
  p.schedule = Schedule::one_f_one_b;

  // 1 + 3 + 1: the middle stage (three layers, two sends) is the slowest.
  p.pp = 3;
  p.stage_layers = {1, 3, 1};
  mb = microbatch_times(m, p, c, hw);
  CHECK(mb.forward == Approx(3 * f));
  CHECK(mb.backward == Approx(3 * b));
  CHECK(mb.pp_comm == Approx(2 * send));
  t = predict_time(m, p, c, hw);
  {
    const double T0 = u + E + send + o, F0 = f + e.embedding_fwd_s + send;
    const double T1 = 3 * u + 2 * send + o, F1 = 3 * f + send;
    const double T2 = u + H + send + o;
    const double path0 = mb_count * T0 + std::max(0.0, T1 + T2 - 2 * F0);
    const double path1 = mb_count * T1 + T0 + std::max(0.0, T2 - F1);
    const double path2 = mb_count * T2 + T0 + T1;
    CHECK(t.part(TimePart::bubble) == Approx(std::max({path0, path1, path2}) - mb_count * T1));
    // Against equal stages of the slowest one's size, (p−1)·T_1 would charge more.
    CHECK(t.part(TimePart::bubble) < 2 * T1);
  }
}

// A stated partition with runs of equal middle stages (1 + 3 + 3 + 2 + 2 + 3
// + 1): the model prices only each run's last stage; the oracle is every
// stage's path by the formula above (Narayanan et al. 2021, §2.2), worked in
// the test from the per-layer and edge costs.
TEST_CASE("uneven stages: every stage's path, runs of equal stages included", "[time][pipeline][stages]") {
  const Transformer m = gpt(15, 4096, 32, 2048, 32000);
  const Cluster c = a100(8);
  const HardwareProfile hw = profile();
  const std::vector<int> stages = {1, 3, 3, 2, 2, 3, 1};
  for (const auto schedule : {Schedule::one_f_one_b, Schedule::gpipe}) {
    for (const int mb_count : {2, 8, 64}) {
      Plan p;
      p.pp = 7;
      p.micro_batch = 1;
      p.grad_accum = mb_count;
      p.global_batch = mb_count;
      p.schedule = schedule;
      p.stage_layers = stages;
      const LayerCost lc = layer_cost(m, p, c, hw);
      const EdgeCost e = edge_cost(m, p, c, hw);
      REQUIRE(lc.host_fwd_s < lc.fwd_s);
      REQUIRE(lc.host_bwd_s < lc.bwd_s);
      const double f = lc.fwd_s, u = lc.fwd_s + lc.bwd_s, o = hw.engine.microbatch_overhead_s;
      const double send = pipeline_p2p(m, p, c, hw).time_s;
      std::vector<double> T, F;
      for (std::size_t i = 0; i < stages.size(); ++i) {
        const bool first = i == 0, last = i + 1 == stages.size();
        T.push_back(stages[i] * u + (first || last ? 1 : 2) * send + o +
                    (first ? e.embedding_fwd_s + e.embedding_bwd_s : 0) + (last ? e.head_fwd_s + e.head_bwd_s : 0));
        F.push_back(stages[i] * f + send + (first ? e.embedding_fwd_s : 0) + (last ? e.head_fwd_s : 0));
      }
      double longest = 0;
      for (std::size_t k = 0; k < T.size(); ++k) {
        double before = 0, after = 0;
        for (std::size_t i = 0; i < T.size(); ++i) (i < k ? before : after) += i == k ? 0 : T[i];
        const double waits = schedule == Schedule::gpipe
                                 ? after
                                 : std::max(0.0, after - static_cast<double>(T.size() - k - 1) * F[k]);
        longest = std::max(longest, mb_count * T[k] + before + waits);
      }
      const double slowest = *std::max_element(T.begin(), T.end());
      INFO(to_string(schedule) << ", " << mb_count << " micro-batches");
      CHECK(predict_time(m, p, c, hw).part(TimePart::bubble) == Approx(longest - mb_count * slowest));
    }
  }
}

// Balanced stages take a closed form of their prefix sums (the last stage of
// each run of equal middle stages stands for the run); stating the same
// partition carries the prefix stage by stage. Both must give the same iteration (70 layers on 12 stages:
// 10 × 6 + 2 × 5; 298 on 50: 48 × 6 + 2 × 5; 13 on 4: 4 + 3 + 3 + 3).
TEST_CASE("uneven stages: the balanced shortcut equals the stated partition", "[time][pipeline][stages]") {
  const Cluster c = a100(64);
  const HardwareProfile hw = profile();
  for (const auto& [layers, pp] : {std::pair{70, 12}, std::pair{298, 50}, std::pair{13, 4}, std::pair{7, 3}}) {
    const Transformer m = gpt(layers, 4096, 32, 2048, 51200);
    for (const auto schedule : {Schedule::gpipe, Schedule::one_f_one_b}) {
      Plan p;
      p.tp = 8;
      p.pp = pp;
      p.micro_batch = 1;
      p.grad_accum = 64;
      p.global_batch = 64;
      p.schedule = schedule;
      const TimePrediction balanced = predict_time(m, p, c, hw);
      // DeepSpeed's partition_uniform by hand: ⌊L/p⌋ each, the first L mod p one more.
      for (int i = 0; i < pp; ++i) p.stage_layers.push_back(layers / pp + (i < layers % pp ? 1 : 0));
      INFO(layers << " layers on " << pp << " stages, " << to_string(schedule));
      CHECK(predict_time(m, p, c, hw).iteration_s == Approx(balanced.iteration_s).epsilon(1e-12));
      CHECK(predict_time(m, p, c, hw).part(TimePart::bubble) == Approx(balanced.part(TimePart::bubble)).epsilon(1e-12));
    }
  }
}

// Context parallelism (issue 19): a cp rank runs every linear, elementwise and
// tensor-parallel operation on s/cp tokens — the same work as a plan without
// cp on a sequence of s/cp — and its attention as a ring of cp blocks whose
// K/V exchange hides behind the block compute (op_costs.cpp
// context_parallel_attention).
TEST_CASE("context parallelism: the rank's s/cp tokens, the ring's exposed exchange", "[time][cp]") {
  const HardwareProfile hw = profile();
  const Cluster c = a100(2);
  Transformer m = gpt(8, 4096, 32, 8192, 50304);
  m.kv_heads = 8;  // grouped-query attention: K/V chunks of 8 heads
  Plan p = zero_plan(2, 2, 1, 1, 4);
  p.sequence_parallel = true;
  p.attention = AttentionKernel::flash;
  const LayerCost none = layer_cost(m, p, c, hw);
  CHECK(none.cp_steps == 0);
  CHECK(none.cp_fwd_s == 0);
  CHECK(none.cp_bwd_s == 0);
  CHECK(predict_time(m, p, c, hw).part(TimePart::cp_comm) == 0);
  for (int cp : {2, 4}) {
    INFO("cp " << cp);
    Plan q = p;
    q.cp = cp;
    Transformer shorter = m;
    shorter.seq_len = m.seq_len / cp;
    const LayerCost lc = layer_cost(m, q, c, hw);
    const LayerCost ref = layer_cost(shorter, p, c, hw);
    CHECK(lc.fwd_gemm_s == Approx(ref.fwd_gemm_s));
    CHECK(lc.fwd_elementwise_s == Approx(ref.fwd_elementwise_s));
    CHECK(lc.bwd_weight_s == Approx(ref.bwd_weight_s));
    CHECK(lc.tp_fwd_s == Approx(ref.tp_fwd_s));
    CHECK(lc.tp_bytes == Approx(ref.tp_bytes));
    CHECK(pipeline_p2p(m, q, c, hw).bytes == Approx(pipeline_p2p(shorter, p, c, hw).bytes));
    // One K/V chunk: K and V of the rank's s/cp rows, 8 heads of 128 split over tp 2, 16-bit.
    const double chunk = 2.0 * 1 * (8192.0 / cp) * (8 * 128 / 2) * 2;
    CHECK(lc.cp_steps == cp);
    CHECK(lc.cp_bytes == Approx(chunk));
    // tp 2 × cp ≤ 8: the ring stays inside a node.
    const double kv = p2p_time(chunk, false, c, hw), kv_dkv = p2p_time(2 * chunk, false, c, hw);
    CHECK(lc.cp_fwd_link_s == Approx((cp - 1) * kv));
    CHECK(lc.cp_bwd_link_s == Approx((cp - 1) * kv_dkv + kv));
    CHECK(lc.cp_fwd_s == Approx((cp - 1) * std::max(0.0, kv - lc.cp_step_fwd_s)));
    // The last dK/dV hop home has no block left to hide behind.
    CHECK(lc.cp_bwd_s == Approx((cp - 1) * std::max(0.0, kv_dkv - lc.cp_step_bwd_s) + kv));
    CHECK(lc.fwd_attention_s == Approx(cp * lc.cp_step_fwd_s));
    // At 8k tokens a flash block (0.1 ms and more) outlasts its 2-8 MB exchange on NVSwitch.
    CHECK(lc.cp_fwd_s == 0);
    // The iteration: cp_comm is m × layers × the exposed ring, and the parts sum to the total.
    const TimePrediction t = predict_time(m, q, c, hw);
    CHECK(t.part(TimePart::cp_comm) == Approx(4.0 * 8 * (lc.cp_fwd_s + lc.cp_bwd_s + lc.cp_recompute_s)));
    double sum = 0;
    for (double v : t.parts) sum += v;
    CHECK(sum == Approx(t.iteration_s));
    // Gradients reduce over dp × cp ranks: the same traffic as dp·cp data-parallel ranks.
    Plan wide = p;
    wide.dp = p.dp * cp;
    wide.global_batch = wide.dp * wide.micro_batch * wide.grad_accum;
    CHECK(dp_sync_cost(m, q, c, hw).per_step_s == Approx(dp_sync_cost(m, wide, c, hw).per_step_s));
    CHECK(dp_sync_cost(m, q, c, hw).param_allgather_s == Approx(dp_sync_cost(m, wide, c, hw).param_allgather_s));
  }
  // Across nodes (tp 8 fills one): the ring's hops cross the inter-node fabric.
  Plan x = p;
  x.tp = 8;
  x.dp = 1;
  x.cp = 2;
  x.global_batch = 4;
  const LayerCost far = layer_cost(m, x, c, hw);
  CHECK(far.cp_fwd_link_s == Approx(p2p_time(far.cp_bytes, true, c, hw)));
}

// DeepSpeed-Ulysses (issue 19 item 3): a rank runs every linear, elementwise
// and tensor-parallel operation on s/u tokens (the work of a plan without
// Ulysses on a sequence of s/u), its attention core on the whole sequence of
// a/(t·u) heads (the core of a tp·u plan), and four blocking all-to-alls each
// way whose nccl-tests S is the rank's [s/u, width/t] tensor.
TEST_CASE("ulysses: s/u tokens outside attention, a/u heads inside, four all-to-alls each way", "[time][ulysses]") {
  const HardwareProfile hw = profile();
  const Cluster c = a100(2);
  Transformer m = gpt(8, 4096, 32, 8192, 50304);
  m.kv_heads = 8;  // grouped-query attention: K/V all-to-alls of 8 heads' width
  Plan p = zero_plan(2, 2, 1, 1, 4);
  const LayerCost none = layer_cost(m, p, c, hw);
  CHECK(none.ulysses_a2a_fwd == 0);
  CHECK(none.ulysses_fwd_s == 0);
  CHECK(predict_time(m, p, c, hw).part(TimePart::ulysses_comm) == 0);
  for (AttentionKernel kernel : {AttentionKernel::standard, AttentionKernel::flash}) {
    for (int u : {2, 4}) {
      INFO("ulysses " << u << " flash " << (kernel == AttentionKernel::flash));
      Plan q = p;
      q.attention = kernel;
      q.ulysses = u;
      REQUIRE_FALSE(check_plan(q, m, c).has_value());
      Transformer shorter = m;
      shorter.seq_len = m.seq_len / u;
      Plan ref_plan = p;
      ref_plan.attention = kernel;
      const LayerCost lc = layer_cost(m, q, c, hw);
      const LayerCost ref = layer_cost(shorter, ref_plan, c, hw);
      CHECK(lc.fwd_gemm_s == Approx(ref.fwd_gemm_s));
      CHECK(lc.fwd_elementwise_s == Approx(ref.fwd_elementwise_s));
      CHECK(lc.bwd_weight_s == Approx(ref.bwd_weight_s));
      CHECK(lc.tp_fwd_s == Approx(ref.tp_fwd_s));
      CHECK(pipeline_p2p(m, q, c, hw).bytes == Approx(pipeline_p2p(shorter, ref_plan, c, hw).bytes));
      // The core: whole sequence, a/(t·u) heads, as a tp·u plan's core.
      Plan wide_tp = ref_plan;
      wide_tp.tp = p.tp * u;
      const LayerCost core = layer_cost(m, wide_tp, c, hw);
      CHECK(lc.fwd_attention_s == Approx(core.fwd_attention_s));
      CHECK(lc.bwd_attention_s == Approx(core.bwd_attention_s));
      // All-to-all S: b·(s/u)·width/t elements of 2 bytes; Q and O 4096 wide, K and V 8·128.
      const double sq = 1.0 * (8192.0 / u) * 4096 / 2 * 2, skv = 1.0 * (8192.0 / u) * 1024 / 2 * 2;
      CHECK(lc.ulysses_a2a_fwd == 4);
      CHECK(lc.ulysses_a2a_bwd == 4);
      CHECK(lc.ulysses_q_bytes == Approx(sq));
      CHECK(lc.ulysses_kv_bytes == Approx(skv));
      // tp 2 × u ≤ 8: inside a node. α·(u−1) + S·(u−1)/u / busbw (nccl-tests all-to-all).
      const GroupPlacement g{u, u};
      const double base = hw.intra_node.base_latency_s;
      const double alpha = level_latency(false, c, hw), bw = group_bus_bandwidth(g, c, hw);
      auto a2a = [&](double bytes) { return base + alpha * (u - 1) + bytes * (u - 1.0) / u / bw; };
      CHECK(lc.ulysses_fwd_s == Approx(2 * a2a(sq) + 2 * a2a(skv)));
      CHECK(lc.ulysses_bwd_s == Approx(lc.ulysses_fwd_s));
      CHECK(lc.ulysses_recompute_s == 0);
      // The iteration: ulysses_comm is m × layers × the all-to-alls, and the parts sum to the total.
      const TimePrediction t = predict_time(m, q, c, hw);
      CHECK(t.part(TimePart::ulysses_comm) == Approx(4.0 * 8 * (lc.ulysses_fwd_s + lc.ulysses_bwd_s)));
      double sum = 0;
      for (double v : t.parts) sum += v;
      CHECK(sum == Approx(t.iteration_s));
      // Gradients reduce over dp × u ranks: the traffic of dp·u data-parallel ranks.
      Plan wide = p;
      wide.dp = p.dp * u;
      wide.global_batch = wide.dp * wide.micro_batch * wide.grad_accum;
      CHECK(dp_sync_cost(m, q, c, hw).per_step_s == Approx(dp_sync_cost(m, wide, c, hw).per_step_s));
    }
  }
  // Full recomputation repeats the forward all-to-alls; selective only the core.
  Plan r = p;
  r.ulysses = 2;
  r.recompute = Recompute::full;
  const LayerCost full = layer_cost(m, r, c, hw);
  CHECK(full.ulysses_recompute_s == Approx(full.ulysses_fwd_s));
  r.recompute = Recompute::selective;
  CHECK(layer_cost(m, r, c, hw).ulysses_recompute_s == 0);
  // Across nodes (tp 8 fills one): the all-to-all crosses the inter-node fabric.
  Plan x = p;
  x.tp = 8;
  x.dp = 1;
  x.ulysses = 2;
  x.global_batch = 4;
  m.kv_heads = 32;
  const LayerCost far = layer_cost(m, x, c, hw);
  CHECK(far.ulysses_fwd_s ==
        Approx(2 * collective_time(Collective::all_to_all, far.ulysses_q_bytes, GroupPlacement{2, 1}, c, hw) +
               2 * collective_time(Collective::all_to_all, far.ulysses_kv_bytes, GroupPlacement{2, 1}, c, hw)));
}

// Hybrid sharding (issue 19 item 4), worked by hand on 4 test A100 nodes (8
// GPUs, NVSwitch 300 GB/s at 0.75 busbw efficiency and 5 µs per step; one
// 25 GB/s NIC per GPU at 0.9 and 10 µs; 20 µs per call at each level):
// dp 32 sharded in groups of 8 inside each node. The reduce-scatter and the
// weight gathers run over NVSwitch in the shard group; the sharded gradients
// (S/8) are all-reduced across the 4 replicas over the NICs, one replica group
// per GPU of a node, each on its own NIC (ring 2·3 steps, tree 2·⌈log2 4⌉ = 4).
TEST_CASE("hybrid sharding: two-level reduction and gathers in the shard group, closed form", "[time][hsdp]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  const Cluster c = a100(4);
  HardwareProfile hw = profile();
  Plan p = zero_plan(32, 1, 3, 1, 4);
  p.reduce_bucket_elems = 1e12;  // one reduce bucket
  p.dp_shard = 8;
  const double psi = stage_params(m, p);
  const double S = 2 * psi;  // 16-bit gradients
  const double intra = 300e9 * 0.75, nic = 25e9 * 0.9;
  const double rs = 20e-6 + 7 * 5e-6 + S * 7.0 / 8.0 / intra;
  const double ar = 20e-6 + 4 * 10e-6 + (S / 8) * 2.0 * 3.0 / 4.0 / nic;
  const GroupLayout l = place_groups(p, c);
  CHECK(l.shard.size == 8);
  CHECK_FALSE(l.shard.crosses_nodes());
  CHECK(l.replica.size == 4);
  CHECK(l.replica.per_node == 1);
  // DeepSpeed-style engine (bucketed gathers, MiCS): reduce-scatter every
  // micro-batch, the replicas' all-reduce once at the accumulation boundary.
  hw.engine.zero3_gather = GatherUnit::bucket;
  const DpSyncCost d = dp_sync_cost(m, p, c, hw);
  REQUIRE(d.buckets == 1);
  CHECK(d.per_microbatch_s == Approx(rs));
  CHECK(d.replica_allreduce_s == Approx(ar));
  CHECK(d.per_step_s == Approx(ar));
  CHECK(d.replica_bytes == Approx(S / 8));
  CHECK_FALSE(d.replica_per_microbatch);
  // The weights' all-gathers, forward and backward, inside the node.
  const Zero3GatherCost z = zero3_gather_cost(m, p, c, hw);
  REQUIRE(z.gathers >= 1);
  const double ag = z.gathers * (20e-6 + 7 * 5e-6 + (S / z.gathers) * 7.0 / 8.0 / intra);
  CHECK(z.fwd_s == Approx(ag));
  CHECK(z.bwd_s == Approx(ag));
  // FSDP (per-module units): both hops on every micro-batch, none per step.
  hw.engine.zero3_gather = GatherUnit::module;
  const DpSyncCost f = dp_sync_cost(m, p, c, hw);
  const int units = f.buckets;
  const double rs_u = 20e-6 + 7 * 5e-6 + (S / units) * 7.0 / 8.0 / intra;
  const double ar_u = 20e-6 + 4 * 10e-6 + (S / units / 8) * 2.0 * 3.0 / 4.0 / nic;
  CHECK(f.replica_per_microbatch);
  CHECK(f.per_step_s == 0);
  CHECK(f.per_microbatch_s == Approx(units * (rs_u + ar_u)));
  // Plain ZeRO-3 over all 32 ranks: the reduce-scatter crosses the nodes, at
  // the node's 8 NICs (min(NVSwitch, 8 × 22.5 GB/s) = 180 GB/s), 31 ring
  // steps of which 3 cross nodes (NCCL's count: nodes − 1), 28 inside them.
  hw.engine.zero3_gather = GatherUnit::bucket;
  Plan plain = p;
  plain.dp_shard = 0;
  const DpSyncCost pd = dp_sync_cost(m, plain, c, hw);
  CHECK(pd.per_microbatch_s == Approx(20e-6 + 28 * 5e-6 + 3 * 10e-6 + S * 31.0 / 32.0 / (8 * nic)));
  CHECK(pd.per_step_s == 0);
  CHECK(place_groups(plain, c).replica.size == 1);
  // The parts still sum to the iteration; the time of the states' exchange moves.
  const TimePrediction t = predict_time(m, p, c, hw);
  CHECK(sum_parts(t) == Approx(t.iteration_s));
  CHECK(t.part(TimePart::zero3_gather) < predict_time(m, plain, c, hw).part(TimePart::zero3_gather));
}

TEST_CASE("engines' selective policies: the GEMMs each recomputes, closed form", "[time][flops][recompute]") {
  // A Llama-shaped layer (GQA 32/8 heads, SwiGLU 14336): with one GEMM
  // efficiency at every size and no launch cost a GEMM's time is its FLOPs
  // over peak × 0.6, so each policy's recompute time is the FLOPs it names
  // (plus the elementwise kernels it repeats) and nothing is fitted.
  Transformer m = gpt(32, 4096, 32, 8192, 128256);
  m.kv_heads = 8;
  m.ffn_hidden = 14336;
  m.activation = Activation::swiglu;
  const double b = 1, s = 8192, h = 4096, kvd = 1024, f = 14336, L = 32, tokens = b * s;
  const HardwareProfile hw = constant_efficiency_profile();
  const Cluster c = a100(1);
  const double rate = 312e12 * 0.6;
  Plan p;
  p.global_batch = 1;
  p.attention = AttentionKernel::flash;
  p.recompute = Recompute::selective;
  const LayerCost attention = layer_cost(m, p, c, hw);
  CHECK(attention.recompute_s == Approx(attention.fwd_attention_s));

  // torchtitan's op SAC: wk (h × kvd), wo (h × h) and w3 (h × f) again, with
  // the elementwise kernels; the flash kernel's output is saved.
  p.recompute_policy = SelectivePolicy::alternate_mm;
  const LayerCost op = layer_cost(m, p, c, hw);
  const double op_flops = 2.0 * tokens * h * (kvd + h + f);
  CHECK(op.recompute_flops == Approx(op_flops));
  CHECK(op.recompute_s == Approx(op_flops / rate + op.fwd_elementwise_s));
  // MaxText's save_dot_except_mlpwi: wi_0 and wi_1 (h × 2f), the attention core, the elementwise kernels.
  p.recompute_policy = SelectivePolicy::mlp_in;
  const LayerCost wi = layer_cost(m, p, c, hw);
  CHECK(wi.recompute_flops == Approx(2.0 * tokens * h * 2.0 * f + attention.recompute_flops));
  CHECK(wi.recompute_s == Approx(2.0 * tokens * h * 2.0 * f / rate + wi.fwd_attention_s + wi.fwd_elementwise_s));
  // JAX's dots_saveable (PaxML SAVE_DOT_ONLY): no GEMM again, the attention
  // core (a fused kernel, not a dot) and the elementwise kernels.
  p.recompute_policy = SelectivePolicy::dots;
  const LayerCost dots = layer_cost(m, p, c, hw);
  CHECK(dots.recompute_flops == Approx(attention.recompute_flops));
  CHECK(dots.recompute_s == Approx(dots.fwd_attention_s + dots.fwd_elementwise_s));
  CHECK(dots.recompute_s < wi.recompute_s);
  // torchtitan's every-second-layer SAC: half a layer's forward per layer.
  p.recompute_policy = SelectivePolicy::alternate_layers;
  const LayerCost half = layer_cost(m, p, c, hw);
  CHECK(half.recompute_s == Approx(0.5 * half.fwd_s));

  // Hardware FLOPs (HFU) count the same work per iteration: L layers of it
  // beyond the plan without recomputation.
  p.recompute_policy = SelectivePolicy::alternate_mm;
  const double hw_op = hardware_flops_per_iteration(m, p);
  p.recompute_policy = SelectivePolicy::attention;
  const double hw_att = hardware_flops_per_iteration(m, p);
  p.recompute = Recompute::none;
  const double hw_none = hardware_flops_per_iteration(m, p);
  CHECK(hw_op - hw_none == Approx(L * op_flops).epsilon(1e-12));
  CHECK(hw_att > hw_none);
  p.recompute = Recompute::selective;
  p.recompute_policy = SelectivePolicy::dots;
  CHECK(hardware_flops_per_iteration(m, p) == Approx(hw_att).epsilon(1e-12));  // the same core, nothing more
  p.recompute = Recompute::none;
  p.recompute_policy = SelectivePolicy::attention;
  p.recompute = Recompute::full;
  const double hw_full = hardware_flops_per_iteration(m, p);
  p.recompute = Recompute::selective;
  p.recompute_policy = SelectivePolicy::alternate_layers;
  CHECK(hardware_flops_per_iteration(m, p) - hw_none == Approx((hw_full - hw_none) / 2.0).epsilon(1e-12));
  // torchtitan's selective_ac_option "3" (fms-fsdp's 1/3): a third of it,
  // a third of a forward per layer.
  p.recompute_every = 3;
  CHECK(hardware_flops_per_iteration(m, p) - hw_none == Approx((hw_full - hw_none) / 3.0).epsilon(1e-12));
  const LayerCost third = layer_cost(m, p, c, hw);
  CHECK(third.recompute_s == Approx(third.fwd_s / 3.0));
}

TEST_CASE("a model without dropout runs no dropout kernels: the scores' and the hidden state's mask passes go",
          "[time][dropout]") {
  // Closed form over the profile's own HBM and launch figures: with dropout the
  // standard attention's forward runs the softmax (read, write) and the dropout
  // (read, write, 1-byte mask) over the scores, two kernels; without it the
  // softmax alone. Each bias-dropout-add writes its 1-byte mask only with dropout.
  Transformer m = gpt(24, 2048, 16, 2048, 51200);
  const Cluster c = test::a100_nodes(1);
  const HardwareProfile hw = with_engine(default_profile_for(c), "megatron");
  Plan p = zero_plan(4, 2, 0, 4, 2);
  p.precision = Precision::bf16;
  p.attention = AttentionKernel::standard;
  const LayerCost with = layer_cost(m, p, c, hw);
  m.dropout = 0;
  const LayerCost without = layer_cost(m, p, c, hw);
  const double eb = 2, scores = 4.0 * 16 / 2 * 2048.0 * 2048.0, hs = 4.0 * 2048 * 2048;
  CHECK(with.fwd_attention_s - without.fwd_attention_s ==
        Approx(memory_bound_time(scores * (2 * eb + 1), c.node.gpu, hw, 1)));
  CHECK(with.fwd_elementwise_s - without.fwd_elementwise_s ==
        Approx(memory_bound_time(2 * hs * hw.engine.elementwise_traffic, c.node.gpu, hw, 0)));
  CHECK(with.fwd_gemm_s == Approx(without.fwd_gemm_s));
  // FlashAttention regenerates its mask in the kernel: its attention time is the same.
  p.attention = AttentionKernel::flash;
  const LayerCost flash_without = layer_cost(m, p, c, hw);
  m.dropout = 0.1;
  CHECK(layer_cost(m, p, c, hw).fwd_attention_s == Approx(flash_without.fwd_attention_s));
}

// The fused Adam step is memory-bound: its traffic is the gradient work (the
// fp32 gradient read, the unscale and norm pass, the 16-bit copy written:
// 4 + 8 + 2 = 14 bytes) plus every state read and written at its width,
// 2·K. Oracle: bytes / achieved HBM bandwidth + 4 launches, K as ZeRO counts it.
// A bf16 master beside bf16 parameters is the parameters (K = 4): they are read
// and written (2 + 2) instead of the copy written (2): 12 + 4 + 8 = 24.
TEST_CASE("the optimizer step moves its states at their width", "[time][optimizer]") {
  const Transformer m = gpt(16, 2048, 16, 1024, 50304);
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  Plan p;
  p.dp = 8;
  p.zero_stage = 1;
  p.global_batch = 8;
  p.precision = Precision::bf16;
  const double part = stage_params(m, p) / 8;
  const double hbm = c.node.gpu.hbm_bandwidth_gbps * 1e9 * hw.memory_bandwidth_efficiency;
  auto step = [&](Precision master, Precision moments, bool remainders) {
    p.master_dtype = master;
    p.moments_dtype = moments;
    p.param_remainders = remainders;
    return optimizer_cost(m, p, c, hw).gpu_step_s;
  };
  CHECK(step(Precision::fp32, Precision::fp32, false) == Approx((14 + 24) * part / hbm + 4 * hw.kernel_launch_s));
  CHECK(step(Precision::bf16, Precision::bf16, false) == Approx((12 + 4 + 8) * part / hbm + 4 * hw.kernel_launch_s));
  CHECK(step(Precision::fp32, Precision::bf16, false) == Approx((14 + 16) * part / hbm + 4 * hw.kernel_launch_s));
  CHECK(step(Precision::fp32, Precision::bf16, true) == Approx((14 + 12) * part / hbm + 4 * hw.kernel_launch_s));
  // fp16 parameters with fp16 states: Megatron-Core's copy (K = 6), but ztune's
  // executor updates the parameters in place, as it does bf16 ones.
  p.precision = Precision::fp16;
  CHECK(step(Precision::fp16, Precision::fp16, false) == Approx((14 + 12) * part / hbm + 4 * hw.kernel_launch_s));
  HardwareProfile executor = hw;
  executor.engine.executor = true;
  p.master_dtype = p.moments_dtype = Precision::fp16;
  CHECK(optimizer_cost(m, p, c, executor).gpu_step_s ==
        Approx((12 + 4 + 8) * part / hbm + 4 * hw.kernel_launch_s));
}

// Megatron's block method recomputes the first N layers of each model chunk
// (Megatron-Core TransformerBlock._checkpointed_forward): the hardware FLOPs
// add N layers' forward, not L; a stage's micro-batch adds N recomputations.
TEST_CASE("block recomputation: N layers' forward again, stage by stage", "[time][flops][recompute][block]") {
  const double B = 64, s = 2048, h = 4096, L = 5;
  const Transformer m = gpt(5, 4096, 32, 2048, 32000);
  Plan p;
  p.global_batch = 64;
  p.recompute = Recompute::none;
  const double model = hardware_flops_per_iteration(m, p);
  p.recompute = Recompute::full;
  p.recompute_num_layers = 2;
  // Narayanan's recomputed forward of one layer: 24·B·s·h²·(1 + s/(6h)).
  const double layer_forward = 24.0 * B * s * h * h * (1 + s / (6.0 * h));
  CHECK(hardware_flops_per_iteration(m, p) == Approx(model + 2 * layer_forward).epsilon(1e-12));
  p.recompute_num_layers = 0;
  CHECK(hardware_flops_per_iteration(m, p) == Approx(model + L * layer_forward).epsilon(1e-12));

  // Pipelined over uneven stages 3 + 2 with N = 1: each stage recomputes one
  // layer. The fill and drain of uneven stages (the case above) with those
  // stage times.
  const Cluster c = a100(1);
  const HardwareProfile hw = profile();
  p.pp = 2;
  p.micro_batch = 1;
  p.grad_accum = 8;
  p.global_batch = 8;
  p.stage_layers = {3, 2};
  p.recompute_num_layers = 1;
  const LayerCost lc = layer_cost(m, p, c, hw);
  const EdgeCost e = edge_cost(m, p, c, hw);
  REQUIRE(lc.host_fwd_s < lc.fwd_s);
  REQUIRE(lc.host_bwd_s < lc.bwd_s);
  REQUIRE(lc.host_recompute_s < lc.recompute_s);
  const double f = lc.fwd_s, b = lc.bwd_s, r = lc.recompute_s;
  REQUIRE(r == Approx(f));  // a recomputed layer runs its forward again
  const double o = hw.engine.microbatch_overhead_s;
  const double E = e.embedding_fwd_s + e.embedding_bwd_s, H = e.head_fwd_s + e.head_bwd_s;
  const double send = pipeline_p2p(m, p, c, hw).time_s;
  const MicrobatchTimes mb = microbatch_times(m, p, c, hw);
  CHECK(mb.forward == Approx(3 * f + e.embedding_fwd_s));
  CHECK(mb.recompute == Approx(r));
  const double T0 = 3 * (f + b) + r + E + send + o, F0 = 3 * f + e.embedding_fwd_s + send;
  const double T1 = 2 * (f + b) + r + H + send + o;
  REQUIRE(T0 > T1);
  const double path0 = 8 * T0 + std::max(0.0, T1 - F0), path1 = 8 * T1 + T0;
  const TimePrediction t = predict_time(m, p, c, hw);
  CHECK(t.part(TimePart::bubble) == Approx(std::max(path0, path1) - 8 * T0));
  CHECK(t.part(TimePart::recompute) == Approx(8 * r));
  // Between no recomputation and full: the iteration is monotone in N.
  double previous = 0;
  for (int n : {1, 2, 3}) {
    p.recompute_num_layers = n;
    const double it = predict_time(m, p, c, hw).iteration_s;
    CHECK(it > previous);
    previous = it;
  }
  p.recompute_num_layers = 0;
  CHECK(predict_time(m, p, c, hw).iteration_s == Approx(previous));  // 3 ≥ every stage's layers: all of them
}

// ZeRO-3 under a pipeline gathers each stage's parameters in its first forward
// of the step and reduce-scatters the accumulated gradients once
// (Plan::zero3_held_through_step): nothing per micro-batch, so the traffic is
// Ψ of gradients and Ψ of parameters per step whatever the accumulation
// (ZeRO-3 without the pipeline: 3Ψ per micro-batch, above).
TEST_CASE("ZeRO-3 under a pipeline: one gather and one reduce-scatter per step", "[time][zero][pipeline]") {
  const Transformer m = gpt(8, 2048, 16, 2048, 50304);
  const Cluster c = a100(4);
  const HardwareProfile hw = profile();
  Plan p = zero_plan(8, 1, 3, 1, 8);
  p.pp = 4;
  p.precision = Precision::bf16;
  REQUIRE_FALSE(check_plan(p, m, c).has_value());
  const double psi2 = 2 * stage_params(m, p);
  const DpSyncCost d = dp_sync_cost(m, p, c, hw);
  CHECK(d.per_microbatch_s == 0);
  CHECK(d.per_step_s > 0);
  CHECK(d.param_allgather_s == 0);  // the gather is ZeRO-3's, before the forward
  CHECK(d.bytes_per_step == Approx(psi2));
  const Zero3GatherCost z = zero3_gather_cost(m, p, c, hw);
  CHECK(z.bytes_per_pass == Approx(psi2));
  CHECK(z.bwd_s == 0);  // held from the forward
  // Twice the micro-batches: the same gather and reduction time per step.
  const TimePrediction t8 = predict_time(m, p, c, hw);
  Plan q = p;
  q.grad_accum = 16;
  q.global_batch = 128;
  const TimePrediction t16 = predict_time(m, q, c, hw);
  CHECK(t8.part(TimePart::zero3_gather) > 0);
  CHECK(t16.part(TimePart::zero3_gather) == Approx(t8.part(TimePart::zero3_gather)));
  CHECK(t16.part(TimePart::dp_comm) == Approx(t8.part(TimePart::dp_comm)));
  CHECK(t16.part(TimePart::forward) == Approx(2 * t8.part(TimePart::forward)));
}

// Hybrid sharding gathers and reduce-scatters in the shard group: with tp 4 and
// shard groups of 2 ranks on 8-GPU nodes, both inside a node, beside each other
// on NVLink, although dp (16 ranks) spans nodes. Oracle: the placement (ranks
// ordered tp, cp, dp; 8 per node).
TEST_CASE("hybrid sharding's shard group shares the node's link with tensor parallelism", "[time][hsdp]") {
  const Transformer m = gpt(8, 2048, 16, 2048, 50304);
  const Cluster c = a100(8);
  Plan p = zero_plan(16, 4, 3, 1, 1);
  CHECK_FALSE(tp_shares_dp_link(p, c));  // dp across nodes, tp inside
  p.dp_shard = 2;
  REQUIRE_FALSE(check_plan(p, m, c).has_value());
  CHECK(tp_shares_dp_link(p, c));  // the gathers run inside the node, beside tp
}

// The loss's passes over the logits, byte for byte from each engine's code
// (op_costs.cpp cross_entropy_cost): Megatron's vocab_parallel_cross_entropy
// on output.float() moves 38 bytes a bf16 logit forward (cast 2 + 4, max 4,
// subtract 8, exp 8, sum 4, divide 8) in six kernels and 14 backward (the
// in-place multiply 8, the cast back 6) in two; PyTorch's F.cross_entropy on
// logits.float() 22 in three (cast 6, log_softmax's three reads and a write
// 16) and 26 in four (zero-fill 4, log_softmax backward 16, cast 6); the
// fused pass 10 in three and 6 in one; Megatron-Core's compiled fusion 22 in
// three and 10 in one. Everything else of the head is the same.
TEST_CASE("the loss's kernels: Megatron's and PyTorch's fp32 cross-entropy against the fused pass",
          "[time][edge][loss]") {
  const Transformer m = gpt(2, 1024, 16, 1024, 50304);
  const Cluster c = a100(1);
  HardwareProfile hw = profile();
  hw.memory_bandwidth_efficiency = 0.8;
  Plan p;
  p.tp = 2;
  p.micro_batch = 4;
  p.global_batch = 4;
  p.precision = Precision::bf16;
  const double logits = 4.0 * 1024 * 50304 / 2;  // micro-batch × sequence × vocabulary / tp
  const double bandwidth = c.node.gpu.hbm_bandwidth_gbps * 1e9 * 0.8;
  auto head = [&](CrossEntropyKernels k) {
    hw.engine.cross_entropy = k;
    return edge_cost(m, p, c, hw);
  };
  const EdgeCost fused = head(CrossEntropyKernels::fused);
  const EdgeCost megatron = head(CrossEntropyKernels::megatron_fp32);
  const EdgeCost torch = head(CrossEntropyKernels::torch_fp32);
  // Megatron-Core's compiled fusion: 22 forward in three kernels, 10 backward in one.
  const EdgeCost megatron_fused = head(CrossEntropyKernels::megatron_fused);
  CHECK(megatron_fused.head_fwd_s - fused.head_fwd_s == Approx(logits * (22.0 - 10.0) / bandwidth));
  CHECK(megatron_fused.head_bwd_s - fused.head_bwd_s == Approx(logits * (10.0 - 6.0) / bandwidth));
  const double launch = hw.kernel_launch_s;
  CHECK(megatron.head_fwd_s - fused.head_fwd_s == Approx(logits * (38.0 - 10.0) / bandwidth + 3 * launch));
  CHECK(megatron.head_bwd_s - fused.head_bwd_s == Approx(logits * (14.0 - 6.0) / bandwidth + 1 * launch));
  CHECK(torch.head_fwd_s - fused.head_fwd_s == Approx(logits * (22.0 - 10.0) / bandwidth));
  CHECK(torch.head_bwd_s - fused.head_bwd_s == Approx(logits * (26.0 - 6.0) / bandwidth + 3 * launch));
  CHECK(megatron.head_gemm_s == fused.head_gemm_s);
  CHECK(megatron.embedding_fwd_s == fused.embedding_fwd_s);
  // Under a graph compiler every engine's loss is the fused pass.
  EngineProfile e = hw.engine;
  e.cross_entropy = CrossEntropyKernels::megatron_fp32;
  CHECK(compiled(e).cross_entropy == CrossEntropyKernels::fused);
}
