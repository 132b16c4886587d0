// FP8 linear layers (plan.fp8) in the cost model. Oracles: closed forms worked
// by hand for a GPT layer (24·s·b·h² GEMM FLOPs; the four linear inputs,
// output gradients and 12·h² weights of Megatron's split), the GPU's FP8 peak,
// and the bytes each library's casts and saved tensors move as Transformer
// Engine 1.x's modules (module/linear.py, layernorm_linear.py) run under
// Megatron-Core's layer spec (TELayerNormColumnParallelLinear for QKV and
// FC1, TERowParallelLinear for the projection and FC2, Megatron's activation
// between) and as torchao's Float8Linear runs them. The profile has one GEMM efficiency at
// every size and no launch cost, so each time is its FLOPs or bytes over a
// rate written here; at these shapes (s 2048, h 1024) every FP8 GEMM stays
// compute-bound at the full HBM rate (the smallest, the projection's 4.3
// GFLOP, takes 3.6 µs against 2.4 µs for its 7.3 MB).
#include <catch2/catch.hpp>

#include "cost_model_fixtures.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/model/time_model.hpp"
#include "ztune/vocab/hardware_profile.hpp"

using namespace ztune;

namespace {

constexpr double kPeak16 = 1000e12, kPeak8 = 2000e12, kHbm = 3000e9, kHbmEff = 1.0, kGemmEff = 0.6;

// One node of 8 GPUs with FP8 units: round H100-like figures.
Cluster fp8_node() {
  Cluster c = test::a100_nodes(1);
  c.node.gpu = {"FP8-GPU", 80, 1000, 1000, 60, 3000};
  c.node.gpu.peak_tflops_fp8 = 2000;
  return c;
}

HardwareProfile flat_profile(Fp8Library lib) {
  HardwareProfile hw;
  hw.name = "test";
  hw.gemm_efficiency = {{1e15, kGemmEff}, {1, kGemmEff}};
  hw.attention_gemm_factor = 0.7;
  hw.memory_bandwidth_efficiency = kHbmEff;
  hw.kernel_launch_s = 0;
  hw.engine.host_op_s = 0;
  hw.intra_node = {0.75, 0, 20e-6};
  hw.inter_node = {0.9, 0, 20e-6};
  hw.engine.fp8 = lib;
  return hw;
}

// One GPU, one 2048-token sequence, bf16.
Plan one_gpu(Fp8Recipe r) {
  Plan p = test::zero_plan(1, 1, 0, 1, 1);
  p.precision = Precision::bf16;
  p.attention = AttentionKernel::flash;
  p.fp8 = r;
  return p;
}

constexpr double s = 2048, h = 1024;
const Transformer kModel = test::gpt(4, 1024, 16, 2048, 51200);
double hbm_s(double bytes) { return bytes / (kHbm * kHbmEff); }

}  // namespace

TEST_CASE("fp8: the four linear GEMMs run at the FP8 peak, the rest of the layer as before", "[fp8][time]") {
  const Cluster c = fp8_node();
  const HardwareProfile hw = flat_profile(Fp8Library::transformer_engine);
  const LayerCost bf = layer_cost(kModel, one_gpu(Fp8Recipe::none), c, hw);
  const LayerCost f8 = layer_cost(kModel, one_gpu(Fp8Recipe::delayed), c, hw);
  // 24·s·b·h² FLOPs: QKV 3h², projection h², FC1 and FC2 4h² each, 2 FLOPs a MAC.
  const double flops = 2 * s * (3 * h * h + h * h + 4 * h * h + 4 * h * h);
  CHECK(bf.fwd_gemm_s == Approx(flops / (kPeak16 * kGemmEff)));
  CHECK(f8.fwd_gemm_s == Approx(flops / (kPeak8 * kGemmEff)));
  CHECK(f8.bwd_gemm_s == Approx(2 * flops / (kPeak8 * kGemmEff)));  // dgrad and wgrad: FP8 too (TE's default)
  CHECK(f8.fwd_attention_s == Approx(bf.fwd_attention_s));          // the attention core stays 16-bit
  CHECK(f8.fwd_flops == Approx(bf.fwd_flops));                      // the same work, counted alike
  // The LM head's GEMM stays 16-bit (Megatron-Core's output layer is not a TE module).
  CHECK(edge_cost(kModel, one_gpu(Fp8Recipe::delayed), c, hw).head_gemm_s ==
        Approx(edge_cost(kModel, one_gpu(Fp8Recipe::none), c, hw).head_gemm_s));
}

TEST_CASE("fp8: Transformer Engine's casts, delayed and tensorwise", "[fp8][time]") {
  const Cluster c = fp8_node();
  const HardwareProfile hw = flat_profile(Fp8Library::transformer_engine);
  const LayerCost bf = layer_cost(kModel, one_gpu(Fp8Recipe::none), c, hw);
  const LayerCost dl = layer_cost(kModel, one_gpu(Fp8Recipe::delayed), c, hw);
  // Forward: the projection's input (s·h) and FC2's (s·4h) cast and
  // transposed, 2 bytes read, 2 written; the norms write QKV's and FC1's inputs
  // in FP8 themselves.
  CHECK(dl.fwd_elementwise_s - bf.fwd_elementwise_s == Approx(hbm_s(4 * s * (h + 4 * h))));
  // Backward: every output gradient, QKV's (3h wide), the projection's (h),
  // FC1's (4h) and FC2's (h), cast and transposed (4 bytes each); the FP8
  // inputs the norms wrote, QKV's and FC1's (h), transposed for wgrad (2 bytes each).
  const double bwd = 4 * s * (3 * h + h + 4 * h + h) + 2 * s * (h + h);
  CHECK(dl.bwd_elementwise_s - bf.bwd_elementwise_s == Approx(hbm_s(bwd)));
  // Current scaling reads every cast's 16-bit source once more for its amax:
  // the inputs (h, h, h, 4h) forward, the output gradients (3h, h, 4h, h) backward.
  const LayerCost tw = layer_cost(kModel, one_gpu(Fp8Recipe::tensorwise), c, hw);
  CHECK(tw.fwd_elementwise_s - dl.fwd_elementwise_s == Approx(hbm_s(2 * s * 7 * h)));
  CHECK(tw.bwd_elementwise_s - dl.bwd_elementwise_s == Approx(hbm_s(2 * s * 9 * h)));
  // Full recomputation repeats the forward, casts included.
  Plan full = one_gpu(Fp8Recipe::delayed);
  full.recompute = Recompute::full;
  CHECK(layer_cost(kModel, full, c, hw).recompute_s == Approx(dl.fwd_s));
}

TEST_CASE("fp8: torchao casts every input and weight at each use", "[fp8][time]") {
  const Cluster c = fp8_node();
  const HardwareProfile hw = flat_profile(Fp8Library::torchao);
  const LayerCost bf = layer_cost(kModel, one_gpu(Fp8Recipe::none), c, hw);
  const LayerCost tw = layer_cost(kModel, one_gpu(Fp8Recipe::tensorwise), c, hw);
  const double inputs = s * 7 * h, grads = s * 9 * h, weights = 12 * h * h;
  // Forward: amax (2) and cast (2 + 1) of each input and weight. Backward: amax
  // and two-layout cast of each output gradient (2 + 2 + 2), amax and cast
  // again of the saved 16-bit inputs and of the weights (2 + 2 + 1).
  CHECK(tw.fwd_elementwise_s - bf.fwd_elementwise_s == Approx(hbm_s(5 * (inputs + weights))));
  CHECK(tw.bwd_elementwise_s - bf.bwd_elementwise_s == Approx(hbm_s(6 * grads + 5 * (inputs + weights))));
}

TEST_CASE("fp8: Transformer Engine's weight copies, refreshed once a step", "[fp8][time][memory]") {
  const Cluster c = fp8_node();
  const HardwareProfile hw = flat_profile(Fp8Library::transformer_engine);
  const double weights = 4 * 12 * h * h;  // the four layers' linear weights
  // The optimizer step casts each updated weight to FP8 and its transpose: read 2, write 2.
  CHECK(optimizer_cost(kModel, one_gpu(Fp8Recipe::delayed), c, hw).gpu_step_s -
            optimizer_cost(kModel, one_gpu(Fp8Recipe::none), c, hw).gpu_step_s ==
        Approx(hbm_s(4 * weights)));
  // torchao casts at each use, in the layers' passes: nothing at the step.
  const HardwareProfile ao = flat_profile(Fp8Library::torchao);
  CHECK(optimizer_cost(kModel, one_gpu(Fp8Recipe::tensorwise), c, ao).gpu_step_s ==
        Approx(optimizer_cost(kModel, one_gpu(Fp8Recipe::none), c, ao).gpu_step_s));
  // Memory: the cached copies, 1 + 1 bytes a weight, in the workspace line.
  const MemoryPrediction bf = predict_memory(kModel, one_gpu(Fp8Recipe::none), c, hw);
  const MemoryPrediction f8 = predict_memory(kModel, one_gpu(Fp8Recipe::delayed), c, hw);
  CHECK(f8.line(MemLine::workspace) - bf.line(MemLine::workspace) == Approx(2 * weights));
  // torchao: one layer's copies live at a time.
  CHECK(predict_memory(kModel, one_gpu(Fp8Recipe::tensorwise), c, ao).line(MemLine::workspace) -
            predict_memory(kModel, one_gpu(Fp8Recipe::none), c, ao).line(MemLine::workspace) ==
        Approx(2 * 12 * h * h));
}

TEST_CASE("fp8: Transformer Engine keeps the linear inputs in FP8", "[fp8][memory]") {
  const Cluster c = fp8_node();
  const HardwareProfile hw = flat_profile(Fp8Library::transformer_engine);
  // Korthikanti's 34·s·b·h holds the four linear inputs as 2 + 2 + 2 + 8
  // bytes per s·b·h (QKV, projection, FC1, FC2's 4h): in FP8 half of it, 7,
  // with the standard attention core, which frees its output.
  Plan standard = one_gpu(Fp8Recipe::delayed);
  standard.attention = AttentionKernel::standard;
  Plan standard16 = standard;
  standard16.fp8 = Fp8Recipe::none;
  const double saving = 4 * 7 * s * h;  // four layers, one micro-batch in flight
  CHECK(predict_memory(kModel, standard16, c, hw).line(MemLine::activations) -
            predict_memory(kModel, standard, c, hw).line(MemLine::activations) ==
        Approx(saving));
  // A flash kernel keeps the attention output (the projection's input) for
  // its own backward: the FP8 copy is a byte more, 6 − 1 = 5 per s·b·h.
  CHECK(predict_memory(kModel, one_gpu(Fp8Recipe::none), c, hw).line(MemLine::activations) -
            predict_memory(kModel, one_gpu(Fp8Recipe::delayed), c, hw).line(MemLine::activations) ==
        Approx(4 * 5 * s * h));
  // With tensor parallelism 2 and sequence parallelism every input is split: 7·s·b·h/2.
  Plan sp = standard;
  sp.tp = 2;
  sp.sequence_parallel = true;
  Plan sp16 = sp;
  sp16.fp8 = Fp8Recipe::none;
  CHECK(predict_memory(kModel, sp16, c, hw).line(MemLine::activations) -
            predict_memory(kModel, sp, c, hw).line(MemLine::activations) ==
        Approx(saving / 2));
  // Full recomputation keeps only each layer's input: only the layer being
  // recomputed (its whole activations) is smaller.
  Plan full = standard;
  full.recompute = Recompute::full;
  Plan full16 = full;
  full16.fp8 = Fp8Recipe::none;
  CHECK(predict_memory(kModel, full16, c, hw).line(MemLine::activations) -
            predict_memory(kModel, full, c, hw).line(MemLine::activations) ==
        Approx(7 * s * h));
  // torchao keeps its 16-bit inputs.
  const HardwareProfile ao = flat_profile(Fp8Library::torchao);
  CHECK(predict_memory(kModel, one_gpu(Fp8Recipe::tensorwise), c, ao).line(MemLine::activations) ==
        Approx(predict_memory(kModel, one_gpu(Fp8Recipe::none), c, ao).line(MemLine::activations)));
}

TEST_CASE("fp8: utilization is against the FP8 peak", "[fp8][time]") {
  const Cluster c = fp8_node();
  const HardwareProfile hw = flat_profile(Fp8Library::transformer_engine);
  const TimePrediction t = predict_time(kModel, one_gpu(Fp8Recipe::delayed), c, hw);
  CHECK(t.mfu == Approx(t.model_tflops_per_gpu * 1e12 / kPeak8));
  const TimePrediction b = predict_time(kModel, one_gpu(Fp8Recipe::none), c, hw);
  CHECK(b.mfu == Approx(b.model_tflops_per_gpu * 1e12 / kPeak16));
  CHECK(t.iteration_s < b.iteration_s);
}

TEST_CASE("fp8: the plan's rules", "[fp8][plan]") {
  const Cluster c = fp8_node();
  Plan p = one_gpu(Fp8Recipe::delayed);
  CHECK_FALSE(check_plan(p, kModel, c));
  p.precision = Precision::fp32;
  REQUIRE(check_plan(p, kModel, c));
  CHECK(check_plan(p, kModel, c)->starts_with("$.fp8: FP8 linear layers cast the plan's 16-bit"));
  // A GPU without FP8 units (the A100 fixture) refuses it, naming the GPU.
  p.precision = Precision::bf16;
  const auto why = check_plan(p, kModel, test::a100_nodes(1));
  REQUIRE(why);
  CHECK(why->find("A100-SXM4-80GB has no FP8 tensor cores") != std::string::npos);
  // A CPU cluster has no FP8 units, whatever its file says, and that is said
  // before the fp32 precision such a cluster defaults to.
  Cluster cpu = c;
  cpu.device_kind = DeviceKind::cpu;
  p.precision = Precision::fp32;
  const auto cpu_why = check_plan(p, kModel, cpu);
  REQUIRE(cpu_why);
  CHECK(cpu_why->starts_with("$.fp8: a CPU cluster (test-a100) has no FP8 tensor cores"));
  p.precision = Precision::bf16;
  // FP8 GEMMs need weight dimensions that are multiples of 16 on each rank
  // (Transformer Engine's assert_dim_for_fp8_exec): hidden 1040 = 65 · 16
  // splits into 520 = 32.5 · 16 over tp 2.
  const Transformer odd = test::gpt(4, 1040, 16, 2048, 51200);
  Plan tp2 = one_gpu(Fp8Recipe::delayed);
  CHECK_FALSE(check_plan(tp2, odd, c));
  tp2.tp = 2;
  const auto dims = check_plan(tp2, odd, c);
  REQUIRE(dims);
  CHECK(dims->find("the QKV weight is 1040 × 1560 on each of tp 2 ranks") != std::string::npos);
  tp2.fp8 = Fp8Recipe::none;
  CHECK_FALSE(check_plan(tp2, odd, c));
  // The layer-cost memo tells FP8 plans apart.
  CHECK_FALSE(layer_cost_key(one_gpu(Fp8Recipe::delayed)) == layer_cost_key(one_gpu(Fp8Recipe::none)));
  CHECK_FALSE(layer_cost_key(one_gpu(Fp8Recipe::delayed)) == layer_cost_key(one_gpu(Fp8Recipe::tensorwise)));
}

// Megatron-LM's --fp8-param-gather (fp8_param_gather): the linear weights'
// compute copy is FP8 (1 byte, not 2), Transformer Engine caches only its
// transpose (1 byte, not the 2 of a separate FP8 copy), and the distributed
// optimizer's parameter all-gather moves those weights in 1 byte.
TEST_CASE("fp8: FP8 parameters drop the 16-bit weights and the cache's copy, and halve their all-gather",
          "[fp8][memory][dp]") {
  const Cluster c = fp8_node();
  const HardwareProfile hw = flat_profile(Fp8Library::transformer_engine);
  Plan f8 = test::zero_plan(8, 1, 1, 1, 1);
  f8.precision = Precision::bf16;
  f8.attention = AttentionKernel::flash;
  f8.fp8 = Fp8Recipe::delayed;
  Plan params = f8;
  params.fp8_param_gather = true;
  const double weights = 4 * 12 * h * h;  // the four layers' linear weights
  const MemoryPrediction a = predict_memory(kModel, f8, c, hw), b = predict_memory(kModel, params, c, hw);
  CHECK(a.line(MemLine::params) - b.line(MemLine::params) == Approx(weights));
  CHECK(a.line(MemLine::workspace) - b.line(MemLine::workspace) == Approx(weights));
  CHECK(a.line(MemLine::optimizer) == Approx(b.line(MemLine::optimizer)));  // the fp32 main weights stay
  CHECK(dp_sync_cost(kModel, f8, c, hw).bytes_per_step - dp_sync_cost(kModel, params, c, hw).bytes_per_step ==
        Approx(weights));
  // The optimizer writes the FP8 weights itself: only the transpose is refreshed (1 + 1 bytes).
  CHECK(optimizer_cost(kModel, f8, c, hw).gpu_step_s - optimizer_cost(kModel, params, c, hw).gpu_step_s ==
        Approx(hbm_s(2 * weights)));
  // Nor beside master remainders: no bf16 weight is left to complete.
  params.param_remainders = true;
  REQUIRE(check_plan(params, kModel, c));
  CHECK(check_plan(params, kModel, c)->starts_with("$.fp8_param_gather: FP8 weights leave no bf16 weight"));
  params.param_remainders = false;
  // Offloaded parameters leave the GPU's params line empty, FP8 or not.
  Plan off = params;
  off.zero_stage = 3;
  off.offload_optimizer = off.offload_params = OffloadTarget::cpu;
  CHECK(predict_memory(kModel, off, c, hw).line(MemLine::params) == 0);
  // It keeps FP8 weights: not without fp8.
  params.fp8 = Fp8Recipe::none;
  REQUIRE(check_plan(params, kModel, c));
  CHECK(check_plan(params, kModel, c)->starts_with("$.fp8_param_gather: keeps the linear layers' weights in FP8"));
}

// Transformer Engine under delayed scaling gathers FP8 with sequence
// parallelism (the norms' FP8 outputs, the FP8 output gradients, the saved FP8
// inputs); the reduce-scatters stay 16-bit. Oracle: nccl-tests' ring
// all-gather worked by hand from the fixture (NVSwitch 300 GB/s at 0.75 busbw,
// tp 2: each rank moves S/2): half the bytes take half the bandwidth time,
// the latency terms are the same.
TEST_CASE("fp8: delayed scaling under Transformer Engine gathers FP8 across tensor-parallel ranks", "[fp8][tp]") {
  const Cluster c = fp8_node();
  const HardwareProfile hw = flat_profile(Fp8Library::transformer_engine);
  Plan p = one_gpu(Fp8Recipe::delayed);
  p.tp = 2;
  p.sequence_parallel = true;
  Plan q = p;
  q.fp8 = Fp8Recipe::none;
  const LayerCost f8 = layer_cost(kModel, p, c, hw), bf = layer_cost(kModel, q, c, hw);
  const double S = s * h * 2;              // s·b·h 16-bit
  const double saved = (S / 2) / 2 / 225e9;  // per all-gather: half of S/2 at 225 GB/s
  CHECK(bf.tp_fwd_s - f8.tp_fwd_s == Approx(2 * saved));        // before QKV and FC1
  CHECK(bf.tp_bwd_s - f8.tp_bwd_s == Approx(2 * saved));        // the output gradients
  CHECK(bf.tp_bwd_async_s - f8.tp_bwd_async_s == Approx(2 * saved));  // the inputs re-gathered
  // Current scaling and torchao gather 16-bit.
  p.fp8 = Fp8Recipe::tensorwise;
  CHECK(layer_cost(kModel, p, c, hw).tp_fwd_s == Approx(bf.tp_fwd_s));
}
