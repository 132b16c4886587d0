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
