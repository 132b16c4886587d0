// ztune memory's grid (tuner/memory_grid.hpp): which rows exist, ztune's
// model-state lines against the ZeRO paper's closed forms (Rajbhandari et al.
// 2020 §5: 2Ψ + 2Ψ + 12Ψ, partitioned by stage) and ZeRO-Offload's host
// accounting (Ren et al. 2021: fp32 parameters, momentum, variance and
// gradients, 16 bytes a parameter), and where DeepSpeed's estimators apply.
#include <catch2/catch.hpp>

#include "../model/cost_model_fixtures.hpp"
#include "ztune/tuner/memory_grid.hpp"

using namespace ztune;

namespace {

const MemoryGridRow& row(const MemoryGrid& g, int stage, OffloadTarget opt, OffloadTarget params, Precision prec) {
  for (const auto& r : g.rows)
    if (r.zero_stage == stage && r.offload_optimizer == opt && r.offload_params == params && r.precision == prec)
      return r;
  FAIL("no row for stage " << stage);
  return g.rows.front();
}

}  // namespace

TEST_CASE("memory grid: the rows and ztune's lines in closed form", "[memory][grid]") {
  const Transformer m = test::gpt(24, 2048, 16, 1024, 50304);
  const double psi = m.total_params();
  const Cluster c = test::a100_nodes(2);  // 16 GPUs, 8 a node, NVMe present
  const int n = 16, gpn = 8;
  const MemoryGrid g = memory_grid(m, c, {Precision::bf16, Precision::fp32}, true);
  CHECK(g.gpus == n);
  CHECK(g.rows.size() == 20);  // 1 + 2 + 2 + 5 offload combinations per precision
  using O = OffloadTarget;
  const auto bf16 = Precision::bf16;

  const auto& s0 = row(g, 0, O::none, O::none, bf16);
  CHECK(s0.ztune.line(MemLine::params) + s0.ztune.line(MemLine::grads) + s0.ztune.line(MemLine::optimizer) ==
        Approx(16 * psi));
  const auto& s1 = row(g, 1, O::none, O::none, bf16);
  CHECK(s1.ztune.line(MemLine::optimizer) == Approx(12 * psi / n));
  CHECK(s1.ztune.line(MemLine::grads) == Approx(2 * psi));
  const auto& s2 = row(g, 2, O::none, O::none, bf16);
  CHECK(s2.ztune.line(MemLine::grads) == Approx(2 * psi / n));
  const auto& s3 = row(g, 3, O::none, O::none, bf16);
  CHECK(s3.ztune.line(MemLine::params) == Approx(2 * psi / n));
  // The grid's GPU figure is exactly the model-state lines, nothing else.
  CHECK(s3.ztune_gpu_bytes == Approx(s3.ztune.line(MemLine::params) + s3.ztune.line(MemLine::grads) +
                                     s3.ztune.line(MemLine::optimizer) + s3.ztune.line(MemLine::comm_buckets) +
                                     s3.ztune.line(MemLine::zero3_gathered)));
  CHECK(s3.ztune_gpu_bytes < s3.ztune.gpu_total_bytes);  // activations and the rest left out

  // Offloaded optimizer: nothing of it on the GPU, 16 bytes of each partition
  // on the host for every GPU of the node; on NVMe the same bytes there.
  const auto& cpu = row(g, 3, O::cpu, O::none, bf16);
  CHECK(cpu.ztune.line(MemLine::optimizer) == 0);
  CHECK(cpu.ztune.host_bytes_per_node == Approx(gpn * 16 * psi / n));
  const auto& nvme = row(g, 3, O::nvme, O::nvme, bf16);
  CHECK(nvme.ztune.nvme_bytes_per_node == Approx(gpn * (16 * psi / n + 2 * psi / n)));
  CHECK(nvme.ztune.line(MemLine::params) == 0);

  // fp32: 4-byte parameters and gradients, Adam's 8 (the parameters are the master copy).
  const auto& f0 = row(g, 0, O::none, O::none, Precision::fp32);
  CHECK(f0.ztune.line(MemLine::params) == Approx(4 * psi));
  CHECK(f0.ztune.line(MemLine::optimizer) == Approx(8 * psi));
}

TEST_CASE("memory grid: DeepSpeed's estimators only where they apply", "[memory][grid][deepspeed]") {
  const Transformer m = test::gpt(24, 2048, 16, 1024, 50304);
  const MemoryGrid g = memory_grid(m, test::a100_nodes(2), {Precision::bf16, Precision::fp32}, true);
  using O = OffloadTarget;
  for (const auto& r : g.rows) {
    const bool nvme = r.offload_optimizer == O::nvme || r.offload_params == O::nvme;
    const bool expected = r.precision != Precision::fp32 && r.zero_stage >= 2 && !nvme;
    CAPTURE(r.zero_stage, to_string(r.offload_optimizer), to_string(r.offload_params), to_string(r.precision));
    CHECK(r.deepspeed.has_value() == expected);
    CHECK(r.no_deepspeed_why.empty() == expected);
  }
  // Stage 3 with everything on the host: DeepSpeed's GPU figure is 4 bytes × its largest layer.
  const auto& all = row(g, 3, O::cpu, O::cpu, Precision::bf16);
  CHECK(all.deepspeed->gpu_bytes == static_cast<std::int64_t>(4 * g.largest.params));
  CHECK(all.deepspeed_no_init->host_bytes_per_node > all.deepspeed->host_bytes_per_node);
}

TEST_CASE("memory grid: the cluster's rules drop rows it cannot run", "[memory][grid]") {
  const Transformer m = test::gpt(24, 2048, 16, 1024, 50304);
  Cluster c = test::a100_nodes(1);
  c.node.nvme_size_tb = 0;  // no NVMe: ZeRO-Infinity's NVMe rows go
  MemoryGrid g = memory_grid(m, c, {Precision::bf16}, true);
  CHECK(g.rows.size() == 8);
  for (const auto& r : g.rows) CHECK(r.offload_optimizer != OffloadTarget::nvme);
  c.node.gpu.peak_tflops_bf16 = 0;  // a V100: no bf16 plan at all
  CHECK(memory_grid(m, c, {Precision::bf16}, true).rows.empty());
  // Without cluster rules (N GPUs of no particular kind) every shape stays.
  CHECK(memory_grid(m, c, {Precision::bf16}, false).rows.size() == 10);
}

TEST_CASE("memory grid: hybrid-sharded stage-3 rows follow the plain ones", "[memory][grid]") {
  const Transformer m = test::gpt(24, 2048, 16, 1024, 50304);
  const double psi = m.total_params();
  const MemoryGrid g = memory_grid(m, test::a100_nodes(2), {Precision::bf16}, true, {}, 4);
  REQUIRE(g.rows.size() == 15);  // 1 + 2 + 2 + 5 + the 5 stage-3 rows in groups of 4
  for (std::size_t i = 0; i < g.rows.size(); ++i) {
    CAPTURE(i);
    CHECK(g.rows[i].dp_shard == (i >= 10 ? 4 : 0));
  }
  // ZeRO-3 in groups of 4 of the 16 GPUs: 16Ψ/4 of model states a GPU.
  const auto& h = g.rows[10];
  REQUIRE(h.offload_optimizer == OffloadTarget::none);
  CHECK(h.ztune.line(MemLine::params) + h.ztune.line(MemLine::grads) + h.ztune.line(MemLine::optimizer) ==
        Approx(16 * psi / 4));
  CHECK_FALSE(h.deepspeed.has_value());
}
