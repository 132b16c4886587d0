// Loading the planner's inputs: catalog names, files, a Hugging Face config.json,
// and bad entries reported against the field they concern with a message that
// names the file, the JSON path (or flag) and what was expected.
#include <catch2/catch.hpp>

#include <QDir>
#include <QFile>
#include <QTemporaryDir>

#include "ztune/gui/search_inputs.hpp"

using namespace ztune::gui;

namespace {

QString write_file(const QTemporaryDir& dir, const QString& name, const QByteArray& text) {
  const QString path = dir.filePath(name);
  QFile f(path);
  REQUIRE(f.open(QIODevice::WriteOnly));
  f.write(text);
  return path;
}

const InputIssue* issue_for(const InputResolution& r, InputField f) {
  for (const auto& i : r.issues)
    if (i.field == f) return &i;
  return nullptr;
}

}  // namespace

TEST_CASE("the defaults load: dgx2x16 and 100b", "[gui][inputs]") {
  const InputResolution r = resolve_inputs({});
  REQUIRE(r.ok());
  CHECK(r.issues.empty());
  CHECK(r.inputs->cluster.total_devices() == 256);  // 16 DGX-2 × 16 V100
  CHECK(r.inputs->model.total_params() == Approx(100e9).epsilon(0.05));
  CHECK(r.inputs->options.stop == nullptr);
  CHECK(r.inputs->options.top == kPlannerPlansKept);  // every plan that fits, for the table
}

TEST_CASE("a Hugging Face config.json is accepted as the model", "[gui][inputs]") {
  SearchInputs in;
  in.cluster = "dgx-a100-80gb";
  in.model = QStringLiteral(ZTUNE_SOURCE_DIR "/tests/vocab/fixtures/hf/llama-2-7b/config.json");
  const InputResolution r = resolve_inputs(in);
  REQUIRE(r.ok());
  // Llama-2-7B: 6,738,415,616 parameters (Touvron et al. 2023; the HF checkpoint's count).
  CHECK(r.inputs->model.total_params() == Approx(6738415616.0).epsilon(1e-6));
}

TEST_CASE("an unknown catalog name is marked on the cluster field", "[gui][inputs]") {
  SearchInputs in;
  in.cluster = "no-such-cluster";
  const InputResolution r = resolve_inputs(in);
  CHECK_FALSE(r.ok());
  const InputIssue* i = issue_for(r, InputField::cluster);
  REQUIRE(i != nullptr);
  CHECK(i->message.contains("no-such-cluster"));
  CHECK(i->message.contains("dgx2x16"));  // the catalog is listed
  CHECK(issue_for(r, InputField::model) == nullptr);  // the model was fine
}

TEST_CASE("a malformed cluster file names the file, the JSON path and what was expected", "[gui][inputs]") {
  QTemporaryDir dir;
  QFile src(QStringLiteral(ZTUNE_TEST_DATA_DIR "/clusters/dgx2.json"));
  REQUIRE(src.open(QIODevice::ReadOnly));
  QByteArray text = src.readAll();
  // The design brief's own example: a memory size written as a string.
  const qsizetype at = text.indexOf("\"memory_gb\"");
  REQUIRE(at >= 0);
  const qsizetype colon = text.indexOf(':', at);
  const qsizetype end = text.indexOf(',', colon);
  text.replace(colon + 1, end - colon - 1, " \"32GB\"");
  SearchInputs in;
  in.cluster = write_file(dir, "bad-cluster.json", text);
  in.model = "no-such-model";
  const InputResolution r = resolve_inputs(in);
  const InputIssue* c = issue_for(r, InputField::cluster);
  REQUIRE(c != nullptr);
  CHECK(c->message.contains("bad-cluster.json"));
  CHECK(c->message.contains("$.node.gpu.memory_gb"));
  CHECK(c->message.contains("expected"));
  // Both problems are reported at once.
  CHECK(issue_for(r, InputField::model) != nullptr);
}

TEST_CASE("constraints the cluster cannot meet are marked on their field", "[gui][inputs]") {
  SearchInputs in;
  in.gpus = 512;  // dgx2x16 has 256
  InputResolution r = resolve_inputs(in);
  const InputIssue* g = issue_for(r, InputField::gpus);
  REQUIRE(g != nullptr);
  CHECK(g->message.startsWith("--gpus: 512"));
  CHECK(g->message.contains("256"));

  in = {};
  in.engine = "pytorch";
  r = resolve_inputs(in);
  const InputIssue* e = issue_for(r, InputField::engine);
  REQUIRE(e != nullptr);
  CHECK(e->message.contains("pytorch"));

  in = {};
  in.model = "";
  r = resolve_inputs(in);
  REQUIRE(issue_for(r, InputField::model) != nullptr);
  CHECK(issue_for(r, InputField::model)->message.startsWith("--model"));
}

TEST_CASE("messages map to fields by their flag", "[gui][inputs]") {
  CHECK(field_of_message("--gpus: 3 exceeds") == InputField::gpus);
  CHECK(field_of_message("--global-batch: 7 is not") == InputField::global_batch);
  CHECK(field_of_message("--max-gpus: 9") == InputField::gpus);
  CHECK(field_of_message("dgx2.json: $.nodes: expected") == InputField::other);
}

TEST_CASE("the attention input pins the kernel, flash on V100s is marked on its field", "[gui][inputs][flash]") {
  SearchInputs in;
  in.cluster = "dgx-a100-80gb";
  in.model = "gpt3-175b";
  in.attention = "flash";
  const InputResolution ok = resolve_inputs(in);
  REQUIRE(ok.ok());
  REQUIRE(ok.inputs->options.space.attention.has_value());
  CHECK(*ok.inputs->options.space.attention == ztune::AttentionKernel::flash);
  in.cluster = "dgx2";  // V100: no FlashAttention-2
  const InputResolution v100 = resolve_inputs(in);
  const InputIssue* i = issue_for(v100, InputField::attention);
  REQUIRE(i != nullptr);
  CHECK(i->message.contains("Ampere"));
  in.attention = "xformers";
  const InputResolution rejected = resolve_inputs(in);  // the issue lives in it
  const InputIssue* bad = issue_for(rejected, InputField::attention);
  REQUIRE(bad != nullptr);
  CHECK(bad->message.contains("any, standard, flash, cudnn or eager"));
  in.cluster = "dgx-h100";
  in.attention = "cudnn";
  const InputResolution h100 = resolve_inputs(in);
  REQUIRE(h100.ok());
  CHECK(*h100.inputs->options.space.attention == ztune::AttentionKernel::cudnn);
  CHECK_FALSE(resolve_inputs(SearchInputs{}).inputs->options.space.attention.has_value());  // "any"
}

TEST_CASE("the memory headroom input reaches the search, out of range is marked on its field", "[gui][inputs]") {
  SearchInputs in;
  in.memory_headroom_pct = 10;
  const InputResolution ok = resolve_inputs(in);
  REQUIRE(ok.ok());
  CHECK(ok.inputs->options.memory.gpu_headroom == Approx(0.10));
  in.memory_headroom_pct = 75;
  const InputResolution rejected = resolve_inputs(in);  // the issue lives in it
  const InputIssue* bad = issue_for(rejected, InputField::memory_headroom);
  REQUIRE(bad != nullptr);
  CHECK(bad->message.startsWith("--memory-headroom"));
  CHECK(field_of_message(bad->message) == InputField::memory_headroom);
  CHECK(resolve_inputs(SearchInputs{}).inputs->options.memory.gpu_headroom == 0);
}

TEST_CASE("the max context-parallel input reaches the search, a negative one is marked on its field",
          "[gui][inputs][cp]") {
  SearchInputs in;
  CHECK(resolve_inputs(in).inputs->options.space.max_cp == 0);  // the search's default
  in.max_cp = 4;
  const InputResolution ok = resolve_inputs(in);
  REQUIRE(ok.ok());
  CHECK(ok.inputs->options.space.max_cp == 4);
  in.max_cp = -1;
  const InputResolution rejected = resolve_inputs(in);  // the issue lives in it
  const InputIssue* bad = issue_for(rejected, InputField::max_cp);
  REQUIRE(bad != nullptr);
  CHECK(bad->message.startsWith("--max-cp"));
  CHECK(field_of_message(bad->message) == InputField::max_cp);
}

TEST_CASE("the precision and optimizer-state inputs reach the search, refusals are marked on their fields",
          "[gui][inputs][precision]") {
  SearchInputs in;
  in.cluster = "dgx-h100";
  in.model = "llama-7b";
  in.engine = "megatron";
  in.precision = "bf16";
  in.optimizer = "remainders";
  const InputResolution ok = resolve_inputs(in);
  REQUIRE(ok.ok());
  const auto& space = ok.inputs->options.space;
  REQUIRE(space.precision.has_value());
  CHECK(*space.precision == ztune::Precision::bf16);
  CHECK(space.master_dtype == ztune::Precision::fp32);
  CHECK(space.moments_dtype == ztune::Precision::bf16);
  CHECK(space.param_remainders);
  // The default: every 16-bit precision the GPU has, ZeRO's fp32 states.
  const InputResolution plain = resolve_inputs(SearchInputs{});
  CHECK_FALSE(plain.inputs->options.space.precision.has_value());
  CHECK(plain.inputs->options.space.master_dtype == ztune::Precision::fp32);
  CHECK_FALSE(plain.inputs->options.space.param_remainders);
  // Remainders complete an fp32 master from a bf16 parameter: not with fp16.
  in.precision = "fp16";
  const InputResolution r16 = resolve_inputs(in);  // the issues live in it
  const InputIssue* fp16 = issue_for(r16, InputField::optimizer);
  REQUIRE(fp16 != nullptr);
  CHECK(fp16->message.startsWith("--param-remainders"));
  // DeepSpeed keeps fp32 states: the search says so on the optimizer field.
  in.precision = "bf16";
  in.optimizer = "bf16";
  in.engine = "deepspeed";
  const InputResolution rds = resolve_inputs(in);
  const InputIssue* ds = issue_for(rds, InputField::optimizer);
  REQUIRE(ds != nullptr);
  CHECK(ds->message.startsWith("--master-dtype"));
  // bf16 on V100s (no bf16 tensor cores) is marked on the precision field.
  in = {};
  in.precision = "bf16";
  const InputResolution rv = resolve_inputs(in);
  const InputIssue* v100 = issue_for(rv, InputField::precision);
  REQUIRE(v100 != nullptr);
  CHECK(v100->message.startsWith("--precision"));
  in.precision = "fp64";
  REQUIRE(issue_for(resolve_inputs(in), InputField::precision) != nullptr);
  in = {};
  in.optimizer = "int8";
  REQUIRE(issue_for(resolve_inputs(in), InputField::optimizer) != nullptr);
}

TEST_CASE("the FP8 input reaches the search, GPUs and engines without FP8 are marked on its field",
          "[gui][inputs][fp8]") {
  SearchInputs in;
  in.cluster = "dgx-h100";
  in.model = "llama-7b";
  in.engine = "megatron";
  in.fp8 = "delayed";
  const InputResolution ok = resolve_inputs(in);
  REQUIRE(ok.ok());
  CHECK(ok.inputs->options.space.fp8 == ztune::Fp8Recipe::delayed);
  CHECK(resolve_inputs(SearchInputs{}).inputs->options.space.fp8 == ztune::Fp8Recipe::none);
  // V100s have no FP8 tensor cores: said on the FP8 field, naming the GPU.
  in = {};
  in.fp8 = "delayed";
  const InputResolution rv = resolve_inputs(in);
  const InputIssue* v100 = issue_for(rv, InputField::fp8);
  REQUIRE(v100 != nullptr);
  CHECK(v100->message.startsWith("--fp8: V100-SXM3-32GB has no FP8 tensor cores"));
  // DeepSpeed has no FP8 path.
  in.cluster = "dgx-h100";
  in.model = "llama-7b";
  in.engine = "deepspeed";
  const InputResolution rds = resolve_inputs(in);
  const InputIssue* ds = issue_for(rds, InputField::fp8);
  REQUIRE(ds != nullptr);
  CHECK(ds->message.contains("Megatron-DeepSpeed has no FP8"));
  in.fp8 = "fp4";
  REQUIRE(issue_for(resolve_inputs(in), InputField::fp8) != nullptr);
  // FP8 parameters: Megatron's, under its distributed optimizer; FSDP's
  // float8 all-gather is not modelled, said on the same field.
  in.engine = "megatron";
  in.fp8 = "delayed+params";
  const InputResolution params = resolve_inputs(in);
  REQUIRE(params.ok());
  CHECK(params.inputs->options.space.fp8 == ztune::Fp8Recipe::delayed);
  CHECK(params.inputs->options.space.fp8_param_gather);
  CHECK_FALSE(ok.inputs->options.space.fp8_param_gather);
  in.engine = "fsdp";
  in.fp8 = "tensorwise+params";
  const InputIssue* fs = issue_for(resolve_inputs(in), InputField::fp8);
  REQUIRE(fs != nullptr);
  CHECK(fs->message.startsWith("--fp8-param-gather"));
}
