#include <catch2/catch.hpp>

#include <algorithm>

#include "ztune/vocab/cluster.hpp"
#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::EndsWith;

TEST_CASE("plan round-trips and checks batch arithmetic", "[plan]") {
  ztune::Plan p;
  p.dp = 4; p.micro_batch = 2; p.grad_accum = 8; p.global_batch = 64;
  auto j = ztune::plan_to_json(p);
  auto q = ztune::plan_from_json(j, "p.json");
  CHECK(q.global_batch == 64);
  j["global_batch"] = 65;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                      Contains("p.json: $.global_batch: expected micro_batch × grad_accum × dp = 64, got 65"));
}

TEST_CASE("plan rules name the field they break", "[plan]") {
  auto c = ztune::load_cluster("dgx2x16");
  auto m = ztune::load_transformer("100b");
  ztune::Plan p;
  p.precision = ztune::Precision::fp16;
  p.dp = 256; p.global_batch = 256;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.dp = 512; p.global_batch = 512;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.dp") && Contains("256"));
  p.dp = 1; p.global_batch = 1; p.tp = 3;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.tp: 3 does not divide the model's 64 heads"));
  p.tp = 1; p.offload_params = ztune::OffloadTarget::cpu; p.zero_stage = 2;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.offload.params") && Contains("zero_stage 3"));
  p.offload_params = ztune::OffloadTarget::none; p.zero_stage = 0; p.precision = ztune::Precision::bf16;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("no bf16"));
}

TEST_CASE("plan attention kernel: round trip, default for older files, and its rules", "[plan][flash]") {
  ztune::Plan p;
  p.attention = ztune::AttentionKernel::flash;
  auto j = ztune::plan_to_json(p);
  CHECK(j["attention"] == "flash");
  CHECK(ztune::plan_from_json(j, "p.json").attention == ztune::AttentionKernel::flash);
  // Plan files written before the field existed read as the standard kernel.
  j.erase("attention");
  CHECK(ztune::plan_from_json(j, "p.json").attention == ztune::AttentionKernel::standard);
  j["attention"] = "xformers";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                      Contains("p.json: $.attention: expected one of standard|flash|cudnn|eager, got \"xformers\""));
  j["attention"] = "cudnn";
  CHECK(ztune::plan_from_json(j, "p.json").attention == ztune::AttentionKernel::cudnn);
  p.attention = ztune::AttentionKernel::cudnn;
  CHECK(ztune::plan_to_json(p)["attention"] == "cudnn");
  CHECK_THAT(p.summary(), Contains(" cudnn"));
  CHECK(ztune::attention_kernel_of("flash") == ztune::AttentionKernel::flash);
  CHECK_FALSE(ztune::attention_kernel_of("Flash").has_value());

  auto m = ztune::load_transformer("gpt3-175b");
  auto a100 = ztune::load_cluster("dgx-a100-80gb");
  ztune::Plan q;
  q.dp = 8; q.global_batch = 8;
  q.attention = ztune::AttentionKernel::flash;
  CHECK_FALSE(ztune::check_plan(q, m, a100).has_value());
  // FlashAttention-2 needs Ampere; a V100 has no bf16 tensor cores.
  auto v100 = ztune::load_cluster("dgx2");
  q.precision = ztune::Precision::fp16;
  CHECK_THAT(*ztune::check_plan(q, m, v100), Contains("$.attention") && Contains("Ampere"));
  // cuDNN's fused flash attention needs sm_80 the same way.
  q.attention = ztune::AttentionKernel::cudnn;
  CHECK_THAT(*ztune::check_plan(q, m, v100), Contains("$.attention: cuDNN's fused flash attention") && Contains("Ampere"));
  q.attention = ztune::AttentionKernel::flash;
  // Flash is a dense kernel: not with a block-sparse layout.
  q.precision = ztune::Precision::bf16;
  q.sparse_attention = ztune::SparseLayout::fixed;
  CHECK_THAT(*ztune::check_plan(q, m, a100), Contains("$.attention") && Contains("sparse"));
}

TEST_CASE("eager attention in the plan file: round-trip, named in the summary, its rules", "[plan][eager]") {
  ztune::Plan p;
  p.attention = ztune::AttentionKernel::eager;
  auto j = ztune::plan_to_json(p);
  CHECK(j["attention"] == "eager");
  CHECK(ztune::plan_from_json(j, "p.json").attention == ztune::AttentionKernel::eager);
  CHECK_THAT(p.summary(), Contains(" eager"));
  CHECK_FALSE(ztune::fused_attention(p.attention));  // standard's memory: the s×s probabilities are stored
  j["attention"] = "torch";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.attention") && Contains("eager"));
  auto m = ztune::load_transformer("gpt3-175b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p.dp = 8;
  p.global_batch = 8;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.sparse_attention = ztune::SparseLayout::fixed;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.attention") && Contains("block-sparse"));
  p.sparse_attention = ztune::SparseLayout::none;
  p.dp = 4;
  p.cp = 2;
  p.global_batch = 4;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.attention") && Contains("context parallelism"));
}

TEST_CASE("unfused bias kernels in the plan file: absent reads as fused, false round-trips and is named",
          "[plan][fusion]") {
  ztune::Plan p;
  auto j = ztune::plan_to_json(p);
  CHECK_FALSE(j.contains("bias_fusion"));  // a fused plan's file (and digest) is unchanged
  CHECK(ztune::plan_from_json(j, "p.json").bias_fusion);
  p.bias_fusion = false;
  j = ztune::plan_to_json(p);
  CHECK(j["bias_fusion"] == false);
  CHECK_FALSE(ztune::plan_from_json(j, "p.json").bias_fusion);
  CHECK_THAT(p.summary(), Contains(" unfused-bias"));
  j["bias_fusion"] = "no";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.bias_fusion") && Contains("expected true or false"));
}

TEST_CASE("the gradient reduction's dtype in the plan file: absent is the engine's, stated round-trips, its rule",
          "[plan][grads]") {
  ztune::Plan p;
  auto j = ztune::plan_to_json(p);
  CHECK_FALSE(j["communication"].contains("grad_reduce_dtype"));  // an unstated plan's file (and digest) is unchanged
  CHECK_FALSE(ztune::plan_from_json(j, "p.json").grad_reduce_dtype.has_value());
  p.grad_reduce_dtype = ztune::Precision::fp32;
  j = ztune::plan_to_json(p);
  CHECK(j["communication"]["grad_reduce_dtype"] == "fp32");
  CHECK(ztune::plan_from_json(j, "p.json").grad_reduce_dtype == ztune::Precision::fp32);
  CHECK_THAT(p.summary(), Contains(" grad-reduce:fp32"));
  j["communication"]["grad_reduce_dtype"] = "fp8";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                      Contains("p.json: $.communication.grad_reduce_dtype") && Contains("fp32"));
  // fp32, or the plan's own 16-bit precision: a bf16 plan does not reduce in fp16.
  auto m = ztune::load_transformer("gpt3-175b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p.dp = 8;
  p.global_batch = 8;
  p.precision = ztune::Precision::bf16;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.grad_reduce_dtype = ztune::Precision::bf16;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.grad_reduce_dtype = ztune::Precision::fp16;
  CHECK_THAT(*ztune::check_plan(p, m, c),
             Contains("$.communication.grad_reduce_dtype: a bf16 plan reduces its gradients in fp32 or bf16") &&
                 Contains("\"fp16\""));
  p.precision = ztune::Precision::fp32;
  p.grad_reduce_dtype = ztune::Precision::bf16;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("a fp32 plan reduces its gradients in fp32 (expected"));
}

TEST_CASE("partitioned activations: optional in the file, round-trip, and their rules", "[plan][pa]") {
  ztune::Plan p;
  p.tp = 8; p.recompute = ztune::Recompute::full; p.partition_activations = true;
  auto j = ztune::plan_to_json(p);
  CHECK(j["partition_activations"] == true);
  CHECK(ztune::plan_from_json(j, "p.json").partition_activations);
  CHECK_THAT(p.summary(), Contains(" pa"));
  // Files written before the field existed (and plans without Pa) read as not partitioned.
  j.erase("partition_activations");
  CHECK_FALSE(ztune::plan_from_json(j, "p.json").partition_activations);
  CHECK_FALSE(ztune::plan_to_json(ztune::Plan{}).contains("partition_activations"));
  j["partition_activations"] = "yes";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.partition_activations"));

  auto m = ztune::load_transformer("gpt3-175b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p.global_batch = 1;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.recompute = ztune::Recompute::selective;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.partition_activations") && Contains("recompute \"full\""));
  p.recompute = ztune::Recompute::full;
  p.sequence_parallel = true;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.partition_activations") && Contains("sequence parallelism"));
  p.sequence_parallel = false;
  p.tp = 1; p.dp = 1;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.partition_activations") && Contains("tp >= 2"));
}

TEST_CASE("CPU checkpointing: optional in the file, round-trip, needs full recomputation on GPUs", "[plan][offload]") {
  ztune::Plan p;
  p.recompute = ztune::Recompute::full;
  p.cpu_checkpointing = true;
  auto j = ztune::plan_to_json(p);
  CHECK(j["cpu_checkpointing"] == true);
  CHECK(ztune::plan_from_json(j, "p.json").cpu_checkpointing);
  CHECK_THAT(p.summary(), Contains(" ckpt→cpu"));
  // Files written before the field existed read as checkpoints on the GPU.
  j.erase("cpu_checkpointing");
  CHECK_FALSE(ztune::plan_from_json(j, "p.json").cpu_checkpointing);
  CHECK_FALSE(ztune::plan_to_json(ztune::Plan{}).contains("cpu_checkpointing"));
  j["cpu_checkpointing"] = 1;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.cpu_checkpointing"));

  auto m = ztune::load_transformer("gpt3-175b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p.global_batch = 1;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.recompute = ztune::Recompute::selective;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.cpu_checkpointing") && Contains("recompute \"full\""));
  p.recompute = ztune::Recompute::full;
  CHECK_THAT(*ztune::check_plan(p, ztune::load_transformer("tiny"), ztune::load_cluster("local-cpu")),
             Contains("$.cpu_checkpointing") && Contains("CPU cluster"));
}

TEST_CASE("gradient all-reduce (reduce_scatter false): optional in the file, round-trip, ZeRO-1/2 only", "[plan][zero]") {
  ztune::Plan p;
  p.zero_stage = 1;
  p.reduce_scatter = false;
  auto j = ztune::plan_to_json(p);
  CHECK(j["communication"]["reduce_scatter"] == false);
  CHECK_FALSE(ztune::plan_from_json(j, "p.json").reduce_scatter);
  CHECK_THAT(p.summary(), Contains(" grad-allreduce"));
  j["communication"].erase("reduce_scatter");
  CHECK(ztune::plan_from_json(j, "p.json").reduce_scatter);
  CHECK_FALSE(ztune::plan_to_json(ztune::Plan{})["communication"].contains("reduce_scatter"));
  j["communication"]["reduce_scatter"] = "no";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.communication.reduce_scatter"));
}

TEST_CASE("stage3_max_reuse_distance: optional in the file, round-trip, DeepSpeed's 1e9 by default", "[plan][zero]") {
  ztune::Plan p;
  p.zero_stage = 3;
  CHECK(p.max_reuse_distance == 1e9);  // DeepSpeed's default (zero/config.py)
  CHECK_FALSE(ztune::plan_to_json(p)["communication"].contains("max_reuse_distance"));
  p.max_reuse_distance = 3e9;
  auto j = ztune::plan_to_json(p);
  CHECK(j["communication"]["max_reuse_distance"] == 3e9);
  CHECK(ztune::plan_from_json(j, "p.json").max_reuse_distance == 3e9);
  j["communication"].erase("max_reuse_distance");  // files from before the field
  CHECK(ztune::plan_from_json(j, "p.json").max_reuse_distance == 1e9);
  j["communication"]["max_reuse_distance"] = -1;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.communication.max_reuse_distance"));
}

TEST_CASE("TP communication overlap: optional in the file, round-trip, needs sequence parallelism", "[plan][tp_overlap]") {
  ztune::Plan p;
  p.tp = 8; p.sequence_parallel = true; p.tp_comm_overlap = true;
  auto j = ztune::plan_to_json(p);
  CHECK(j["communication"]["tp_comm_overlap"] == true);
  CHECK(ztune::plan_from_json(j, "p.json").tp_comm_overlap);
  CHECK_THAT(p.summary(), Contains(" sp+overlap"));
  // Files written before the field existed (and plans without it) read as no overlap.
  j["communication"].erase("tp_comm_overlap");
  CHECK_FALSE(ztune::plan_from_json(j, "p.json").tp_comm_overlap);
  CHECK_FALSE(ztune::plan_to_json(ztune::Plan{})["communication"].contains("tp_comm_overlap"));
  j["communication"]["tp_comm_overlap"] = 1;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.communication.tp_comm_overlap"));

  auto m = ztune::load_transformer("gpt3-175b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p.global_batch = 1;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.sequence_parallel = false;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.communication.tp_comm_overlap") && Contains("sequence_parallel"));
  // Transformer Engine has no V100 (or CPU) path.
  p.sequence_parallel = true;
  p.precision = ztune::Precision::fp16;
  const auto v100 = ztune::load_cluster("dgx2");
  CHECK_THAT(*ztune::check_plan(p, m, v100), Contains("$.communication.tp_comm_overlap") && Contains("Ampere"));
}

TEST_CASE("device and batch counts cannot overflow: 2^20 on every axis is refused, not wrapped", "[plan][bad-input]") {
  ztune::Plan p;
  p.dp = p.tp = p.pp = 1 << 20;  // each within a plan file's bound
  CHECK(p.devices() == std::int64_t{1} << 60);
  p.cp = 1 << 20;
  CHECK(p.devices() == ztune::kPlanDevicesSaturated);  // 2^80 saturates
  p.cp = 1;
  p.micro_batch = 1 << 20;
  p.grad_accum = 1 << 24;
  CHECK(p.sequences_per_step() == ztune::kPlanDevicesSaturated);  // 2^64 saturates
  // A cluster never has 2^60 devices: check_plan names dp and the count (2^60 wrapped to 0 as an int).
  auto c = ztune::load_cluster("dgx2x16");
  auto m = ztune::load_transformer("100b");
  p.micro_batch = 1; p.grad_accum = 1; p.global_batch = 1 << 20;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.dp: dp×tp×pp = 1152921504606846976 needs more devices"));
  // A plan file with such degrees is refused when read.
  auto j = ztune::plan_to_json(ztune::Plan{});
  j["dp"] = 1 << 20; j["tp"] = 1 << 20; j["pp"] = 1 << 20; j["global_batch"] = 1 << 20;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                      Contains("p.json: $.dp: expected dp×tp×cp×pp of at most 2147483647 devices, got 1152921504606846976"));
}

// Uneven pipeline stages (issue 19). DeepSpeed's partition_uniform
// (deepspeed/runtime/utils.py) gives every part ⌊n/p⌋ items and the first
// n mod p parts one more: BLOOM-176B's 70 layers on 12 stages are 10 × 6 + 2 × 5,
// DeepSpeed's 1T (298 layers, pp 50) 48 × 6 + 2 × 5.
TEST_CASE("balanced stages: DeepSpeed's uniform partition", "[plan][stages]") {
  ztune::Plan p;
  p.pp = 12;
  int sum = 0;
  for (int i = 0; i < 12; ++i) {
    CHECK(ztune::stage_layer_count(p, 70, i) == (i < 10 ? 6 : 5));
    sum += ztune::stage_layer_count(p, 70, i);
  }
  CHECK(sum == 70);
  CHECK(ztune::max_stage_layers(p, 70) == 6);
  CHECK(ztune::max_middle_stage_layers(p, 70) == 6);
  CHECK_FALSE(ztune::even_stages(p, 70));
  p.pp = 50;
  CHECK(ztune::stage_layer_count(p, 298, 47) == 6);
  CHECK(ztune::stage_layer_count(p, 298, 48) == 5);
  CHECK(ztune::stage_layer_count(p, 298, 49) == 5);
  p.pp = 4;
  CHECK(ztune::even_stages(p, 48));
  CHECK(ztune::max_middle_stage_layers(p, 48) == 12);
  p.stage_layers = {1, 2, 4, 1};
  CHECK(ztune::max_stage_layers(p, 8) == 4);
  CHECK(ztune::max_middle_stage_layers(p, 8) == 4);
  CHECK(ztune::stage_layer_count(p, 8, 2) == 4);
}

TEST_CASE("uneven stages: any pp up to the layers, interleaved with each stage in equal chunks", "[plan][stages]") {
  ztune::Transformer m = ztune::load_transformer("100b");  // 64 heads; its layers set here
  m.layers = 70;
  ztune::Plan p;
  p.pp = 12;
  CHECK_FALSE(ztune::check_plan_shape(p, m).has_value());
  p.pp = 71;
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.pp: 71 stages for 70 layers"));
  p.pp = 7;
  p.schedule = ztune::Schedule::interleaved;
  p.virtual_stages = 3;  // 7 × 3 = 21 does not divide 70
  p.grad_accum = 7;
  p.global_batch = 7;
  CHECK_THAT(*ztune::check_plan_shape(p, m),
             Contains("$.virtual_stages: pp×virtual_stages = 21 does not divide the model's 70 layers"));
  p.virtual_stages = 2;  // 14 divides 70: five layers per chunk
  CHECK_FALSE(ztune::check_plan_shape(p, m).has_value());
  p.stage_layers = {11, 9, 10, 10, 10, 10, 10};
  CHECK_THAT(*ztune::check_plan_shape(p, m),
             Contains("$.stage_layers[0]: 11 layers do not cut into virtual_stages 2 equal model chunks"));
  // Uneven stages whose counts all split into 2 chunks (Megatron-Core's uneven
  // first/last stages with --num-virtual-stages-per-pipeline-rank).
  p.stage_layers = {12, 8, 10, 10, 10, 10, 10};
  CHECK_FALSE(ztune::check_plan_shape(p, m).has_value());
  // 12 + 11 + 11 + 12 + 12 + 12 = 70 on 6 stages: 11 does not split into 2.
  p.pp = 6;
  p.grad_accum = 6;
  p.global_batch = 6;
  p.stage_layers = {12, 11, 11, 12, 12, 12};
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.stage_layers[1]: 11 layers"));
  p.pp = 7;
  p.grad_accum = 7;
  p.global_batch = 7;
  p.stage_layers = {11, 9, 10, 10, 10, 10, 10};
  p.schedule = ztune::Schedule::one_f_one_b;
  p.virtual_stages = 1;
  CHECK_FALSE(ztune::check_plan_shape(p, m).has_value());
  p.stage_layers = {11, 9, 10, 10, 10, 10, 11};
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.stage_layers: the stages hold 71 layers; expected the model's 70"));
  p.stage_layers = {11, 9, 10};
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.stage_layers: 3 entries for pp 7"));
}

TEST_CASE("stage_layers in the plan file: optional, round-trips, strict", "[plan][stages]") {
  ztune::Plan p;
  p.pp = 2;
  auto j = ztune::plan_to_json(p);
  CHECK_FALSE(j.contains("stage_layers"));  // balanced plans are written as before
  CHECK(ztune::plan_from_json(j, "p.json").stage_layers.empty());
  p.stage_layers = {3, 2};
  j = ztune::plan_to_json(p);
  CHECK(j["stage_layers"] == nlohmann::json::array({3, 2}));
  CHECK(ztune::plan_from_json(j, "p.json").stage_layers == std::vector<int>{3, 2});
  j["stage_layers"] = nlohmann::json::array({3, 0});
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                      Contains("p.json: $.stage_layers[1]: expected an integer layer count in [1, ") &&
                          Contains("got 0"));
  j["stage_layers"] = nlohmann::json::array({5});
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                      Contains("p.json: $.stage_layers: expected 2 entries (one per stage, pp 2), got 1"));
  j["stage_layers"] = "3+2";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.stage_layers: expected an array"));
  j["stage_layers"] = nlohmann::json::array({3, 2.5});
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.stage_layers[1]"));
  // A whole number is an integer however it is written (docs/formats.md: 8 or 8.0).
  j["stage_layers"] = nlohmann::json::array({3.0, 2});
  CHECK(ztune::plan_from_json(j, "p.json").stage_layers == std::vector<int>{3, 2});
  // In a plan file the path is under "$.plan"; the sum is checked against the model.
  ztune::PlanFile pf;
  pf.plan = p;
  nlohmann::json f = ztune::plan_file_to_json(pf);
  f["plan"]["stage_layers"] = nlohmann::json::array({1, 0});
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(f, "f.json"), Contains("f.json: $.plan.stage_layers[1]"));
  pf.model = ztune::load_transformer("tiny");
  pf.cluster = ztune::load_cluster("local-cpu");
  pf.plan.precision = ztune::Precision::fp32;
  f = ztune::plan_file_to_json(pf);
  f["plan"]["stage_layers"] = nlohmann::json::array({pf.model->layers, 1});
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(f, "f.json"),
                      Contains("f.json: $.plan.stage_layers: the stages hold " +
                               std::to_string(pf.model->layers + 1) + " layers"));
}

// Megatron-LM's --decoder-first-pipeline-num-layers / --decoder-last-pipeline-num-layers.
TEST_CASE("stages from the end stages' layer counts, the rest balanced", "[plan][stages]") {
  CHECK(ztune::stage_layers_from_ends(298, 50, 4, 4) ==
        [] { std::vector<int> v{4}; for (int i = 0; i < 48; ++i) v.push_back(i < 2 ? 7 : 6); v.push_back(4); return v; }());
  CHECK(ztune::stage_layers_from_ends(10, 3, 2, 0) == std::vector<int>{2, 4, 4});
  CHECK(ztune::stage_layers_from_ends(10, 3, 0, 3) == std::vector<int>{4, 3, 3});
  CHECK(ztune::stage_layers_from_ends(10, 2, 7, 3) == std::vector<int>{7, 3});
  CHECK_THROWS_WITH(ztune::stage_layers_from_ends(10, 2, 7, 2), Contains("expected first + last = 10"));
  CHECK_THROWS_WITH(ztune::stage_layers_from_ends(10, 4, 8, 1),
                    Contains("leave 1 of the model's 10 layers for the other 2 stages; expected at least one layer "
                             "for each"));
}

// Megatron-LM's --account-for-embedding/loss-in-pipeline-split: Llama 3.1
// 405B's 126 layers + embedding + loss = 128 over 16 stages of 8: the first
// and last hold 7 transformer layers, the others 8.
TEST_CASE("stages with the embedding and the loss counted as layers", "[plan][stages]") {
  auto v = ztune::stage_layers_accounting(126, 16, true, true);
  REQUIRE(v.size() == 16);
  CHECK(v.front() == 7);
  CHECK(v.back() == 7);
  CHECK(v[1] == 8);
  int sum = 0;
  for (int n : v) sum += n;
  CHECK(sum == 126);
  CHECK(ztune::stage_layers_accounting(7, 4, true, false) == std::vector<int>{1, 2, 2, 2});
  CHECK_THROWS_WITH(ztune::stage_layers_accounting(126, 12, true, true),
                    Contains("--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split") &&
                        Contains("128 do not split into 12"));
}

// Megatron-Core's accounting layout with a virtual pipeline
// (transformer_layer.py get_transformer_layer_offset, by hand): Llama 3.1
// 405B's 126 + 2 = 128 over 16 × 8 chunks of one layer, the first (the
// embedding's) and the last (the loss's) empty; 6 + 2 over 2 × 2: chunks of 2,
// the ends 1.
TEST_CASE("model chunks with the embedding and the loss counted as layers", "[plan][stages][chunks]") {
  const auto v = ztune::chunk_layers_accounting(126, 16, 8, true, true);
  REQUIRE(v.size() == 128);
  CHECK((v.front() == 0 && v.back() == 0));
  CHECK(std::count(v.begin(), v.end(), 1) == 126);
  const auto stages = ztune::stage_sums_of_chunks(v, 16);
  CHECK(stages == ztune::stage_layers_accounting(126, 16, true, true));  // 7 + 8 × 14 + 7
  CHECK(ztune::chunk_layers_accounting(6, 2, 2, true, true) == std::vector<int>{1, 2, 2, 1});
  CHECK(ztune::chunk_layers_accounting(7, 2, 2, true, false) == std::vector<int>{1, 2, 2, 2});
  CHECK(ztune::chunk_layers_accounting(7, 2, 2, false, true) == std::vector<int>{2, 2, 2, 1});
  CHECK_THROWS_WITH(ztune::chunk_layers_accounting(80, 2, 3, true, true),
                    Contains("with --virtual-stages 3: 80 layers + 2 counted as layers = 82 do not split into pp × "
                             "virtual stages = 6 equal model chunks"));

  // The plan: shape rules, the summary, the recomputed layers by chunk.
  ztune::Transformer m = ztune::load_transformer("100b");
  m.layers = 6;
  ztune::Plan p;
  p.pp = 2;
  p.schedule = ztune::Schedule::interleaved;
  p.virtual_stages = 2;
  p.grad_accum = 2;
  p.global_batch = 2;
  p.chunk_layers = {1, 2, 2, 1};
  p.stage_layers = {3, 3};  // 3 layers would not cut into 2 equal chunks
  CHECK_FALSE(ztune::check_plan_shape(p, m).has_value());
  CHECK(ztune::virtual_stage_bounds(p.stage_layers, 6, 2, 2, p.chunk_layers) == std::vector<int>{0, 1, 3, 5, 6});
  CHECK_THAT(p.summary(), EndsWith("stages:3+3 chunks:1+2×2+1"));
  // Megatron's block method counts per chunk: 1 of stage 0's chunks of 1 and
  // 2, 1 of each = 2 a stage; 2 layers: 1 + 2 = 3.
  p.recompute = ztune::Recompute::full;
  p.recompute_num_layers = 1;
  CHECK(ztune::recomputed_layers(p, 3) == 2);
  CHECK(ztune::recomputed_layers_total(p, 6) == 4);
  p.recompute_num_layers = 2;
  CHECK(ztune::recomputed_layers(p, 3) == 3);
  p.recompute = ztune::Recompute::none;
  p.recompute_num_layers = 0;
  p.chunk_layers = {0, 3, 3, 0};
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.chunk_layers: stage 0's chunks hold 0 to 3 layers; "
                                                      "expected a stage's chunks to differ by at most one layer"));
  p.chunk_layers = {2, 2, 1, 1};  // the longer chunk first on both stages
  CHECK_FALSE(ztune::check_plan_shape(p, m).has_value());
  p.chunk_layers = {2, 1, 1, 2};
  CHECK_FALSE(ztune::check_plan_shape(p, m).has_value());
  p.chunk_layers = {2, 2, 1, 2};  // 7 layers: named by the chunks, which a plan file may have filled the stages from
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.chunk_layers: the chunks hold 7 layers; expected the model's 6"));
  p.chunk_layers = {2, 1, 1, 2};  // stages of 3 and 3 against the stated 2 and 4
  p.stage_layers = {2, 4};
  CHECK_THAT(*ztune::check_plan_shape(p, m),
             Contains("$.chunk_layers: stage 0's chunks hold 3 layers, its stage_layers entry 2"));
  p.stage_layers = {3, 3};
  p.chunk_layers = {3, 0, 0, 3};  // an empty chunk inside the pipeline
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.chunk_layers[1]: 0 layers; expected at least 1"));
  m.layers = 3;
  p.stage_layers = {2, 1};
  p.chunk_layers = {1, 0, 1, 1};
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.chunk_layers[1]: 0 layers; expected at least 1"));
  m.layers = 4;
  p.stage_layers = {2, 2};
  p.chunk_layers = {1, 1, 1};
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.chunk_layers: 3 entries for pp 2 × virtual_stages 2"));
  p.chunk_layers = {1, 1, 1, 1};
  p.schedule = ztune::Schedule::one_f_one_b;
  p.virtual_stages = 1;
  CHECK_THAT(*ztune::check_plan_shape(p, m), Contains("$.chunk_layers: model chunks need the interleaved schedule"));
}

TEST_CASE("chunk_layers in the plan file: optional, round-trips, strict", "[plan][stages][chunks]") {
  ztune::Plan p;
  p.pp = 2;
  p.schedule = ztune::Schedule::interleaved;
  p.virtual_stages = 2;
  auto j = ztune::plan_to_json(p);
  CHECK_FALSE(j.contains("chunk_layers"));
  p.chunk_layers = {0, 1, 1, 0};
  p.stage_layers = {1, 1};
  j = ztune::plan_to_json(p);
  CHECK(j["chunk_layers"] == nlohmann::json::array({0, 1, 1, 0}));
  auto back = ztune::plan_from_json(j, "p.json");
  CHECK(back.chunk_layers == p.chunk_layers);
  CHECK(back.stage_layers == p.stage_layers);
  // Stated alone, the stages follow from the chunks.
  j.erase("stage_layers");
  CHECK(ztune::plan_from_json(j, "p.json").stage_layers == std::vector<int>{1, 1});
  j["chunk_layers"] = nlohmann::json::array({0, 1, 1});
  CHECK_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                    Contains("p.json: $.chunk_layers: expected 4 entries (pp 2 × virtual_stages 2") && Contains("got 3"));
  j["chunk_layers"] = nlohmann::json::array({0, -1, 1, 0});
  CHECK_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                    Contains("p.json: $.chunk_layers[1]: expected an integer layer count in [0, ") && Contains("got -1"));
  j["chunk_layers"] = "0+1+1+0";
  CHECK_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.chunk_layers: expected an array"));
  j["chunk_layers"] = nlohmann::json::array({0, 1, 1, 0});
  j["virtual_stages"] = 1;
  j["schedule"] = "1f1b";
  CHECK_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                    Contains("p.json: $.chunk_layers: model chunks need virtual_stages >= 2"));
}

// Megatron-LM's uneven split (first/last stage layers, equal middle), by hand:
// 125 layers on 16 stages: middle ⌈125/16⌉ = 8 × 14 = 112, ends 13 = 7 + 6;
// 298 on 50: 6 × 48 = 288, ends 5 + 5; 17 on 16: ⌈⌉ = 2 leaves the ends −11,
// so middle 1 × 14, ends 3 = 2 + 1; 10 on 4: 3 + 3 in the middle, ends 2 + 2.
TEST_CASE("Megatron's balanced partition: equal middle stages, the ends take the rest", "[plan][stages]") {
  auto expect = [](int first, int middle, int stages, int last) {
    std::vector<int> v(static_cast<std::size_t>(stages), middle);
    v.front() = first;
    v.back() = last;
    return v;
  };
  CHECK(ztune::megatron_stage_layers(125, 16) == expect(7, 8, 16, 6));
  CHECK(ztune::megatron_stage_layers(298, 50) == expect(5, 6, 50, 5));
  CHECK(ztune::megatron_stage_layers(17, 16) == expect(2, 1, 16, 1));
  CHECK(ztune::megatron_stage_layers(10, 4) == expect(2, 3, 4, 2));
  CHECK(ztune::megatron_stage_layers(7, 2) == std::vector<int>{4, 3});
  CHECK(ztune::megatron_stage_layers(96, 8).empty());   // pp divides: equal stages, nothing to state
  CHECK(ztune::megatron_stage_layers(4, 5).empty());    // more stages than layers
  for (int layers = 2; layers <= 80; ++layers)
    for (int pp = 2; pp <= layers; ++pp) {
      const auto v = ztune::megatron_stage_layers(layers, pp);
      if (layers % pp == 0) continue;
      REQUIRE(v.size() == static_cast<std::size_t>(pp));
      int sum = 0;
      for (int n : v) {
        CHECK(n >= 1);
        sum += n;
      }
      CHECK(sum == layers);
      for (std::size_t i = 2; i + 1 < v.size(); ++i) CHECK(v[i] == v[1]);
    }
}

// Context parallelism (issue 19): Megatron-Core's --context-parallel-size.
TEST_CASE("cp in the plan file: optional, round-trips, strict, its rules name $.cp", "[plan][cp]") {
  ztune::Plan p;
  auto j = ztune::plan_to_json(p);
  CHECK_FALSE(j.contains("cp"));  // plans without context parallelism are written as before
  CHECK(ztune::plan_from_json(j, "p.json").cp == 1);
  p.cp = 4;
  p.dp = 2;
  p.global_batch = 2;  // cp consumes no batch: micro_batch × grad_accum × dp
  j = ztune::plan_to_json(p);
  CHECK(j["cp"] == 4);
  const auto q = ztune::plan_from_json(j, "p.json");
  CHECK(q.cp == 4);
  CHECK(q.gpus() == 8);   // dp × tp × cp × pp
  CHECK(q.dp_cp() == 8);  // the weights' data-parallel group
  CHECK_THAT(q.summary(), Contains("dp2×tp1×cp4×pp1"));
  j["cp"] = 0;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.cp: expected an integer"));
  j["cp"] = "2";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.cp"));

  auto m = ztune::load_transformer("gpt3-175b");  // seq 2048
  auto a100 = ztune::load_cluster("dgx-a100-80gb");
  ztune::Plan r;
  r.cp = 8;
  r.attention = ztune::AttentionKernel::flash;
  CHECK_FALSE(ztune::check_plan(r, m, a100).has_value());
  // Load-balanced chunks: 2·cp must divide the sequence.
  r.cp = 3;
  CHECK_THAT(*ztune::check_plan(r, m, a100), Contains("$.cp: 3") && Contains("2·cp = 6") && Contains("2048"));
  r.cp = 2;
  r.sparse_attention = ztune::SparseLayout::fixed;
  r.attention = ztune::AttentionKernel::standard;
  CHECK_THAT(*ztune::check_plan(r, m, a100), Contains("$.cp") && Contains("block-sparse"));
  r.sparse_attention = ztune::SparseLayout::none;
  r.zero_stage = 3;
  r.offload_optimizer = ztune::OffloadTarget::cpu;
  CHECK_THAT(*ztune::check_plan(r, m, a100), Contains("$.cp") && Contains("offload"));
  // The devices: dp × tp × cp × pp of them.
  r.offload_optimizer = ztune::OffloadTarget::none;
  r.dp = a100.total_devices();
  r.global_batch = r.dp;
  CHECK_THAT(*ztune::check_plan(r, m, a100), Contains("dp×tp×cp×pp = " + std::to_string(2 * a100.total_devices())));
}

// DeepSpeed-Ulysses (issue 19 item 3): Megatron-DeepSpeed's --ds-sequence-parallel-size.
TEST_CASE("ulysses in the plan file: optional, round-trips, its rules name $.ulysses", "[plan][ulysses]") {
  ztune::Plan p;
  auto j = ztune::plan_to_json(p);
  CHECK_FALSE(j.contains("ulysses"));  // plans without Ulysses are written as before
  CHECK(ztune::plan_from_json(j, "p.json").ulysses == 1);
  p.ulysses = 4;
  p.dp = 2;
  p.global_batch = 2;  // Ulysses consumes no batch
  j = ztune::plan_to_json(p);
  CHECK(j["ulysses"] == 4);
  const auto q = ztune::plan_from_json(j, "p.json");
  CHECK(q.ulysses == 4);
  CHECK(q.gpus() == 8);    // dp × tp × ulysses × pp
  CHECK(q.dp_cp() == 8);   // gradients and ZeRO partitions over dp × ulysses
  CHECK(q.seq_split() == 4);
  CHECK_THAT(q.summary(), Contains("dp2×tp1×u4×pp1"));
  j["ulysses"] = 0;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.ulysses: expected an integer"));

  auto m = ztune::load_transformer("gpt3-175b");  // seq 2048, 96 heads (MHA)
  auto a100 = ztune::load_cluster("dgx-a100-80gb");
  ztune::Plan r;
  r.ulysses = 8;
  CHECK_FALSE(ztune::check_plan_shape(r, m).has_value());
  r.tp = 4;  // Megatron-DeepSpeed combines tp with Ulysses: 96 heads / (4·8) = 3 per rank
  r.dp = 1;
  CHECK_FALSE(ztune::check_plan_shape(r, m).has_value());
  r.tp = 1;
  r.ulysses = 5;  // divides neither the 2048 tokens nor the 96 heads
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.ulysses: 5") && Contains("2048"));
  r.ulysses = 64;  // divides 2048 but not the 96 heads
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.ulysses") && Contains("96 attention heads"));
  r.ulysses = 2;
  r.cp = 2;
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.ulysses") && Contains("context parallelism"));
  r.cp = 1;
  r.tp = 2;
  r.sequence_parallel = true;
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.ulysses") && Contains("sequence parallelism"));
  // GQA: Llama-3-70B has 8 KV heads; tp 8 leaves one per rank, which 2 Ulysses ranks cannot split.
  auto llama = ztune::load_transformer("llama-70b");
  ztune::Plan g;
  g.tp = 8;
  g.ulysses = 2;
  CHECK_THAT(*ztune::check_plan_shape(g, llama), Contains("$.ulysses") && Contains("KV heads"));
  g.tp = 4;  // 2 KV heads per tp rank: one per Ulysses rank
  CHECK_FALSE(ztune::check_plan_shape(g, llama).has_value());
  g.ulysses = 8;
  g.tp = 1;
  CHECK_FALSE(ztune::check_plan_shape(g, llama).has_value());
  g.ulysses = 16;  // 64 query heads split, but not the 8 KV heads
  CHECK_THAT(*ztune::check_plan_shape(g, llama), Contains("$.ulysses") && Contains("KV heads"));
  // The devices: dp × tp × ulysses × pp of them.
  ztune::Plan d;
  d.ulysses = 2;
  d.dp = a100.total_devices();
  d.global_batch = d.dp;
  CHECK_THAT(*ztune::check_plan(d, m, a100), Contains("dp×tp×ulysses×pp = " + std::to_string(2 * a100.total_devices())));
}

TEST_CASE("dp_shard in the plan file: optional, round-trips, its rules name $.dp_shard", "[plan][hsdp]") {
  ztune::Plan p;
  auto j = ztune::plan_to_json(p);
  CHECK_FALSE(j.contains("dp_shard"));  // plans without hybrid sharding are written as before
  CHECK(ztune::plan_from_json(j, "p.json").dp_shard == 0);
  p.dp = 32;
  p.global_batch = 32;
  p.zero_stage = 3;
  p.dp_shard = 8;
  j = ztune::plan_to_json(p);
  CHECK(j["dp_shard"] == 8);
  const auto q = ztune::plan_from_json(j, "p.json");
  CHECK(q.dp_shard == 8);
  CHECK(q.shard_group() == 8);
  CHECK(q.shard_replicas() == 4);
  CHECK(q.hybrid_sharded());
  CHECK_THAT(q.summary(), Contains("dp32×tp1×pp1 shard8"));
  j["dp_shard"] = 0;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.dp_shard: expected an integer"));

  auto m = ztune::load_transformer("gpt3-175b");
  ztune::Plan r = q;
  CHECK_FALSE(ztune::check_plan_shape(r, m).has_value());
  r.zero_stage = 2;
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.dp_shard") && Contains("needs zero_stage 3, got stage 2"));
  r.zero_stage = 3;
  r.dp_shard = 12;  // does not divide 32
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.dp_shard: 12") && Contains("a divisor of 32 from 2 to 16"));
  r.dp_shard = 32;  // the whole group: plain ZeRO-3, stated by omitting it
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.dp_shard: 32") && Contains("omit dp_shard"));
  r.dp_shard = 1;
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.dp_shard: 1"));
  {
    // Two ranks (or three) have no smaller group to shard in: no range is offered.
    ztune::Plan two = r;
    two.dp = 2;
    two.global_batch = 2;
    CHECK_THAT(*ztune::check_plan_shape(two, m),
               Contains("$.dp_shard: 1") && Contains("dp × cp of 4 or more") && !Contains("from 2 to 1"));
  }
  r.dp_shard = 8;
  r.zeropp = true;  // hpZ's node-local copy is another scheme
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.dp_shard") && Contains("ZeRO++"));
  // With context parallelism the group is dp × cp.
  r.zeropp = false;
  r.dp = 16;
  r.global_batch = 16;
  r.cp = 2;
  r.attention = ztune::AttentionKernel::flash;
  CHECK_FALSE(ztune::check_plan_shape(r, m).has_value());
  CHECK(r.shard_replicas() == 4);
  r.dp_shard = 3;
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("with dp × cp = 32; expected a divisor of 32"));
  // With Ulysses the group is dp × ulysses too (the executor shards over it);
  // the message had said "dp 4".
  r.cp = 1;
  r.ulysses = 2;
  r.dp = 2;
  r.global_batch = 2;
  CHECK_THAT(*ztune::check_plan_shape(r, m), Contains("$.dp_shard: 3 ranks per shard group with dp × ulysses = 4"));
  // The summary writes the pipeline's chunks beside pp, before the shard group.
  ztune::Plan v;
  v.dp = 4;
  v.pp = 2;
  v.zero_stage = 3;
  v.dp_shard = 2;
  v.schedule = ztune::Schedule::interleaved;
  v.virtual_stages = 2;
  CHECK_THAT(v.summary(), Contains("dp4×tp1×pp2×v2 shard2 z3"));
}

TEST_CASE("selective policy: optional in the file, round-trips, strict, needs recompute selective", "[plan][recompute]") {
  ztune::Plan p;
  p.recompute = ztune::Recompute::selective;
  // The default (Korthikanti's attention core) is not written: older files and digests are unchanged.
  CHECK_FALSE(ztune::plan_to_json(p).contains("recompute_policy"));
  CHECK(ztune::recompute_text(p) == "selective");
  for (const auto policy : {ztune::SelectivePolicy::alternate_mm, ztune::SelectivePolicy::mlp_in,
                            ztune::SelectivePolicy::alternate_layers, ztune::SelectivePolicy::dots}) {
    p.recompute_policy = policy;
    auto j = ztune::plan_to_json(p);
    CHECK(j["recompute_policy"] == ztune::to_string(policy));
    CHECK(ztune::plan_from_json(j, "p.json").recompute_policy == policy);
    CHECK_THAT(p.summary(), Contains(" selective:" + ztune::to_string(policy)));
  }
  auto j = ztune::plan_to_json(p);
  j.erase("recompute_policy");
  CHECK(ztune::plan_from_json(j, "p.json").recompute_policy == ztune::SelectivePolicy::attention);
  j["recompute_policy"] = "every_mm";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.recompute_policy"));

  auto m = ztune::load_transformer("llama-7b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p.global_batch = 1;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.recompute = ztune::Recompute::full;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.recompute_policy") && Contains("recompute \"selective\""));
}

// One owner for the default precision and the name's parser (issue 22): the
// CPU cluster trains fp32 by default; GPUs in 16-bit mixed precision, bf16 where the
// datasheet lists bf16 tensor cores (A100, H100), fp16 where not (V100).
TEST_CASE("default precision by device, and the one parser of its name", "[plan][precision]") {
  CHECK(ztune::default_precision(ztune::load_cluster("local-cpu")) == ztune::Precision::fp32);
  CHECK(ztune::default_precision(ztune::load_cluster("dgx2x16")) == ztune::Precision::fp16);
  CHECK(ztune::default_precision(ztune::load_cluster("dgx-a100-80gb")) == ztune::Precision::bf16);
  CHECK(ztune::default_precision(ztune::load_cluster("dgx-h100")) == ztune::Precision::bf16);
  for (auto p : {ztune::Precision::fp16, ztune::Precision::bf16, ztune::Precision::fp32})
    CHECK(ztune::precision_of(ztune::to_string(p)) == p);
  CHECK_FALSE(ztune::precision_of("FP16").has_value());
  CHECK_FALSE(ztune::precision_of("fp8").has_value());
}

TEST_CASE("virtual stage bounds: chunk c of stage r is virtual stage c·pp + r", "[plan][stages]") {
  // Equal stages: Narayanan et al. 2021 §2.2's chunks, 8 layers on 2 stages × 2 chunks of 2.
  CHECK(ztune::virtual_stage_bounds({}, 8, 2, 2) == std::vector<int>{0, 2, 4, 6, 8});
  // Uneven 4 + 2 on 2 stages × 2 chunks: every round covers 3 layers, stage 0
  // contributing 2 and stage 1 one (Megatron-Core's uneven first stage).
  CHECK(ztune::virtual_stage_bounds({4, 2}, 6, 2, 2) == std::vector<int>{0, 2, 3, 5, 6});
  // One chunk per stage: the stages, balanced (70 on 12: 10 stages of 6, then 2 of 5).
  const auto b = ztune::virtual_stage_bounds({}, 70, 12, 1);
  REQUIRE(b.size() == 13);
  CHECK(b[1] == 6);
  CHECK(b[10] == 60);
  CHECK(b[11] == 65);
  CHECK(b.back() == 70);
}

TEST_CASE("plan vocabulary: every enum's name table parses back to its value", "[vocab][plan]") {
  using namespace ztune;
  // One table per enum (plan.hpp) serves plan files, the CLI's flags and the
  // published runs' loaders; to_string prints the same names.
  for (const char* n : kOffloadTargetNames) CHECK(to_string(*offload_target_of(n)) == n);
  for (const char* n : kRecomputeNames) CHECK(to_string(*recompute_of(n)) == n);
  for (const char* n : kScheduleNames) CHECK(to_string(*schedule_of(n)) == n);
  for (const char* n : kSparseLayoutNames) CHECK(to_string(*sparse_layout_of(n)) == n);
  CHECK(*schedule_of("1f1b") == Schedule::one_f_one_b);
  CHECK(*recompute_of("selective") == Recompute::selective);
  CHECK(*offload_target_of("nvme") == OffloadTarget::nvme);
  CHECK_FALSE(recompute_of("partial").has_value());
  CHECK_FALSE(schedule_of("1F1B").has_value());
  CHECK_FALSE(offload_target_of("").has_value());
  CHECK(names_of(kScheduleNames) == std::vector<std::string>{"gpipe", "1f1b", "interleaved"});
}

TEST_CASE("the optimizer's state dtypes in the plan file: absent is fp32, stated round-trips, their rules",
          "[plan][optimizer]") {
  ztune::Plan p;
  auto j = ztune::plan_to_json(p);
  CHECK_FALSE(j.contains("optimizer"));  // an fp32-state plan's file (and digest) is unchanged
  auto q = ztune::plan_from_json(j, "p.json");
  CHECK(q.master_dtype == ztune::Precision::fp32);
  CHECK(q.moments_dtype == ztune::Precision::fp32);
  CHECK_FALSE(q.param_remainders);
  CHECK_FALSE(q.low_precision_optimizer());
  // NeMo's distributed_fused_adam with optim.dtype bf16.
  p.master_dtype = ztune::Precision::bf16;
  p.moments_dtype = ztune::Precision::bf16;
  j = ztune::plan_to_json(p);
  CHECK(j["optimizer"]["master_dtype"] == "bf16");
  CHECK(j["optimizer"]["moments_dtype"] == "bf16");
  CHECK_FALSE(j["optimizer"].contains("param_remainders"));
  q = ztune::plan_from_json(j, "p.json");
  CHECK(q.master_dtype == ztune::Precision::bf16);
  CHECK(q.moments_dtype == ztune::Precision::bf16);
  CHECK_THAT(p.summary(), Contains(" adam:bf16/bf16"));
  // Megatron-Core's precision-aware optimizer: fp32 master as remainders, bf16 moments.
  p.master_dtype = ztune::Precision::fp32;
  p.param_remainders = true;
  j = ztune::plan_to_json(p);
  CHECK(j["optimizer"]["param_remainders"] == true);
  CHECK(ztune::plan_from_json(j, "p.json").param_remainders);
  CHECK_THAT(p.summary(), Contains(" adam:fp32-rem/bf16"));
  j["optimizer"]["moments_dtype"] = "fp8";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                      Contains("p.json: $.optimizer.moments_dtype") && Contains("fp32"));
  j["optimizer"]["moments_dtype"] = "bf16";
  j["optimizer"]["masters"] = "bf16";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.optimizer") && Contains("masters"));

  auto m = ztune::load_transformer("gpt3-175b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p = ztune::Plan{};
  p.dp = 8;
  p.global_batch = 8;
  p.zero_stage = 1;
  p.precision = ztune::Precision::bf16;
  p.master_dtype = ztune::Precision::fp16;  // Megatron-Core --main-params-dtype fp16 beside --bf16
  p.moments_dtype = ztune::Precision::bf16;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.master_dtype = ztune::Precision::bf16;
  p.param_remainders = true;  // a remainder completes an fp32 master only
  CHECK_THAT(*ztune::check_plan(p, m, c),
             Contains("$.optimizer.param_remainders") && Contains("master_dtype \"fp32\""));
  p.master_dtype = ztune::Precision::fp32;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.offload_optimizer = ztune::OffloadTarget::cpu;  // host Adam keeps fp32 states
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.optimizer: 16-bit optimizer states with optimizer offload"));
  p.offload_optimizer = ztune::OffloadTarget::none;
  p.zero_stage = 0;
  p.onebit_adam = true;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.optimizer: 1-bit Adam"));
  p.onebit_adam = false;
  p.param_remainders = false;
  p.precision = ztune::Precision::fp16;  // remainders complete bf16 only
  p.param_remainders = true;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("needs precision \"bf16\""));
  p.param_remainders = false;
  p.precision = ztune::Precision::fp32;  // an fp32 plan's parameters are its master
  p.master_dtype = ztune::Precision::bf16;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.optimizer.master_dtype: an fp32 plan's parameters"));
  p.master_dtype = ztune::Precision::fp32;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());  // fp32 training with bf16 moments
}

TEST_CASE("block recomputation: optional in the file, round-trips, strict, needs recompute full", "[plan][recompute][block]") {
  ztune::Plan p;
  p.recompute = ztune::Recompute::full;
  // Every layer (the default) is not written: older files and digests are unchanged.
  CHECK_FALSE(ztune::plan_to_json(p).contains("recompute_num_layers"));
  p.recompute_num_layers = 3;
  auto j = ztune::plan_to_json(p);
  CHECK(j["recompute_num_layers"] == 3);
  CHECK(ztune::plan_from_json(j, "p.json").recompute_num_layers == 3);
  CHECK_THAT(p.summary(), Contains(" full:block3"));
  j["recompute_num_layers"] = 0;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.recompute_num_layers"));
  j["recompute_num_layers"] = "2";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.recompute_num_layers"));
  j.erase("recompute_num_layers");
  CHECK(ztune::plan_from_json(j, "p.json").recompute_num_layers == 0);

  auto m = ztune::load_transformer("llama-7b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p.global_batch = 1;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.recompute = ztune::Recompute::selective;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.recompute_num_layers") && Contains("recompute \"full\""));
  p.recompute = ztune::Recompute::full;
  p.cpu_checkpointing = true;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.recompute_num_layers") && Contains("cpu_checkpointing"));

  // Megatron-Core counts N within each model chunk: 32 layers on pp 4 × v 2
  // are chunks of 4; N = 3 recomputes 3 of each, 6 a stage, 24 in all; N = 5
  // every layer of a chunk.
  p.cpu_checkpointing = false;
  p.pp = 4;
  p.virtual_stages = 2;
  p.schedule = ztune::Schedule::interleaved;
  CHECK(ztune::recomputed_layers(p, 8) == 6);
  CHECK(ztune::recomputed_layers_total(p, 32) == 24);
  CHECK(ztune::recomputed_layer_fraction(p, 8) == Approx(0.75));
  p.recompute_num_layers = 5;
  CHECK(ztune::recomputed_layers_total(p, 32) == 32);
  // Uneven stages 10 + 7 + 7 + 8 without interleaving, N = 7: 7 of each.
  p.virtual_stages = 1;
  p.schedule = ztune::Schedule::one_f_one_b;
  p.recompute_num_layers = 7;
  p.stage_layers = {10, 7, 7, 8};
  CHECK(ztune::recomputed_layers_total(p, 32) == 28);
  // Without the block method every layer of a stage counts.
  p.recompute_num_layers = 0;
  CHECK(ztune::recomputed_layers(p, 10) == 10);
  p.recompute = ztune::Recompute::none;
  CHECK(ztune::recomputed_layers(p, 10) == 10);
}

TEST_CASE("every k-th layer recomputed (torchtitan's selective_ac_option k): optional, round-trips, its rule",
          "[plan][recompute]") {
  ztune::Plan p;
  p.recompute = ztune::Recompute::selective;
  p.recompute_policy = ztune::SelectivePolicy::alternate_layers;
  // k = 2, torchtitan's default, is not written: older files and digests are unchanged.
  CHECK_FALSE(ztune::plan_to_json(p).contains("recompute_every"));
  CHECK(ztune::recompute_text(p) == "selective:alternate_layers");
  CHECK(ztune::whole_layer_recompute_share(p) == 0.5);
  p.recompute_every = 3;
  auto j = ztune::plan_to_json(p);
  CHECK(j["recompute_every"] == 3);
  CHECK(ztune::plan_from_json(j, "p.json").recompute_every == 3);
  CHECK(ztune::recompute_text(p) == "selective:alternate_layers/3");
  CHECK(ztune::whole_layer_recompute_share(p) == Approx(1.0 / 3));
  CHECK(ztune::attention_recompute_share(p) == Approx(1.0 / 3));
  j["recompute_every"] = 1;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"), Contains("p.json: $.recompute_every"));
  {
    ztune::Plan wrong = p;
    wrong.recompute_policy = ztune::SelectivePolicy::attention;
    CHECK_THAT(*ztune::check_plan_shape(wrong, ztune::load_transformer("llama-7b")),
               Contains("every 3rd layer recomputed whole"));  // not "3th"
  }
  auto m = ztune::load_transformer("llama-7b");
  auto c = ztune::load_cluster("dgx-a100-80gb");
  p.global_batch = 1;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.recompute_policy = ztune::SelectivePolicy::alternate_mm;
  CHECK_THAT(*ztune::check_plan(p, m, c), Contains("$.recompute_every") && Contains("alternate_layers"));
  // torchtitan counts the blocks a rank wraps: k past the stage's 32 layers
  // recomputes none, where the priced share would be 1/k of each layer.
  p.recompute_policy = ztune::SelectivePolicy::alternate_layers;
  p.recompute_every = 32;
  CHECK_FALSE(ztune::check_plan(p, m, c).has_value());
  p.recompute_every = 33;
  CHECK_THAT(*ztune::check_plan(p, m, c),
             Contains("$.recompute_every: one layer in every 33, in stages of at most 32 layers, recomputes none"));
}

// docs/formats.md: "An optional field given as null reads as absent". The
// reader had refused null optional fields as unknown, and its list of the
// fields it expects left out every optional one the file did not give.
TEST_CASE("plan file: null optional fields read as absent, and an unknown field's message lists them all",
          "[plan][bad-input]") {
  ztune::Plan p;
  p.pp = 2;
  auto j = ztune::plan_to_json(p);
  for (const char* key : {"cp", "ulysses", "dp_shard", "stage_layers", "recompute_every", "recompute_num_layers"})
    j[key] = nullptr;
  j["communication"]["max_reuse_distance"] = nullptr;
  const ztune::Plan q = ztune::plan_from_json(j, "p.json");
  CHECK(q.cp == 1);
  CHECK(q.ulysses == 1);
  CHECK(q.stage_layers.empty());
  j = ztune::plan_to_json(p);
  j["stage_layer"] = nlohmann::json::array({1, 1});  // a typo
  REQUIRE_THROWS_WITH(ztune::plan_from_json(j, "p.json"),
                      Contains("p.json: $.stage_layer: unknown field") && Contains("stage_layers") &&
                          Contains("dp_shard") && Contains("recompute_num_layers"));
}
