// LayerCostMemo (model/layer_cost_memo.hpp): a prediction that takes its layer
// and edge costs from the memo equals the one computed afresh (the oracle:
// predict_time without a memo), for plans that differ from the remembered one
// in every field LayerCostKey leaves out; plans that differ in a key field are
// priced afresh.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <vector>

#include "cost_model_fixtures.hpp"
#include "ztune/model/layer_cost_memo.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/hardware_profile.hpp"

using namespace ztune;

namespace {

void require_same(const TimePrediction& a, const TimePrediction& b) {
  REQUIRE(a.iteration_s == b.iteration_s);
  for (std::size_t i = 0; i < a.parts.size(); ++i) REQUIRE(a.parts[i] == b.parts[i]);
  REQUIRE(a.tokens_per_s == b.tokens_per_s);
  REQUIRE(a.hardware_flops == b.hardware_flops);
}

}  // namespace

TEST_CASE("the layer-cost memo changes no prediction when fields outside its key change", "[model][memo]") {
  const Cluster c = load_cluster("dgx-h100x32");
  const Transformer m = load_transformer("llama-70b");
  const HardwareProfile hw = default_profile_for(c);
  Plan base = test::zero_plan(/*dp=*/8, /*tp=*/8, /*zero=*/0, /*micro_batch=*/1, /*grad_accum=*/16);
  base.pp = 4;
  base.sequence_parallel = true;
  base.recompute = Recompute::selective;
  base.precision = Precision::bf16;
  REQUIRE_FALSE(check_plan(base, m, c));

  // Each variation touches only what a layer does not see. ZeRO-2/3 run
  // without pipeline stages (check_plan): their stages go to data parallelism.
  auto no_pp = [](Plan& p) {
    p.pp = 1;
    p.dp = 32;
    p.grad_accum = 4;
  };
  const std::vector<std::pair<std::string, std::function<void(Plan&)>>> variations = {
      {"dp and accumulation", [](Plan& p) { p.dp = 4; p.grad_accum = 32; }},
      {"pp", [](Plan& p) { p.pp = 8; p.dp = 4; p.grad_accum = 32; }},
      {"interleaved", [](Plan& p) { p.schedule = Schedule::interleaved; p.virtual_stages = 2; }},
      {"ZeRO-1", [](Plan& p) { p.zero_stage = 1; }},
      {"ZeRO-3 hybrid", [&no_pp](Plan& p) { no_pp(p); p.zero_stage = 3; p.dp_shard = 4; }},
      {"offload", [&no_pp](Plan& p) { no_pp(p); p.zero_stage = 2; p.offload_optimizer = OffloadTarget::cpu; }},
      {"no overlap", [](Plan& p) { p.overlap_comm = false; p.zero_stage = 1; p.reduce_scatter = false; }},
      {"buckets", [&no_pp](Plan& p) { no_pp(p); p.zero_stage = 3; p.reduce_bucket_elems = 1e7; p.prefetch_bucket_elems = 1e6; p.max_live_params = 1e8; }},
      {"1-bit Adam", [](Plan& p) { p.onebit_adam = true; p.onebit_freeze_step = 100; }},
      {"ZeRO++", [&no_pp](Plan& p) { no_pp(p); p.zero_stage = 3; p.zeropp = true; }},
      {"GPipe", [](Plan& p) { p.schedule = Schedule::gpipe; }},
  };
  LayerCostMemo memo(m, c, hw);
  REQUIRE(memo.serves(m, c, hw));
  require_same(predict_time(m, base, c, hw, &memo), predict_time(m, base, c, hw));
  REQUIRE(memo.misses() == 1);
  // A variation of the base plan, priced with the memo and afresh.
  auto price = [&](const std::string& name, const std::function<void(Plan&)>& vary) {
    Plan p = base;
    vary(p);
    const auto refused = check_plan(p, m, c);
    INFO(name << ": " << refused.value_or("valid"));
    REQUIRE_FALSE(refused);
    require_same(predict_time(m, p, c, hw, &memo), predict_time(m, p, c, hw));
  };
  for (const auto& [name, vary] : variations) price(name, vary);
  CHECK(memo.misses() == 1);  // every variation shared the base plan's layer
  CHECK(memo.hits() == static_cast<std::int64_t>(variations.size()));

  // A key field changes the layer: priced afresh, and right.
  const std::vector<std::pair<std::string, std::function<void(Plan&)>>> layer_changes = {
      {"micro-batch", [](Plan& p) { p.micro_batch = 2; p.grad_accum = 8; }},
      {"tp", [](Plan& p) { p.tp = 4; p.dp = 16; p.grad_accum = 8; }},
      {"cp", [](Plan& p) { p.cp = 2; p.dp = 4; p.grad_accum = 32; }},
      {"full recomputation", [](Plan& p) { p.recompute = Recompute::full; }},
      {"flash", [](Plan& p) { p.attention = AttentionKernel::flash; }},
      {"no SP", [](Plan& p) { p.sequence_parallel = false; }},
      {"TP overlap", [](Plan& p) { p.tp_comm_overlap = true; }},
      {"fp16", [](Plan& p) { p.precision = Precision::fp16; }},
      {"every 2nd layer", [](Plan& p) { p.recompute_policy = SelectivePolicy::alternate_layers; }},
      {"every 3rd layer",
       [](Plan& p) { p.recompute_policy = SelectivePolicy::alternate_layers; p.recompute_every = 3; }},
  };
  std::int64_t misses = memo.misses();
  for (const auto& [name, vary] : layer_changes) {
    price(name, vary);
    CHECK(memo.misses() == ++misses);
  }
}

TEST_CASE("the layer-cost memo serves only its own model, cluster and profile on GPUs", "[model][memo]") {
  const Cluster gpu = load_cluster("dgx-h100x32");
  const Cluster cpu = load_cluster("local-cpu");
  const Transformer m = load_transformer("llama-70b");
  const Transformer other = load_transformer("llama-7b");
  const HardwareProfile hw = default_profile_for(gpu);
  const HardwareProfile cpu_hw = default_profile_for(cpu);
  CHECK(LayerCostMemo(m, gpu, hw).serves(m, gpu, hw));
  CHECK_FALSE(LayerCostMemo(m, gpu, hw).serves(other, gpu, hw));
  const Cluster copy = gpu;  // equal but another object: not assumed the same
  CHECK_FALSE(LayerCostMemo(m, gpu, hw).serves(m, copy, hw));
  // CPU ranks price the layer by the executor's kernels, which read more of
  // the plan than the key holds (cpu_executor_costs.hpp).
  CHECK_FALSE(LayerCostMemo(m, cpu, cpu_hw).serves(m, cpu, cpu_hw));
  // A memo handed a plan of another model is not used: the result is the oracle's.
  LayerCostMemo memo(m, gpu, hw);
  const Plan p = test::zero_plan(/*dp=*/32, /*tp=*/8, /*zero=*/0, /*micro_batch=*/1, /*grad_accum=*/4);
  REQUIRE_FALSE(check_plan(p, other, gpu));
  require_same(predict_time(other, p, gpu, hw, &memo), predict_time(other, p, gpu, hw));
  CHECK(memo.misses() + memo.hits() == 0);
}
