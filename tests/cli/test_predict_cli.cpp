// ztune predict / validate end to end: JSON keys of issue 3, exit codes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

TEST_CASE("predict --json has every key of the contract and its parts sum", "[cli][predict]") {
  auto r = run_command(ztune_bin() +
                       " predict --cluster dgx2x16 --model 100b --tp 16 --pp 1 --zero 2 --micro-batch 1"
                       " --global-batch 1024 --recompute full --precision fp16 --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const auto& gpu = j.at("memory").at("gpu");
  for (const char* key : {"total_bytes", "capacity_bytes", "params_bytes", "grads_bytes", "optimizer_bytes",
                          "activations_bytes", "comm_buckets_bytes", "zero3_gathered_bytes", "workspace_bytes",
                          "logits_bytes", "runtime_bytes", "fragmentation_bytes"})
    CHECK(gpu.contains(key));
  double lines = 0;
  for (const auto& [k, v] : gpu.items())
    if (k != "total_bytes" && k != "capacity_bytes") lines += v.get<double>();
  CHECK(lines == Approx(gpu.at("total_bytes").get<double>()));
  for (const char* key : {"host_bytes", "nvme_bytes", "fits"}) CHECK(j.at("memory").contains(key));
  const auto& t = j.at("time");
  for (const char* key : {"iteration_s", "tokens_per_s", "model_tflops_per_gpu", "hardware_tflops_per_gpu", "mfu", "hfu"})
    CHECK(t.contains(key));
  double parts = 0;
  for (const auto& [k, v] : t.at("breakdown_s").items()) parts += v.get<double>();
  CHECK(parts == Approx(t.at("iteration_s").get<double>()));
  CHECK(t.at("breakdown_s").contains("tp_comm"));
  CHECK(t.at("breakdown_s").contains("bubble"));
  // The model's size: GPT-2's layout (Radford et al. 2019; biases, LayerNorm, learned
  // positions, tied head) has L·(12h² + 13h) + V·h + s·h + 2h parameters.
  const double l = 125, h = 8192, v = 50257, s = 1024;
  CHECK(j.at("model") == "100b");
  CHECK(j.at("model_params").get<double>() == l * (12 * h * h + 13 * h) + v * h + s * h + 2 * h);
  CHECK(j.at("seq_len") == 1024);
  // The plan as fields (what the flags asked), and the stages resolved: 125 layers on one stage.
  CHECK(j.at("plan_fields").at("tp") == 16);
  CHECK(j.at("plan_fields").at("zero_stage") == 2);
  CHECK(j.at("stage_layers") == nlohmann::json::array({125}));
}

TEST_CASE("predict --json gives uneven balanced stages and the modes as fields", "[cli][predict][stages]") {
  // 32 layers on 5 stages: 7, 7, 6, 6, 6 (the first 32 mod 5 stages one more); cp as a field.
  auto r = run_command(ztune_bin() +
                       " predict --cluster dgx-h100x4 --model llama-7b --engine megatron --tp 2 --pp 5 --dp 1 --cp 2"
                       " --seq 8192 --attention flash --micro-batch 1 --global-batch 10 --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("stage_layers") == nlohmann::json::array({7, 7, 6, 6, 6}));
  CHECK(j.at("plan_fields").at("cp") == 2);
  CHECK_FALSE(j.at("plan_fields").contains("stage_layers"));  // balanced: not stated
}

TEST_CASE("predict prints readable tables", "[cli][predict]") {
  auto r = run_command(ztune_bin() + " predict --cluster dgx2x16 --model 100b --tp 16 --zero 3 --micro-batch 1"
                                     " --global-batch 256 --recompute full --precision fp16");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("activations") && Contains("GiB") && Contains("iteration") && Contains("MFU"));
}

TEST_CASE("an impossible plan exits 2 naming the rule it breaks", "[cli][predict]") {
  auto r = run_command(ztune_bin() + " predict --cluster dgx2x16 --model 100b --tp 3 --dp 64 --precision fp16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--tp") && Contains("heads"));
  r = run_command(ztune_bin() + " predict --cluster dgx2x16 --model 100b --zero 1 --offload-params cpu --precision fp16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("stage 3"));
}

TEST_CASE("a plan searched with --compile keeps it: predict --plan prices it as the search ranked it",
          "[cli][predict]") {
  // Without "compile" in the plan file predict had priced it uncompiled, 12 % slower than the table.
  const std::string plan = "/tmp/ztune-test-compiled-plan-" + std::to_string(::getpid()) + ".json";
  const auto s = run_command(ztune_bin() + " search --no-db --cluster dgx-h100x4 --model llama-7b --engine fsdp "
                                           "--compile --top 1 --no-simulate --json --out " + plan);
  INFO(s.err);
  REQUIRE(s.exit_code == 0);
  const double ranked = nlohmann::json::parse(s.out).at("plans").at(0).at("prediction").at("time").at("tokens_per_s");
  CHECK(nlohmann::json::parse(std::ifstream(plan)).at("compile") == true);
  const auto r = run_command(ztune_bin() + " predict --json --plan " + plan);
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto p = nlohmann::json::parse(r.out);
  CHECK(p.at("time").at("tokens_per_s").get<double>() == Approx(ranked).epsilon(1e-9));
  CHECK(p.at("compiled") == true);
  std::remove(plan.c_str());
}

TEST_CASE("a profile calibrated on the user's runs says what they measured it to be worth", "[cli][predict][calibrate]") {
  // The figures are the ones ztune calibrate wrote on this machine's CPU loop
  // (session 41: 4 runs, 17.6 % left out, 9.1 % in sample); the line and the
  // JSON must carry them as written, as percentages of the fractions.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ztune-runs-fit-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::ifstream in(std::string(ZTUNE_SOURCE_DIR) + "/data/profiles/cpu.json");
  nlohmann::json prof = nlohmann::json::parse(in);
  prof["name"] = "mine";
  prof["runs_fit"] = {{"runs", 4}, {"in_sample_error", 0.091}, {"held_out_error", 0.176}};
  std::ofstream((dir / "four.json").string()) << prof.dump();
  prof["runs_fit"] = {{"runs", 1}, {"in_sample_error", 0.084}};
  std::ofstream((dir / "one.json").string()) << prof.dump();
  prof["runs_fit"] = {{"runs", 0}, {"in_sample_error", 0.084}};
  std::ofstream((dir / "zero.json").string()) << prof.dump();
  const std::string plan = " predict --cluster local-cpu --model tiny --dp 2 --zero 1 --micro-batch 2 --global-batch 8 --profile ";

  auto r = run_command(ztune_bin() + plan + (dir / "four.json").string());
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("your runs: profile mine was fitted on 4 of your runs; each left out of the fit was "
                             "predicted within 18% on average (9.1% in sample)"));
  r = run_command(ztune_bin() + plan + (dir / "one.json").string() + " --json");
  REQUIRE(r.exit_code == 0);
  const auto mine = nlohmann::json::parse(r.out).at("accuracy").at("your_runs");
  CHECK(mine.at("runs") == 1);
  CHECK(mine.at("in_sample_error").get<double>() == Approx(0.084));
  CHECK(mine.at("held_out_error").is_null());
  r = run_command(ztune_bin() + plan + (dir / "one.json").string());
  CHECK_THAT(r.out, Contains("fitted on one of your runs; it predicts that run within 8.4%, in sample"));
  // Another engine: the runs measured ztune's executor, not it.
  CHECK_THAT(run_command(ztune_bin() + plan + (dir / "four.json").string() + " --engine deepspeed").out,
             Contains("they ran ztune's executor, and this prediction prices engine deepspeed"));
  // The catalog's own profile: no such line.
  CHECK_THAT(run_command(ztune_bin() + plan + "cpu").out, !Contains("your runs:"));
  r = run_command(ztune_bin() + plan + (dir / "zero.json").string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("$.runs_fit.runs"));
  fs::remove_all(dir);
}

TEST_CASE("a profile fitted on another GPU family than the cluster's is refused, naming both", "[cli][predict]") {
  // A CPU rank's calibrated profile had priced an A100 cluster at 0.1 % MFU
  // without a word (its peak and bandwidths replaced the A100's). The message
  // names the profile's file too: the name inside a copied file is not the
  // file the user passed.
  for (const auto& [args, name, said] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"predict --cluster dgx-a100-80gb --model gpt2-1.5b --dp 8 --micro-batch 4 --global-batch 32 --profile cpu",
            "cpu", "fitted on CPU ranks ($.gpu), but cluster dgx-a100-80gb has A100-SXM4-80GB GPUs"},
           {"predict --cluster local-cpu --model tiny --profile a100", "a100",
            "fitted on A100 GPUs ($.gpu), but cluster local-cpu has CPU ranks"},
           {"search --cluster dgx2x16 --model gpt2-1.5b --no-db --profile h100", "h100",
            "fitted on H100 GPUs ($.gpu), but cluster dgx2x16 has V100-SXM3-32GB GPUs"}}) {
    const auto r = run_command(ztune_bin() + " " + args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, StartsWith("ztune: error: profile " + name + " (") &&
                          Contains("profiles/" + name + ".json): " + said));
  }
  // The family's own profile, and a CPU calibration on a CPU cluster, are taken.
  CHECK(run_command(ztune_bin() + " predict --cluster local-cpu --model tiny --profile local-cpu-calibrated").exit_code == 0);
  CHECK(run_command(ztune_bin() + " predict --cluster dgx-a100-80gbx16 --model gpt2-1.5b --profile a100").exit_code == 0);
}

// A GPU the catalog has no profile for (a B200 the user describes): the
// refusal says how to make one, and the copy it describes prices the plan and
// prints its (unchecked) accuracy, exit 0; the catalog lookup had run even
// with --profile, so predict printed the tables and then exited 2.
TEST_CASE("a GPU without a catalog profile is priced with the user's copy, exit 0", "[cli][predict][accuracy]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ztune-test-b200-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto cluster = nlohmann::json::parse(std::ifstream(std::string(ZTUNE_SOURCE_DIR) + "/data/clusters/dgx-h100.json"));
  cluster["name"] = "my-b200";
  cluster["node"]["gpu"]["name"] = "B200-SXM-180GB";
  std::ofstream(dir / "b200.json") << cluster.dump();
  const std::string base = ztune_bin() + " predict --cluster " + (dir / "b200.json").string() +
                           " --model llama-7b --dp 8 --zero 1 --micro-batch 1 --global-batch 64";
  auto r = run_command(base + " --profile h100");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("the catalog has no b200 profile either") && Contains("set its $.gpu to \"B200-SXM-180GB\""));
  auto profile = nlohmann::json::parse(std::ifstream(std::string(ZTUNE_SOURCE_DIR) + "/data/profiles/h100.json"));
  profile["gpu"] = "B200-SXM-180GB";
  std::ofstream(dir / "b200-profile.json") << profile.dump();
  r = run_command(base + " --profile " + (dir / "b200-profile.json").string());
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("no published training time measured on B200") &&
                        Contains("this prediction used profile h100") &&  // the copy's: H100's efficiencies
                        Contains("extrapolated: no published run on B200 at all"));
  fs::remove_all(dir);
}

// The largest micro-batch that fits in memory need not divide the sequences a
// step gives each replica; the one a run can take is the largest divisor of
// global batch / dp below it (the oracle: 1024 / 8 = 128 = 2^7).
TEST_CASE("predict names the largest micro-batch that fits and the largest that divides the batch", "[cli][predict]") {
  const std::string base = ztune_bin() + " predict --cluster dgx-a100-80gb --model llama-7b --zero 3 --recompute none"
                                         " --global-batch 1024 --json --micro-batch ";
  auto r = run_command(base + "1");
  REQUIRE(r.exit_code == 0);
  const auto mem = nlohmann::json::parse(r.out).at("memory");
  const int fits = mem.at("largest_micro_batch"), runnable = mem.at("largest_runnable_micro_batch");
  INFO("fits " << fits << ", runnable " << runnable);
  REQUIRE(fits >= 1);
  CHECK(runnable <= fits);
  CHECK(128 % runnable == 0);
  for (int mb = runnable + 1; mb <= fits; ++mb) CHECK(128 % mb != 0);  // none larger divides 128
  const auto at = run_command(base + std::to_string(runnable));
  REQUIRE(at.exit_code == 0);
  CHECK(nlohmann::json::parse(at.out).at("memory").at("fits_gpu") == true);
  if (runnable != fits) CHECK(run_command(base + std::to_string(fits)).exit_code == 2);  // refused: it does not divide
}

TEST_CASE("TP communication overlap on the command line: needs --sequence-parallel, megatron only, shortens tp_comm",
          "[cli][predict][tp_overlap]") {
  const std::string base = ztune_bin() + " predict --cluster dgx-h100x32 --model gpt3-175b --tp 8 --pp 8 --dp 4"
                                         " --global-batch 256 --micro-batch 1 --engine megatron --json";
  auto r = run_command(base + " --tp-comm-overlap");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--tp-comm-overlap") && Contains("sequence_parallel"));
  r = run_command(ztune_bin() + " predict --cluster dgx-h100x32 --model gpt3-175b --tp 8 --pp 8 --dp 4"
                                " --global-batch 256 --micro-batch 1 --engine deepspeed --sequence-parallel"
                                " --tp-comm-overlap");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("Megatron-DeepSpeed has no overlap"));
  const auto plain = run_command(base + " --sequence-parallel");
  const auto over = run_command(base + " --sequence-parallel --tp-comm-overlap");
  REQUIRE(plain.exit_code == 0);
  REQUIRE(over.exit_code == 0);
  const auto a = nlohmann::json::parse(plain.out).at("time"), b = nlohmann::json::parse(over.out).at("time");
  // The megatron profile hides part of each collective (its fitted tp_comm):
  // TP communication and the step shrink, the compute does not move.
  CHECK(b.at("breakdown_s").at("tp_comm").get<double>() < a.at("breakdown_s").at("tp_comm").get<double>());
  CHECK(b.at("iteration_s").get<double>() < a.at("iteration_s").get<double>());
  CHECK(b.at("breakdown_s").at("forward").get<double>() == Approx(a.at("breakdown_s").at("forward").get<double>()));
}

// FP8 from the command line: the GPU and the engine must have it (the
// messages name the flag, the GPU and the rule), and on H100 the linear GEMMs
// are faster while the attention core and the memory states are not.
TEST_CASE("FP8 on the command line: refused without FP8 units or an FP8 engine, faster GEMMs on H100",
          "[cli][predict][fp8]") {
  const std::string plan = " --model gpt3-175b --tp 8 --pp 8 --global-batch 256 --micro-batch 1 --zero 1 --json";
  auto r = run_command(ztune_bin() + " predict --cluster dgx-a100-80gbx64" + plan + " --engine megatron --fp8 delayed");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--fp8: A100-SXM4-80GB has no FP8 tensor cores"));
  // search names the device too, before the engine's library (the default
  // engine has none: a user who switched engines only then met the device).
  r = run_command(ztune_bin() + " search --cluster dgx2 --model gpt2-1.5b --fp8 delayed --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: --fp8: V100-SXM3-32GB has no FP8 tensor cores"));
  r = run_command(ztune_bin() + " search --cluster dgx-h100 --model gpt2-1.5b --fp8 delayed --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("names no FP8 library") && Contains("--engine megatron or fsdp"));
  r = run_command(ztune_bin() + " predict --cluster dgx-h100x32" + plan + " --engine deepspeed --fp8 delayed");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("Megatron-DeepSpeed has no FP8"));
  r = run_command(ztune_bin() + " predict --cluster dgx-h100x32" + plan + " --engine megatron --fp8 bf8");
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Contains("--fp8"));
  const auto bf = run_command(ztune_bin() + " predict --cluster dgx-h100x32" + plan + " --engine megatron");
  const auto f8 = run_command(ztune_bin() + " predict --cluster dgx-h100x32" + plan + " --engine megatron --fp8 delayed");
  REQUIRE(bf.exit_code == 0);
  REQUIRE(f8.exit_code == 0);
  const auto a = nlohmann::json::parse(bf.out), b = nlohmann::json::parse(f8.out);
  CHECK_THAT(b.at("plan").get<std::string>(), Contains("fp8:delayed"));
  CHECK(b.at("time").at("breakdown_s").at("forward").get<double>() <
        a.at("time").at("breakdown_s").at("forward").get<double>());
  CHECK(b.at("time").at("iteration_s").get<double>() < a.at("time").at("iteration_s").get<double>());
  CHECK(b.at("memory").at("gpu").at("optimizer_bytes").get<double>() ==
        Approx(a.at("memory").at("gpu").at("optimizer_bytes").get<double>()));
  // The readable table says how the FP8 figure is priced and judged.
  const auto text = run_command(ztune_bin() + " predict --cluster dgx-h100x32" +
                                plan.substr(0, plan.size() - 7) + " --engine megatron --fp8 delayed");
  REQUIRE(text.exit_code == 0);
  CHECK_THAT(text.out, Contains("fp8:delayed") && Contains("through Transformer Engine") &&
                           Contains("No FP8 run is in ztune's validation set"));
  // A pinned FP8 search where nothing fits still says what would: the engine
  // where most plans fit (DeepSpeed's NVMe offload here) drops FP8 with it
  // (it has none).
  const auto none = run_command(ztune_bin() + " search --cluster dgx-h100 --model llama-70b --engine megatron"
                                              " --fp8 delayed --no-db");
  CHECK(none.exit_code == 1);  // nothing fits, as without --fp8
  CHECK_THAT(none.out, Contains("What would make a plan fit") &&
                           Contains("--engine deepspeed in place of --engine megatron (without --fp8") &&
                           Contains("more GPUs"));
  // predict --json says what the FP8 figures rest on.
  const auto fj = b.at("features").at("fp8");
  CHECK(fj.at("library") == "transformer_engine");
  CHECK(fj.at("mfu_peak_tflops").get<double>() == Approx(1978.9));
  CHECK(fj.at("weight_copy_bytes").get<double>() > 0);
}

// A pinned FP8-parameter search: every plan keeps its linear weights in FP8
// under Megatron's distributed optimizer, and the top plan's parameters are
// its 16-bit twin's less one byte for each linear weight the stage holds
// (closed form from the model's shape), whatever else the search chose.
TEST_CASE("search --fp8-param-gather: every plan keeps FP8 parameters under ZeRO-1, refused where none can",
          "[cli][search][fp8]") {
  const std::string space = " --cluster dgx-h100x128 --model llama-70b --gpus 64 --no-db";
  auto r = run_command(ztune_bin() + " search --engine megatron" + space +
                       " --fp8 delayed --fp8-param-gather --top 3 --simulate-top 0 --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE_FALSE(j.at("plans").empty());
  for (const auto& c : j.at("plans")) {
    CHECK(c.at("plan").at("fp8_param_gather") == true);
    CHECK(c.at("plan").at("zero_stage") == 1);
  }
  nlohmann::json plan = j.at("plans").front().at("plan");
  const int tp = plan.at("tp"), pp = plan.at("pp");
  REQUIRE(80 % pp == 0);  // Llama 2/3 70B: 80 layers, balanced stages
  // Llama 70B's linear weights a layer: q, k, v (64 and 8 heads of 128), o,
  // and the SwiGLU MLP's three 8192 × 28672 matrices.
  const double per_layer = 8192.0 * (8192 + 2 * 1024) + 8192.0 * 8192 + 3.0 * 8192 * 28672;
  const double fp8_saving = 80.0 / pp * per_layer / tp;  // one byte each, on the stage
  plan["fp8_param_gather"] = false;
  const auto dir = std::filesystem::temp_directory_path() / ("ztune-fp8-params-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string file = (dir / "plan.json").string();
  {
    std::FILE* out = std::fopen(file.c_str(), "w");
    REQUIRE(out != nullptr);
    std::fputs(nlohmann::json{{"schema", "ztune.planfile/1"}, {"plan", plan}}.dump().c_str(), out);
    std::fclose(out);
  }
  const auto twin = run_command(ztune_bin() + " predict --engine megatron --cluster dgx-h100x128 --model llama-70b"
                                              " --plan " + file + " --json");
  std::filesystem::remove_all(dir);
  REQUIRE(twin.exit_code == 0);
  const double with_fp8 = j.at("plans").front().at("prediction").at("memory").at("gpu").at("params").get<double>();
  const double without = nlohmann::json::parse(twin.out).at("memory").at("gpu").at("params_bytes").get<double>();
  CHECK(without - with_fp8 == Approx(fp8_saving).epsilon(1e-9));
  // Refused, naming the flag and the reason, where no plan of the space can keep
  // them, and a pinned stage they cannot live under said up front, not as "no plan fits".
  struct Refusal {
    const char* flags;
    const char* flag;
    const char* reason;
  };
  for (const Refusal& x : {Refusal{"--engine megatron --fp8-param-gather", "--fp8-param-gather", "needs --fp8"},
                           Refusal{"--engine fsdp --fp8 tensorwise --fp8-param-gather", "--fp8-param-gather",
                                   "enable_fsdp_float8_all_gather"},
                           Refusal{"--engine megatron --precision bf16 --fp8 delayed --param-remainders "
                                   "--fp8-param-gather",
                                   "--fp8-param-gather", "param_remainders"},
                           Refusal{"--engine megatron --fp8 delayed --fp8-param-gather --zero 0", "--fp8-param-gather",
                                   "ZeRO stage 1"},
                           Refusal{"--engine megatron --fp8 delayed --zero 3", "--fp8: ", "Megatron-FSDP"}}) {
    r = run_command(ztune_bin() + " search " + x.flags + space);
    INFO(x.flags);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(x.flag) && Contains(x.reason));
  }
  // One replica: the distributed optimizer is still a plan of its own where FP8
  // parameters need it (the space had left single-replica ZeRO-1 out as stage 0's twin).
  r = run_command(ztune_bin() + " search --engine megatron --cluster h200-box --model llama-7b --no-db --fp8 delayed"
                                " --fp8-param-gather --top 1 --simulate-top 0 --json");
  REQUIRE(r.exit_code == 0);
  const auto one = nlohmann::json::parse(r.out).at("plans").at(0).at("plan");
  CHECK(one.at("dp") == 1);
  CHECK(one.at("zero_stage") == 1);
  CHECK(one.at("fp8_param_gather") == true);
}

TEST_CASE("search --zero: a pinned stage is searched on one replica too, and one the engine lacks is refused",
          "[cli][search]") {
  const std::string one_gpu = ztune_bin() + " search --cluster h200-box --model llama-7b --no-db --top 1 --simulate-top 0";
  for (const char* stage : {"1", "2", "3"}) {
    const auto r = run_command(one_gpu + " --zero " + stage + " --json");
    INFO("--zero " << stage);
    REQUIRE(r.exit_code == 0);
    CHECK(nlohmann::json::parse(r.out).at("plans").at(0).at("plan").at("zero_stage") == std::stoi(stage));
  }
  const auto fsdp = run_command(one_gpu + " --engine fsdp --zero 1");
  CHECK(fsdp.exit_code == 2);
  CHECK_THAT(fsdp.err, Contains("--zero: ") && Contains("no ZeRO-1"));
}

// How far the band reaches: a plan longer than every H100 run ztune was
// checked on is called an extrapolation, naming the quantity and the runs'
// range; one inside them is not.
TEST_CASE("predict says when a plan lies beyond the published runs its error band was measured on",
          "[cli][predict][accuracy]") {
  const std::string base = ztune_bin() + " predict --cluster dgx-h100x128 --model llama-70b --nodes 8 --tp 8 --pp 4"
                                         " --dp 2 --engine megatron --recompute full";
  auto r = run_command(base + " --json");
  REQUIRE(r.exit_code == 0);
  auto x = nlohmann::json::parse(r.out).at("accuracy").at("extrapolation");
  CHECK(x.at("cell") == "H100/megatron");
  CHECK(x.at("beyond").empty());
  const auto inside_cv = nlohmann::json::parse(r.out).at("accuracy").at("cross_validated");
  CHECK(inside_cv.at("band_widening") == 1);
  r = run_command(base + " --seq 131072 --json");
  REQUIRE(r.exit_code == 0);
  // Beyond the runs the band is widened: each side 1.3 times the cell's.
  const auto beyond_cv = nlohmann::json::parse(r.out).at("accuracy").at("cross_validated");
  CHECK(beyond_cv.at("band_widening") == Approx(1.3));
  CHECK(beyond_cv.at("band_pct")[1].get<double>() == Approx(1.3 * inside_cv.at("band_pct")[1].get<double>()));
  CHECK(beyond_cv.at("band_pct")[0].get<double>() == Approx(1.3 * inside_cv.at("band_pct")[0].get<double>()));
  x = nlohmann::json::parse(r.out).at("accuracy").at("extrapolation");
  REQUIRE(x.at("beyond").size() == 1);
  CHECK(x.at("beyond")[0].at("quantity") == "sequence length");
  CHECK(x.at("beyond")[0].at("value") == 131072);
  CHECK(x.at("beyond")[0].at("runs_max").get<double>() < 131072 / 1.1);
  r = run_command(base + " --seq 131072");
  CHECK_THAT(r.out, Contains("extrapolated beyond the H100/megatron runs it was checked on") &&
                        Contains("sequence length 131,072") && Contains("widened 1.3x to "));
  // Where the cell's band has missed a source left out, the accuracy line
  // names it: DeepSpeed's ZeRO-3 runs on Azure's A100s (ztune validate lists
  // the same: 1 of their 4 runs inside).
  r = run_command(ztune_bin() + " predict --cluster dgx-a100-80gb --model llama-7b --engine deepspeed --zero 3 --json");
  REQUIRE(r.exit_code == 0);
  const auto misses = nlohmann::json::parse(r.out).at("accuracy").at("cross_validated").at("band_misses");
  REQUIRE(misses.size() == 1);
  CHECK(misses[0].at("source") == "DeepSpeed-Azure-ZeRO3");
  CHECK(misses[0].at("runs") == 4);
  CHECK(misses[0].at("covered").get<double>() < 0.5);
}

TEST_CASE("CPU checkpointing and the gradient all-reduce on the command line: their rules, named by flag",
          "[cli][predict][offload]") {
  const std::string base = ztune_bin() + " predict --cluster dgx2x16 --model 100b --micro-batch 4 --json";
  auto r = run_command(base + " --zero 3 --engine deepspeed --cpu-checkpointing");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--cpu-checkpointing") && Contains("recompute \"full\""));
  r = run_command(base + " --zero 3 --recompute full --cpu-checkpointing");  // the ztune engine
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--engine deepspeed"));
  r = run_command(base + " --zero 3 --recompute full --engine deepspeed --grad-allreduce");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--grad-allreduce") && Contains("zero_stage 3"));
  // Both run where DeepSpeed runs them: checkpoints on the host take GPU
  // activations down and host memory up; the all-reduce slows dp_comm.
  const auto on_gpu = run_command(base + " --zero 3 --recompute full --engine deepspeed");
  const auto on_host = run_command(base + " --zero 3 --recompute full --engine deepspeed --cpu-checkpointing");
  REQUIRE(on_gpu.exit_code == 0);
  REQUIRE(on_host.exit_code == 0);
  const auto g = nlohmann::json::parse(on_gpu.out), h = nlohmann::json::parse(on_host.out);
  CHECK(h.at("memory").at("gpu").at("activations_bytes").get<double>() <
        g.at("memory").at("gpu").at("activations_bytes").get<double>());
  CHECK(h.at("memory").at("host_bytes").get<double>() > g.at("memory").at("host_bytes").get<double>());
  CHECK(h.at("time").at("breakdown_s").at("offload_stall").get<double>() > 0);
  const auto rs = run_command(base + " --zero 1 --tp 16 --recompute full --engine deepspeed");
  const auto ar = run_command(base + " --zero 1 --tp 16 --recompute full --engine deepspeed --grad-allreduce");
  REQUIRE(rs.exit_code == 0);
  REQUIRE(ar.exit_code == 0);
  CHECK(nlohmann::json::parse(ar.out).at("time").at("breakdown_s").at("dp_comm").get<double>() >
        nlohmann::json::parse(rs.out).at("time").at("breakdown_s").at("dp_comm").get<double>());
}

TEST_CASE("a plan that does not fit still gets its prediction, with fits false and the overflow named",
          "[cli][predict]") {
  // 100B on plain data parallelism: 16 bytes per parameter cannot fit 32 GB.
  auto r = run_command(ztune_bin() + " predict --cluster dgx2x16 --model 100b --zero 0 --micro-batch 1"
                                     " --global-batch 256 --precision fp16 --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("memory").at("fits") == false);
  CHECK_FALSE(j.at("memory").at("overflow_lines").empty());
  CHECK(j.at("time").at("iteration_s").get<double>() > 0);
  r = run_command(ztune_bin() + " predict --cluster dgx2x16 --model 100b --zero 0 --micro-batch 1"
                                " --global-batch 256 --precision fp16");
  CHECK_THAT(r.out, Contains("DOES NOT FIT") && Contains("overflow"));
  // How far over, from the JSON's own total and capacity: what a change must win back.
  char over[64];
  std::snprintf(over, sizeof over, "overflow: %.2f GiB over the capacity;",
                (j.at("memory").at("gpu").at("total_bytes").get<double>() -
                 j.at("memory").at("gpu_usable_bytes").get<double>()) / (1024.0 * 1024 * 1024));
  CHECK_THAT(r.out, Contains(over));
}

TEST_CASE("validate --json reports every source, its exit code says whether each met its stated tolerance",
          "[cli][validate]") {
  auto r = run_command(ztune_bin() + " validate --json");
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("sources").size() >= 8);
  CHECK(j.at("cases").size() > 1600);
  // A source that misses its own target after the joint fit (session 15:
  // vTrain-single 10.05 % against 10 %) makes validate say so and exit 1.
  bool all_ok = true;
  for (const auto& s : j.at("sources")) all_ok = all_ok && s.at("ok").get<bool>();
  CHECK(j.at("ok") == all_ok);
  CHECK(r.exit_code == (all_ok ? 0 : 1));
  // 36 before context parallelism; its 17 NeMo Llama 3.1 rows (plan.cp 2) are
  // predicted now, with hybrid sharding the 18 HSDP/OLMo-core/PaxML rows, and
  // the DeepSpeed-Azure 530B with validation.json's assumed micro-batch.
  CHECK(j.at("not_expressible").empty());
  std::size_t assumed = 0;
  for (const auto& c : j.at("cases")) assumed += c.at("assumed").get<std::string>().empty() ? 0 : 1;
  // OLMo-core's GPU count (7 rows), PaxML's intra-node mesh (4), Azure 530B's
  // micro-batch, the NeMo Llama 3.1 405B rows' TP overlap (6), the DeepSpeed
  // BERT rows' 10 micro-batches per step (2), the 2019 Megatron-LM code's eager attention (the
  // three Shoeybi et al. rows),
  // and the selective policies read from the rows' text: torchtitan's op-level
  // SAC (9 rows) and layer-level SAC (2), MaxText's save_dot_except_mlpwi (6);
  // the Azure ZeRO-3 rows' knobs read from their recipe (the other 3 of them); PaxML's
  // SAVE_DOT_ONLY policy (its 4 rows, already assumed for their mesh); the
  // gradient-reduction dtype stated per source (48 rows: the dgxc NeMo yamls'
  // grad_sync_dtype or NeMo's fp32 default, torchtitan's only float32), 35 of
  // them rows with no other assumption; the block-level recomputation of the
  // IBM FSDP blog's and fms-fsdp's "selective" rows (8: every second block of
  // the 13B, every block of fms-fsdp's 34B and 70B); the dropout stated per
  // source for the Llama-style runs (77 rows), 9 of them rows with no other
  // assumption (the IBM blog's 7B, 34B and 70B, fms-fsdp's 7B, TinyLlama).
  CHECK(assumed == 23 + 9 + 2 + 6 + 3 + 35 + 8 + 9);
  // Every run's time carries the memory model's share of its GPU.
  for (const auto& c : j.at("cases"))
    if (c.at("metric") == "tokens_per_s_per_gpu") CHECK(c.value("memory_fraction", 0.0) > 0.0);
  CHECK(j.at("cells").size() >= 6);
  r = run_command(ztune_bin() + " validate --source Korthikanti2022-T5");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("korthikanti2022_t5_175B_selsp") && Contains("MAPE"));
}

TEST_CASE("predict shows the cost model's error against published runs on the same GPU", "[cli][predict]") {
  // A100: Korthikanti et al. Table 5 (8 iteration times on Selene) and vTrain's
  // 1,440 single-node runs are in data/validation.
  auto r = run_command(ztune_bin() + " predict --cluster dgx-a100-80gb --model gpt3-175b --nodes 8 --tp 8 --pp 8"
                                     " --micro-batch 1 --global-batch 64 --recompute selective --sequence-parallel"
                                     " --json");
  REQUIRE(r.exit_code == 0);
  const auto a = nlohmann::json::parse(r.out).at("accuracy");
  CHECK(a.at("gpu_family") == "A100");
  int t5 = 0, single = 0;
  for (const auto& s : a.at("time_sources")) {
    if (s.at("source") == "Korthikanti2022-T5") t5 = s.at("cases").get<int>();
    if (s.at("source") == "vTrain-single") single = s.at("cases").get<int>();
    CHECK(s.at("mape_pct").get<double>() >= 0);
  }
  CHECK(t5 == 8);
  CHECK(single == 1440);
  auto v100 = run_command(ztune_bin() + " predict --cluster dgx2 --model gpt2-1.5b --zero 2 --micro-batch 4"
                                        " --precision fp16");
  REQUIRE(v100.exit_code == 0);
  // V100: Megatron-LM (2019-2020) and DeepSpeed's BERT runs of engine_runs.json.
  CHECK_THAT(v100.out, Contains("accuracy on V100") && Contains("Megatron-V1-blog"));
  auto h200 = run_command(ztune_bin() + " predict --cluster dgx-h200 --model gpt2-1.5b --zero 2 --micro-batch 4");
  REQUIRE(h200.exit_code == 0);
  CHECK_THAT(h200.out, Contains("accuracy: no published training time measured on H200"));
}

TEST_CASE("predict --memory-headroom judges fit against the usable memory, out of range exits 2", "[cli][predict]") {
  // The ZeRO paper's 100B on 256 V100-32GB with DeepSpeed's ZeRO-3, micro-batch
  // 4: about a quarter of each GPU left free.
  const std::string plan = " predict --cluster dgx2x16 --model 100b --zero 3 --micro-batch 4 --global-batch 1024"
                           " --recompute full --precision fp16 --engine deepspeed --json";
  auto r = run_command(ztune_bin() + plan);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("memory").at("fits_gpu") == true);
  const double total = j.at("memory").at("gpu").at("total_bytes").get<double>();
  const double capacity = j.at("memory").at("gpu").at("capacity_bytes").get<double>();
  const double free_pct = 100 * (1 - total / capacity);
  REQUIRE(free_pct > 1);
  REQUIRE(free_pct < 49);
  // Just less headroom than the plan leaves: still fits; just more: does not.
  r = run_command(ztune_bin() + plan + " --memory-headroom " + std::to_string(free_pct - 0.5));
  j = nlohmann::json::parse(r.out);
  CHECK(j.at("memory").at("fits_gpu") == true);
  r = run_command(ztune_bin() + plan + " --memory-headroom " + std::to_string(free_pct + 0.5));
  j = nlohmann::json::parse(r.out);
  CHECK(j.at("memory").at("fits_gpu") == false);
  CHECK(j.at("memory").at("gpu_usable_bytes").get<double>() ==
        Approx(capacity * (1 - (free_pct + 0.5) / 100)).epsilon(1e-4));
  r = run_command(ztune_bin() + " predict --cluster dgx2x16 --model 100b --memory-headroom 60");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--memory-headroom"));
  // The search's table shows what its plans were judged against: 90 % of 32 GiB.
  r = run_command(ztune_bin() + " search --cluster dgx2x16 --model 100b --memory-headroom 10 --no-db --no-simulate "
                                "--top 1");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("GPU mem GiB of usable") && Contains("/28.8 "));
}

TEST_CASE("predict's largest micro-batch says when the batch gives each replica fewer sequences", "[cli][predict]") {
  // Global batch 16 over dp 8: 2 sequences a replica a step, whatever memory allows.
  auto r = run_command(ztune_bin() + " predict --cluster dgx-h100 --model gpt2-1.5b --dp 8 --global-batch 16 --zero 3 "
                                     "--recompute full");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("in memory, more than the 2 sequences a step this global batch gives each of the 8 "
                             "replicas"));
  r = run_command(ztune_bin() + " predict --cluster dgx-h100 --model gpt2-1.5b --dp 8 --global-batch 8192 --zero 3 "
                                "--recompute full");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("largest micro-batch that fits: ") && !Contains("sequences a step this global batch"));
}

TEST_CASE("predict says what would make a plan fit, with numbers, nothing when it fits", "[cli][predict]") {
  // DeepSpeed's engine: the ZeRO paper's model and GPUs (ztune's executor
  // stores fp32 and fits none of these ZeRO-3 plans).
  const std::string plan = " predict --cluster dgx2x16 --model 100b --zero 1 --micro-batch 2 --global-batch 1024"
                           " --precision fp16 --engine deepspeed";
  auto r = run_command(ztune_bin() + plan);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("What would make this plan fit") && Contains("[fits]") && Contains("tokens/s") &&
                        Contains("ZeRO stage 2") && Contains("the search's best plan on these 256 GPUs"));
  // The last hint is the search's best plan on the same GPUs: the same plan and
  // throughput as `ztune search --gpus 256` ranks first analytically.
  auto s = run_command(ztune_bin() + " search --cluster dgx2x16 --model 100b --gpus 256 --global-batch 1024"
                                     " --precision fp16 --engine deepspeed --simulate-top 0 --top 1 --no-db --json");
  REQUIRE(s.exit_code == 0);
  const auto best = nlohmann::json::parse(s.out).at("plans").at(0);
  r = run_command(ztune_bin() + plan + " --json");
  auto j = nlohmann::json::parse(r.out);
  const auto& hints = j.at("memory").at("fit_hints");
  REQUIRE_FALSE(hints.empty());
  bool fits = false;
  for (const auto& h : hints)
    if (h.at("fits").get<bool>()) {
      fits = true;
      CHECK(h.at("tokens_per_s").get<double>() > 0);
    }
  CHECK(fits);
  CHECK(hints.back().at("tokens_per_s").get<double>() ==
        Approx(best.at("prediction").at("time").at("tokens_per_s").get<double>()));
  r = run_command(ztune_bin() + " predict --cluster dgx2x16 --model 100b --zero 3 --micro-batch 4 --global-batch 1024"
                                " --recompute full --precision fp16 --engine deepspeed --json");
  j = nlohmann::json::parse(r.out);
  CHECK(j.at("memory").at("fits") == true);
  CHECK(j.at("memory").at("fit_hints").empty());
}

// The hints are plans for the engine the user named (before, every hint was
// checked against ztune's executor whatever --engine said: a DeepSpeed plan was
// told ZeRO-R Pa "fits; but --engine ztune cannot run it").
TEST_CASE("predict's fit hints are plans for the --engine given, refused by that engine's rules only",
          "[cli][predict]") {
  const std::string plan = " predict --cluster dgx2x16 --nodes 50 --model deepspeed-1t --tp 16 --pp 50"
                           " --recompute full --micro-batch 1 --json";
  auto hint = [](const nlohmann::json& j, const std::string& change) {
    for (const auto& h : j.at("memory").at("fit_hints"))
      if (h.at("change").get<std::string>().find(change) != std::string::npos) return h;
    return nlohmann::json();
  };
  auto r = run_command(ztune_bin() + plan + " --engine deepspeed");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.at("memory").at("fits") == false);
  auto pa = hint(j, "partitioned activation checkpoints");
  REQUIRE_FALSE(pa.is_null());
  CHECK(pa.at("fits") == true);  // DeepSpeed runs ZeRO-R Pa
  CHECK_THAT(pa.at("detail").get<std::string>(), !Contains("cannot run it"));
  // ztune's executor has no Pa: the same hint under --engine ztune is refused, naming it.
  r = run_command(ztune_bin() + plan + " --engine ztune");
  REQUIRE(r.exit_code == 0);
  pa = hint(nlohmann::json::parse(r.out), "partitioned activation checkpoints");
  REQUIRE_FALSE(pa.is_null());
  CHECK(pa.at("fits") == false);
  CHECK_THAT(pa.at("detail").get<std::string>(), Contains("--engine ztune cannot run it"));
}

// Context parallelism (issue 19): --cp on predict and search, errors naming the flag.
TEST_CASE("predict --cp: the ring's part, the devices it takes, and the errors naming --cp", "[cli][predict][cp]") {
  const std::string base = ztune_bin() +
                           " predict --cluster dgx-h100x32 --nodes 8 --model llama-70b --seq 8192 --tp 4 --pp 4"
                           " --virtual-stages 5 --micro-batch 1 --global-batch 128 --sequence-parallel --zero 1"
                           " --attention flash --engine megatron";
  auto r = run_command(base + " --cp 2 --dp 2 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK_THAT(j.at("plan").get<std::string>(), Contains("dp2×tp4×cp2×pp4"));
  CHECK(j.at("time").at("breakdown_s").at("cp_comm").get<double>() > 0);
  CHECK(j.at("memory").at("fits") == true);
  // Without --dp the remaining devices: 64 / (tp 4 × pp 4 × cp 2) = 2.
  r = run_command(base + " --cp 2 --json");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(nlohmann::json::parse(r.out).at("plan").get<std::string>(), Contains("dp2×tp4×cp2×pp4"));
  // 8192 tokens do not cut into 2·3 chunks.
  r = run_command(base + " --cp 3 --dp 1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--cp: 3") && Contains("8192"));
  // More ranks than the cluster has.
  r = run_command(base + " --cp 2 --dp 4");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("dp×tp×cp×pp = 128") && Contains("64"));
  // search --cp 3: refused before anything is searched.
  r = run_command(ztune_bin() + " search --cluster dgx-h100x32 --nodes 8 --model llama-70b --seq 8192 --cp 3 --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--cp: 3"));
}

// DeepSpeed-Ulysses (issue 19 item 3): --ulysses on predict and search, errors naming the flag.
TEST_CASE("predict --ulysses: the all-to-all part, the devices it takes, and the errors naming --ulysses",
          "[cli][predict][ulysses]") {
  const std::string base = ztune_bin() +
                           " predict --cluster dgx-h100x32 --nodes 8 --model llama-70b --seq 8192 --tp 2"
                           " --micro-batch 1 --global-batch 128 --zero 3 --attention flash --engine deepspeed";
  auto r = run_command(base + " --ulysses 4 --json");
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  // Without --dp the remaining devices: 64 / (tp 2 × ulysses 4) = 8.
  CHECK_THAT(j.at("plan").get<std::string>(), Contains("dp8×tp2×u4×pp1"));
  CHECK(j.at("time").at("breakdown_s").at("ulysses_comm").get<double>() > 0);
  CHECK(j.at("time").at("breakdown_s").at("cp_comm").get<double>() == 0);
  // Llama-70B's 8 KV heads over tp 2: 4 per rank, which 8 Ulysses ranks cannot split.
  r = run_command(base + " --ulysses 8 --dp 1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("ulysses") && Contains("KV heads"));
  // Not with context parallelism.
  r = run_command(base + " --ulysses 2 --cp 2 --dp 1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("ulysses") && Contains("context parallelism"));
  // search: Megatron-LM has no Ulysses.
  r = run_command(ztune_bin() +
                  " search --cluster dgx-h100x32 --nodes 8 --model llama-70b --seq 8192 --engine megatron --ulysses 2"
                  " --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--ulysses") && Contains("megatron"));
}

TEST_CASE("search --json says what was searched, how far to trust it, its id, and when nothing fits what would",
          "[cli][search][json]") {
  const auto dir = std::filesystem::temp_directory_path() / ("ztune-search-json-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "results.db").string();
  auto r = run_command(ztune_bin() + " search --cluster dgx2x16 --model gpt2-1.5b --top 2 --json --db " + db);
  REQUIRE(r.exit_code == 0);
  auto j = nlohmann::json::parse(r.out);
  for (const char* key : {"plans", "space", "feasible", "pruned_by", "elapsed_s"}) CHECK(j.contains(key));  // issue 5
  CHECK(j.at("cluster").at("name") == "dgx2x16");
  CHECK(j.at("cluster").at("gpus") == 256);
  CHECK(j.at("cluster").at("gpu").get<std::string>().find("V100") != std::string::npos);
  CHECK(j.at("model").at("name") == "gpt2-1.5b");
  CHECK(j.at("model").at("seq_len").get<int>() > 0);
  CHECK(j.at("engine") == "ztune");
  CHECK(j.at("search_id").is_number_integer());
  CHECK(j.at("accuracy").is_object());
  CHECK_FALSE(j.contains("closest"));
  // The id is the stored search's: history shows it.
  const auto shown = run_command(ztune_bin() + " history show " + std::to_string(j.at("search_id").get<long>()) +
                                 " --db " + db);
  CHECK(shown.exit_code == 0);
  // Nothing fits: the closest plans and the fit advice, as the text prints them.
  r = run_command(ztune_bin() + " search --cluster v100-workstation --model 100b --zero 1 --json --no-db");
  CHECK(r.exit_code == 1);
  j = nlohmann::json::parse(r.out);
  CHECK(j.at("feasible") == 0);
  CHECK(j.at("search_id").is_null());
  CHECK(j.at("accuracy").is_null());
  REQUIRE_FALSE(j.at("closest").empty());
  CHECK(j.at("closest").at(0).at("prediction").at("memory").at("fits") == false);
  REQUIRE_FALSE(j.at("fit_hints").empty());
  bool fits = false;
  for (const auto& h : j.at("fit_hints")) {
    CHECK_FALSE(h.at("change").get<std::string>().empty());
    if (h.at("fits").get<bool>()) fits = true;
  }
  CHECK(fits);  // "more GPUs" or the search without --zero
  std::filesystem::remove_all(dir);
}

TEST_CASE("search table: each plan's GPU count, and with --objective cost its cost and a footnote that says so",
          "[cli][search]") {
  // 200..256 GPUs: the plans use different counts, none need be the cluster's 256.
  auto r = run_command(ztune_bin() + " search --cluster dgx2x16 --model 100b --no-db --min-gpus 200 --max-gpus 256"
                                     " --objective cost --gpu-hour-price 2.5 --top 5");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("  GPUs  ") && Contains("  cost  ") && Contains("ranked by their simulated cost of"));
  const auto j = nlohmann::json::parse(run_command(ztune_bin() + " search --cluster dgx2x16 --model 100b --no-db"
                                                                 " --min-gpus 200 --max-gpus 256 --objective cost"
                                                                 " --gpu-hour-price 2.5 --top 5 --json")
                                           .out);
  // The table's cost column is the objective the JSON carries, rounded (grouped digits).
  const double best_cost = j.at("plans").at(0).at("prediction").at("objective").at("value").get<double>();
  const long gpus = j.at("plans").at(0).at("plan").at("dp").get<long>() * j.at("plans").at(0).at("plan").at("tp").get<long>() *
                    j.at("plans").at(0).at("plan").at("pp").get<long>();
  std::string best_line = r.out.substr(r.out.find("\n1"));
  best_line = best_line.substr(1, best_line.find('\n', 1));
  CHECK_THAT(best_line, Contains(" " + std::to_string(gpus) + " "));
  char cost[32];
  std::snprintf(cost, sizeof cost, "%.0f", best_cost);
  std::string digits;
  for (char ch : best_line)
    if (std::isdigit(static_cast<unsigned char>(ch))) digits += ch;
  CHECK(digits.find(cost) != std::string::npos);
  // Ranked by throughput the footnote says throughput, and there is no cost column.
  r = run_command(ztune_bin() + " search --cluster dgx2x16 --model 100b --no-db --top 3");
  CHECK_THAT(r.out, Contains("ranked by their simulated throughput") && !Contains("  cost  "));
}

TEST_CASE("validate's case table keeps its columns whatever the length of a source or case name", "[cli][validate]") {
  const auto r = run_command(ztune_bin() + " validate --all");
  REQUIRE_FALSE(r.out.empty());
  // Every case row's metric column starts where the header's does (the
  // longest ids, torchtitan's *_fsdp_compile and Megatron-2019-localDDP's,
  // used to push theirs right).
  std::size_t header = std::string::npos, rows = 0;
  std::size_t start = 0;
  while (start < r.out.size()) {
    std::size_t end = r.out.find('\n', start);
    if (end == std::string::npos) end = r.out.size();
    const std::string line = r.out.substr(start, end - start);
    start = end + 1;
    if (header == std::string::npos && line.starts_with("source ") && line.find(" metric ") != std::string::npos) {
      header = line.find(" metric ") + 1;
      continue;
    }
    if (header == std::string::npos) continue;
    for (const char* metric : {"tokens_per_s_per_gpu", "iteration_time_s"}) {
      const auto at = line.find(std::string(" ") + metric + " ");
      if (at == std::string::npos) continue;
      INFO(line);
      CHECK(at + 1 == header);
      ++rows;
    }
  }
  CHECK(header != std::string::npos);
  CHECK(rows > 100);
}

TEST_CASE("the engines' selective policies on the command line: priced, and refused where the engine lacks them",
          "[cli][predict][recompute]") {
  const std::string base = ztune_bin() +
                           " predict --cluster dgx-h100x32 --model llama-70b --micro-batch 1"
                           " --global-batch 256 --attention flash --json";
  auto r = run_command(base + " --zero 3 --engine fsdp --recompute-policy alternate_mm");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--recompute-policy") && Contains("recompute \"selective\""));
  r = run_command(base + " --engine megatron --zero 1 --recompute selective --recompute-policy mlp_in");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--engine megatron cannot run this plan") && Contains("core attention"));
  // torchtitan's op SAC recomputes three GEMMs where Korthikanti's recomputes
  // the flash kernel's forward: more recompute time, fewer activations kept.
  const auto core = run_command(base + " --zero 3 --engine fsdp --recompute selective");
  const auto op = run_command(base + " --zero 3 --engine fsdp --recompute selective --recompute-policy alternate_mm");
  REQUIRE(core.exit_code == 0);
  REQUIRE(op.exit_code == 0);
  const auto c = nlohmann::json::parse(core.out), o = nlohmann::json::parse(op.out);
  CHECK(o.at("time").at("breakdown_s").at("recompute").get<double>() >
        c.at("time").at("breakdown_s").at("recompute").get<double>());
  CHECK(o.at("memory").at("gpu").at("activations_bytes").get<double>() <
        c.at("memory").at("gpu").at("activations_bytes").get<double>());
  CHECK(o.at("time").at("hfu").get<double>() > o.at("time").at("mfu").get<double>());
  // torchtitan's layer checkpointing every 3rd block instead of every 2nd: two
  // thirds of the recompute time; --recompute-every needs the layer policy.
  r = run_command(base + " --zero 3 --engine fsdp --recompute selective --recompute-every 3");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--recompute-every") && Contains("alternate_layers"));
  const std::string layers = base + " --zero 3 --engine fsdp --recompute selective --recompute-policy alternate_layers";
  const auto second = run_command(layers);
  const auto third = run_command(layers + " --recompute-every 3");
  REQUIRE(second.exit_code == 0);
  REQUIRE(third.exit_code == 0);
  const auto l2 = nlohmann::json::parse(second.out), l3 = nlohmann::json::parse(third.out);
  CHECK(l3.at("time").at("breakdown_s").at("recompute").get<double>() ==
        Approx(l2.at("time").at("breakdown_s").at("recompute").get<double>() * 2 / 3).epsilon(1e-9));
  CHECK(l3.at("memory").at("gpu").at("activations_bytes").get<double>() >
        l2.at("memory").at("gpu").at("activations_bytes").get<double>());
}

TEST_CASE("model states are counted as the engine keeps them: Megatron's fp32 gradient buffer for bf16",
          "[cli][predict][memory][engine]") {
  // Megatron-Core's docs ("Distributed Optimizer"): bf16 parameters with fp32
  // gradients take 6 + 12/d bytes per parameter with the distributed optimizer
  // (ztune's ZeRO-1); the ZeRO paper's count, ztune's executor's, 4 + 12/d.
  // The same plan under --engine megatron therefore holds twice the gradient
  // bytes, and --accounting paper gives the paper's back.
  const std::string plan =
      " predict --cluster dgx-h100x32 --model llama-70b --tp 4 --pp 4 --dp 16 --zero 1 --micro-batch 1"
      " --global-batch 1024 --recompute selective --sequence-parallel --precision bf16 --json";
  auto megatron = run_command(ztune_bin() + plan + " --engine megatron");
  auto paper = run_command(ztune_bin() + plan + " --engine megatron --accounting paper");
  auto ztune = run_command(ztune_bin() + plan);
  REQUIRE(megatron.exit_code == 0);
  REQUIRE(paper.exit_code == 0);
  REQUIRE(ztune.exit_code == 0);
  const auto jm = nlohmann::json::parse(megatron.out), jp = nlohmann::json::parse(paper.out),
             jz = nlohmann::json::parse(ztune.out);
  CHECK(jm.at("memory").at("accounting") == "megatron");
  CHECK(jp.at("memory").at("accounting") == "paper");
  CHECK(jz.at("memory").at("accounting") == "executor");  // its own tensors: 2 + 2 + 12/d bytes here, the paper's
  const auto& gm = jm.at("memory").at("gpu");
  const auto& gp = jp.at("memory").at("gpu");
  const double params = gm.at("params_bytes").get<double>();
  CHECK(gm.at("grads_bytes").get<double>() == Approx(2.0 * params));  // 4 bytes against the params' 2
  CHECK(gp.at("grads_bytes").get<double>() == Approx(params));
  CHECK(gm.at("optimizer_bytes").get<double>() == Approx(gp.at("optimizer_bytes").get<double>()));
  CHECK(gm.at("total_bytes").get<double>() > gp.at("total_bytes").get<double>());
  // The search says whose count its fits use.
  auto search = run_command(ztune_bin() +
                            " search --cluster dgx-h100x32 --model llama-70b --engine megatron --top 1 --simulate-top 0"
                            " --json --no-db");
  REQUIRE(search.exit_code == 0);
  CHECK(nlohmann::json::parse(search.out).at("memory_accounting") == "megatron");
  auto overridden = run_command(ztune_bin() +
                                " search --cluster dgx-h100x32 --model llama-70b --engine megatron --top 1"
                                " --simulate-top 0 --accounting paper --json --no-db");
  REQUIRE(overridden.exit_code == 0);
  CHECK(nlohmann::json::parse(overridden.out).at("memory_accounting") == "paper");
}

TEST_CASE("predict names DeepSpeed's BF16_Optimizer where it runs: bf16 pipelines without ZeRO",
          "[cli][predict][engine][grads]") {
  // DeepSpeed 0.18-0.19 wrap a bf16 pipeline without ZeRO in BF16_Optimizer
  // (memory_model.hpp deepspeed_runs_bf16_optimizer): its fp32 gradient
  // buffer shows in the grads line (6 bytes per parameter against the
  // params' 2), and the text says where its time went.
  const std::string plan = " predict --cluster dgx-a100-80gbx16 --model llama-7b --tp 2 --pp 4 --dp 16 --micro-batch 1"
                           " --global-batch 512 --recompute full --precision bf16";
  auto z0 = run_command(ztune_bin() + plan + " --engine deepspeed --zero 0");
  auto z1 = run_command(ztune_bin() + plan + " --engine deepspeed --zero 1");
  auto json = run_command(ztune_bin() + plan + " --engine deepspeed --zero 0 --json");
  REQUIRE(z0.exit_code == 0);
  REQUIRE(z1.exit_code == 0);
  REQUIRE(json.exit_code == 0);
  CHECK_THAT(z0.out, Contains("grads    DeepSpeed's BF16_Optimizer (bf16 pipeline without ZeRO)") &&
                         Contains("in overhead), reduced in fp32"));
  CHECK_THAT(z1.out, !Contains("BF16_Optimizer"));
  const auto doc = nlohmann::json::parse(json.out);
  const auto& g = doc.at("memory").at("gpu");
  CHECK(g.at("grads_bytes").get<double>() == Approx(3.0 * g.at("params_bytes").get<double>()));
  // Megatron on the same plan keeps its own count and names no DeepSpeed optimizer.
  auto megatron = run_command(ztune_bin() + plan + " --zero 0 --engine megatron");
  REQUIRE(megatron.exit_code == 0);
  CHECK_THAT(megatron.out, !Contains("BF16_Optimizer"));
}

TEST_CASE("predict on CPU ranks without 16-bit throughput says so and gives the memory it can predict",
          "[cli][predict][precision]") {
  // local-cpu states no bf16 peak: the executor trains the plan (its kernels
  // stage through fp32) but its time cannot be priced. The memory the message
  // gives is `ztune run`'s prediction for the same plan.
  auto r = run_command(ztune_bin() + " predict --cluster local-cpu --model tiny --precision bf16 --dp 2 --zero 1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--precision bf16: cluster local-cpu states no bf16 throughput") &&
                        Contains("node.gpu.peak_tflops.bf16 is 0") && Contains("MiB per rank (fits)"));
  CHECK_THAT(r.err, !Contains("not finite"));
  r = run_command(ztune_bin() + " predict --cluster local-cpu --model tiny --dp 2 --zero 1");
  CHECK(r.exit_code == 0);  // fp32, which the cluster prices
}

TEST_CASE("Megatron's block recomputation on the command line: priced between none and full, refused by flag",
          "[cli][predict][recompute][block]") {
  // GPT-3 175B on 8 × 8 H100, tp 8 × pp 8: 12 layers a stage.
  const std::string base = ztune_bin() +
                           " predict --cluster dgx-h100x32 --nodes 8 --model gpt3-175b --tp 8 --pp 8 --sequence-parallel"
                           " --micro-batch 1 --global-batch 64 --zero 1 --attention flash --json";
  const std::string megatron = base + " --engine megatron";
  auto r = run_command(megatron + " --recompute selective --recompute-num-layers 4");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--recompute-num-layers") && Contains("recompute \"full\""));
  r = run_command(megatron + " --recompute full --recompute-num-layers 0");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--recompute-num-layers"));
  r = run_command(base + " --recompute full --recompute-num-layers 4 --engine deepspeed");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("deepspeed cannot run this plan") && Contains("--engine megatron"));
  const auto none = run_command(megatron);
  const auto full = run_command(megatron + " --recompute full");
  const auto block = run_command(megatron + " --recompute full --recompute-num-layers 4");
  REQUIRE(none.exit_code == 0);
  REQUIRE(full.exit_code == 0);
  REQUIRE(block.exit_code == 0);
  const auto n = nlohmann::json::parse(none.out), f = nlohmann::json::parse(full.out),
             b = nlohmann::json::parse(block.out);
  auto recompute = [](const nlohmann::json& j) { return j.at("time").at("breakdown_s").at("recompute").get<double>(); };
  auto activations = [](const nlohmann::json& j) {
    return j.at("memory").at("gpu").at("activations_bytes").get<double>();
  };
  // 4 of a stage's 12 layers recomputed: a third of full recomputation's time.
  CHECK(recompute(b) == Approx(recompute(f) / 3).epsilon(1e-9));
  CHECK(recompute(n) == 0);
  CHECK(activations(f) < activations(b));
  CHECK(activations(b) < activations(n));
  CHECK_THAT(b.at("plan").get<std::string>(), Contains("full:block4"));
  // The text says which layers: 4 of each stage's 12, 32 of the 96.
  std::string text = megatron + " --recompute full --recompute-num-layers 4";
  text.erase(text.find(" --json"), 7);
  const auto t = run_command(text);
  REQUIRE(t.exit_code == 0);
  CHECK_THAT(t.out, Contains("recompute 32 of 96 layers (Megatron's block method: each model chunk's first 4 layers"));
}

// ZeRO-3 under a pipeline is priced as FSDP2 runs it there (held through the
// step); predict says so beside the figures it changes, and prices the whole
// stage gathered (2Ψ of the stage: the executor's fp32 storage on the ztune
// engine's CPU ranks aside, here the fsdp engine's bf16).
TEST_CASE("predict names ZeRO-3 under a pipeline and prices its gathered stage", "[cli][predict][pipeline]") {
  const auto r = run_command(ztune_bin() + " predict --cluster dgx-h100x32 --nodes 8 --model llama-70b --engine fsdp "
                                           "--tp 4 --pp 4 --zero 3 --micro-batch 1 --global-batch 64 --recompute full "
                                           "--attention flash --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  const double gathered = j["memory"]["gpu"]["zero3_gathered_bytes"].get<double>();
  const double params = j["memory"]["gpu"]["params_bytes"].get<double>();
  CHECK(gathered == Approx(4 * params));  // the whole stage against its partition over dp 4 (paper: 2Ψ/4)
  const auto text = run_command(ztune_bin() + " predict --cluster dgx-h100x32 --nodes 8 --model llama-70b --engine "
                                              "fsdp --tp 4 --pp 4 --zero 3 --micro-batch 1 --global-batch 64 "
                                              "--recompute full --attention flash");
  CHECK_THAT(text.out, Catch::Matchers::Contains("ZeRO-3 under the pipeline: each stage gathered once per step"));
}

TEST_CASE("predict names the stage its memory lines are of and why ztune's executor prices cp attention in fp32",
          "[cli][predict]") {
  // 16 stages of GPT-2 1.5B on 3,072 GPUs (dp 192): 6,144 sequences are 8
  // micro-batches of 4 per replica, fewer than the 16 the first stage's 1F1B
  // warm-up can hold, and the last stage (head, logits) is the most loaded;
  // with twice the batch the first stage holds 16 micro-batches' checkpoints
  // and is. The lines had jumped 4x with no word of which stage they were.
  const std::string base =
      " predict --cluster selene-3072 --model gpt2-1.5b --pp 16 --micro-batch 4 --zero 0 --recompute full"
      " --attention flash --precision bf16 --json --global-batch ";
  auto r = run_command(ztune_bin() + base + "6144");
  REQUIRE(r.exit_code == 0);
  const auto last = nlohmann::json::parse(r.out);
  r = run_command(ztune_bin() + base + "12288");
  REQUIRE(r.exit_code == 0);
  const auto first = nlohmann::json::parse(r.out);
  CHECK(last["memory"]["stage"] == 15);
  CHECK(first["memory"]["stage"] == 0);
  CHECK(first["memory"]["gpu"]["activations_bytes"].get<double>() >
        last["memory"]["gpu"]["activations_bytes"].get<double>());
  r = run_command(ztune_bin() + " predict --cluster selene-3072 --model gpt2-1.5b --pp 16 --micro-batch 4 --zero 0"
                                " --recompute full --attention flash --precision bf16 --global-batch 6144");
  CHECK_THAT(r.out, Contains("Memory per GPU (stage 15, most loaded)    GiB\n"));
  // cp 2 with ztune's engine on GPUs: its CUDA backend has no ring
  // attention, so the engine refuses the plan as `ztune run` would, and names
  // the engine that runs it (it had been priced, on fp32 copies).
  const std::string cp =
      " predict --cluster dgx-h100x32 --model llama-70b --global-batch 512 --tp 4 --pp 4 --cp 2 --attention flash";
  r = run_command(ztune_bin() + cp);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--engine ztune cannot run this plan: ztune's executor runs context parallelism (ring "
                             "attention) on its CPU backend only") &&
                        Contains("; --engine megatron"));
  r = run_command(ztune_bin() + cp + " --engine megatron");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, !Contains("on fp32 copies"));
  // Ulysses: the engine named is one that runs it (Megatron refuses Ulysses).
  const std::string ulysses =
      " predict --cluster dgx-h100x4 --model llama-70b --tp 4 --ulysses 2 --micro-batch 1 --global-batch 64 --zero 3";
  r = run_command(ztune_bin() + ulysses);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("DeepSpeed-Ulysses on its CPU backend only") && Contains("--engine deepspeed runs it"));
  r = run_command(ztune_bin() + ulysses + " --engine deepspeed");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, !Contains("on fp32 copies"));
  // Hybrid sharding: the fsdp engine runs it.
  r = run_command(ztune_bin() + " predict --cluster dgx-h100x4 --model llama-7b --dp 32 --zero 3 --dp-shard 8"
                                " --micro-batch 1 --global-batch 64");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("hybrid sharding on its CPU backend only") && Contains("--engine fsdp runs it"));
}

TEST_CASE("predict and search say when a SwiGLU model is priced with dropout, and predict --json gives its dropout",
          "[cli][predict][dropout]") {
  // The catalog's Llama 7B states "dropout": 0 (Llama 2's Table 1: no
  // dropout); the same file without the key reads as GPT-2's 0.1, its masks
  // and kernels priced: predict says so, and what prices the Llama way.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ztune_test_dropout_note_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  nlohmann::json m = nlohmann::json::parse(std::ifstream(std::string(ZTUNE_TEST_DATA_DIR) + "/models/llama-7b.json"));
  REQUIRE(m.at("dropout") == 0);
  m.erase("dropout");
  std::ofstream((dir / "no-dropout.json").string()) << m.dump();
  const std::string plan =
      " --cluster dgx-a100-80gb --engine fsdp --zero 3 --dp 8 --micro-batch 1 --global-batch 64 --recompute none";
  const auto stated = run_command(ztune_bin() + " predict --model llama-7b" + plan);
  const auto unstated = run_command(ztune_bin() + " predict --model " + (dir / "no-dropout.json").string() + plan);
  REQUIRE(stated.exit_code == 0);
  REQUIRE(unstated.exit_code == 0);
  CHECK_THAT(stated.out, !Catch::Contains("dropout"));
  CHECK_THAT(unstated.out, Catch::Contains("note     dropout 0.1 priced") && Catch::Contains("\"dropout\": 0"));
  // The masks: two 1-byte masks a layer and the embedding's (formats.md
  // `dropout`), kept for backward with no recomputation here: more memory.
  const auto j0 = nlohmann::json::parse(run_command(ztune_bin() + " predict --json --model llama-7b" + plan).out);
  const auto j1 = nlohmann::json::parse(
      run_command(ztune_bin() + " predict --json --model " + (dir / "no-dropout.json").string() + plan).out);
  CHECK(j0.at("model_dropout") == 0.0);
  CHECK(j1.at("model_dropout") == Approx(0.1));
  CHECK(j1.at("memory").at("gpu").at("activations_bytes").get<double>() >
        j0.at("memory").at("gpu").at("activations_bytes").get<double>());
  // search says it too, above its table.
  const auto searched = run_command(ztune_bin() + " search --no-db --top 3 --engine fsdp --cluster dgx-a100-80gb --model " +
                                    (dir / "no-dropout.json").string());
  REQUIRE(searched.exit_code == 0);
  CHECK_THAT(searched.out, Catch::Contains("note: dropout 0.1 priced"));
  // ztune's executor runs no dropout: nothing to say under it.
  const auto executor = run_command(ztune_bin() + " predict --engine ztune --model " +
                                    (dir / "no-dropout.json").string() +
                                    " --cluster dgx-a100-80gb --zero 3 --dp 8 --micro-batch 1 --global-batch 64");
  REQUIRE(executor.exit_code == 0);
  CHECK_THAT(executor.out, !Catch::Contains("dropout"));
  fs::remove_all(dir);
}
