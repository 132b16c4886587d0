// The ztune engine prices ztune's executor as its code runs a 16-bit plan on a
// GPU (EngineProfile::executor): parameters, gradients, activations and
// collectives in the plan's 16-bit type with fp32 masters (issue 24), every
// GEMM and kernel on the stored values (CudaBackend's native hooks), its own
// allocations for memory, and its context-parallel ring and Ulysses
// all-to-all attending on fp32 copies. Oracles: closed forms over the
// profile's own figures, and the same plan on a 16-bit engine with the same
// figures.
#include <catch2/catch.hpp>

#include "cost_model_fixtures.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/hardware_profile.hpp"

using namespace ztune;

namespace {

Plan tp_plan(Precision precision) {
  Plan p = test::zero_plan(4, 2, 1, 2, 8);
  p.recompute = Recompute::full;
  p.attention = AttentionKernel::flash;
  p.precision = precision;
  return p;
}

// DeepSpeed's GPU figures as the executor's or as DeepSpeed's own: only what
// being the executor changes differs between the two.
HardwareProfile executing(const Cluster& c, bool executor) {
  HardwareProfile hw = with_engine(default_profile_for(c), "deepspeed");
  hw.engine.executor = executor;
  return hw;
}

}  // namespace

TEST_CASE("the shipped ztune engine is the executor, and no other engine is", "[model][executor]") {
  CHECK(load_engine_profile("ztune").executor);
  for (const char* name : {"megatron", "deepspeed", "fsdp"}) {
    INFO(name);
    CHECK_FALSE(load_engine_profile(name).executor);
  }
  Plan p = tp_plan(Precision::bf16);
  CHECK(storage_precision(p) == Precision::bf16);  // every engine's, the executor's too
  const EngineProfile ztune = load_engine_profile("ztune"), megatron = load_engine_profile("megatron");
  CHECK(attention_precision(p, ztune) == Precision::bf16);
  p.attention = AttentionKernel::standard;
  CHECK(attention_precision(p, ztune) == Precision::bf16);
  // The ring and Ulysses attend on fp32 copies in the executor, on the stored values in Megatron-Core.
  p.cp = 2;
  CHECK(attention_precision(p, ztune) == Precision::fp32);
  CHECK(attention_precision(p, megatron) == Precision::bf16);
  p.cp = 1;
  p.ulysses = 2;
  CHECK(attention_precision(p, ztune) == Precision::fp32);
}

TEST_CASE("the executor's 16-bit kernels cost a 16-bit engine's: half an fp32 plan's traffic, no staging",
          "[model][executor]") {
  // Every layer term of a bf16 plan is the 16-bit engine's with the same
  // figures, standard and flash attention alike (CudaBackend runs each kernel
  // on the stored values); the tensor-parallel all-reduce moves the 2-byte
  // activations, half an fp32 plan's.
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  for (const AttentionKernel k : {AttentionKernel::flash, AttentionKernel::standard}) {
    INFO(to_string(k));
    Plan bf16 = tp_plan(Precision::bf16);
    bf16.attention = k;
    Plan fp32 = bf16;
    fp32.precision = Precision::fp32;
    const LayerCost executor = layer_cost(m, bf16, c, executing(c, true));
    const LayerCost engine16 = layer_cost(m, bf16, c, executing(c, false));
    CHECK(executor.fwd_elementwise_s == Approx(engine16.fwd_elementwise_s));
    CHECK(executor.bwd_elementwise_s == Approx(engine16.bwd_elementwise_s));
    CHECK(executor.fwd_attention_s == Approx(engine16.fwd_attention_s));
    CHECK(executor.bwd_attention_s == Approx(engine16.bwd_attention_s));
    CHECK(executor.fwd_gemm_s == Approx(engine16.fwd_gemm_s));
    CHECK(executor.bwd_gemm_s == Approx(engine16.bwd_gemm_s));
    const double tokens = static_cast<double>(m.seq_len) * bf16.micro_batch;
    CHECK(executor.tp_bytes == Approx(2.0 * tokens * m.hidden));
    CHECK(layer_cost(m, fp32, c, executing(c, true)).tp_bytes == Approx(4.0 * tokens * m.hidden));
    CHECK(layer_cost(m, fp32, c, executing(c, true)).fwd_elementwise_s > executor.fwd_elementwise_s);
  }
}

TEST_CASE("the executor's context-parallel attention computes in fp32, Megatron-Core's in the stored type",
          "[model][executor]") {
  // GptStage::attend hands the ring fp32 copies: its blocks run at the fp32
  // peak and move 4-byte elements, slower than the same ring on the 16-bit
  // values with the same figures; the linear layers are untouched.
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  Plan p = tp_plan(Precision::bf16);
  p.cp = 2;
  p.dp = 2;
  const LayerCost executor = layer_cost(m, p, c, executing(c, true));
  const LayerCost engine16 = layer_cost(m, p, c, executing(c, false));
  CHECK(executor.fwd_attention_s > engine16.fwd_attention_s);
  CHECK(executor.bwd_attention_s > engine16.bwd_attention_s);
  CHECK(executor.fwd_gemm_s == Approx(engine16.fwd_gemm_s));
}

TEST_CASE("the executor's optimizer step streams 38 bytes a 16-bit parameter, 32 an fp32 one", "[model][executor]") {
  // Fused AdamW: read master, gradient, momentum and variance (16), write
  // master, momentum, variance (12) and the norm's read of the gradient: with
  // 16-bit storage the 16-bit copy (2) and the unscale/norm pass (8) as
  // DeepSpeed's fused Adam (38, op_costs); an fp32 plan's parameters are the
  // masters: 16 + 12 + 4 = 32.
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  Plan p = tp_plan(Precision::bf16);
  const HardwareProfile h32 = executing(c, true);
  const double part = stage_params(m, p) / p.shard_group();
  const double hbm = c.node.gpu.hbm_bandwidth_gbps * 1e9 * h32.memory_bandwidth_efficiency;
  CHECK(optimizer_cost(m, p, c, h32).gpu_step_s == Approx(38.0 * part / hbm + 4 * h32.kernel_launch_s));
  p.precision = Precision::fp32;
  CHECK(optimizer_cost(m, p, c, h32).gpu_step_s == Approx(32.0 * part / hbm + 4 * h32.kernel_launch_s));
}

TEST_CASE("the executor's model states and buffers on a GPU rank are those of CPU ranks",
          "[model][executor][memory]") {
  // What the executor allocates does not depend on the device: the lines of a
  // bf16 plan on a GPU equal those of the same plan on CPU ranks (which
  // tests/executor check against its tracked allocations), with the CUDA
  // context, NCCL, cuBLAS and the allocator's slack on top.
  const Transformer m = load_transformer("tiny");
  const Cluster gpu = load_cluster("dgx-a100-80gb");
  const Cluster cpu = load_cluster("local-cpu");
  Plan p = test::zero_plan(2, 1, 2, 2, 2);
  p.attention = AttentionKernel::flash;
  p.precision = Precision::bf16;
  const MemoryPrediction on_gpu = predict_memory(m, p, gpu, with_engine(default_profile_for(gpu), "ztune"));
  const MemoryPrediction on_cpu = predict_memory(m, p, cpu, default_profile_for(cpu));
  for (const MemLine l : {MemLine::params, MemLine::grads, MemLine::optimizer, MemLine::activations,
                          MemLine::comm_buckets, MemLine::logits}) {
    INFO(kMemLineNames[static_cast<std::size_t>(l)]);
    CHECK(on_gpu.line(l) == Approx(on_cpu.line(l)));
  }
  // 2 + 2 + 12 bytes a parameter (ZeRO paper §3.1's 16Ψ), ZeRO-2 partitioning
  // gradients and states over 2; an fp32 plan 4 + 4 + 8.
  const double psi = on_cpu.line(MemLine::params) / 2.0;
  CHECK(on_gpu.line(MemLine::grads) == Approx(2.0 * psi / 2));
  CHECK(on_gpu.line(MemLine::optimizer) == Approx(12.0 * psi / 2));
  p.precision = Precision::fp32;
  const MemoryPrediction fp32 = predict_memory(m, p, cpu, default_profile_for(cpu));
  CHECK(fp32.line(MemLine::params) == Approx(4.0 * psi));
  CHECK(fp32.line(MemLine::optimizer) == Approx(8.0 * psi / 2));
  // Gradients the plan reduces in fp32 (Megatron's main_grad) are kept in fp32.
  p.precision = Precision::bf16;
  p.grad_reduce_dtype = Precision::fp32;
  CHECK(predict_memory(m, p, cpu, default_profile_for(cpu)).line(MemLine::grads) == Approx(4.0 * psi / 2));
  CHECK(on_gpu.line(MemLine::runtime) > 1e9);  // the CUDA context and a communicator
  CHECK(on_cpu.line(MemLine::runtime) == 0);
}

TEST_CASE("a GPU rank's workspace: the backward's temporaries, in the stored type",
          "[model][executor][memory]") {
  // On a GPU every kernel runs on the stored values (CudaBackend's *_native
  // hooks): the backward's temporaries are what GptStage holds at its largest
  // moment (executor/src/gpt_block.cpp, gpt_stage.cpp), 2 bytes each in bf16
  // and 4 in fp32, so an fp32 plan's workspace exceeds a bf16 one's by 2 bytes
  // on each (cuBLAS's workspace, the same in both, cancels). 8 sequences a
  // micro-batch: the activations outgrow the optimizer step's fp32 workspace.
  Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  const HardwareProfile hw = with_engine(default_profile_for(c), "ztune");
  Plan p;
  p.micro_batch = 8;
  p.global_batch = 8;
  p.attention = AttentionKernel::flash;
  auto saved = [&] {  // fp32's workspace less bf16's, in bytes
    Plan q = p;
    q.precision = Precision::fp32;
    const double fp32 = predict_memory(m, q, c, hw).line(MemLine::workspace);
    q.precision = Precision::bf16;
    return fp32 - predict_memory(m, q, c, hw).line(MemLine::workspace);
  };
  const double n = 8.0 * m.seq_len, h = m.hidden, f = m.ffn_hidden, a = m.heads, s = m.seq_len;
  // GPT-2's vocabulary: the loss's backward is the largest moment, the logits'
  // gradient (n·V) beside the logits and the residual stream's incoming and
  // outgoing gradients (2·n·h).
  CHECK(saved() == Approx(2.0 * (2.0 * n * h + n * m.vocab)));
  // A 16-bit plan that keeps fp32 gradients sums the table's in place; the
  // 16-bit one's fp32 atomics copy (V·h) comes when the activations are
  // freed, so it does not add to the peak.
  p.precision = Precision::bf16;
  const double bf16 = predict_memory(m, p, c, hw).line(MemLine::workspace);
  p.grad_reduce_dtype = Precision::fp32;
  CHECK(predict_memory(m, p, c, hw).line(MemLine::workspace) == Approx(bf16));
  p.grad_reduce_dtype.reset();
  // A 1,024-token vocabulary: the MLP's activation backward is the largest
  // moment, its input and output gradients (dfc, dg: n·F each) beside the
  // attention branch's output gradient (dx2: n·h) and d and dnext, the
  // logits and the stage's output (n·h) freed.
  m.vocab = 1024;
  CHECK(saved() == Approx(2.0 * (2.0 * n * h + 2.0 * n * f - n * m.vocab)));
  // Selective recomputation with the standard kernel: the attention's
  // backward re-runs the probabilities (a·b·s²) and output (n·h) first, beside
  // the output's and Q|K|V's gradients (n·h, 3·n·h), dx2, d and dnext; the
  // CUDA kernel's scratch (7·n·h + a·b·s²) comes on top.
  p.attention = AttentionKernel::standard;
  p.recompute = Recompute::selective;
  const double probs = a * 8.0 * s * s;
  CHECK(saved() == Approx(2.0 * ((7.0 * n * h + probs - n * m.vocab) + (7.0 * n * h + probs))));
}
