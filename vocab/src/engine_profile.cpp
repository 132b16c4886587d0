#include "ztune/vocab/engine_profile.hpp"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/json_reader.hpp"

namespace ztune {

void read_host_costs(ObjectReader& r, const char* op_key, EngineProfile& e) {
  e.host_op_s = r.positive(op_key, true, kMaxHostOpUs) * 1e-6;
  e.microbatch_overhead_s = r.positive("microbatch_overhead_us", true, kMaxMicrobatchOverheadUs) * 1e-6;
  e.step_overhead_s = r.positive("step_overhead_ms", true, kMaxStepOverheadMs) * 1e-3;
}

EngineProfile engine_profile_from_json(const nlohmann::json& doc, const std::string& file) {
  ObjectReader r(doc, file, "$");
  r.schema("ztune.engine/1");
  EngineProfile e;
  e.name = r.name("name");
  e.source = r.string("source");
  {
    auto h = r.object("host");
    read_host_costs(h, "op_us", e);
    h.finish();
  }
  {
    auto f = r.object("fusion");
    e.elementwise_traffic = f.positive("elementwise_traffic");
    if (e.elementwise_traffic < 1.0 || e.elementwise_traffic > 10.0)
      throw f.error("elementwise_traffic", "expected a factor in [1, 10] of the fused kernels' traffic, got " +
                                               std::to_string(e.elementwise_traffic));
    // Optional: an engine with nothing left for a compiler to fuse states none.
    e.compiled_elementwise_traffic = e.elementwise_traffic;
    if (f.has("compiled_elementwise_traffic")) {
      e.compiled_elementwise_traffic = f.positive("compiled_elementwise_traffic");
      if (e.compiled_elementwise_traffic < 1.0 || e.compiled_elementwise_traffic > e.elementwise_traffic)
        throw f.error("compiled_elementwise_traffic",
                      "expected a factor in [1, elementwise_traffic = " + std::to_string(e.elementwise_traffic) +
                          "] (a compiler fuses, it does not add traffic), got " +
                          std::to_string(e.compiled_elementwise_traffic));
    }
    // Added with Megatron's softmax fallback: absent means a fused kernel always.
    e.megatron_softmax_rule = f.optional_choice("masked_softmax", {"megatron", "always"}, "always") == "megatron";
    // Added with the loss's own kernels: absent means fused.
    e.cross_entropy =
        *value_in<CrossEntropyKernels>(kCrossEntropyNames, f.optional_choice("cross_entropy", kCrossEntropyNames, "fused"));
    f.finish();
  }
  {
    auto o = r.object("overlap");
    e.dp_overlap = o.fraction("dp", true);
    e.zero3_prefetch_overlap = o.fraction("zero3_prefetch", true);
    e.offload_overlap = o.fraction("offload", true);
    e.tp_overlap = o.fraction("tp", true);
    // Added with plan.tp_comm_overlap: an engine without it states none.
    e.tp_comm_overlap = o.optional_fraction("tp_comm", true).value_or(0.0);
    o.finish();
  }
  // Added with the fp32 gradients of bf16 training: absent means neither.
  if (r.has("gradients")) {
    auto g = r.object("gradients");
    e.bf16_reduce_fp32 = g.optional_choice("bf16_reduce", {"fp32", "bf16"}, "bf16") == "fp32";
    e.fp16_reduce_fp32 = g.optional_choice("fp16_reduce", {"fp32", "fp16"}, "fp16") == "fp32";
    e.bf16_pipeline_fp32_accumulation =
        g.optional_choice("bf16_pipeline_accumulation", {"fp32_per_microbatch", "none"}, "none") ==
        "fp32_per_microbatch";
    // Added with Megatron-Core's in-place buffers: absent means buckets.
    e.dp_buffers_in_place = g.optional_choice("buffers", {"in_place", "buckets"}, "buckets") == "in_place";
    g.finish();
  }
  // Added with ztune's executor as an engine: absent means another engine.
  e.executor = r.optional_boolean("executor").value_or(false);
  e.zero3_gather = r.choice("zero3_gather", {"bucket", "module"}) == "module" ? GatherUnit::module : GatherUnit::bucket;
  // Added with DeepSpeed's recomputation gathers: absent means held.
  e.zero3_recompute_regathers = r.optional_choice("zero3_recompute", {"regather", "held"}, "held") == "regather";
  // Added with FP8 linear layers: absent means the engine has none.
  e.fp8 = *value_in<Fp8Library>(kFp8LibraryNames, r.optional_choice("fp8", kFp8LibraryNames, "none"));
  r.finish();
  return e;
}

nlohmann::json engine_profile_to_json(const EngineProfile& e) {
  return nlohmann::json{
      {"schema", "ztune.engine/1"},
      {"name", e.name},
      {"source", e.source},
      {"host",
       {{"op_us", e.host_op_s * 1e6},
        {"microbatch_overhead_us", e.microbatch_overhead_s * 1e6},
        {"step_overhead_ms", e.step_overhead_s * 1e3}}},
      {"fusion",
       {{"elementwise_traffic", e.elementwise_traffic},
        {"compiled_elementwise_traffic", e.compiled_elementwise_traffic},
        {"masked_softmax", e.megatron_softmax_rule ? "megatron" : "always"},
        {"cross_entropy", name_in(kCrossEntropyNames, e.cross_entropy)}}},
      {"overlap",
       {{"dp", e.dp_overlap},
        {"zero3_prefetch", e.zero3_prefetch_overlap},
        {"offload", e.offload_overlap},
        {"tp", e.tp_overlap},
        {"tp_comm", e.tp_comm_overlap}}},
      {"gradients",
       {{"bf16_reduce", e.bf16_reduce_fp32 ? "fp32" : "bf16"},
        {"fp16_reduce", e.fp16_reduce_fp32 ? "fp32" : "fp16"},
        {"bf16_pipeline_accumulation", e.bf16_pipeline_fp32_accumulation ? "fp32_per_microbatch" : "none"},
        {"buffers", e.dp_buffers_in_place ? "in_place" : "buckets"}}},
      {"zero3_gather", e.zero3_gather == GatherUnit::module ? "module" : "bucket"},
      {"zero3_recompute", e.zero3_recompute_regathers ? "regather" : "held"},
      {"executor", e.executor},
      {"fp8", name_in(kFp8LibraryNames, e.fp8)},
  };
}

EngineProfile compiled(EngineProfile e) {
  e.elementwise_traffic = e.compiled_elementwise_traffic;
  e.cross_entropy = CrossEntropyKernels::fused;
  return e;
}

std::string engine_names() {
  std::string known;
  for (const auto& n : catalog_names("engines")) known += (known.empty() ? "" : ", ") + n;
  return known.empty() ? "none" : known;
}

EngineProfile load_engine_profile(const std::string& name) {
  namespace fs = std::filesystem;
  const bool plain = !name.empty() && name.size() <= 64 && name.find('/') == std::string::npos &&
                     name.find('.') == std::string::npos;
  const fs::path file = fs::path(data_dir()) / "engines" / (name + ".json");
  if (!plain || !fs::is_regular_file(file))
    throw InputError("engine \"" + name.substr(0, 64) + "\": no engine profile (looked for data/engines/" +
                     name.substr(0, 64) + ".json; engines: " + engine_names() + ")");
  return engine_profile_from_json(read_json_file(file.string()), file.string());
}

}  // namespace ztune
