#include <catch2/catch.hpp>

#include "ztune/model/cluster.hpp"
#include <nlohmann/json.hpp>

#include "ztune/model/input_error.hpp"
#include "ztune/model/plan.hpp"
#include "ztune/model/transformer.hpp"

using Catch::Matchers::Contains;

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
                      Contains("p.json: $.attention: expected one of standard|flash, got \"xformers\""));

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
  // Flash is a dense kernel: not with a block-sparse layout.
  q.precision = ztune::Precision::bf16;
  q.sparse_attention = ztune::SparseLayout::fixed;
  CHECK_THAT(*ztune::check_plan(q, m, a100), Contains("$.attention") && Contains("sparse"));
}
