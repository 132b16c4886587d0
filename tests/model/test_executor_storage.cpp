// The ztune engine prices ztune's executor as its code runs a 16-bit plan on a
// GPU (EngineProfile::fp32_storage): fp32 parameters, gradients, activations
// and collectives, the linear GEMMs in 16-bit on operands cast per call
// (CudaBackend::run_gemm), attention in fp32. Oracles: closed forms over the
// profile's own bandwidth and launch figures, and the same plan trained in
// fp32 (the executor's storage is the same whatever the GEMMs' precision).
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

TEST_CASE("the shipped ztune engine stores fp32, the GPU engines the training precision", "[model][executor]") {
  CHECK(load_engine_profile("ztune").fp32_storage);
  for (const char* name : {"megatron", "deepspeed", "fsdp"}) {
    INFO(name);
    CHECK_FALSE(load_engine_profile(name).fp32_storage);
  }
  Plan p = tp_plan(Precision::bf16);
  CHECK(storage_precision(p, load_engine_profile("ztune")) == Precision::fp32);
  CHECK(storage_precision(p, load_engine_profile("megatron")) == Precision::bf16);
}

TEST_CASE("fp32 storage: collectives carry 4 bytes, each linear GEMM pays two operand casts", "[model][executor]") {
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  const Plan p = tp_plan(Precision::bf16);
  const HardwareProfile h16 = storing(c, false);
  const HardwareProfile h32 = storing(c, true);
  const LayerCost l16 = layer_cost(m, p, c, h16);
  const LayerCost l32 = layer_cost(m, p, c, h32);
  // The tensor-parallel all-reduce of s·b·h activations: fp32 elements.
  const double tokens = static_cast<double>(m.seq_len) * p.micro_batch;
  CHECK(l16.tp_bytes == Approx(2.0 * tokens * m.hidden));
  CHECK(l32.tp_bytes == Approx(4.0 * tokens * m.hidden));
  // Casts, forward: QKV (h → 3h/t), projection (h/t → h), FC1 (h → 4h/t),
  // FC2 (4h/t → h); each reads the activation (tokens × k) and the weight
  // (k × n) in fp32 and writes them in 16-bit, 6 bytes an element, in two
  // kernels. The GEMMs themselves are the 16-bit ones either way.
  const double h = m.hidden, t = p.tp, f = m.ffn_hidden;
  const double elems = (tokens * h + h * 3 * h / t) + (tokens * h / t + h / t * h) + (tokens * h + h * f / t) +
                       (tokens * f / t + f / t * h);
  const double hbm = c.node.gpu.hbm_bandwidth_gbps * 1e9 * h32.memory_bandwidth_efficiency;
  CHECK(l32.fwd_gemm_s - l16.fwd_gemm_s == Approx(6.0 * elems / hbm + 4 * 2 * h32.kernel_launch_s));
}

TEST_CASE("fp32 storage: attention and elementwise work cost what an fp32 plan's do", "[model][executor]") {
  // The executor's attention kernels and its norms, GeLU and residual adds run
  // on fp32 tensors whatever the GEMMs' precision: as in an fp32 plan.
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  for (const AttentionKernel k : {AttentionKernel::flash, AttentionKernel::standard}) {
    Plan bf16 = tp_plan(Precision::bf16);
    bf16.attention = k;
    Plan fp32 = bf16;
    fp32.precision = Precision::fp32;
    const LayerCost executor = layer_cost(m, bf16, c, storing(c, true));
    const LayerCost reference = layer_cost(m, fp32, c, storing(c, false));
    INFO(to_string(k));
    CHECK(executor.fwd_attention_s == Approx(reference.fwd_attention_s));
    CHECK(executor.bwd_attention_s == Approx(reference.bwd_attention_s));
    CHECK(executor.fwd_elementwise_s == Approx(reference.fwd_elementwise_s));
    CHECK(executor.tp_bytes == Approx(reference.tp_bytes));
    // The linears stay on 16-bit tensor cores: faster than fp32's, casts and all.
    CHECK(executor.fwd_gemm_s < reference.fwd_gemm_s);
  }
}

TEST_CASE("fp32 storage: the optimizer step streams 32 bytes a parameter, no 16-bit copy", "[model][executor]") {
  // Fused AdamW over fp32 tensors: read parameter, gradient, momentum and
  // variance (16), write parameter, momentum, variance (12), and the norm's
  // read of the gradient (4); DeepSpeed's fused 16-bit Adam 38 (op_costs).
  const Transformer m = load_transformer("gpt2-1.5b");
  const Cluster c = load_cluster("dgx-a100-80gb");
  const Plan p = tp_plan(Precision::bf16);
  const HardwareProfile h32 = storing(c, true);
  const double part = stage_params(m, p) / p.shard_group();
  const double hbm = c.node.gpu.hbm_bandwidth_gbps * 1e9 * h32.memory_bandwidth_efficiency;
  CHECK(optimizer_cost(m, p, c, h32).gpu_step_s == Approx(32.0 * part / hbm + 4 * h32.kernel_launch_s));
  CHECK(optimizer_cost(m, p, c, storing(c, false)).gpu_step_s ==
        Approx(38.0 * part / hbm + 4 * h32.kernel_launch_s));
}

TEST_CASE("fp32 storage: a GPU rank's model states and buffers are the executor's, as on CPU ranks",
          "[model][executor][memory]") {
  // What the executor allocates does not depend on the device or the GEMMs'
  // precision: the lines of a bf16 plan on a GPU equal those of the fp32 plan
  // on CPU ranks (which tests/executor check against its tracked allocations),
  // with the CUDA context, NCCL, cuBLAS and the allocator's slack on top.
  const Transformer m = load_transformer("tiny");
  const Cluster gpu = load_cluster("dgx-a100-80gb");
  const Cluster cpu = load_cluster("local-cpu");
  Plan p = test::zero_plan(2, 1, 2, 2, 2);
  p.attention = AttentionKernel::flash;
  p.precision = Precision::bf16;
  const MemoryPrediction on_gpu = predict_memory(m, p, gpu, with_engine(default_profile_for(gpu), "ztune"));
  p.precision = Precision::fp32;
  const MemoryPrediction on_cpu = predict_memory(m, p, cpu, default_profile_for(cpu));
  for (const MemLine l : {MemLine::params, MemLine::grads, MemLine::optimizer, MemLine::activations,
                          MemLine::comm_buckets, MemLine::logits}) {
    INFO(kMemLineNames[static_cast<std::size_t>(l)]);
    CHECK(on_gpu.line(l) == Approx(on_cpu.line(l)));
  }
  // 4 + 4 + 8 bytes a parameter, ZeRO-2 partitioning gradients and states over 2.
  const double psi = on_cpu.line(MemLine::params) / 4.0;
  CHECK(on_gpu.line(MemLine::grads) == Approx(4.0 * psi / 2));
  CHECK(on_gpu.line(MemLine::optimizer) == Approx(8.0 * psi / 2));
  CHECK(on_gpu.line(MemLine::runtime) > 1e9);  // the CUDA context and a communicator
  CHECK(on_cpu.line(MemLine::runtime) == 0);
}

TEST_CASE("fp32 storage: the CUDA backend's cast scratch is the largest GEMM's two operands in 16-bit",
          "[model][executor][memory]") {
  // CudaBackend::run_gemm casts A and B into 16-bit scratch per call; the
  // largest pair of a GPT layer with a small vocabulary is FC2's: its input
  // (tokens × 4h) and its weight (4h × h). An fp32 plan casts nothing, and
  // with flash attention there is no score scratch: the workspace lines
  // differ by exactly 2·(tokens·4h + 4h·h) bytes.
  Transformer m = load_transformer("gpt2-1.5b");
  m.vocab = 1024;  // so that the logits GEMM is not the largest
  const Cluster c = load_cluster("dgx-a100-80gb");
  const HardwareProfile hw = with_engine(default_profile_for(c), "ztune");
  Plan p;
  p.micro_batch = 2;
  p.global_batch = 2;
  p.attention = AttentionKernel::flash;
  p.precision = Precision::bf16;
  const double bf16 = predict_memory(m, p, c, hw).line(MemLine::workspace);
  p.precision = Precision::fp32;
  const double fp32 = predict_memory(m, p, c, hw).line(MemLine::workspace);
  const double tokens = 2.0 * m.seq_len, h = m.hidden, f = m.ffn_hidden;
  CHECK(bf16 - fp32 == Approx(2.0 * (tokens * f + f * h)));
}
