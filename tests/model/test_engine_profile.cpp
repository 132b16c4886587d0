// The engine profile (data/engines/): what a framework does with the hardware.
// Oracles: the same plan priced under two engines differs exactly in the parts
// the engine profiles say (closed forms from op_costs.hpp's definitions), and
// the schema is strict.
#include <catch2/catch.hpp>

#include <cmath>

#include <nlohmann/json.hpp>

#include "cost_model_fixtures.hpp"
#include "ztune/vocab/engine_profile.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/input_error.hpp"
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
  // DeepSpeed's hooks gather a recomputed block again; FSDP and ztune's
  // executor recompute inside the block's backward, after its one gather.
  CHECK(load_engine_profile("deepspeed").zero3_recompute_regathers);
  CHECK_FALSE(load_engine_profile("fsdp").zero3_recompute_regathers);
  CHECK_FALSE(load_engine_profile("ztune").zero3_recompute_regathers);
  CHECK_FALSE(load_engine_profile("megatron").zero3_recompute_regathers);
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
  bad["zero3_recompute"] = "sometimes";
  CHECK_THROWS_WITH(engine_profile_from_json(bad, "e.json"), Catch::Contains("$.zero3_recompute"));
  bad = doc;
  bad.erase("zero3_recompute");  // a profile from before the field: held
  CHECK_FALSE(engine_profile_from_json(bad, "e.json").zero3_recompute_regathers);
  bad = doc;
  bad["host"]["launch_us"] = 1;
  CHECK_THROWS_WITH(engine_profile_from_json(bad, "e.json"), Catch::Contains("launch_us"));
  // "executor": a boolean, false when absent, kept by the round trip; the
  // retired "storage" key is refused rather than silently ignored.
  CHECK_FALSE(engine_profile_from_json(doc, "e.json").executor);
  bad = engine_profile_to_json(load_engine_profile("ztune"));
  CHECK(engine_profile_from_json(bad, "e.json").executor);
  bad["executor"] = "yes";
  CHECK_THROWS_WITH(engine_profile_from_json(bad, "e.json"), Catch::Contains("e.json: $.executor"));
  bad = doc;
  bad["storage"] = "fp32";
  CHECK_THROWS_WITH(engine_profile_from_json(bad, "e.json"), Catch::Contains("storage"));
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

TEST_CASE("host costs past any framework's are refused, in an engine and in a calibrated profile", "[engine][bad-input]") {
  // A calibration started from a profile stating 1e300 ms a step had written
  // one predicting 1e297 s a step (session 41's audit).
  nlohmann::json doc = engine_profile_to_json(load_engine_profile("fsdp"));
  doc["host"]["step_overhead_ms"] = 1e300;
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"),
                    Catch::Contains("e.json: $.host.step_overhead_ms") && Catch::Contains("at most 3.6e+06"));
  doc["host"]["step_overhead_ms"] = 300.0;  // the fits' bound: accepted
  doc["host"]["op_us"] = 2e6;
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"), Catch::Contains("$.host.op_us"));

  HardwareProfile hw = hardware();
  hw.measured_engine = engine(GatherUnit::bucket, 1, 0.01, 0.1);
  nlohmann::json p = profile_to_json(hw);
  CHECK(profile_from_json(p, "p.json").measured_engine->step_overhead_s == Approx(0.1));
  p["framework"]["microbatch_overhead_us"] = 1e12;
  CHECK_THROWS_WITH(profile_from_json(p, "p.json"), Catch::Contains("p.json: $.framework.microbatch_overhead_us"));
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

TEST_CASE("hardware profile: GEMM waves are optional, bounded, and round-trip", "[engine][gemm]") {
  nlohmann::json doc = profile_to_json(load_profile(std::string(ZTUNE_TEST_DATA_DIR) + "/profiles/a100.json"));
  const HardwareProfile a100 = profile_from_json(doc, "p.json");
  CHECK(a100.gemm_waves.units() == 108);  // the A100 datasheet's SM count
  CHECK(a100.gemm_waves.tile_m() == doc["gemm"]["waves"]["tile_m"].get<int>());
  // A profile without them (CPU ranks, profiles from before): no quantization.
  nlohmann::json none = doc;
  none["gemm"].erase("waves");
  CHECK(profile_from_json(none, "p.json").gemm_waves.utilization(1, 1, 1) == 1.0);
  CHECK_FALSE(profile_to_json(profile_from_json(none, "p.json"))["gemm"].contains("waves"));
  nlohmann::json bad = doc;
  bad["gemm"]["waves"]["sms"] = 0;
  CHECK_THROWS_WITH(profile_from_json(bad, "p.json"), Catch::Contains("p.json: $.gemm.waves.sms"));
  bad = doc;
  bad["gemm"]["waves"].erase("tile_n");
  CHECK_THROWS_WITH(profile_from_json(bad, "p.json"), Catch::Contains("$.gemm.waves.tile_n"));
}

// DeepSpeed ZeRO-3 with full recomputation, worked by hand from
// partitioned_param_coordinator's release rule: the recomputed forward
// releases weight i unless the modules walked before its backward use, the
// later weights' recomputation and their backward (2·Σ_{j>i} p_j), stay
// below stage3_max_reuse_distance. A GPT block: QKV 3h², output h², FC1 4h²,
// FC2 4h² (12h² in all).
TEST_CASE("same plan, two engines: DeepSpeed gathers a recomputed block again, FSDP holds it", "[engine][time][zero]") {
  const Cluster c = test::a100_nodes(4);
  HardwareProfile ds = hardware();
  ds.engine = engine(GatherUnit::bucket, 1, 0, 0);
  ds.engine.zero3_recompute_regathers = true;
  HardwareProfile held = ds;
  held.engine.zero3_recompute_regathers = false;
  Plan p = test::zero_plan(32, 1, 3, 1, 1);
  p.recompute = Recompute::full;
  // h = 20480 (GPT 530B's width), h² = 4.19e8, distance 3e9: FC2 is used
  // again at once (kept); FC1 after 2·4h² = 3.36e9 (released); the output
  // projection and QKV later still: 8h² of 12h² gathered a third time.
  const Transformer wide = test::gpt(2, 20480, 160, 1024, 51200);
  p.max_reuse_distance = 3e9;
  CHECK(zero3_backward_regather_share(wide, p, ds) == Approx(8.0 / 12.0));
  // h = 12288 (GPT-3 175B): 2·8h² = 2.4e9 and 2·9h² = 2.7e9 are below 3e9:
  // the whole block stays gathered from its recomputation to its backward.
  const Transformer gpt3 = test::gpt(2, 12288, 96, 1024, 51200);
  CHECK(zero3_backward_regather_share(gpt3, p, ds) == 0);
  // DeepSpeed's default distance, 1e9: FC1 (2·4h² = 1.2e9) and the rest released.
  p.max_reuse_distance = 1e9;
  CHECK(zero3_backward_regather_share(gpt3, p, ds) == Approx(8.0 / 12.0));
  // Distance 0 keeps nothing, FC2 neither (the walk stops before its first module).
  p.max_reuse_distance = 0;
  CHECK(zero3_backward_regather_share(gpt3, p, ds) == Approx(1.0));
  p.max_reuse_distance = 1e9;
  // The gather time: forward one pass; the backward window the
  // recomputation's pass and the share again. FSDP-like engines: one pass each.
  const Zero3GatherCost z = zero3_gather_cost(gpt3, p, c, ds);
  CHECK(z.bwd_s == Approx(z.fwd_s * (1.0 + 8.0 / 12.0)));
  const Zero3GatherCost h = zero3_gather_cost(gpt3, p, c, held);
  CHECK(h.fwd_s == Approx(z.fwd_s));
  CHECK(h.bwd_s == Approx(h.fwd_s));
  CHECK(zero3_backward_regather_share(gpt3, p, held) == 0);
  // No recomputation (or selective, which recomputes no weight's module): no regather.
  p.recompute = Recompute::selective;
  CHECK(zero3_backward_regather_share(gpt3, p, ds) == 0);
  p.recompute = Recompute::none;
  CHECK(zero3_gather_cost(gpt3, p, c, ds).bwd_s == Approx(z.fwd_s));
  // The iteration moves by exactly the extra gather where nothing hides it
  // (no prefetch: stage3_max_live_parameters below two FC1s).
  p.recompute = Recompute::full;
  p.max_live_params = 1e8;
  const TimePrediction with = predict_time(gpt3, p, c, ds);
  const TimePrediction without = predict_time(gpt3, p, c, held);
  CHECK(with.part(TimePart::zero3_gather) - without.part(TimePart::zero3_gather) ==
        Approx(z.fwd_s * 8.0 / 12.0).epsilon(1e-9));
}

// Megatron-LM's FusedScaleMaskSoftmax.is_kernel_available (causal mask):
// 16-bit input, 16 < sk <= 4096, sq and sk multiples of 4, and b·np a
// multiple of 4 and of the CUDA kernel's batches per block (4 rows of 1024
// keys, 8 rows of 64: get_batch_per_block).
TEST_CASE("Megatron's fused softmax: the shapes its kernel takes", "[engine][softmax]") {
  CHECK(megatron_fused_softmax_available(4, 1024, 1024, Precision::bf16));
  CHECK(megatron_fused_softmax_available(12, 2048, 2048, Precision::fp16));
  CHECK_FALSE(megatron_fused_softmax_available(2, 1024, 1024, Precision::fp16));  // 16 heads / tp 8, micro-batch 1
  CHECK_FALSE(megatron_fused_softmax_available(6, 2048, 2048, Precision::fp16));  // 96 heads / tp 16
  CHECK_FALSE(megatron_fused_softmax_available(4, 1024, 1024, Precision::fp32));
  CHECK_FALSE(megatron_fused_softmax_available(4, 8192, 8192, Precision::bf16));  // sk > 4096
  CHECK(megatron_fused_softmax_available(4, 4096, 4096, Precision::bf16));
  CHECK_FALSE(megatron_fused_softmax_available(4, 16, 16, Precision::bf16));  // sk <= 16
  CHECK_FALSE(megatron_fused_softmax_available(4, 64, 64, Precision::bf16));  // 8 rows per block at 64 keys
  CHECK(megatron_fused_softmax_available(8, 64, 64, Precision::bf16));
  CHECK_FALSE(megatron_fused_softmax_available(4, 1022, 1022, Precision::bf16));
}

// Where the fused kernel refuses the shape, Megatron runs PyTorch's softmax
// chain in fp32 (forward_torch_softmax): four more kernels each way, 32 more
// bytes per score forward ((eb+4) + 3·8 + (4+eb) − 2·eb) and 36 − eb backward,
// four more host ops each way. An engine whose kernel takes any shape (ztune's
// executor) pays none of it, nor does Megatron at a shape its kernel takes.
TEST_CASE("same plan, two engines: Megatron's softmax falls back to fp32 PyTorch where its kernel refuses the shape",
          "[engine][time][softmax]") {
  const Transformer m = test::gpt(8, 1024, 16, 1024, 51200);
  const Cluster c = test::a100_nodes(1);
  Plan p = test::zero_plan(1, 8, 0, 1, 4);  // 16 heads over tp 8, micro-batch 1: 2 score matrices
  p.precision = Precision::bf16;
  HardwareProfile any = hardware();
  any.engine = engine(GatherUnit::bucket, 1.0, 0, 0);
  any.engine.host_op_s = 10e-6;
  HardwareProfile megatron = any;
  megatron.engine.megatron_softmax_rule = true;
  const double scores = 1.0 * 16 / 8 * 1024 * 1024;
  const double bw = c.node.gpu.hbm_bandwidth_gbps * 1e9 * any.memory_bandwidth_efficiency;
  const LayerCost a = layer_cost(m, p, c, any), g = layer_cost(m, p, c, megatron);
  CHECK(g.fwd_attention_s - a.fwd_attention_s == Approx(32 * scores / bw + 4 * any.kernel_launch_s).epsilon(1e-9));
  CHECK(g.bwd_input_s - a.bwd_input_s == Approx(34 * scores / bw + 4 * any.kernel_launch_s).epsilon(1e-9));
  CHECK(g.host_fwd_s - a.host_fwd_s == Approx(4 * 10e-6));
  CHECK(g.host_bwd_s - a.host_bwd_s == Approx(4 * 10e-6));
  CHECK(g.fwd_gemm_s == a.fwd_gemm_s);
  // Micro-batch 2: 4 score matrices, the fused kernel runs; so does flash.
  p.micro_batch = 2;
  p.global_batch = 2 * p.grad_accum;
  CHECK(layer_cost(m, p, c, megatron).fwd_attention_s == layer_cost(m, p, c, any).fwd_attention_s);
  p.micro_batch = 1;
  p.global_batch = p.grad_accum;
  p.attention = AttentionKernel::flash;
  CHECK(layer_cost(m, p, c, megatron).fwd_attention_s == layer_cost(m, p, c, any).fwd_attention_s);
  // The engine key: optional (absent: a fused kernel always), one of two words, round-trips.
  nlohmann::json doc = engine_profile_to_json(megatron.engine);
  CHECK(engine_profile_from_json(doc, "e.json").megatron_softmax_rule);
  doc["fusion"].erase("masked_softmax");
  CHECK_FALSE(engine_profile_from_json(doc, "e.json").megatron_softmax_rule);
  doc["fusion"]["masked_softmax"] = "sometimes";
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"), Catch::Contains("$.fusion.masked_softmax"));
  CHECK(load_engine_profile("megatron").megatron_softmax_rule);
  CHECK(load_engine_profile("deepspeed").megatron_softmax_rule);
  CHECK_FALSE(load_engine_profile("ztune").megatron_softmax_rule);
  CHECK_FALSE(load_engine_profile("fsdp").megatron_softmax_rule);
}

TEST_CASE("the loss's kernels in the engine profile: optional, one of four words, round-tripped", "[engine][loss]") {
  EngineProfile e = load_engine_profile("megatron");
  CHECK(e.cross_entropy == CrossEntropyKernels::megatron_fp32);
  CHECK(load_engine_profile("deepspeed").cross_entropy == CrossEntropyKernels::megatron_fp32);  // Megatron-DeepSpeed
  CHECK(load_engine_profile("fsdp").cross_entropy == CrossEntropyKernels::torch_fp32);
  CHECK(load_engine_profile("ztune").cross_entropy == CrossEntropyKernels::fused);
  nlohmann::json doc = engine_profile_to_json(e);
  CHECK(doc["fusion"]["cross_entropy"] == "megatron_fp32");
  CHECK(engine_profile_from_json(doc, "e.json").cross_entropy == CrossEntropyKernels::megatron_fp32);
  doc["fusion"].erase("cross_entropy");  // a profile written before the key
  CHECK(engine_profile_from_json(doc, "e.json").cross_entropy == CrossEntropyKernels::fused);
  doc["fusion"]["cross_entropy"] = "fp32";
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"),
                    Catch::Contains("$.fusion.cross_entropy") && Catch::Contains("torch_fp32"));
}

// The fp32 gradients of bf16 training (engine profile "gradients"): Megatron-LM
// reduces its fp32 main_grad buffer; DeepSpeed's BF16_Optimizer, which runs bf16
// pipelines without ZeRO, folds each micro-batch's bf16 gradients into fp32
// buffers and reduces those. Oracles: the byte counts of those buffers and
// the closed form of the fold (18 B per parameter at the achieved HBM
// bandwidth, or two host dispatches per parameter tensor).
TEST_CASE("engine gradients: the reduction's dtype and DeepSpeed's per-micro-batch fp32 fold", "[engine][time][grads]") {
  const Transformer m = test::gpt(8, 1024, 16, 1024, 51200);
  const Cluster c = test::a100_nodes(2);
  HardwareProfile plain = hardware();
  plain.memory_bandwidth_efficiency = 0.8;
  plain.engine = engine(GatherUnit::bucket, 1, 1e-3, 2e-3);
  HardwareProfile megatron = plain;
  megatron.engine.bf16_reduce_fp32 = true;
  HardwareProfile deepspeed = plain;
  deepspeed.engine.bf16_pipeline_fp32_accumulation = true;
  deepspeed.engine.host_op_s = 1e-9;  // the HBM term bounds the fold

  Plan p = test::zero_plan(16, 1, 0, 1, 4);
  p.precision = Precision::bf16;
  const double params = stage_params(m, p);
  // Megatron: 4-byte gradients in bf16, the training precision's otherwise.
  CHECK(gradient_reduce_bytes(p, megatron.engine) == 4.0);
  CHECK(dp_sync_cost(m, p, c, megatron).bytes_per_step == Approx(4.0 * params));
  CHECK(dp_sync_cost(m, p, c, plain).bytes_per_step == Approx(2.0 * params));
  CHECK(dp_sync_cost(m, p, c, megatron).per_step_s > 1.9 * dp_sync_cost(m, p, c, plain).per_step_s);
  p.precision = Precision::fp16;
  CHECK(gradient_reduce_bytes(p, megatron.engine) == 2.0);

  // DeepSpeed without a pipeline: bf16 gradients reduced as they are, no fold.
  p.precision = Precision::bf16;
  CHECK(gradient_reduce_bytes(p, deepspeed.engine) == 2.0);
  CHECK(bf16_grad_accumulation_time(m, p, c, deepspeed) == 0.0);
  // With a pipeline at ZeRO 0: the BF16_Optimizer, fp32 reduction and the fold.
  p.pp = 2;
  p.dp = 8;
  p.zero_stage = 0;
  p.global_batch = 8 * 4;
  CHECK(bf16_optimizer_runs(p, deepspeed.engine));
  CHECK(gradient_reduce_bytes(p, deepspeed.engine) == 4.0);
  const double stage = stage_params(m, p);
  // 4 layers per stage of 12 tensors (2 LayerNorms with biases, QKV, projection,
  // two MLP linears, their 4 biases) and the last stage's edge of 3 (the final
  // LayerNorm's 2, the tied embedding's copy; the first stage's 2, the word
  // and position embeddings, are fewer): 51 tensors, 2 kernels each.
  const double hbm = c.node.gpu.hbm_bandwidth_gbps * 1e9 * 0.8;
  const double fold = 18.0 * stage / hbm + 102 * plain.kernel_launch_s;
  CHECK(bf16_grad_accumulation_time(m, p, c, deepspeed) == Approx(fold).epsilon(1e-12));
  // The host bounds it when its dispatch is slower: two ops per tensor.
  HardwareProfile slow_host = deepspeed;
  slow_host.engine.host_op_s = 1e-3;
  CHECK(bf16_grad_accumulation_time(m, p, c, slow_host) == Approx(102 * 1e-3));
  // The prediction's overhead part carries it once per micro-batch (4).
  const auto overhead = [&](const HardwareProfile& hw) {
    return predict_time(m, p, c, hw).parts[static_cast<std::size_t>(TimePart::overhead)];
  };
  CHECK(overhead(deepspeed) - overhead(plain) == Approx(4 * fold).epsilon(1e-9));
  // ZeRO-1 (DeepSpeed's ZeRO optimizer with the default accumulation dtype),
  // fp16 and the other engines: no BF16_Optimizer.
  Plan z1 = p;
  z1.zero_stage = 1;
  CHECK(bf16_grad_accumulation_time(m, z1, c, deepspeed) == 0.0);
  CHECK(gradient_reduce_bytes(z1, deepspeed.engine) == 2.0);
  Plan f16 = p;
  f16.precision = Precision::fp16;
  CHECK(bf16_grad_accumulation_time(m, f16, c, deepspeed) == 0.0);
  CHECK(bf16_grad_accumulation_time(m, p, c, megatron) == 0.0);
}

// A plan that states its reduction's dtype (plan.communication.grad_reduce_dtype)
// moves that many bytes per gradient whatever the engine's default: the
// oracle is the buffer's element size (4 for fp32, 2 for 16 bits) times the
// stage's parameters, the nccl-tests S of the step's reduction.
TEST_CASE("a plan's stated gradient-reduction dtype sets the bytes reduced, over the engine's", "[engine][time][grads]") {
  const Transformer m = test::gpt(8, 1024, 16, 1024, 51200);
  const Cluster c = test::a100_nodes(2);
  HardwareProfile plain = hardware();
  plain.engine = engine(GatherUnit::bucket, 1, 1e-3, 2e-3);
  HardwareProfile megatron = plain;
  megatron.engine.bf16_reduce_fp32 = true;
  HardwareProfile executor = plain;
  executor.engine.bf16_reduce_fp32 = executor.engine.fp16_reduce_fp32 = true;

  Plan p = test::zero_plan(16, 1, 0, 1, 4);
  p.precision = Precision::bf16;
  const double params = stage_params(m, p);
  // Unstated: the engine's (Megatron-LM's fp32 main_grad; ztune's float buffers, fp16 too).
  CHECK(gradient_reduce_bytes(p, plain.engine) == 2.0);
  CHECK(gradient_reduce_bytes(p, megatron.engine) == 4.0);
  p.precision = Precision::fp16;
  CHECK(gradient_reduce_bytes(p, megatron.engine) == 2.0);
  CHECK(gradient_reduce_bytes(p, executor.engine) == 4.0);
  // Stated: Megatron-LM --grad-reduce-in-bf16 on the fp32-reducing engine, and
  // DeepSpeed communication_data_type fp32 on a 16-bit one.
  p.precision = Precision::bf16;
  p.grad_reduce_dtype = Precision::bf16;
  CHECK(gradient_reduce_bytes(p, megatron.engine) == 2.0);
  CHECK(dp_sync_cost(m, p, c, megatron).bytes_per_step == Approx(2.0 * params));
  p.grad_reduce_dtype = Precision::fp32;
  CHECK(gradient_reduce_bytes(p, plain.engine) == 4.0);
  CHECK(dp_sync_cost(m, p, c, plain).bytes_per_step == Approx(4.0 * params));
  Plan unstated = p;
  unstated.grad_reduce_dtype.reset();
  CHECK(dp_sync_cost(m, p, c, plain).per_step_s > 1.9 * dp_sync_cost(m, unstated, c, plain).per_step_s);
}

TEST_CASE("engine gradients: the shipped engines, an optional section, strict values", "[engine][grads][bad-input]") {
  // DeepSpeed's BF16_Optimizer is in the shipped deepspeed engine. Megatron-LM
  // (and NeMo, whose grad_sync_dtype defaults to fp32) reduce bf16 gradients
  // in their fp32 main_grad buffer; the NeMo runs that reduce in bf16 state it
  // in the plan. ztune's executor keeps and reduces its gradients in the
  // training dtype unless the plan states fp32 (issue 24's 16-bit storage);
  // DeepSpeed and FSDP reduce the training dtype.
  CHECK(load_engine_profile("deepspeed").bf16_pipeline_fp32_accumulation);
  CHECK(load_engine_profile("megatron").bf16_reduce_fp32);
  CHECK_FALSE(load_engine_profile("megatron").fp16_reduce_fp32);
  for (const char* name : {"deepspeed", "fsdp", "ztune"}) {
    CHECK_FALSE(load_engine_profile(name).bf16_reduce_fp32);
    CHECK_FALSE(load_engine_profile(name).fp16_reduce_fp32);
  }
  for (const char* name : {"megatron", "fsdp", "ztune"})
    CHECK_FALSE(load_engine_profile(name).bf16_pipeline_fp32_accumulation);
  nlohmann::json doc = engine_profile_to_json(load_engine_profile("deepspeed"));
  CHECK(engine_profile_from_json(doc, "e.json").bf16_pipeline_fp32_accumulation);  // round trip
  doc.erase("gradients");  // a profile from before the section: neither
  CHECK_FALSE(engine_profile_from_json(doc, "e.json").bf16_pipeline_fp32_accumulation);
  doc["gradients"] = {{"bf16_reduce", "fp8"}};
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"), Catch::Contains("e.json: $.gradients.bf16_reduce"));
  doc["gradients"] = {{"bf16_reduce", "fp32"}, {"reduce_dtype", "fp32"}};
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"), Catch::Contains("reduce_dtype"));
  doc["gradients"] = {{"fp16_reduce", "bf16"}};
  CHECK_THROWS_WITH(engine_profile_from_json(doc, "e.json"), Catch::Contains("e.json: $.gradients.fp16_reduce"));
  doc["gradients"] = {{"fp16_reduce", "fp32"}};
  CHECK(engine_profile_from_json(engine_profile_to_json(engine_profile_from_json(doc, "e.json")), "e.json")
            .fp16_reduce_fp32);  // round trip
}
