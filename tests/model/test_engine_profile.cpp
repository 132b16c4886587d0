// The engine profile (data/engines/): what a framework does with the hardware.
// Oracles: the same plan priced under two engines differs exactly in the parts
// the engine profiles say (closed forms from op_costs.hpp's definitions), and
// the schema is strict.
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "cost_model_fixtures.hpp"
#include "ztune/model/engine_profile.hpp"
#include "ztune/model/hardware_profile.hpp"
#include "ztune/model/input_error.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/model/time_model.hpp"

using namespace ztune;

namespace {

HardwareProfile hardware() {
  HardwareProfile hw;
  hw.name = "test";
  hw.gemm_efficiency = {{1e12, 0.8}, {1e6, 0.05}};
  hw.attention_gemm_factor = 0.7;
  hw.kernel_launch_s = 3e-6;
  hw.intra_node = {0.8, 0, 20e-6};
  hw.inter_node = {0.9, 0, 20e-6};
  return hw;
}

EngineProfile engine(GatherUnit unit, double traffic, double mb_overhead, double step_overhead) {
  EngineProfile e;
  e.name = "test";
  e.zero3_gather = unit;
  e.elementwise_traffic = traffic;
  e.microbatch_overhead_s = mb_overhead;
  e.step_overhead_s = step_overhead;
  return e;
}

}  // namespace

TEST_CASE("catalog engines load, the ztune engine says it is not measured on a GPU yet", "[engine]") {
  for (const char* name : {"megatron", "deepspeed", "fsdp", "ztune"}) {
    const EngineProfile e = load_engine_profile(name);
    CHECK(e.name == name);
    CHECK(e.elementwise_traffic >= 1.0);
  }
  CHECK(load_engine_profile("fsdp").zero3_gather == GatherUnit::module);
  CHECK(load_engine_profile("deepspeed").zero3_gather == GatherUnit::bucket);
  CHECK(load_engine_profile("ztune").source.find("Not yet measured on a GPU") != std::string::npos);
  CHECK_THROWS_WITH(load_engine_profile("jax"), Catch::Contains("engines: deepspeed, fsdp, megatron, ztune"));
}

TEST_CASE("engine schema is strict and names the path", "[engine][bad-input]") {
  nlohmann::json doc = engine_profile_to_json(load_engine_profile("megatron"));
  CHECK(engine_profile_from_json(doc, "e.json").name == "megatron");  // round trip
  nlohmann::json bad = doc;
  bad["fusion"]["elementwise_traffic"] = 0.5;
  CHECK_THROWS_WITH(engine_profile_from_json(bad, "e.json"), Catch::Contains("e.json: $.fusion.elementwise_traffic"));
  bad = doc;
  bad["overlap"]["dp"] = 1.5;
  CHECK_THROWS_WITH(engine_profile_from_json(bad, "e.json"), Catch::Contains("$.overlap.dp"));
  bad = doc;
  bad["zero3_gather"] = "layer";
  CHECK_THROWS_WITH(engine_profile_from_json(bad, "e.json"), Catch::Contains("$.zero3_gather"));
  bad = doc;
  bad["host"]["launch_us"] = 1;
  CHECK_THROWS_WITH(engine_profile_from_json(bad, "e.json"), Catch::Contains("launch_us"));
}

TEST_CASE("same plan, two engines: ZeRO-3 gathers per FSDP module vs per DeepSpeed bucket", "[engine][time]") {
  const Transformer m = test::gpt(24, 2048, 16, 2048, 51200);
  const Cluster c = test::a100_nodes(2);
  const Plan p = test::zero_plan(16, 1, 3, 1, 1);
  HardwareProfile ds = hardware();
  ds.engine = engine(GatherUnit::bucket, 1, 0, 0);
  HardwareProfile fs = ds;
  fs.engine.zero3_gather = GatherUnit::module;
  // FSDP: one all-gather per transformer block plus the embedding/head module.
  CHECK(zero3_gathers_per_pass(m, p, fs) == 25);
  // DeepSpeed: stage parameters over max(prefetch bucket, one layer).
  const double params = stage_params(m, p);
  const double unit = std::max(std::min(p.prefetch_bucket_elems, params), m.params_per_layer());
  CHECK(zero3_gathers_per_pass(m, p, ds) == static_cast<int>(std::ceil(params / unit)));
  // The gather time is that many collectives of an equal share of 2Ψ bytes.
  const GroupPlacement dp = place_groups(p, c).dp;
  const double per = collective_time(Collective::all_gather, 2.0 * params / 25, dp, c, fs);
  CHECK(zero3_gather_cost(m, p, c, fs).fwd_s == Approx(25 * per).epsilon(1e-12));
}

TEST_CASE("same plan, two engines: unfused elementwise traffic and host overheads", "[engine][time]") {
  const Transformer m = test::gpt(8, 1024, 16, 1024, 51200);
  const Cluster c = test::a100_nodes(1);
  const Plan p = test::zero_plan(8, 1, 1, 2, 4);
  HardwareProfile fused = hardware();
  fused.engine = engine(GatherUnit::bucket, 1.0, 1e-3, 2e-3);
  HardwareProfile eager = hardware();
  eager.engine = engine(GatherUnit::bucket, 2.5, 3e-3, 7e-3);
  // memory_bound_time = bytes / bandwidth + launches: the bytes term scales by 2.5.
  const double launches = 5 * fused.kernel_launch_s;
  const double f = layer_cost(m, p, c, fused).fwd_elementwise_s - launches;
  const double e = layer_cost(m, p, c, eager).fwd_elementwise_s - launches;
  CHECK(e == Approx(2.5 * f).epsilon(1e-9));
  // GEMMs are the hardware's: identical under both engines.
  CHECK(layer_cost(m, p, c, eager).fwd_gemm_s == layer_cost(m, p, c, fused).fwd_gemm_s);
  // Overhead part: grad_accum × per-micro-batch + per-step (host dispatch is 0 here).
  const auto overhead = [&](const HardwareProfile& hw) {
    return predict_time(m, p, c, hw).parts[static_cast<std::size_t>(TimePart::overhead)];
  };
  CHECK(overhead(eager) - overhead(fused) == Approx(4 * 2e-3 + 5e-3).epsilon(1e-9));
}

TEST_CASE("with_engine: a calibrated profile's measured executor replaces the catalog's ztune engine only", "[engine]") {
  HardwareProfile hw = hardware();
  EngineProfile measured = engine(GatherUnit::bucket, 1, 0.123, 0);
  measured.name = "ztune";
  hw.measured_engine = measured;
  CHECK(with_engine(hw, "ztune").engine.microbatch_overhead_s == 0.123);
  CHECK(with_engine(hw, "megatron").engine.name == "megatron");
}

TEST_CASE("the same engine compiled (torch.compile, XLA): only the elementwise traffic changes", "[engine][time]") {
  const Transformer m = test::gpt(8, 1024, 16, 1024, 51200);
  const Cluster c = test::a100_nodes(1);
  const Plan p = test::zero_plan(8, 1, 1, 2, 4);
  HardwareProfile eager = hardware();
  eager.engine = engine(GatherUnit::module, 2.5, 3e-3, 7e-3);
  eager.engine.compiled_elementwise_traffic = 1.25;
  HardwareProfile comp = eager;
  comp.engine = compiled(eager.engine);
  CHECK(comp.engine.elementwise_traffic == 1.25);
  CHECK(comp.engine.microbatch_overhead_s == eager.engine.microbatch_overhead_s);
  CHECK(comp.engine.zero3_gather == GatherUnit::module);
  // The elementwise bytes term scales by 1.25 / 2.5; GEMMs and the host's fixed costs do not move.
  const double launches = 5 * eager.kernel_launch_s;
  const double e = layer_cost(m, p, c, eager).fwd_elementwise_s - launches;
  const double k = layer_cost(m, p, c, comp).fwd_elementwise_s - launches;
  CHECK(k == Approx(0.5 * e).epsilon(1e-9));
  CHECK(layer_cost(m, p, c, comp).fwd_gemm_s == layer_cost(m, p, c, eager).fwd_gemm_s);
  const auto part = [&](const HardwareProfile& hw, TimePart t) {
    return predict_time(m, p, c, hw).parts[static_cast<std::size_t>(t)];
  };
  CHECK(part(comp, TimePart::overhead) == part(eager, TimePart::overhead));
  CHECK(part(comp, TimePart::dp_comm) == part(eager, TimePart::dp_comm));
  CHECK(part(comp, TimePart::forward) < part(eager, TimePart::forward));
  // The reader: optional (default: the eager traffic), and never above it.
  nlohmann::json doc = engine_profile_to_json(eager.engine);
  CHECK(engine_profile_from_json(doc, "e.json").compiled_elementwise_traffic == 1.25);
  doc["fusion"].erase("compiled_elementwise_traffic");
  CHECK(engine_profile_from_json(doc, "e.json").compiled_elementwise_traffic == 2.5);
  doc["fusion"]["compiled_elementwise_traffic"] = 3.0;
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"),
                    Catch::Contains("$.fusion.compiled_elementwise_traffic") && Catch::Contains("does not add traffic"));
}

TEST_CASE("engine tp_comm overlap: optional (absent: no overlap), a fraction, round-trips", "[engine][tp_overlap]") {
  nlohmann::json doc = engine_profile_to_json(load_engine_profile("megatron"));
  doc["overlap"]["tp_comm"] = 0.625;
  CHECK(engine_profile_from_json(doc, "e.json").tp_comm_overlap == 0.625);
  CHECK(engine_profile_to_json(engine_profile_from_json(doc, "e.json"))["overlap"]["tp_comm"] == 0.625);
  doc["overlap"].erase("tp_comm");
  CHECK(engine_profile_from_json(doc, "e.json").tp_comm_overlap == 0.0);
  doc["overlap"]["tp_comm"] = 1.5;
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"), Catch::Contains("e.json: $.overlap.tp_comm"));
  // Only Megatron-Core has the userbuffers overlap: the shipped engines say so.
  CHECK(load_engine_profile("megatron").tp_comm_overlap > 0);
  CHECK(load_engine_profile("deepspeed").tp_comm_overlap == 0);
  CHECK(load_engine_profile("fsdp").tp_comm_overlap == 0);
}

TEST_CASE("hardware profile: the cudnn attention factor is optional, a fraction, and round-trips", "[engine][cudnn]") {
  nlohmann::json doc = profile_to_json(load_profile(std::string(ZTUNE_TEST_DATA_DIR) + "/profiles/h100.json"));
  const HardwareProfile h100 = profile_from_json(doc, "p.json");
  CHECK(h100.cudnn_attention_factor == Approx(doc["gemm"]["cudnn_attention_factor"].get<double>()));
  // A profile written before the cudnn kernel existed prices it as FlashAttention-2.
  doc["gemm"].erase("cudnn_attention_factor");
  const HardwareProfile old = profile_from_json(doc, "p.json");
  CHECK(old.cudnn_attention_factor == old.attention_gemm_factor);
  doc["gemm"]["cudnn_attention_factor"] = 1.5;
  CHECK_THROWS_WITH(profile_from_json(doc, "p.json"),
                    Catch::Contains("p.json: $.gemm.cudnn_attention_factor") && Catch::Contains("fraction"));
}
