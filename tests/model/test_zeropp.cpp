// ZeRO++ in the cost model against the closed forms of Wang et al. 2023
// (arXiv:2306.10209) §3: cross-node volume per micro-batch 3M → ≈ 0.75M
// (M = 2Ψ bytes), hpZ's secondary copy 2Ψ/g per GPU (g GPUs per node), the
// forward gather in int8 over the whole group and the backward gather inside
// the node.
#include <catch2/catch.hpp>

#include "ztune/vocab/engine_profile.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/memory_model.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/model/zeropp.hpp"

using namespace ztune;

namespace {

Plan zero3(int dp) {
  Plan p;
  p.dp = dp;
  p.zero_stage = 3;
  p.micro_batch = 1;
  p.global_batch = dp;
  p.precision = Precision::fp16;
  p.recompute = Recompute::full;
  return p;
}

}  // namespace

TEST_CASE("ZeRO++: cross-node volume per micro-batch falls from 3M to about 0.75M", "[model][zeropp]") {
  const Transformer m = load_transformer("20b");
  const Cluster c = load_cluster("dgx2x16");  // 16 nodes × 16 GPUs
  Plan p = zero3(256);
  const double psi = stage_params(m, p);
  const double M = 2 * psi;
  const double ring = 255.0 / 256.0;
  const Zero3CrossNodeBytes plain = zero3_cross_node_bytes(m, p, c);
  CHECK(plain.total() == Approx(3 * M * ring));
  p.zeropp = true;
  const Zero3CrossNodeBytes zpp = zero3_cross_node_bytes(m, p, c);
  CHECK(zpp.forward_gather == Approx(M / 2 * ring).epsilon(0.003));         // int8 (+ block scales)
  CHECK(zpp.backward_gather == 0);                                         // hpZ: inside the node
  // int4 with one fp32 scale per 2048 elements (+0.4%), the node's share once
  CHECK(zpp.gradient_reduce == Approx(M / 4 * 15.0 / 16.0).epsilon(0.005));
  CHECK(zpp.total() / plain.total() == Approx(0.25).epsilon(0.05));

  // Inside one node nothing crosses nodes, with or without ZeRO++.
  Plan small = zero3(16);
  CHECK(zero3_cross_node_bytes(m, small, c).total() == 0);
}

TEST_CASE("ZeRO++: hpZ keeps a 16-bit secondary partition of 2Ψ/g per GPU", "[model][zeropp]") {
  const Transformer m = load_transformer("20b");
  const Cluster c = load_cluster("dgx2x16");
  // DeepSpeed's ZeRO++ (16-bit weights); ztune's executor keeps its copy in its storage type too.
  const HardwareProfile hw = with_engine(default_profile_for(c), "deepspeed");
  Plan p = zero3(256);
  const double psi = stage_params(m, p);
  const MemoryPrediction plain = predict_memory(m, p, c, hw);
  p.zeropp = true;
  const MemoryPrediction zpp = predict_memory(m, p, c, hw);
  CHECK(zeropp_secondary_bytes(m, p, c) == Approx(2 * psi / 16));
  CHECK(zpp.line(MemLine::params) - plain.line(MemLine::params) == Approx(2 * psi / 16));
  CHECK(zpp.line(MemLine::optimizer) == plain.line(MemLine::optimizer));
  const MemoryPrediction executor = predict_memory(m, p, c, with_engine(hw, "ztune"));
  p.zeropp = false;
  CHECK(executor.line(MemLine::params) - predict_memory(m, p, c, with_engine(hw, "ztune")).line(MemLine::params) ==
        Approx(2 * psi / 16));
  p.zeropp = true;
  // A data-parallel group inside one node: the secondary partition is the primary one.
  Plan one_node = zero3(16);
  one_node.zeropp = true;
  CHECK(zeropp_secondary_bytes(m, one_node, c) == 0);
}

TEST_CASE("ZeRO++ on ztune's executor: its numerics, its storage type on the wire", "[model][zeropp][executor]") {
  // The executor quantizes and dequantizes in place and then gathers and
  // reduces its stored values, 16-bit for this fp16 plan (executor/src/
  // param_store.cpp, zeropp_reduce.hpp): the same bytes as its plain ZeRO-3,
  // plus the quantization kernels.
  const Transformer m = load_transformer("20b");
  const Cluster c = load_cluster("dgx2x16");
  const HardwareProfile hw = with_engine(default_profile_for(c), "ztune");
  Plan p = zero3(256);
  REQUIRE(p.precision != Precision::fp32);
  const double psi = stage_params(m, p);
  const Zero3GatherCost plain = zero3_gather_cost(m, p, c, hw);
  const DpSyncCost plain_dp = dp_sync_cost(m, p, c, hw);
  p.zeropp = true;
  const Zero3GatherCost zpp = zero3_gather_cost(m, p, c, hw);
  CHECK(plain.bytes_per_pass == Approx(2 * psi));
  CHECK(zpp.bytes_per_pass == Approx(2 * psi));
  CHECK(zpp.fwd_s > plain.fwd_s);  // the same gathers and the qwZ kernels
  CHECK(dp_sync_cost(m, p, c, hw).bytes_per_microbatch == Approx(2 * psi));
  CHECK(plain_dp.bytes_per_microbatch == Approx(2 * psi));
  // So on the executor ZeRO++ buys its numerics, not time.
  Plan off = p;
  off.zeropp = false;
  CHECK(predict_time(m, p, c, hw).iteration_s >= predict_time(m, off, c, hw).iteration_s);
  // Nor an int8 staging buffer beside its gathers; hpZ's copy is the stored 16-bit (2Ψ/g).
  const MemoryPrediction with = predict_memory(m, p, c, hw);
  const MemoryPrediction without = predict_memory(m, off, c, hw);
  CHECK(with.line(MemLine::zero3_gathered) == Approx(without.line(MemLine::zero3_gathered)));
  CHECK(with.line(MemLine::params) - without.line(MemLine::params) == Approx(2 * psi / 16));
}

TEST_CASE("ZeRO++: int8 forward gathers over the group, 16-bit backward gathers inside the node", "[model][zeropp]") {
  const Transformer m = load_transformer("20b");
  const Cluster c = load_cluster("dgx2x16");
  // ZeRO++ is DeepSpeed's: its baseline is DeepSpeed's 16-bit reduce-scatter.
  HardwareProfile hw = default_profile_for(c);
  hw.engine = load_engine_profile("deepspeed");
  Plan p = zero3(256);
  const double psi = stage_params(m, p);
  const Zero3GatherCost plain = zero3_gather_cost(m, p, c, hw);
  p.zeropp = true;
  const Zero3GatherCost zpp = zero3_gather_cost(m, p, c, hw);
  CHECK(zpp.bytes_per_pass == Approx(kZeroppWeightBytes * psi));
  CHECK(zpp.bytes_per_pass / plain.bytes_per_pass == Approx(0.5).epsilon(0.003));
  // Same number of gathers; the backward ones on NVSwitch (150 GB/s) instead
  // of the node's 8 × 12.5 GB/s InfiniBand: at least 1.5x faster link time.
  CHECK(zpp.bwd_s < plain.bwd_s / 1.5);
  CHECK(zpp.fwd_s < plain.fwd_s);
  // Gradients: int4 all-to-alls move a quarter of the 16-bit reduce-scatter's bytes.
  Plan off = p;
  off.zeropp = false;
  CHECK(dp_sync_cost(m, p, c, hw).bytes_per_microbatch / dp_sync_cost(m, off, c, hw).bytes_per_microbatch ==
        Approx(0.25).epsilon(0.005));
  CHECK(dp_sync_cost(m, p, c, hw).per_microbatch_s < dp_sync_cost(m, off, c, hw).per_microbatch_s);
}

TEST_CASE("ZeRO++ shortens a communication-bound ZeRO-3 iteration", "[model][zeropp]") {
  // DeepSpeed's (int8 and int4 on the wire; ztune's executor moves floats).
  const Transformer m = load_transformer("20b");
  const Cluster c = load_cluster("dgx2x16");
  const HardwareProfile hw = with_engine(default_profile_for(c), "deepspeed");
  Plan p = zero3(256);
  const TimePrediction plain = predict_time(m, p, c, hw);
  p.zeropp = true;
  const TimePrediction zpp = predict_time(m, p, c, hw);
  CHECK(zpp.part(TimePart::zero3_gather) <= plain.part(TimePart::zero3_gather));
  CHECK(zpp.part(TimePart::dp_comm) <= plain.part(TimePart::dp_comm));
  CHECK(zpp.part(TimePart::forward) == plain.part(TimePart::forward));
  CHECK(zpp.iteration_s < plain.iteration_s);
}
