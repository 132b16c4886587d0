// ztune memory (issue 23): the model-state grid users know from DeepSpeed's
// estimators, end to end: its shape, figures against closed forms and the
// published parameter count, units, and the usage errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

using Catch::Matchers::Contains;

TEST_CASE("ztune memory --json: every row, DeepSpeed's figures in closed form", "[cli][memory]") {
  auto r = run_command(ztune_bin() + " memory --model llama-7b --gpus 16 --nodes 2 --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  // LLaMA-7B as Hugging Face counts it (LlamaForCausalLM, untied head): 6,738,415,616.
  CHECK(j["params"].get<double>() == 6738415616.0);
  CHECK(j["largest_module"]["params"].get<double>() == 32000.0 * 4096);  // the token embedding
  CHECK(j["gpus"] == 16);
  CHECK(j["nodes"] == 2);
  REQUIRE(j["rows"].size() == 20);  // (1 + 2 + 2 + 5) × {16-bit mixed, fp32}
  const double psi = 6738415616.0, largest = 32000.0 * 4096;
  int checked = 0;
  for (const auto& row : j["rows"]) {
    if (row["precision"] != "bf16" || row["zero_stage"] < 2 || row["offload"]["optimizer"] == "nvme") {
      CHECK(row["deepspeed"].is_null());
      CHECK(row.contains("deepspeed_missing_why"));
      continue;
    }
    const auto ds = row["deepspeed"];
    const bool opt_cpu = row["offload"]["optimizer"] == "cpu", params_cpu = row["offload"]["params"] == "cpu";
    double gpu = 0;
    if (row["zero_stage"] == 2)
      gpu = opt_cpu ? 2 * psi : 2 * psi + std::trunc(18 * psi / 16);
    else
      gpu = 4 * largest + (params_cpu ? 0.0 : opt_cpu ? std::trunc(2 * psi / 16) : std::trunc(18 * psi / 16));
    CHECK(ds["gpu_bytes"].get<double>() == Approx(gpu).epsilon(1e-12));
    ++checked;
  }
  CHECK(checked == 5);  // stage 2 ×2, stage 3 ×3
}

TEST_CASE("ztune memory on a cluster: capacities, fits, one unit per table", "[cli][memory]") {
  auto r = run_command(ztune_bin() + " memory --model 100b --cluster dgx2x16");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("on 256 GPUs (16 nodes × 16)") && Contains("per GPU (GiB)") && Contains("fits") &&
                        Contains("fp16 mixed") && Contains("optimizer+params→nvme") &&
                        Contains("Activations, workspace, logits"));
  CHECK_THAT(r.out, Contains("no: GPU"));  // 100B at stage 0 needs ~1.5 TiB a GPU
  // The tiny model's states read in MiB, its size in millions (not 0.00 GiB, 0.00B).
  r = run_command(ztune_bin() + " memory --model tiny --gpus 2");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("per GPU (MiB)") && Contains("0.22M parameters") && Contains("16-bit mixed"));
}

TEST_CASE("ztune memory: usage errors name the flag (exit 2)", "[cli][memory]") {
  auto r = run_command(ztune_bin() + " memory --model llama-7b --gpus 10 --nodes 4");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--gpus: 10 GPUs do not divide over 4 nodes"));
  r = run_command(ztune_bin() + " memory --model llama-7b --cluster dgx2x16 --gpus 24 --nodes 1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("at most 16"));
  r = run_command(ztune_bin() + " memory --gpus 8");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--model"));
  r = run_command(ztune_bin() + " memory --model llama-7b --cluster dgx2 --precision bf16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--precision: bf16"));
}

TEST_CASE("ztune memory --dp-shard: ZeRO-3 in shard groups beside ZeRO-3 over all, in closed form", "[cli][memory]") {
  // Hybrid sharding (FSDP HYBRID_SHARD, DeepSpeed MiCS): a group of N holds
  // Ψ/N of the 16-bit parameters and gradients and of the optimizer states,
  // 16Ψ/N bytes a GPU (Rajbhandari et al. 2020 §5 with N_d = N); offloaded,
  // each node's host keeps its 8 GPUs' partitions, 8 × 16Ψ/N. DeepSpeed's
  // estimators count no shard group.
  auto r = run_command(ztune_bin() + " memory --model llama-7b --gpus 16 --nodes 2 --precision bf16 --dp-shard 8 --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  REQUIRE(j["rows"].size() == 15);  // 1 + 2 + 2 + 5, then the 5 stage-3 rows again in groups of 8
  const double psi = 6738415616.0;
  int hybrid = 0;
  for (const auto& row : j["rows"]) {
    if (row["dp_shard"].is_null()) continue;
    ++hybrid;
    CHECK(row["zero_stage"] == 3);
    CHECK(row["dp_shard"] == 8);
    CHECK(row["deepspeed"].is_null());
    CHECK_THAT(row["deepspeed_missing_why"].get<std::string>(), Contains("MiCS"));
    const auto& lines = row["ztune"]["gpu_lines"];
    if (row["offload"]["optimizer"] == "none") {
      CHECK(lines["params"].get<double>() == Approx(2 * psi / 8));
      CHECK(lines["grads"].get<double>() == Approx(2 * psi / 8));
      CHECK(lines["optimizer"].get<double>() == Approx(12 * psi / 8));
    } else if (row["offload"]["optimizer"] == "cpu") {
      CHECK(lines["optimizer"].get<double>() == 0);
      CHECK(row["ztune"]["host_bytes_per_node"].get<double>() >= 8 * 16 * psi / 8);
    }
  }
  CHECK(hybrid == 5);
  // A group that does not split the GPUs in two or more is refused, naming the flag.
  // One group of all 16 is plain ZeRO-3, as predict takes it: said, and no rows added.
  r = run_command(ztune_bin() + " memory --model llama-7b --gpus 16 --nodes 2 --precision bf16 --dp-shard 16 --json");
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out)["rows"].size() == 10);
  CHECK_THAT(r.err, Contains("one shard group of all 16 GPUs is plain ZeRO-3"));
  for (const char* bad : {"5", "32"}) {
    r = run_command(ztune_bin() + " memory --model llama-7b --gpus 16 --dp-shard " + bad);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(std::string("--dp-shard ") + bad + ": the 16 GPUs do not split into two or more "
                               "groups of " + bad + "; expected a divisor of 16 from 2 to 8"));
  }
}

TEST_CASE("ztune memory with 16-bit optimizer states: K from the states, offload rows out, refusals name the flags",
          "[cli][memory]") {
  // NeMo's optim.dtype bf16 (master and moments in bf16) beside the bf16 rows'
  // parameters: the master is the parameters (NeMo's store_params false), K =
  // 2·2 = 4 bytes a parameter, partitioned over the 8 GPUs from stage 1 (ZeRO
  // paper §3.1 with K = 4); Megatron-Core's fp32 masters as remainders with
  // bf16 moments: 2 + 4. fp32 rows keep their parameters as masters and take
  // the bf16 moments: 4.
  const double psi = 6738415616.0;
  for (const auto& [flags, k16] : {std::pair{"--master-dtype bf16 --moments-dtype bf16", 4.0},
                                   std::pair{"--param-remainders --moments-dtype bf16", 6.0}}) {
    INFO(flags);
    auto r = run_command(ztune_bin() + " memory --model llama-7b --gpus 8 --json " + flags);
    REQUIRE(r.exit_code == 0);
    const auto j = nlohmann::json::parse(r.out);
    CHECK(j["optimizer_states"]["bytes_per_param"].get<double>() == k16);
    int rows16 = 0;
    for (const auto& row : j["rows"]) {
      CHECK(row["offload"]["optimizer"] == "none");  // 16-bit states are not offloaded
      CHECK(row["deepspeed"].is_null());
      CHECK_THAT(row["deepspeed_missing_why"].get<std::string>(), Contains("fp32 optimizer states"));
      const double k = row["precision"] == "fp32" ? 4.0 : k16;  // remainders: bf16 rows only
      const double opt = row["ztune"]["gpu_lines"]["optimizer"].get<double>();
      CHECK(opt == Approx(row["zero_stage"] == 0 ? k * psi : k * psi / 8));
      rows16 += row["precision"] != "fp32";
    }
    CHECK(rows16 == 4);  // stages 0-3 without offload
  }
  auto r = run_command(ztune_bin() + " memory --model llama-7b --gpus 8 --master-dtype bf16 --moments-dtype bf16");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("4 bytes of optimizer state a parameter") &&
                        Contains("master weights in bf16 (the parameters themselves: no copy), moments in bf16"));
  r = run_command(ztune_bin() + " memory --model llama-7b --gpus 8 --precision fp32 --master-dtype bf16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--master-dtype") && Contains("fp32 training's master weights are its parameters"));
  r = run_command(ztune_bin() + " memory --model llama-7b --gpus 8 --precision fp16 --param-remainders");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--param-remainders") && Contains("remainders need bf16"));
}
