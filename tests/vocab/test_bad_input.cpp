// Bad input of every kind, for every file ztune reads (cluster, model, plan,
// plan file): each message must name the file, the JSON path and what was
// expected (DESIGN.md "Files the user writes or reads", STYLE.md #7). The
// expected messages are written out in full where the text is fixed.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <nlohmann/json.hpp>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using nlohmann::json;

namespace {

/// Writes `text` to a fresh file in this process's scratch folder; returns its path.
std::string write_file(const std::string& name, const std::string& text) {
  const fs::path dir = fs::temp_directory_path() / ("ztune-bad-input-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path path = dir / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

json cluster_doc() { return ztune::cluster_to_json(ztune::load_cluster("dgx-a100-80gb")); }
json model_doc() { return ztune::transformer_to_json(ztune::load_transformer("llama-70b")); }

/// A valid plan for llama-70b (80 layers, 64 heads, 8 kv heads) on a few DGX H100s.
ztune::Plan good_plan() {
  ztune::Plan p;
  p.dp = 2;
  p.tp = 8;
  p.pp = 2;
  p.micro_batch = 1;
  p.grad_accum = 8;
  p.global_batch = 16;
  p.zero_stage = 1;
  return p;
}

/// A plan file carrying `p` with the model and cluster it was made for.
json plan_file_doc(const ztune::Plan& p, const std::string& cluster = "dgx-h100x4",
                   const std::string& model = "llama-70b") {
  return json{{"schema", "ztune.planfile/1"},
              {"plan", ztune::plan_to_json(p)},
              {"model", ztune::transformer_to_json(ztune::load_transformer(model))},
              {"cluster", ztune::cluster_to_json(ztune::load_cluster(cluster))}};
}

std::string plan_file_error(const ztune::Plan& p, const std::string& cluster = "dgx-h100x4") {
  try {
    (void)ztune::plan_file_from_json(plan_file_doc(p, cluster), "plan.json");
  } catch (const ztune::InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

}  // namespace

// ---------------------------------------------------------------- cluster files

TEST_CASE("cluster: malformed JSON names the file, line and column", "[bad-input][cluster]") {
  const auto path = write_file("broken-cluster.json", "{\n  \"schema\": \"ztune.cluster/1\",\n  \"nodes\": 4,,\n}\n");
  // Line 3 is `  "nodes": 4,,`: the second comma, column 14, is where a key was expected.
  REQUIRE_THROWS_WITH(ztune::load_cluster(path), StartsWith(path + ":3:14: malformed JSON") &&
                                                     Contains("expected string literal"));
  const auto truncated = write_file("truncated-cluster.json", "{\"schema\": \"ztune.cluster/1\", \"node\": {");
  REQUIRE_THROWS_WITH(ztune::load_cluster(truncated), StartsWith(truncated + ":1:") && Contains("malformed JSON"));
}

TEST_CASE("cluster: a missing field names its path", "[bad-input][cluster]") {
  auto doc = cluster_doc();
  doc["node"].erase("host_memory_gb");
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"), "c.json: $.node.host_memory_gb: missing required field");
  doc = cluster_doc();
  doc["fabric"]["inter_node"].erase("nics_per_node");
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.fabric.inter_node.nics_per_node: missing required field");
  doc = cluster_doc();
  doc.erase("schema");
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"), "c.json: $.schema: missing required field");
}

TEST_CASE("cluster: a wrong type says what was expected and what came", "[bad-input][cluster]") {
  auto doc = cluster_doc();
  doc["nodes"] = "4";
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.nodes: expected an integer in [1, 1000000], got \"4\"");
  doc = cluster_doc();
  doc["node"]["gpu"]["memory_gb"] = "80GB";
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.memory_gb: expected a number > 0 and at most 1e+06, got \"80GB\"");
  doc = cluster_doc();
  doc["node"]["gpus"] = 8.5;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpus: expected an integer in [1, 1024], got 8.5");
  doc = cluster_doc();
  doc["fabric"]["intra_node"] = 300;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.fabric.intra_node: expected an object, got 300");
  doc = cluster_doc();
  doc["device_kind"] = "tpu";
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.device_kind: expected one of gpu|cpu, got \"tpu\"");
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(json::array({1, 2}), "c.json"),
                      "c.json: $: expected an object, got [1,2]");
}

TEST_CASE("cluster: zero and negative values are rejected", "[bad-input][cluster]") {
  auto doc = cluster_doc();
  doc["nodes"] = 0;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.nodes: expected an integer in [1, 1000000], got 0");
  doc = cluster_doc();
  doc["node"]["gpu"]["hbm_bandwidth_gbps"] = 0;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.hbm_bandwidth_gbps: expected a number > 0 and at most 1e+06, got 0");
  doc = cluster_doc();
  doc["fabric"]["inter_node"]["latency_us"] = -1;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.fabric.inter_node.latency_us: expected a number >= 0 and at most 1e+06, got -1");
  doc = cluster_doc();
  doc["node"]["gpu"]["peak_tflops"]["bf16"] = -312;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.peak_tflops.bf16: expected a number >= 0 and at most 1e+06, got -312");
  doc = cluster_doc();
  doc["node"]["gpu"]["peak_tflops"]["fp32"] = 0;  // every device computes in fp32
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.peak_tflops.fp32: expected a number > 0 and at most 1e+06, got 0");
}

TEST_CASE("cluster: capacities have the rates' floor, and names no control characters", "[bad-input][cluster]") {
  // 1e-300 GB was read as > 0 and printed as a capacity of 0.000.
  auto doc = cluster_doc();
  doc["node"]["gpu"]["memory_gb"] = 1e-300;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.memory_gb: expected a number from 1e-06 to 1e+06, got 1e-300");
  doc = cluster_doc();
  doc["node"]["host_memory_gb"] = 1e-300;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      Catch::Matchers::Contains("c.json: $.node.host_memory_gb: expected a number from 1e-06"));
  // A NUL, a newline and an ANSI escape went to the terminal as they were.
  doc = cluster_doc();
  doc["name"] = std::string("a\0b\n\x1b[31mred", 11);
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      Catch::Matchers::Contains("c.json: $.name: expected a name without control characters"));
  doc = cluster_doc();
  doc["node"]["gpu"]["name"] = "";
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.name: expected a name, got an empty string");
}

TEST_CASE("cluster: an unknown field is rejected with the fields that are allowed", "[bad-input][cluster]") {
  auto doc = cluster_doc();
  doc["node"]["gpu"]["tdp_w"] = 400;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.tdp_w: unknown field (expected only: hbm_bandwidth_gbps, memory_gb, name, "
                      "peak_tflops)");
  doc = cluster_doc();
  doc["node"]["gpu"]["peak_tflops"]["int8"] = 3958;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.peak_tflops.int8: unknown field (expected only: bf16, fp16, fp32, fp8)");
  // fp8 is a peak of its own (plan.fp8's GEMMs), optional, 0 or a rate.
  doc = cluster_doc();
  doc["node"]["gpu"]["peak_tflops"]["fp8"] = 1978.9;
  CHECK(ztune::cluster_from_json(doc, "c.json").node.gpu.peak_tflops_fp8 == 1978.9);
  doc["node"]["gpu"]["peak_tflops"]["fp8"] = -1;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      StartsWith("c.json: $.node.gpu.peak_tflops.fp8: expected"));
  doc = cluster_doc();
  doc["gpus_total"] = 8;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      StartsWith("c.json: $.gpus_total: unknown field (expected only: ") && Contains("nodes"));
}

TEST_CASE("cluster: a wrong schema version is named as such", "[bad-input][cluster]") {
  auto doc = cluster_doc();
  doc["schema"] = "ztune.cluster/2";
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.schema: expected \"ztune.cluster/1\", got \"ztune.cluster/2\" (a different version "
                      "of this format: this ztune reads ztune.cluster/1)");
  // A model file given where a cluster is expected.
  const auto path = write_file("model-as-cluster.json", model_doc().dump());
  REQUIRE_THROWS_WITH(ztune::load_cluster(path),
                      path + ": $.schema: expected \"ztune.cluster/1\", got \"ztune.model/1\"");
}

TEST_CASE("cluster: inconsistent values", "[bad-input][cluster]") {
  auto doc = cluster_doc();
  doc["node"]["gpu"]["peak_tflops"]["fp16"] = 0;
  doc["node"]["gpu"]["peak_tflops"]["bf16"] = 0;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.gpu.peak_tflops: expected a 16-bit peak > 0 (fp16 or bf16) for a GPU, got fp16 "
                      "0 and bf16 0");
  doc = cluster_doc();
  doc["node"]["nvme_size_tb"] = 0;  // bandwidth stays 40
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.node.nvme_size_tb: expected NVMe size and bandwidth both 0 (no NVMe) or both > 0, got "
                      "size 0 TB and bandwidth 40 GB/s");
  doc = cluster_doc();
  doc["fabric"]["inter_node"]["collective_efficiency"] = 1.5;
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(doc, "c.json"),
                      "c.json: $.fabric.inter_node.collective_efficiency: expected a fraction in (0, 1], got 1.5");
}

// ------------------------------------------------------------------ model files

TEST_CASE("model: malformed JSON names the file, line and column", "[bad-input][model]") {
  const auto path = write_file("broken-model.json", "{\"schema\": \"ztune.model/1\", \"layers\": 80 \"hidden\": 8192}");
  REQUIRE_THROWS_WITH(ztune::load_transformer(path), StartsWith(path + ":1:") && Contains("malformed JSON"));
  const auto empty = write_file("empty-model.json", "");
  REQUIRE_THROWS_WITH(ztune::load_transformer(empty), StartsWith(empty + ":1:") && Contains("malformed JSON"));
}

TEST_CASE("model: missing field, wrong type, zero or negative, unknown field", "[bad-input][model]") {
  auto doc = model_doc();
  doc.erase("ffn_hidden");
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"), "m.json: $.ffn_hidden: missing required field");
  doc = model_doc();
  doc["bias"] = "false";
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.bias: expected true or false, got \"false\"");
  doc = model_doc();
  doc["activation"] = "relu";
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.activation: expected one of gelu|swiglu, got \"relu\"");
  doc = model_doc();
  doc["hidden"] = 8192.5;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.hidden: expected an integer in [1, 1048576], got 8192.5");
  doc = model_doc();
  doc["layers"] = 0;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.layers: expected an integer in [1, 100000], got 0");
  doc = model_doc();
  doc["train_tokens"] = -1;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.train_tokens: expected a number in [1, 1e+18], got -1");
  doc = model_doc();
  doc["global_batch"] = -1024;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.global_batch: expected an integer in [1, 4294967296], got -1024");
  doc = model_doc();
  doc["rope_scaling"] = 8;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      StartsWith("m.json: $.rope_scaling: unknown field (expected only: ") && Contains("kv_heads"));
}

TEST_CASE("model: a wrong schema version is named as such", "[bad-input][model]") {
  auto doc = model_doc();
  doc["schema"] = "ztune.model/0";
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.schema: expected \"ztune.model/1\", got \"ztune.model/0\" (a different version of "
                      "this format: this ztune reads ztune.model/1)");
  doc["schema"] = 1;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.schema: expected \"ztune.model/1\", got 1");
}

TEST_CASE("model: heads must divide hidden and kv heads must divide heads", "[bad-input][model]") {
  auto doc = model_doc();  // llama-70b: hidden 8192, 64 heads, 8 kv heads
  doc["heads"] = 48;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.heads: expected a divisor of hidden (8192), got 48");
  doc = model_doc();
  doc["kv_heads"] = 6;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.kv_heads: expected a divisor of heads (64), got 6");
  doc["kv_heads"] = 128;  // more kv heads than query heads
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.kv_heads: expected a divisor of heads (64), got 128");
  // The same checks run on a file loaded from disk, naming that file.
  doc["kv_heads"] = 6;
  const auto path = write_file("bad-kv.json", doc.dump(2));
  REQUIRE_THROWS_WITH(ztune::load_transformer(path), path + ": $.kv_heads: expected a divisor of heads (64), got 6");
}

// -------------------------------------------------------------- plan documents

TEST_CASE("plan: malformed JSON in a plan file names the file, line and column", "[bad-input][plan]") {
  const auto path = write_file("broken-plan.json", "{\"schema\": \"ztune.planfile/1\", \"plan\": {\"dp\": }}");
  REQUIRE_THROWS_WITH(ztune::load_plan_file(path), StartsWith(path + ":1:") && Contains("malformed JSON"));
  REQUIRE_THROWS_WITH(ztune::load_plan_file("/nonexistent/plan.json"), "/nonexistent/plan.json: cannot open file");
}

TEST_CASE("plan: missing field, wrong type, zero or negative, unknown field", "[bad-input][plan]") {
  const auto base = ztune::plan_to_json(good_plan());
  auto doc = base;
  doc["offload"].erase("params");
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"), "p.json: $.offload.params: missing required field");
  doc = base;
  doc["tp"] = "8";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"),
                      "p.json: $.tp: expected an integer in [1, 1048576], got \"8\"");
  doc = base;
  doc["precision"] = "fp8";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"),
                      "p.json: $.precision: expected one of fp16|bf16|fp32, got \"fp8\"");
  doc = base;
  doc["zero_stage"] = 4;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"), "p.json: $.zero_stage: expected an integer in [0, 3], got 4");
  doc = base;
  doc["dp"] = 0;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"), "p.json: $.dp: expected an integer in [1, 1048576], got 0");
  doc = base;
  doc["micro_batch"] = -2;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"),
                      "p.json: $.micro_batch: expected an integer in [1, 1048576], got -2");
  doc = base;
  doc["communication"]["reduce_bucket_elems"] = 0;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"),
                      "p.json: $.communication.reduce_bucket_elems: expected a number in [1, 1000000000000000], got 0");
  doc = base;
  doc["onebit_adam"]["warmup"] = 100;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"),
                      "p.json: $.onebit_adam.warmup: unknown field (expected only: enabled, freeze_step)");
}

TEST_CASE("plan: wrong schema versions of the plan and of the plan file", "[bad-input][plan]") {
  auto plan = ztune::plan_to_json(good_plan());
  plan["schema"] = "ztune.plan/2";
  REQUIRE_THROWS_WITH(ztune::plan_from_json(plan, "p.json"),
                      "p.json: $.schema: expected \"ztune.plan/1\", got \"ztune.plan/2\" (a different version of this "
                      "format: this ztune reads ztune.plan/1)");
  auto file = plan_file_doc(good_plan());
  file["schema"] = "ztune.planfile/2";
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(file, "plan.json"),
                      "plan.json: $.schema: expected \"ztune.planfile/1\", got \"ztune.planfile/2\" (a different "
                      "version of this format: this ztune reads ztune.planfile/1)");
  // A bare plan where a plan file is expected: the wrapper's schema is checked
  // first, and the message says how a plan file holds a plan.
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(ztune::plan_to_json(good_plan()), "plan.json"),
                      "plan.json: $.schema: expected \"ztune.planfile/1\", got \"ztune.plan/1\": this is a plan on "
                      "its own; a plan file holds it as {\"schema\": \"ztune.planfile/1\", \"plan\": {...}} beside its "
                      "model and cluster (ztune search --out writes one)");
}

TEST_CASE("plan file: errors inside the embedded documents carry the full path", "[bad-input][plan]") {
  auto file = plan_file_doc(good_plan());
  file["plan"]["tp"] = "eight";
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(file, "plan.json"),
                      "plan.json: $.plan.tp: expected an integer in [1, 1048576], got \"eight\"");
  file = plan_file_doc(good_plan());
  file["plan"] = 3;
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(file, "plan.json"), "plan.json: $.plan: expected an object, got 3");
  file = plan_file_doc(good_plan());
  file["model"]["heads"] = 48;
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(file, "plan.json"),
                      "plan.json: $.model.heads: expected a divisor of hidden (8192), got 48");
  file = plan_file_doc(good_plan());
  file["cluster"]["node"]["gpu"]["memory_gb"] = -80;
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(file, "plan.json"),
                      "plan.json: $.cluster.node.gpu.memory_gb: expected a number > 0 and at most 1e+06, got -80");
  file = plan_file_doc(good_plan());
  file["tuner_score"] = 1.0;
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(file, "plan.json"),
                      StartsWith("plan.json: $.tuner_score: unknown field (expected only: "));
  // The plan alone (no model or cluster) is a valid plan file.
  file = json{{"schema", "ztune.planfile/1"}, {"plan", ztune::plan_to_json(good_plan())}};
  CHECK_NOTHROW(ztune::plan_file_from_json(file, "plan.json"));
}

TEST_CASE("plan file: dp·tp·pp may use fewer devices than the cluster has, not more", "[bad-input][plan]") {
  auto p = good_plan();  // 2 × 8 × 2 = 32 = 4 DGX H100 nodes × 8
  CHECK(plan_file_error(p) == "(accepted)");
  p.dp = 1;  // 16 of 32 GPUs: the rest idle
  p.global_batch = 8;
  CHECK(plan_file_error(p) == "(accepted)");
  p.dp = 4;  // 64 > 32
  p.global_batch = 32;
  CHECK(plan_file_error(p) ==
        "plan.json: $.plan.dp: dp×tp×pp = 64 needs more devices than the cluster's 32 (4 nodes × 8); expected at "
        "most 32 (fewer is allowed: the rest stay idle)");
}

TEST_CASE("plan file: the plan must fit the model's shape", "[bad-input][plan]") {
  auto p = good_plan();  // llama-70b: 64 heads, 8 kv heads, 80 layers
  p.tp = 3;
  p.pp = 1;
  CHECK(plan_file_error(p) ==
        "plan.json: $.plan.tp: 3 does not divide the model's 64 heads; expected a divisor of 64");
  p = good_plan();
  p.dp = 1;
  p.global_batch = 8;
  p.tp = 1;
  p.pp = 3;
  // Uneven stages (issue 19): 80 layers on 3 stages are 27 + 27 + 26.
  CHECK(plan_file_error(p) == "(accepted)");
  // Interleaving still needs equal chunks: 3 × 3 = 9 does not divide 80.
  p.pp = 3;
  p.schedule = ztune::Schedule::interleaved;
  p.virtual_stages = 3;
  p.micro_batch = 1;
  p.grad_accum = 9;
  p.global_batch = 9;
  CHECK(plan_file_error(p) ==
        "plan.json: $.plan.virtual_stages: pp×virtual_stages = 9 does not divide the model's 80 layers; interleaving "
        "cuts every stage into equal model chunks (expected pp×virtual_stages to divide 80, or stage_layers stated, "
        "each a multiple of virtual_stages)");
  p.schedule = ztune::Schedule::one_f_one_b;
  p.virtual_stages = 1;
  p.stage_layers = {40, 40, 1};
  CHECK(plan_file_error(p) == "plan.json: $.plan.stage_layers: the stages hold 81 layers; expected the model's 80");
}

TEST_CASE("plan file: options the ZeRO stage does not allow", "[bad-input][plan]") {
  auto p = good_plan();
  p.pp = 1;
  p.dp = 4;
  p.global_batch = 32;  // 4 × 8 × 1 = 32 GPUs, micro 1 × GAS 8 × dp 4
  REQUIRE(plan_file_error(p) == "(accepted)");

  auto q = p;
  q.zero_stage = 2;
  q.offload_params = ztune::OffloadTarget::cpu;
  CHECK(plan_file_error(q) == "plan.json: $.plan.offload.params: parameter offload needs zero_stage 3 (DeepSpeed "
                              "ZeRO-Infinity), got stage 2");
  q = p;
  q.zero_stage = 2;
  q.offload_optimizer = ztune::OffloadTarget::nvme;
  CHECK(plan_file_error(q) == "plan.json: $.plan.offload.optimizer: NVMe optimizer offload needs zero_stage 3, got stage 2");
  q = p;
  q.zero_stage = 0;
  q.offload_optimizer = ztune::OffloadTarget::cpu;
  CHECK_THAT(plan_file_error(q), StartsWith("plan.json: $.plan.offload.optimizer: ") && Contains("zero_stage >= 1"));
  q = p;
  q.zero_stage = 1;
  q.onebit_adam = true;
  CHECK(plan_file_error(q) == "plan.json: $.plan.onebit_adam: 1-bit Adam needs zero_stage 0");
  q = p;
  q.zero_stage = 2;
  q.zeropp = true;
  CHECK(plan_file_error(q) == "plan.json: $.plan.zeropp: ZeRO++ needs zero_stage 3");
  // Under a pipeline: ZeRO 0, 1, or 3 held through the step (FSDP2 under
  // torch.distributed.pipelining); no engine runs ZeRO-2 there, and ZeRO++ is
  // DeepSpeed's, whose pipeline engine takes neither.
  q = good_plan();
  q.zero_stage = 2;
  CHECK_THAT(plan_file_error(q),
             StartsWith("plan.json: $.plan.zero_stage: stage 2 ") && Contains("use stage 0 or 1, or 3"));
  q.zero_stage = 3;
  CHECK(plan_file_error(q) == "(accepted)");
  {
    // With no data-parallel group it would shard nothing and keep a second copy.
    auto one = q;
    one.dp = 1;
    one.global_batch = 8;
    CHECK_THAT(plan_file_error(one), StartsWith("plan.json: $.plan.zero_stage: 3 under a pipeline") &&
                                         Contains("expected zero_stage 0 or 1, or dp > 1"));
  }
  q.zeropp = true;
  CHECK_THAT(plan_file_error(q), StartsWith("plan.json: $.plan.zeropp: ") && Contains("expected pp 1"));
}

TEST_CASE("plan file: interleaved 1F1B needs virtual stages, and virtual stages need it", "[bad-input][plan]") {
  auto p = good_plan();  // pp 2
  p.schedule = ztune::Schedule::interleaved;
  p.virtual_stages = 1;
  CHECK(plan_file_error(p) == "plan.json: $.plan.schedule: interleaved needs virtual_stages >= 2");
  p.virtual_stages = 2;  // 2 stages × 2 chunks divide 80 layers; 8 micro-batches divisible by pp 2
  CHECK(plan_file_error(p) == "(accepted)");
  p.schedule = ztune::Schedule::one_f_one_b;
  CHECK(plan_file_error(p) == "plan.json: $.plan.virtual_stages: 2 model chunks need schedule \"interleaved\"");
}

TEST_CASE("plan file: bf16 on a V100 cluster", "[bad-input][plan]") {
  ztune::Plan p;  // llama-70b on one DGX-2 (16 V100): tp 8 × pp 2
  p.tp = 8;
  p.pp = 2;
  p.grad_accum = 4;
  p.global_batch = 4;
  p.precision = ztune::Precision::bf16;
  CHECK(plan_file_error(p, "dgx2") == "plan.json: $.plan.precision: V100-SXM3-32GB has no bf16 support; use fp16");
  p.precision = ztune::Precision::fp16;
  CHECK(plan_file_error(p, "dgx2") == "(accepted)");
}

TEST_CASE("plan: global batch = micro_batch × grad_accum × dp", "[bad-input][plan]") {
  auto doc = ztune::plan_to_json(good_plan());  // 1 × 8 × 2 = 16
  doc["global_batch"] = 30;
  REQUIRE_THROWS_WITH(ztune::plan_from_json(doc, "p.json"),
                      "p.json: $.global_batch: expected micro_batch × grad_accum × dp = 16, got 30");
  auto file = plan_file_doc(good_plan());
  file["plan"]["grad_accum"] = 4;
  REQUIRE_THROWS_WITH(ztune::plan_file_from_json(file, "plan.json"),
                      "plan.json: $.plan.global_batch: expected micro_batch × grad_accum × dp = 8, got 16");
}

// A required field spelt wrong is named beside the spelling the file has
// (within two edits), not only reported missing.
TEST_CASE("a misspelt required field is named with the spelling the file has", "[bad_input]") {
  auto model = ztune::transformer_to_json(ztune::load_transformer("llama-7b"));
  model["ffn_hiden"] = model["ffn_hidden"];
  model.erase("ffn_hidden");
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(model, "mine.json"),
                      "mine.json: $.ffn_hidden: missing required field (the object has \"ffn_hiden\": did you mean "
                      "ffn_hidden?)");
  auto cluster = ztune::cluster_to_json(ztune::load_cluster("dgx-h100"));
  cluster["node"]["gpu"]["memory_gbs"] = cluster["node"]["gpu"]["memory_gb"];
  cluster["node"]["gpu"].erase("memory_gb");
  REQUIRE_THROWS_WITH(ztune::cluster_from_json(cluster, "c.json"), Contains("did you mean memory_gb?"));
  // A field far from every key stays plainly missing.
  model = ztune::transformer_to_json(ztune::load_transformer("llama-7b"));
  model.erase("vocab");
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(model, "mine.json"), "mine.json: $.vocab: missing required field");
}
