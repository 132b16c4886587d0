// The ztune engine prices ztune's executor as its code runs a 16-bit plan on a
// GPU (EngineProfile::fp32_storage): parameters, gradients, activations and
// collectives in the plan's 16-bit type with fp32 masters (issue 24), its
// memory-bound kernels and standard attention on fp32 copies of the 16-bit
// values (Backend's staging), its GEMMs and flash attention on the 16-bit
// values (CudaBackend's native hooks). Oracles: closed forms over the
// profile's own bandwidth and launch figures, and the same plan on an engine
// storing fp32 and on one computing in 16 bits.
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

// The same GPU figures with and without the executor's fp32 storage: only
// what storage changes differs between the two.
HardwareProfile storing(const Cluster& c, bool fp32) {
  HardwareProfile hw = with_engine(default_profile_for(c), "deepspeed");
  hw.engine.fp32_storage = fp32;
  return hw;
}

}  // namespace

TEST_CASE("the shipped ztune engine computes on fp32 copies, and every engine stores the training precision",
          "[model][executor]") {
  CHECK(load_engine_profile("ztune").fp32_storage);
  for (const char* name : {"megatron", "deepspeed", "fsdp"}) {
    INFO(name);
    CHECK_FALSE(load_engine_profile(name).fp32_storage);
  }
  Plan p = tp_plan(Precision::bf16);
  CHECK(storage_precision(p) == Precision::bf16);  // every engine's, the executor's too
  CHECK(kernel_precision(p, load_engine_profile("ztune")) == Precision::fp32);
  CHECK(kernel_precision(p, load_engine_profile("megatron")) == Precision::bf16);
}

TEST_CASE("fp32 kernels: collectives carry the stored 2 bytes, the 16-bit GEMMs cost a 16-bit engine's",
          "[model][executor]") {
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  const Plan p = tp_plan(Precision::bf16);
  const LayerCost l16 = layer_cost(m, p, c, storing(c, false));
  const LayerCost l32 = layer_cost(m, p, c, storing(c, true));
  // The tensor-parallel all-reduce of s·b·h activations: 16-bit elements either way.
  const double tokens = static_cast<double>(m.seq_len) * p.micro_batch;
  CHECK(l16.tp_bytes == Approx(2.0 * tokens * m.hidden));
  CHECK(l32.tp_bytes == Approx(2.0 * tokens * m.hidden));
  // The linear GEMMs read the stored 16-bit operands (no casts).
  CHECK(l32.fwd_gemm_s == Approx(l16.fwd_gemm_s));
  CHECK(l32.bwd_gemm_s == Approx(l16.bwd_gemm_s));
}

TEST_CASE("fp32 kernels: staged elementwise work, fp32 standard attention, 16-bit flash attention",
          "[model][executor]") {
  // The executor's norms, GeLU and residual adds convert each 16-bit operand
  // to fp32 and back around an fp32 kernel: 10 bytes an element touch against
  // an fp32 plan's 4 and a 16-bit engine's 2, with the same kernels launched,
  // so its excess over the fp32 plan is 3× the fp32 plan's over the 16-bit
  // engine. Its standard attention computes in fp32 on staged values (more
  // than the fp32 plan's); its flash attention on the 16-bit values (cuDNN's
  // fused attention or the flash kernels' 16-bit instances): the 16-bit
  // engine's. Its collectives move the 16-bit values, half the fp32 plan's.
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  for (const AttentionKernel k : {AttentionKernel::flash, AttentionKernel::standard}) {
    Plan bf16 = tp_plan(Precision::bf16);
    bf16.attention = k;
    Plan fp32 = bf16;
    fp32.precision = Precision::fp32;
    const LayerCost executor = layer_cost(m, bf16, c, storing(c, true));
    const LayerCost reference = layer_cost(m, fp32, c, storing(c, false));
    const LayerCost engine16 = layer_cost(m, bf16, c, storing(c, false));
    INFO(to_string(k));
    CHECK(executor.fwd_elementwise_s - reference.fwd_elementwise_s ==
          Approx(3.0 * (reference.fwd_elementwise_s - engine16.fwd_elementwise_s)));
    if (k == AttentionKernel::flash) {
      CHECK(executor.fwd_attention_s == Approx(engine16.fwd_attention_s));
      CHECK(executor.bwd_attention_s == Approx(engine16.bwd_attention_s));
    } else {
      CHECK(executor.fwd_attention_s > reference.fwd_attention_s);
      CHECK(executor.bwd_attention_s > reference.bwd_attention_s);
    }
    CHECK(executor.tp_bytes == Approx(0.5 * reference.tp_bytes));
    CHECK(executor.fwd_gemm_s == Approx(engine16.fwd_gemm_s));
  }
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
  const HardwareProfile h32 = storing(c, true);
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

TEST_CASE("fp32 kernels: a GPU rank's workspace holds the largest non-GEMM call's fp32 staging, no casts",
          "[model][executor][memory]") {
  // On a GPU the 16-bit GEMMs and flash attention run on the stored values;
  // the largest staged call of a GPT layer is the GeLU's backward: its input,
  // its output gradient and its input gradient, tokens × 4h each, in fp32:
  // 4·3·tokens·4h bytes. An fp32 plan stages nothing, and with flash attention
  // there is no score scratch: the workspace lines differ by exactly that.
  // (8 sequences a micro-batch, so that the activations outgrow the
  // initialisation's fp32 bucket, the executor's other workspace, in both
  // precisions; a small vocabulary, so that the logits are not the largest.)
  Transformer m = load_transformer("gpt2-1.5b");
  m.vocab = 1024;
  const Cluster c = load_cluster("dgx-a100-80gb");
  const HardwareProfile hw = with_engine(default_profile_for(c), "ztune");
  Plan p;
  p.micro_batch = 8;
  p.global_batch = 8;
  p.attention = AttentionKernel::flash;
  p.precision = Precision::bf16;
  const double bf16 = predict_memory(m, p, c, hw).line(MemLine::workspace);
  p.precision = Precision::fp32;
  const double fp32 = predict_memory(m, p, c, hw).line(MemLine::workspace);
  const double tokens = 8.0 * m.seq_len, f = m.ffn_hidden;
  CHECK(bf16 - fp32 == Approx(4.0 * 3.0 * tokens * f));
}
