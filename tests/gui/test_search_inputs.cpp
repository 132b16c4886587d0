// Loading the planner's inputs: catalog names, files, a Hugging Face config.json,
// and bad entries reported against the field they concern with a message that
// names the file, the JSON path (or flag) and what was expected.
#include <catch2/catch.hpp>

#include <cstdint>
#include <functional>
#include <vector>

#include <QDir>
#include <QFile>
#include <QProcess>
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

namespace {

// What `ztune search ARGS` refuses them with: its message after "ztune: error: "
// ("" when it did not refuse them). The command line is the oracle: the form
// must say what it says, never a message of its own.
QString cli_error(const QStringList& args) {
  QProcess p;
  p.start(QStringLiteral(ZTUNE_BIN), QStringList{QStringLiteral("search"), QStringLiteral("--no-db")} + args);
  REQUIRE(p.waitForFinished(120000));
  const QString err = QString::fromUtf8(p.readAllStandardError());
  const QString prefix = QStringLiteral("ztune: error: ");
  const qsizetype at = err.indexOf(prefix);
  return at < 0 ? QString() : err.mid(at + prefix.size()).section(QLatin1Char('\n'), 0, 0);
}

}  // namespace

TEST_CASE("the mode inputs reach the search as ztune search maps --cp, --max-cp, --ulysses, --max-ulysses, --dp-shard",
          "[gui][inputs][modes]") {
  // Unset (0): nothing pinned, the search's default bounds.
  const InputResolution defaults = resolve_inputs(SearchInputs{});
  REQUIRE(defaults.ok());
  const auto& plain = defaults.inputs->options.space;
  CHECK_FALSE(plain.cp.has_value());
  CHECK(plain.max_cp == 0);
  CHECK_FALSE(plain.ulysses.has_value());
  CHECK(plain.max_ulysses == 0);
  CHECK_FALSE(plain.dp_shard.has_value());

  SearchInputs in;
  in.cluster = "dgx-a100-80gbx16";
  in.model = "llama-7b";
  in.seq = 8192;
  in.engine = "megatron";
  in.cp = 2;
  in.max_cp = 4;
  in.max_ulysses = 2;
  const InputResolution cp = resolve_inputs(in);
  REQUIRE(cp.ok());
  REQUIRE(cp.inputs->options.space.cp.has_value());
  CHECK(*cp.inputs->options.space.cp == 2);
  CHECK(cp.inputs->options.space.max_cp == 4);
  CHECK_FALSE(cp.inputs->options.space.ulysses.has_value());
  CHECK(cp.inputs->options.space.max_ulysses == 2);

  in = {};
  in.cluster = "dgx-a100-80gbx16";
  in.model = "llama-7b";
  in.seq = 8192;
  in.engine = "deepspeed";
  in.ulysses = 4;
  const InputResolution u = resolve_inputs(in);
  REQUIRE(u.ok());
  REQUIRE(u.inputs->options.space.ulysses.has_value());
  CHECK(*u.inputs->options.space.ulysses == 4);
  CHECK_FALSE(u.inputs->options.space.cp.has_value());

  in.engine = "fsdp";
  in.ulysses = 0;
  in.dp_shard = 8;
  const InputResolution hs = resolve_inputs(in);
  REQUIRE(hs.ok());
  REQUIRE(hs.inputs->options.space.dp_shard.has_value());
  CHECK(*hs.inputs->options.space.dp_shard == 8);
}

TEST_CASE("a number past its flag's range, or a mode the model cannot take, is refused on its field in the "
          "command line's words",
          "[gui][inputs][modes][range]") {
  struct Case {
    const char* what;
    std::function<void(SearchInputs&)> set;
    QStringList flags;  // the same request to `ztune search`
    InputField field;
  };
  const std::vector<Case> cases = {
      {"headroom 60 %", [](SearchInputs& in) { in.memory_headroom_pct = 60; }, {"--memory-headroom", "60"},
       InputField::memory_headroom},
      {"headroom -1 %", [](SearchInputs& in) { in.memory_headroom_pct = -1; }, {"--memory-headroom", "-1"},
       InputField::memory_headroom},
      {"-5 GPUs", [](SearchInputs& in) { in.gpus = -5; }, {"--gpus", "-5"}, InputField::gpus},
      {"a sequence past a model file's", [](SearchInputs& in) { in.seq = 99999999; }, {"--seq", "99999999"},
       InputField::seq},
      {"-3 tokens of sequence", [](SearchInputs& in) { in.seq = -3; }, {"--seq", "-3"}, InputField::seq},
      {"a negative batch", [](SearchInputs& in) { in.global_batch = -1; }, {"--global-batch", "-1"},
       InputField::global_batch},
      {"a batch past a plan's", [](SearchInputs& in) { in.global_batch = (std::int64_t{1} << 40) + 1; },
       {"--global-batch", "1099511627777"}, InputField::global_batch},
      {"a negative token budget", [](SearchInputs& in) { in.tokens = -1e9; }, {"--tokens", "-1000000000"},
       InputField::tokens},
      {"a token budget past 1e18", [](SearchInputs& in) { in.tokens = 2e18; }, {"--tokens", "2e+18"},
       InputField::tokens},
      {"a negative price", [](SearchInputs& in) { in.gpu_hour_price = -1; }, {"--gpu-hour-price", "-1"},
       InputField::gpu_hour_price},
      {"a price past a billion", [](SearchInputs& in) { in.gpu_hour_price = 2e9; },
       {"--gpu-hour-price", "2000000000"}, InputField::gpu_hour_price},
      {"cp -1", [](SearchInputs& in) { in.cp = -1; }, {"--cp", "-1"}, InputField::cp},
      {"cp past a plan's", [](SearchInputs& in) { in.cp = (1 << 20) + 1; }, {"--cp", "1048577"}, InputField::cp},
      {"max cp -1", [](SearchInputs& in) { in.max_cp = -1; }, {"--max-cp", "-1"}, InputField::max_cp},
      {"ulysses -2", [](SearchInputs& in) { in.ulysses = -2; }, {"--ulysses", "-2"}, InputField::ulysses},
      {"max ulysses -1", [](SearchInputs& in) { in.max_ulysses = -1; }, {"--max-ulysses", "-1"},
       InputField::max_ulysses},
      {"dp shard -3", [](SearchInputs& in) { in.dp_shard = -3; }, {"--dp-shard", "-3"}, InputField::dp_shard},
      {"top 0", [](SearchInputs& in) { in.top = 0; }, {"--top", "0"}, InputField::other},
      // The modes against the model: 100b's 1024-token sequences and 64 heads, 40b's 48.
      {"cp 3: 2·cp chunks do not divide 1024", [](SearchInputs& in) { in.cp = 3; }, {"--cp", "3"}, InputField::cp},
      {"ulysses 3: does not divide 1024",
       [](SearchInputs& in) {
         in.engine = "deepspeed";
         in.ulysses = 3;
       },
       {"--engine", "deepspeed", "--ulysses", "3"}, InputField::ulysses},
      {"ulysses 32: does not divide 48 heads",
       [](SearchInputs& in) {
         in.model = "40b";
         in.engine = "deepspeed";
         in.ulysses = 32;
       },
       {"--model", "40b", "--engine", "deepspeed", "--ulysses", "32"}, InputField::ulysses},
      {"ulysses with cp",
       [](SearchInputs& in) {
         in.engine = "deepspeed";
         in.cp = 2;
         in.ulysses = 2;
       },
       {"--engine", "deepspeed", "--cp", "2", "--ulysses", "2"}, InputField::ulysses},
      {"ulysses under megatron",
       [](SearchInputs& in) {
         in.engine = "megatron";
         in.ulysses = 2;
       },
       {"--engine", "megatron", "--ulysses", "2"}, InputField::ulysses},
      {"a shard group of one rank",
       [](SearchInputs& in) {
         in.engine = "fsdp";
         in.dp_shard = 1;
       },
       {"--engine", "fsdp", "--dp-shard", "1"}, InputField::dp_shard},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    SearchInputs in;  // dgx2x16, 100b
    c.set(in);
    QStringList flags{QStringLiteral("--cluster"), QStringLiteral("dgx2x16")};
    if (!c.flags.contains(QStringLiteral("--model"))) flags << QStringLiteral("--model") << QStringLiteral("100b");
    const QString expected = cli_error(flags + c.flags);
    INFO("ztune search: " << expected.toStdString());
    REQUIRE_FALSE(expected.isEmpty());
    const InputResolution r = resolve_inputs(in);
    CHECK_FALSE(r.ok());
    const InputIssue* i = issue_for(r, c.field);
    REQUIRE(i != nullptr);
    CHECK(i->message.toStdString() == expected.toStdString());
    CHECK(r.issues.size() == 1);  // said once, on its own field
    CHECK(field_of_message(i->message) == c.field);
  }
}

TEST_CASE("a message's flag ends where its name does", "[gui][inputs][modes]") {
  CHECK(field_of_message("--cp: 3 context-parallel ranks") == InputField::cp);
  CHECK(field_of_message("--cp 2: ztune's executor runs") == InputField::cp);
  CHECK(field_of_message("--max-ulysses: expected") == InputField::max_ulysses);
  CHECK(field_of_message("--dp-shard 1: ztune's executor") == InputField::dp_shard);
  CHECK(field_of_message("--master-dtype/--moments-dtype: expected") == InputField::optimizer);
  CHECK(field_of_message("--cpu-checkpointing: needs") == InputField::other);
  CHECK(field_of_message("--sequence-parallel: needs") == InputField::other);
}
