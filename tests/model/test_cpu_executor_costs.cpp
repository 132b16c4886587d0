// The time model's CPU-executor accounting (cpu_executor_costs.hpp) against
// hand counts of the executor's kernel calls (executor/src/gpt_stage.cpp,
// kernels/src/*_cpu.cpp), against a measured 1-rank run, and the GPU path
// against hand-worked numbers of the fused Megatron accounting (unchanged).
#include <catch2/catch.hpp>
#include <algorithm>

#include "cost_model_fixtures.hpp"
#include "ztune/model/cpu_executor_costs.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/time_model.hpp"
#include "ztune/vocab/catalog.hpp"

using namespace ztune;

namespace {

// data/models/tiny.json: 4 layers, hidden 64, 4 heads, FFN 256, vocab 256, seq 64.
Transformer tiny() { return test::gpt(4, 64, 4, 64, 256); }

Plan plan(int mb, int ga, int dp = 1, int tp = 1, bool sp = false, int zero = 0) {
  Plan p = test::zero_plan(dp, tp, zero, mb, ga);
  p.sequence_parallel = sp;
  p.precision = Precision::fp32;  // the CPU backend's
  return p;
}

// Round figures so the GPU times are closed forms: 2039 GB/s at efficiency 1,
// no launch cost, every GEMM at half of the 312 TFLOP/s 16-bit peak.
HardwareProfile flat_profile() {
  HardwareProfile hw;
  hw.name = "flat";
  hw.gemm_efficiency = {{1e15, 0.5}, {1, 0.5}};
  hw.attention_gemm_factor = 1.0;
  hw.memory_bandwidth_efficiency = 1.0;
  hw.kernel_launch_s = 0;
  return hw;
}

}  // namespace

TEST_CASE("CPU executor: memory-bound bytes and calls of one block, hand count", "[cost][cpu]") {
  // micro-batch 2: N = 2·64 = 128 rows of C = 64 (8192 elements), FC width 256
  // (N·F = 32768 elements). Forward (GptStage::forward_block), fp32 traffic:
  //   layernorm_forward ×2   read x, write y        2 ·  8 B · 8192 = 131072
  //   add_bias ×2            read + write x         2 ·  8 B · 8192 = 131072
  //   accumulate ×2          read dst, src, write   2 · 12 B · 8192 = 196608
  //   gelu_forward           read, write               8 B · 32768 = 262144
  //                                                          total  720896, 7 calls
  // Backward (backward_block):
  //   bias_backward ×2       read dout              2 ·  4 B · 8192 =  65536
  //   gelu_backward          read x, dout; += dinp    16 B · 32768 = 524288
  //   layernorm_backward ×2  read x, dout; += dinp  2 · 16 B · 8192 = 262144
  //                                                          total  851968, 5 calls
  const CpuLayerWork w = cpu_layer_work(tiny(), plan(2, 4));
  CHECK(w.fwd.bytes == Approx(720896));
  CHECK(w.fwd.kernels == 7);
  CHECK(w.bwd.bytes == Approx(851968));
  CHECK(w.bwd.kernels == 5);
  // attention_forward: QKᵀ and P·V over the full 64×64 square for 2·4 heads of
  // 16 dims: 2 · (2·64·64·16) · 8 = 2,097,152 FLOPs; backward four such GEMMs.
  CHECK(w.attention_fwd_flops == Approx(2097152));
  CHECK(w.attention_bwd_flops == Approx(4194304));
  // Bias loops inside matmul_forward/backward (QKV 192 wide + FC 256 wide):
  // 128 · 448 = 57344 elements, 8 B forward (read + write), 4 B backward (read).
  CHECK(w.gemm_bias_fwd.bytes == Approx(8.0 * 57344));
  CHECK(w.gemm_bias_bwd.bytes == Approx(4.0 * 57344));

  // tp 2 with sequence parallelism: the residual stream is 64 rows (4096
  // elements) per rank, the FC 128 wide over all 128 rows (16384 elements):
  // forward 56 B · 4096 + 8 B · 16384 = 360448; backward 40 B · 4096 + 16 B · 16384.
  const CpuLayerWork s = cpu_layer_work(tiny(), plan(2, 4, 1, 2, true));
  CHECK(s.fwd.bytes == Approx(360448));
  CHECK(s.bwd.bytes == Approx(40.0 * 4096 + 16.0 * 16384));
  CHECK(s.attention_fwd_flops == Approx(2097152 / 2));
}

TEST_CASE("CPU executor: embedding, head + loss and optimizer, hand count", "[cost][cpu]") {
  const CpuEdgeWork e = cpu_edge_work(tiny(), plan(2, 4));
  // embedding_forward over 128×64 token rows (8 B), over 128×64 position rows
  // (8 B), accumulate (12 B): 28 B · 8192.
  CHECK(e.embedding_fwd.bytes == Approx(28.0 * 8192));
  CHECK(e.embedding_fwd.kernels == 3);
  // embedding_backward into wpe and wte: read gradient, read + write row, 2 · 12 B · 8192.
  CHECK(e.embedding_bwd.bytes == Approx(24.0 * 8192));
  CHECK(e.embedding_bwd.kernels == 2);
  // head_forward: final LayerNorm 8 B · 8192; ce_row_max and ce_row_sumexp read
  // the 128×256 logits (4 B · 32768 each); ce_target_logit 8 B and ce_loss
  // 16 B per row (128 rows): 65536 + 262144 + 1024 + 2048 = 330752, 5 calls.
  CHECK(e.head_fwd.bytes == Approx(330752));
  CHECK(e.head_fwd.kernels == 5);
  // head_backward: ce_backward 12 B · 32768 + final LayerNorm backward 16 B · 8192.
  CHECK(e.head_bwd.bytes == Approx(524288));
  CHECK(e.head_bwd.kernels == 2);

  // Optimizer, dp 2 ZeRO-1. The tiny model's parameters, by hand: 4 blocks of
  // 12·64² + 13·64 = 49984, token 256·64 and position 64·64 embeddings, final
  // norm 2·64: 199936 + 20480 + 128 = 220544. Each rank owns 110272: a
  // sum_squares pass (4 B) and AdamW (read p, g, m, v; write p, m, v: 28 B)
  // over them; 52 tensors, half of them in each rank's piece, + 1 AdamW call.
  const CpuKernelWork o = cpu_optimizer_work(tiny(), plan(4, 2, 2, 1, false, 1), 220544);
  CHECK(o.bytes == Approx(32.0 * 110272));
  CHECK(o.kernels == 27);
  // ZeRO-2 adds, every micro-batch, the reduce-scattered piece into the owned
  // gradients (accumulate, 12 B): 2 micro-batches · 12 B · 110272 more.
  const CpuKernelWork o2 = cpu_optimizer_work(tiny(), plan(4, 2, 2, 1, false, 2), 220544);
  CHECK(o2.bytes - o.bytes == Approx(2.0 * 12.0 * 110272));
  CHECK(o2.kernels - o.kernels == 2);
  // A Llama block registers 6 tensors (GptStage: 2 RMSNorm weights, QKV,
  // output, fused gate-up and down projections; no biases): 4 · 6 + the
  // single stage's 4 edge tensors (counted as GPT-2's: two embeddings, the
  // final norm's two) = 28 tensors, 14 in each rank's piece, + 1 AdamW call.
  Transformer llama = tiny();
  llama.bias = false;
  llama.norm = NormKind::rmsnorm;
  llama.activation = Activation::swiglu;
  CHECK(cpu_optimizer_work(llama, plan(4, 2, 2, 1, false, 1), 220544).kernels == 15);
}

TEST_CASE("GPU clusters keep the fused Megatron accounting", "[cost][cpu]") {
  // tiny, micro-batch 2, fp16 on an A100 (2039 GB/s, 312 TFLOP/s) at flat_profile().
  // Elementwise forward, 16-bit, hs = 8192: 2 norms (2·hs·2 B each), 2
  // bias-dropout-adds (3·hs·2 B + hs mask each), GeLU (256 + 256)·128·2 B:
  // 65536 + 114688 + 131072 = 311296 B → 311296 / 2.039e12 s.
  // Attention: QKᵀ and P·V are bandwidth-bound here: (64·16 + 16·64 + 64·64)·8
  // elements · 2 B = 98304 B each (FLOPs 1048576 / 156e12 is shorter); fused
  // softmax + dropout over 8·64·64 = 32768 scores: 32768 · (4 + 5) B = 294912.
  Plan p = plan(2, 4);
  p.precision = Precision::fp16;
  const Cluster gpu = test::a100_nodes(1);
  const LayerCost lc = layer_cost(tiny(), p, gpu, flat_profile());
  CHECK(lc.fwd_elementwise_s == Approx(311296.0 / 2.039e12));
  CHECK(lc.fwd_attention_s == Approx((2.0 * 98304.0 + 294912.0) / 2.039e12));
  // Backward elementwise is twice the forward traffic.
  CHECK(lc.bwd_elementwise_s == Approx(2.0 * 311296.0 / 2.039e12));
  // Fused Adam: 38 B per parameter over the GPU's 220544 (the embedding and
  // norm counted once: tied head) → 38 · 220544 / 2.039e12.
  const OptimizerCost o = optimizer_cost(tiny(), p, gpu, flat_profile());
  CHECK(o.gpu_step_s == Approx(38.0 * 220544 / 2.039e12));

  // The same node described as CPU ranks switches to the executor's count:
  // the fp32 elementwise pass is no longer the fused 16-bit one.
  Cluster cpu = gpu;
  cpu.device_kind = DeviceKind::cpu;
  const LayerCost lcpu = layer_cost(tiny(), plan(2, 4), cpu, flat_profile());
  CHECK(lcpu.fwd_elementwise_s != Approx(lc.fwd_elementwise_s));
}

TEST_CASE("CPU executor: compute by kind against a measured 1-rank run", "[cost][cpu]") {
  // Oracle: `ztune run` of tiny, dp 1, micro-batch 2, 4 micro-batches, 6 steps,
  // on the 2-core development VM (2026-11-30; three runs, ops_rank0 per step):
  // gemm 0.0212-0.0217 s, attention 0.0059-0.0060 s, memory_bound 0.0154-0.0155 s.
  // Profile and figures: `ztune calibrate --cluster local-cpu --np 2` there, the
  // same day: fp32 peak 0.0343 TFLOP/s, copy bandwidth 30.88 GB/s, memory-bound
  // efficiency 0.1334, no launch cost, attention factor 0.516.
  Cluster c = load_cluster("local-cpu");
  c.node.gpu.peak_tflops_fp32 = 0.03431;
  c.node.gpu.hbm_bandwidth_gbps = 30.88;
  HardwareProfile hw = default_profile_for(c);
  hw.gemm_efficiency = {{1e9, 0.771}, {1e8, 1.0}, {1e7, 0.862}, {1e6, 0.913}, {1e5, 0.685}, {1e4, 0.850}};
  hw.attention_gemm_factor = 0.516;
  hw.memory_bandwidth_efficiency = 0.1334;
  hw.kernel_launch_s = 0;
  const ComputeByKind k = compute_by_kind_rank0(tiny(), plan(2, 4), c, hw);
  // The machine repeats a run within ~5%; 20% is the acceptance band.
  CHECK(k.gemm == Approx(0.0215).epsilon(0.20));
  CHECK(k.attention == Approx(0.0060).epsilon(0.20));
  CHECK(k.memory_bound == Approx(0.0155).epsilon(0.20));
}

TEST_CASE("CPU executor: the cp ring's exchanges hide behind the executor's own block steps", "[cost][cpu][cp]") {
  // executor/src/ring_attention.cpp starts the next K/V chunk's send and
  // receive before each block and waits after it: per step, what of the
  // exchange outlasts that rank's block is exposed. The block is the
  // executor's attention work of the pass split in cp steps, the same time
  // the layer's attention reports, not a GPU kernel's.
  const Cluster c = load_cluster("local-cpu");
  const HardwareProfile hw = default_profile_for(c);
  for (const AttentionKernel kernel : {AttentionKernel::standard, AttentionKernel::flash}) {
    for (const int cp : {2, 4}) {
      Plan p = plan(1, 1);
      p.cp = cp;
      p.attention = kernel;
      INFO("cp " << cp << " " << to_string(kernel));
      REQUIRE_FALSE(check_plan(p, tiny(), c));
      const LayerCost lc = layer_cost(tiny(), p, c, hw);
      CHECK(lc.cp_steps == cp);
      CHECK(lc.cp_step_fwd_s * cp == Approx(lc.fwd_attention_s).epsilon(1e-12));
      CHECK(lc.cp_step_bwd_s * cp == Approx(lc.bwd_attention_s).epsilon(1e-12));
      // Exposure: (cp − 1) exchanges each beyond its block, plus dK/dV's last hop home.
      const double kv = lc.cp_fwd_link_s / (cp - 1);
      CHECK(lc.cp_fwd_s == Approx((cp - 1) * std::max(0.0, kv - lc.cp_step_fwd_s)).margin(1e-15));
      CHECK(lc.cp_bwd_s >= kv);
    }
  }
}
