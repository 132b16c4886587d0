// Issue 20 through the ztune binary: hostile flags, files, database rows and
// outputs get exit 2 (or 1 where no plan fits) with a message naming the flag or
// the file and place, within seconds; nothing aborts, hangs or exits 0 silently.
#include <catch2/catch.hpp>

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_command.hpp"
#include "../tuner/temp_files.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using Catch::Matchers::EndsWith;

namespace {

using ztune::test::read_file;
using ztune::test::scratch;
using ztune::test::write_file;


/// `ztune ARGS` (each test passes --db or --no-db: no test touches the user's database).
CommandResult run_ztune(const std::string& args) { return run_command(ztune_bin() + " " + args); }

/// A plan file for gpt2-1.5b on dgx2x16, as search --out writes it.
std::string plan_file() {
  static const std::string path = [] {
    const std::string p = (scratch() / "plan.json").string();
    // ZeRO-2: a plan every engine's export takes (the best ZeRO-3 plan shards
    // in groups, which DeepSpeed's export refuses: MiCS).
    const auto s = run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --zero 2 --no-db --no-simulate --top 1 --out '" +
                             p + "'");
    REQUIRE(s.exit_code == 0);
    return p;
  }();
  return path;
}

/// `command` in a subshell with the data directory set, so that its own
/// redirections and pipes stand (run_command prefixes a variable assignment and
/// appends its redirections to the whole line).
std::string in_subshell(const std::string& command) {
  return "true; ( export ZTUNE_DATA_DIR='" + std::string(ZTUNE_TEST_DATA_DIR) + "'; " + command + " )";
}

void require_quick_exit_2(const CommandResult& r, std::chrono::steady_clock::duration took) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK(took < std::chrono::seconds(10));
}

}  // namespace

// ---------------------------------------------------------------- flags

TEST_CASE("flags: --nodes 0 is a ztune error with a readable range", "[cli][hardening]") {
  const auto r = run_ztune("search --cluster dgx2x16 --model 100b --nodes 0 --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: --nodes: expected a node count from 1 to 1000000, got \"0\""));
  CHECK(r.err.find("1797693134862315") == std::string::npos);  // DBL_MAX's digits
  CHECK(run_ztune("predict --cluster dgx2x16 --model 100b --nodes 1000001 --tp 16").exit_code == 2);
}

TEST_CASE("flags: --tokens nan and --gpu-hour-price nan are refused", "[cli][hardening]") {
  auto r = run_ztune("search --cluster dgx2x16 --model 100b --tokens nan --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: --tokens: expected a token count above 0 up to 1e+18, got \"nan\""));
  r = run_ztune("search --cluster dgx2x16 --model 100b --objective cost --gpu-hour-price nan --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: --gpu-hour-price: expected a price above 0 up to 1e+09, got \"nan\""));
  r = run_ztune("search --cluster dgx2x16 --model 100b --tokens inf --no-db");
  CHECK(r.exit_code == 2);
}

TEST_CASE("flags: a price or budget whose cost overflows is refused, and at the bounds the cost still ranks",
          "[cli][hardening]") {
  // A price of 1e306 overflowed every plan's cost to a null and ranked a slower plan first.
  auto r = run_ztune("search --cluster dgx-a100-80gb --model llama-7b --objective cost --gpu-hour-price 1e306 --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: --gpu-hour-price: expected a price above 0 up to 1e+09"));
  auto best = [](const std::string& extra) {
    const auto s = run_ztune("search --cluster dgx-a100-80gb --model llama-7b --objective cost --no-simulate --no-db "
                             "--top 1 --json " + extra);
    REQUIRE(s.exit_code == 0);
    const auto plan = nlohmann::json::parse(s.out).at("plans").at(0);
    CHECK(plan.at("prediction").at("objective").at("value").is_number());
    return plan.at("plan");
  };
  CHECK(best("--gpu-hour-price 1e9 --tokens 1e18") == best("--gpu-hour-price 2"));
}

namespace {

/// `ztune ARGS` and the message it must stop with (exit 2), after "ztune: error: ".
struct Refusal {
  std::string args, message;
};

void check_refusals(const std::vector<Refusal>& cases) {
  for (const auto& c : cases) {
    const auto r = run_ztune(c.args);
    INFO(c.args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, StartsWith("ztune: error: " + c.message));
  }
}

}  // namespace

TEST_CASE("flags: output files, directories and sizes are checked when the flags are read", "[cli][hardening]") {
  const std::string dir = scratch().string();
  const std::vector<Refusal> cases{
      {"search --cluster dgx2x16 --model gpt2-1.5b --no-db --out " + dir,
       "--out: " + dir + ": is a directory; expected a file to write"},
      {"calibrate --cluster local-cpu --no-db --keep-measurements " + dir,
       "--keep-measurements: " + dir + ": is a directory"},
      {"calibrate --cluster local-cpu --no-db --cluster-out " + dir, "--cluster-out: " + dir + ": is a directory"},
      {"calibrate --cluster local-cpu --no-db --max-bytes -1",
       "--max-bytes: expected a message size in bytes from 4096 to 68719476736, got \"-1\""},
      {"calibrate --cluster local-cpu --no-db --wait-quiet nan", "--wait-quiet: expected seconds from 0 to 86400"},
      {"calibrate --cluster local-cpu --no-db --reference-factor nan", "--reference-factor: expected a factor"},
      {"run --cluster local-cpu --model tiny --no-db --nvme-dir " + plan_file(), "--nvme-dir: " + plan_file() +
                                                                                     ": not a directory"},
      {"run --cluster local-cpu --model tiny --no-db --steps 2147483648",
       "--steps: expected a step count from 1 to 2147483647"},
      {"run --cluster local-cpu --model tiny --no-db --seed -1", "--seed: expected a seed from 0"},
      {"run --cluster local-cpu --model tiny --no-db --keep-checkpoints 2",
       "--keep-checkpoints: no checkpoints are written without --checkpoint-every N"},
      {"run --cluster local-cpu --model tiny --no-db --collective-timeout -1",
       "--collective-timeout: expected seconds from 0 to 604800"},
      {"memory --model llama-7b --cluster dgx-a100-80gb --gpus 1024000000",
       "--gpus: 1024000000 GPUs need 128000000 nodes of dgx-a100-80gb (8 GPUs each); expected at most 1000000"},
      {"predict --cluster dgx2 --model gpt2-1.5b --tp 1e18", "--tp: expected a whole number from 1 to 2147483647, got \"1e18\""},
      {"search --cluster dgx2 --model gpt2-1.5b --no-db --top 1e9", "--top: expected a whole number from 1 to 2147483647"},
      // The plan flags take what a plan file holds (plan.hpp): pp × virtual stages
      // once wrapped int and divided by zero (SIGFPE), or came out negative.
      {"predict --cluster dgx-h100 --model llama-7b --micro-batch 1 --pp 4 --virtual-stages 1073741824",
       "--virtual-stages: expected a chunk count from 1 to 1024, got \"1073741824\""},
      {"run --cluster local-cpu --model tiny --no-db --pp 2 --virtual-stages 2147483647",
       "--virtual-stages: expected a chunk count from 1 to 1024"},
      {"predict --cluster dgx-h100 --model llama-7b --micro-batch 2147483647 --global-batch 2147483647 --dp 1",
       "--micro-batch: expected a micro-batch size from 1 to 1048576"},
      {"predict --cluster dgx-h100 --model llama-7b --recompute full --recompute-num-layers 2147483647",
       "--recompute-num-layers: expected a layer count from 1 to 1048576"},
      {"search --cluster dgx2 --model gpt2-1.5b --no-db --onebit-adam --freeze-step 2147483647",
       "--freeze-step: expected a step count from 0 to 1073741824"},
      // A plan file does not record its engine: the refusal names the ones that run it.
      {"predict --cluster dgx-h100 --model llama-7b --tp 2 --sequence-parallel --tp-comm-overlap",
       "--engine ztune cannot run this plan: ztune's executor runs its tensor-parallel collectives between its GEMMs "
       "(no userbuffer overlap): use tp_comm_overlap false; --engine megatron runs it"},
      {"predict --cluster dgx-h100 --model llama-7b --global-batch 2000000000000",
       "--global-batch: expected a sequence count from 1 to 1099511627776, got \"2000000000000\""},
      // An unset shell variable is not the default database.
      {"history --db \"\"", "--db: expected a database file, got an empty path"},
      {"search --cluster dgx2 --model gpt2-1.5b --db \"\"", "--db: expected a database file, got an empty path"},
      // An output path's directory must exist: said before measuring, not created.
      {"calibrate --cluster local-cpu --quick --no-db --out /nonexistent-dir/x.json",
       "--out: /nonexistent-dir/x.json: the directory /nonexistent-dir does not exist"},
      // A partition given by its ends is named by those flags, and what they leave said plainly.
      {"predict --cluster dgx-h100 --model llama-7b --pp 2 --virtual-stages 2 --first-stage-layers 3",
       "--first-stage-layers/--last-stage-layers: 3 layers do not cut into virtual_stages 2"},
      {"predict --cluster dgx-h100 --model llama-7b --pp 2 --first-stage-layers 33",
       "--first-stage-layers 33: take 33 of the model's 32 layers"},
      {"predict --cluster dgx-h100 --model llama-7b --pp 4 --first-stage-layers 5 "
       "--account-for-embedding-in-pipeline-split",
       "--first-stage-layers/--last-stage-layers, --account-for-embedding-in-pipeline-split: give one of"},
      // One stage holds every layer: a partition is refused, however it is given.
      {"predict --cluster dgx-h100 --model llama-7b --pp 1 --stage-layers 32",
       "--stage-layers: a partition of pipeline stages; need --pp >= 2, got 1"},
      {"predict --cluster dgx-h100 --model llama-7b --account-for-embedding-in-pipeline-split",
       "--account-for-embedding-in-pipeline-split: a partition of pipeline stages; need --pp >= 2, got 1"},
      {"predict --cluster dgx-h100 --model llama-7b --stage-layers 16 16",
       "--stage-layers: 2 stages given, one per pipeline stage; expected --pp 2 beside them (--pp is 1)"},
      // Each reason of the counted split said alone: 32 + 1 = 33 over pp 2
      // does not divide; tiny's 4 + 1 = 5 over pp 5 leaves the first stage empty.
      {"predict --cluster dgx-h100 --model llama-7b --pp 2 --account-for-embedding-in-pipeline-split",
       "--account-for-embedding-in-pipeline-split: 32 layers + 1 counted as layers = 33 do not split into 2 equal "
       "stages; expected pp dividing 33"},
      {"predict --cluster local-cpu --model tiny --pp 5 --account-for-embedding-in-pipeline-split",
       "--account-for-embedding-in-pipeline-split: 4 layers + 1 counted as layers = 5 split into 5 stages of one "
       "counted layer, leaving an end stage no transformer layer; expected pp dividing 5 into stages of at least 2"},
      // Megatron-Core's interleaving of the counted embedding and loss needs
      // pp × vp to divide the counted layers (Llama 2 70B: 80 + 2 = 82 over
      // pp 2 × vp 3 = 6 chunks does not); the 405B's 128 over 16 × 8 does
      // (test_predict_cli).
      {"predict --cluster dgx-h100 --nodes 2 --model llama-70b --tp 8 --pp 2 --virtual-stages 3 --global-batch 12 "
       "--account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split",
       "--account-for-embedding-in-pipeline-split and --account-for-loss-in-pipeline-split with --virtual-stages 3: "
       "80 layers + 2 counted as layers = 82 do not split into pp × virtual stages = 6 equal model chunks; expected "
       "pp × --virtual-stages dividing 82"},
      {"validate --source no-such-source", "no published run was checked: --source \"no-such-source\" matches no case"},
      {"predict --plan " + plan_file() + " --tp 2",
       "--tp: the plan file " + plan_file() + " gives the whole plan; drop --tp or the file"},
      {"run " + plan_file() + " --zero 1 --no-db", "--zero: the plan file " + plan_file() + " gives the whole plan"},
  };
  check_refusals(cases);
}

TEST_CASE("the counted embedding and loss interleave as Megatron-Core's offsets place them", "[cli][hardening]") {
  // The oracle, megatron/core/transformer/transformer_layer.py
  // get_transformer_layer_offset: 80 + 1 (the loss) over pp 3 × vp 3 is
  // chunks of 9, the last one short: stages 27 + 27 + 26.
  auto r = run_ztune("predict --cluster dgx-h100 --nodes 3 --model llama-70b --tp 8 --pp 3 --virtual-stages 3 "
                     "--global-batch 12 --account-for-loss-in-pipeline-split");
  INFO(r.err);
  CHECK(r.exit_code != 2);
  CHECK_THAT(r.out, Contains("stages:27+27+26 chunks:9×8+8"));
  // 80 + 2 over pp 2 × vp 4: Megatron-Core's chunks of 82 // 8 = 10, ends 9,
  // would build 78 of the 80 layers; ztune says so instead of cutting the
  // stages of 40 into equal chunks of 10, as it once did.
  r = run_ztune("predict --cluster dgx-h100 --nodes 2 --model llama-70b --tp 8 --pp 2 --virtual-stages 4 "
                "--global-batch 12 --account-for-embedding-in-pipeline-split --account-for-loss-in-pipeline-split");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("82 do not split into pp × virtual stages = 8 equal model chunks"));
}

TEST_CASE("pins, catalogs, databases, hosts and profiles that cannot be used are said as such", "[cli][hardening]") {
  const std::string dir = scratch().string();
  write_file(dir + "/untyped-config.json", "{\"hidden_size\": 4096, \"num_hidden_layers\": 32}");
  write_file(dir + "/touched.db", "");
  const std::vector<Refusal> cases{
      // A config.json without its family: not "$.schema: missing required field".
      {"predict --cluster dgx2 --model " + dir + "/untyped-config.json",
       dir + "/untyped-config.json: $.model_type: missing: a Hugging Face config.json names its family in "
             "model_type (or architectures)"},
      // predict's rule for the pin, not "nothing fits even on 192 nodes".
      {"search --cluster dgx-a100-80gb --model llama-7b --no-db --tp 3",
       "--tp: 3 does not divide the model's 32 heads"},
      {"search --cluster dgx-a100-80gb --model llama-7b --no-db --pp 1000", "--pp: 1000 stages for 32 layers"},
      // A read command does not create a database (and its directories) where none is.
      {"history --db " + dir + "/no-such/dir/x.db", "--db " + dir + "/no-such/dir/x.db: no such file"},
      // Nor writes its schema into an empty file (`touch x.db`): SQLite would.
      {"history --db " + dir + "/touched.db", "--db " + dir + "/touched.db: an empty file (0 bytes)"},
      // A device is no database: SQLite had left /dev/null-journal beside it.
      {"history --db /dev/null", "--db /dev/null: not a regular file (expected an SQLite results database)"},
      {"search --cluster dgx2 --model gpt2-1.5b --db /dev/null", "--db /dev/null: not a regular file"},
      {"run --cluster local-cpu --model tiny --no-db --hosts 'node1:4,node 2'", "--hosts: expected host[:slots]"},
      {"predict --cluster local-cpu --model tiny --profile " + dir, "--profile " + dir + ": not a regular file"},
  };
  check_refusals(cases);
  CHECK(!fs::exists(dir + "/no-such"));
  CHECK(fs::file_size(dir + "/touched.db") == 0);
  // A GPU plan where no GPU is: said before any rank starts (on a GPU machine the run goes ahead).
  if (!fs::exists("/dev/nvidia0")) {
    const std::string gpu_plan = dir + "/gpu-plan.json";
    REQUIRE(run_ztune("search --cluster dgx-a100-80gb --model tiny --no-db --no-simulate --top 1 --out " + gpu_plan)
                .exit_code == 0);
    const auto r = run_ztune("run " + gpu_plan + " --steps 1 --no-db");
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, StartsWith("ztune: error: " + gpu_plan + ": the plan is for dgx-a100-80gb's GPUs (the CUDA "
                                 "backend), and this machine has no NVIDIA device"));
    CHECK_THAT(r.out + r.err, !Contains("mpirun"));
    // Calibrating GPUs here had started a CUDA rank per GPU (256 for dgx2x16) on this machine.
    const auto cal = run_ztune("calibrate --cluster dgx2x16 --quick --no-db");
    CHECK(cal.exit_code == 2);
    CHECK_THAT(cal.err, StartsWith("ztune: error: --cluster dgx2x16: its GPUs are calibrated by the CUDA backend, "
                                   "and this machine has no NVIDIA device"));
  }
  // A plan file that embeds its model and cluster gives them, as it gives the
  // plan: --model beside it had been ignored (run trained the file's model).
  {
    const std::string cpu_plan = dir + "/cpu-plan.json";
    REQUIRE(run_ztune("search --cluster local-cpu --model tiny --no-db --no-simulate --top 1 --out " + cpu_plan)
                .exit_code == 0);
    for (const char* flag : {"--model tiny-llama", "--cluster local-cpu", "--seq 32", "--nodes 2"}) {
      const auto r = run_ztune("run " + cpu_plan + " " + flag + " --steps 1 --no-db");
      INFO(flag);
      CHECK(r.exit_code == 2);
      CHECK_THAT(r.err, Contains(": the plan file " + cpu_plan + " embeds its ") &&
                            Contains("(a flag beside it would be ignored)"));
    }
  }
  const auto r = run_command("ZTUNE_DATA_DIR=/nonexistent " + ztune_bin() + " list clusters");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: /nonexistent/clusters: no catalog directory"));
}

TEST_CASE("a run predicted over this machine's memory is refused before any rank starts", "[cli][hardening]") {
  // Audit: gpt2-1.5b on two CPU ranks (27 GiB each by the memory model) was
  // launched on a 23 GiB machine after a warning; the OOM killer ended a rank
  // ("signal 9") or, on a shared machine, any other process.
  // llama-70b's states alone are 16 bytes × 70e9 = 1,043 GiB a rank (ZeRO's
  // closed form, no sharding at dp 2 without ZeRO): over any machine's memory.
  double mem_total_gib = 0;
  {
    std::ifstream meminfo("/proc/meminfo");
    std::string key;
    double kb = 0;
    while (meminfo >> key >> kb)
      if (key == "MemTotal:") mem_total_gib = kb / 1048576.0;
      else meminfo.ignore(1 << 10, '\n');
  }
  REQUIRE(mem_total_gib > 0);
  REQUIRE(mem_total_gib < 2 * 1043);
  const auto r = run_ztune("run --cluster local-cpu --model llama-70b --dp 2 --micro-batch 1 --global-batch 2 "
                           "--steps 1 --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("ztune: error: the memory model puts the ranks this machine would run at ") &&
                        Contains("(2 ranks × ") && Contains("--force to launch it anyway"));
  CHECK_THAT(r.out + r.err, !Contains("mpirun"));
  // The machine's figure is at most its MemTotal (a cgroup limit only lowers it).
  const auto at = r.err.find("more than its ");
  REQUIRE(at != std::string::npos);
  const double said = std::stod(r.err.substr(at + 14));
  CHECK(said <= mem_total_gib + 0.01);
  CHECK(said > 0);
}

TEST_CASE("an output over the results database or a profile read is refused, the file untouched", "[cli][hardening]") {
  // Audit: `run --record r.db` and `search --out so.db` had replaced the
  // whole database with JSON (every stored search, run and profile gone).
  const std::string db = (scratch() / "kept.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("search --cluster local-cpu --model tiny --no-simulate --db '" + db + "'").exit_code == 0);
  const std::string before = read_file(db);
  const std::string profile = write_file("prior.json", read_file(std::string(ZTUNE_SOURCE_DIR) + "/data/profiles/cpu.json"));
  const std::vector<Refusal> cases{
      {"search --cluster local-cpu --model tiny --db '" + db + "' --out '" + db + "'",
       "--out " + db + ": is the file --db reads"},
      {"search --cluster local-cpu --model tiny --db '" + db + "' --out '" + db + "-wal'",  // there only while open
       "--out " + db + "-wal: is the file --db reads"},
      {"search --cluster local-cpu --model tiny --no-db --profile '" + profile + "' --out '" + profile + "'",
       "--out " + profile + ": is the file --profile reads"},
      {"run --model tiny --cluster local-cpu --dp 2 --steps 1 --db '" + db + "' --record '" + db + "'",
       "--record " + db + ": is the file --db reads"},
      {"run --model tiny --cluster local-cpu --dp 2 --steps 1 --no-db --profile '" + profile + "' --record '" +
           profile + "'",
       "--record " + profile + ": is the file --profile reads"},
      {"calibrate --cluster local-cpu --quick --db '" + db + "' --out '" + db + "'", "--out " + db + ": is the file --db reads"},
      {"calibrate --cluster local-cpu --quick --db '" + db + "' --keep-measurements '" + db + "'",
       "--keep-measurements " + db + ": is the file --db reads"},
  };
  check_refusals(cases);
  CHECK(read_file(db) == before);
  CHECK(nlohmann::json::parse(read_file(profile)).at("schema") == "ztune.profile/1");
}

TEST_CASE("export refuses a CPU plan and warns of one that does not fit", "[cli][hardening]") {
  const std::string dir = scratch().string();
  const std::string cpu_plan = dir + "/cpu-plan.json", big_plan = dir + "/big-plan.json";
  REQUIRE(run_ztune("search --cluster local-cpu --model tiny --no-db --no-simulate --top 1 --out " + cpu_plan)
              .exit_code == 0);
  auto r = run_ztune("export " + cpu_plan + " --format deepspeed");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: " + cpu_plan + ": $.cluster: the plan is for local-cpu's CPU ranks"));
  // 64 sequences of llama-7b per micro-batch on an 80 GB GPU: predicted far past it.
  REQUIRE(run_ztune("search --cluster dgx-a100-80gb --model llama-7b --no-db --no-simulate --top 1 --out " + big_plan)
              .exit_code == 0);
  auto doc = nlohmann::json::parse(read_file(big_plan));
  doc["plan"]["micro_batch"] = 64;
  doc["plan"]["grad_accum"] = 1;
  doc["plan"]["global_batch"] = 64 * doc["plan"]["dp"].get<int>();
  write_file(big_plan, doc.dump());
  r = run_ztune("export " + big_plan + " --format deepspeed --out " + dir + "/ds.json");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("warning: " + big_plan + ": the memory model puts this plan at") &&
                        Contains("the engine may run out of memory"));
}

// The fsdp engine prices FSDP's default bf16 reduction unless the plan states
// one; torchtitan reduces in fp32 only, and under a pipeline (ZeRO-3 held
// through the step) keeps each stage's whole gradients in it: 2 bytes a
// parameter more. The export's memory check counts the plan as torchtitan
// runs it. Oracle: the search's own best plan, which fits as priced.
TEST_CASE("torchtitan export warns of a pipelined ZeRO-3 plan that fits only with bf16 gradients",
          "[cli][hardening][export]") {
  const std::string plan = scratch().string() + "/held-405b.json";
  REQUIRE(run_ztune("search --cluster dgx-h100x128 --nodes 64 --model llama-405b --engine fsdp --tp 8 --pp 8 "
                    "--zero 3 --global-batch 256 --no-db --no-simulate --top 1 --out " + plan)
              .exit_code == 0);
  const auto priced = run_ztune("predict --plan " + plan + " --engine fsdp --json");
  REQUIRE(priced.exit_code == 0);
  REQUIRE(nlohmann::json::parse(priced.out)["memory"]["fits_gpu"].get<bool>());
  const auto r = run_ztune("export " + plan + " --format torchtitan --out " + scratch().string() + "/job.toml");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("warning: " + plan + ": the memory model puts this plan at") &&
                        Contains("as torchtitan runs it, its gradients reduced in fp32"));
  CHECK_THAT(r.out, Contains("keeps each stage's whole gradients in fp32"));
}

TEST_CASE("memory: DeepSpeed's host estimate for a billion GPUs is its huge number, not a wrapped negative",
          "[cli][hardening]") {
  const auto r = run_ztune("memory --model llama-7b --gpus 1024000000 --nodes 1000000 --json");
  REQUIRE(r.exit_code == 0);
  for (const auto& row : nlohmann::json::parse(r.out).at("rows")) {
    const auto& ds = row.at("deepspeed");
    if (ds.is_null()) continue;
    CHECK(ds.at("host_bytes_per_node").get<double>() >= 0);
  }
}

TEST_CASE("a cluster rate or latency past any hardware is exit 2 naming the field", "[cli][hardening]") {
  auto doc = nlohmann::json::parse(read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/clusters/dgx-a100-80gb.json"));
  doc["fabric"]["intra_node"]["latency_us"] = 1e308;
  const std::string path = (scratch() / "slow-link.json").string();
  write_file(path, doc.dump());
  const auto r = run_ztune("predict --cluster " + path + " --model llama-7b --tp 2 --micro-batch 1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: " + path) &&
                        Contains("$.fabric.intra_node.latency_us: expected a number >= 0 and at most 1e+06"));
}

TEST_CASE("flags: --threads beyond what a machine starts is refused before anything runs", "[cli][hardening]") {
  auto r = run_ztune("run --cluster local-cpu --model tiny --threads 100000");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: --threads: expected a thread count from 1 to 1024, got \"100000\""));
  r = run_ztune("search --cluster dgx2x16 --model 100b --threads 100000 --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--threads: expected a thread count from 1 to 1024"));
}

TEST_CASE("flags: --top and --simulate-top 2147483647 are clamped to the plans that exist", "[cli][hardening]") {
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --top 2147483647 --simulate-top 2147483647 "
                       "--no-db --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("plans").size() > 10);  // more than the default 10: all that fit
  CHECK(j.at("plans").size() <= j.at("feasible").get<std::size_t>());
}

TEST_CASE("a node count whose doubling overflows int stays within bounds", "[cli][hardening]") {
  // 50,000 DGX-2 nodes: the "more GPUs" hint doubled the node count 12 times
  // and printed "exceeds the cluster's -1018167296 devices".
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = run_ztune("search --cluster dgx2x16 --model 100b --nodes 50000 --no-simulate --no-db");
  INFO(r.out << r.err);
  CHECK((r.exit_code == 0 || r.exit_code == 1));
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60));
  CHECK(r.err.find("-10") == std::string::npos);
  CHECK_THAT(r.out, Contains("800000 ×") || Contains("800,000"));
}

TEST_CASE("flags: a huge --global-batch is searched in bounded memory and time", "[cli][hardening]") {
  // 2^28 made the simulator build a graph of every one of 524,288 micro-batches
  // (1.6 GB); 2^32 cast a micro-batch divisor to int 0 and died of SIGFPE. Under
  // a 1 GB address-space limit, each finishes within seconds.
  for (const char* gb : {"268435456", "4294967296"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_command(in_subshell("ulimit -v 1000000; " + ztune_bin() +
                                           " search --cluster dgx2x16 --model gpt2-1.5b --no-db --global-batch " + gb));
    INFO(gb << ": " << r.err);
    CHECK(r.exit_code == 0);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30));
    CHECK_THAT(r.out, Contains("micro-batches per step; the simulator builds at most 65536"));
  }
  auto r = run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-db --global-batch 1099511627777");
  CHECK(r.exit_code == 2);
  // The plan file's bound (2^40, plan.hpp), said as the flag's range.
  CHECK_THAT(r.err, StartsWith("ztune: error: --global-batch: expected a sequence count from 1 to 1099511627776, "
                               "got \"1099511627777\""));
  r = run_ztune("predict --cluster dgx2 --model gpt2-1.5b --global-batch 4294967296");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: --global-batch: 4294967296 / (micro-batch × dp = 16) is 268435456 "
                               "accumulation steps; a plan holds at most 16777216"));
  r = run_ztune("predict --cluster dgx2 --model gpt2-1.5b --global-batch 2097152 --simulate");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--simulate: plan ") && Contains("has 131072 micro-batches per step; the simulator builds "
                                                             "at most 65536"));
}

// ---------------------------------------------------------------- files

TEST_CASE("1e309 in a cluster file is exit 2 naming the file, line and field", "[cli][hardening]") {
  auto text = read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/clusters/dgx2x16.json");
  const auto at = text.find("\"nodes\": 16");
  REQUIRE(at != std::string::npos);
  text.replace(at, 11, "\"nodes\": 1e309");
  const auto path = write_file("huge.json", text);
  const auto r = run_ztune("predict --cluster '" + path + "' --model 100b --tp 16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: " + path + ":") && Contains(": $.nodes: number 1e309 is out of range"));
}

TEST_CASE("100,000 levels of nesting in a model file is exit 2, not SIGSEGV", "[cli][hardening]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  const auto path = write_file("deep-model.json", "{\"schema\": \"ztune.model/1\", \"layers\": " + deep + "}");
  const auto r = run_ztune("predict --cluster dgx2x16 --model '" + path + "' --tp 16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: " + path + ": $.layers[0]") && Contains("nested deeper than 64"));
  CHECK(r.err.size() < 1000);
}

TEST_CASE("a 300-byte GPU name is exit 2 naming the field", "[cli][hardening]") {
  auto text = read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/clusters/dgx2x16.json");
  const auto at = text.find("\"V100-SXM3-32GB\"");
  REQUIRE(at != std::string::npos);
  text.replace(at, 16, "\"" + std::string(300, 'V') + "\"");
  const auto path = write_file("long-gpu.json", text);
  const auto r = run_ztune("predict --cluster '" + path + "' --model 100b --tp 16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("$.node.gpu.name: no hardware profile for GPU \"VVVV"));
  CHECK(r.err.find("filesystem") == std::string::npos);
}

TEST_CASE("a FIFO given as a plan, cluster or export input is refused at once", "[cli][hardening]") {
  const fs::path fifo = scratch() / "input.fifo";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::string f = "'" + fifo.string() + "'";
  for (const std::string& args :
       {"predict --cluster dgx2x16 --model 100b --plan " + f, "export --format deepspeed " + f,
        "predict --cluster " + f + " --model 100b --tp 16"}) {
    const auto t0 = std::chrono::steady_clock::now();
    // `timeout` so that a regression fails the test instead of hanging it.
    const auto r = run_command("timeout 20 " + ztune_bin() + " " + args);
    require_quick_exit_2(r, std::chrono::steady_clock::now() - t0);
    CHECK_THAT(r.err, Contains(fifo.string() + ": is a FIFO (named pipe), expected a regular JSON file"));
  }
  fs::remove(fifo);
}

// ---------------------------------------------------------------- derived times

namespace {

/// dgx2x16 with its inter-node bandwidth replaced by `bw`.
std::string cluster_with_inter_bandwidth(const std::string& bw) {
  auto text = read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/clusters/dgx2x16.json");
  const auto at = text.find("\"bandwidth_gbps\": 12.5");
  REQUIRE(at != std::string::npos);
  text.replace(at, 22, "\"bandwidth_gbps\": " + bw);
  return write_file("bw-" + bw + ".json", text);
}

}  // namespace

TEST_CASE("a bandwidth of 5e-324 is exit 2 naming the file and field, not iteration inf", "[cli][hardening]") {
  const auto path = cluster_with_inter_bandwidth("5e-324");
  const std::string db = (scratch() / "inf.db").string();
  const std::string plan = "--model gpt2-1.5b --zero 1 --micro-batch 2 --precision fp16";
  for (const std::string& args : {"predict --cluster '" + path + "' " + plan,
                                  "predict --cluster '" + path + "' " + plan + " --simulate",
                                  "search --cluster '" + path + "' --model gpt2-1.5b --no-simulate --db '" + db + "'",
                                  "search --cluster '" + path + "' --model gpt2-1.5b --db '" + db + "'"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = run_command("timeout 60 " + ztune_bin() + " " + args);
    require_quick_exit_2(r, std::chrono::steady_clock::now() - t0);
    // Refused where it is read (it was found later, as an infinite dp_comm): the
    // cluster reader's floor under a rate times divide by.
    CHECK_THAT(r.err, StartsWith("ztune: error: " + path + ": $.fabric.inter_node.bandwidth_gbps: expected a number "
                                 "from 1e-06 to 1e+06, got 4.94066e-324"));
    CHECK(r.out.find("inf") == std::string::npos);
  }
  // Nothing was stored: the database was not even created.
  CHECK(!fs::exists(db));
}

TEST_CASE("a profile efficiency of 5e-324 is exit 2 naming the field", "[cli][hardening]") {
  // The shipped profile with its HBM efficiency replaced (whatever the fit set it to).
  auto doc = nlohmann::json::parse(read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/profiles/v100.json"));
  REQUIRE(doc.at("memory_bound").contains("bandwidth_efficiency"));
  std::string text = doc.dump(2);
  const std::string key = "\"bandwidth_efficiency\": ";
  const auto at = text.find(key, text.find("\"memory_bound\""));
  REQUIRE(at != std::string::npos);
  const auto end = text.find_first_of(",\n}", at + key.size());
  text.replace(at, end - at, key + "5e-324");  // written as text: a double would round it
  const auto profile = write_file("v100-tiny-efficiency.json", text);
  const auto r = run_command("timeout 60 " + ztune_bin() + " predict --cluster dgx2x16 --model gpt2-1.5b --zero 1 " +
                             "--micro-batch 2 --precision fp16 --simulate --profile '" + profile + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(profile) && Contains("$.memory_bound.bandwidth_efficiency: expected a fraction in (0, 1] "
                                                  "of at least 1e-06, got 4.94066e-324"));
}

// ---------------------------------------------------------------- export

TEST_CASE("a profile figure past any hardware is exit 2 naming the field, as a cluster file's is", "[cli][hardening]") {
  // Each had been read, then priced: a 300-digit iteration time, "0 tokens/s",
  // "inf days", or a -nan that blamed the profile's inside name.
  struct Case {
    std::string section, key;
    nlohmann::json value;
    std::string said;
  };
  for (const auto& c : std::vector<Case>{
           {"memory_bound", "kernel_launch_us", 1.7e308, "$.memory_bound.kernel_launch_us: expected a number >= 0 and at most 1e+06"},
           {"fabric", "base_latency_us", 1e300, "$.fabric.inter_node.base_latency_us: expected a number >= 0 and at most 1e+06"},
           {"measured", "hbm_bandwidth_gbps", 1e-300, "$.measured.hbm_bandwidth_gbps: expected a number from 1e-06 to 1e+06"},
           {"measured", "peak_tflops_fp32", 1e300, "$.measured.peak_tflops_fp32: expected a number > 0 and at most 1e+06"},
           {"gemm", "efficiency_by_flops", 1e300, "$.gemm.efficiency_by_flops[0]: expected a size (FLOPs of one GEMM) from 1 to 1e+18"}}) {
    auto doc = nlohmann::json::parse(read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/profiles/h100.json"));
    if (c.section == "fabric") doc["fabric"]["inter_node"][c.key] = c.value;
    else if (c.section == "measured") doc["measured"] = {{"cluster", "dgx-h100x4"}, {c.key, c.value}};
    else if (c.key == "efficiency_by_flops") doc["gemm"][c.key][0][0] = c.value;
    else doc[c.section][c.key] = c.value;
    const auto profile = write_file("h100-" + c.key + ".json", doc.dump(2));
    const auto r = run_command("timeout 60 " + ztune_bin() + " predict --cluster dgx-h100x4 --model llama-7b --profile '" +
                               profile + "'");
    INFO(c.key << "\n" << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(profile + ": " + c.said));
  }
  // Figures measured on another machine are said where they are applied.
  auto doc = nlohmann::json::parse(read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/profiles/h100.json"));
  doc["measured"] = {{"cluster", "dgx2"}, {"hbm_bandwidth_gbps", 1000}};
  const auto elsewhere = write_file("h100-measured-on-dgx2.json", doc.dump(2));
  const auto r = run_command(ztune_bin() + " predict --cluster dgx-h100x4 --model llama-7b --profile '" + elsewhere + "'");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("note     profile h100 (" + elsewhere + ") was measured on cluster dgx2: its figures "
                             "{\"hbm_bandwidth_gbps\":1000.0} replace dgx-h100x4's"));
}

TEST_CASE("export refuses bucket sizes a DeepSpeed integer cannot hold", "[cli][hardening]") {
  auto pf = nlohmann::json::parse(read_file(plan_file()));
  for (const char* v : {"1e308", "1e-7"}) {
    pf["plan"]["communication"]["reduce_bucket_elems"] = nlohmann::json::parse(v);
    const auto path = write_file(std::string("bucket-") + v + ".json", pf.dump(2));
    const auto r = run_ztune("export --format deepspeed '" + path + "'");
    INFO(v << ": " << r.out << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(path) && Contains("$.plan.communication.reduce_bucket_elems: expected a number in [1, "));
    CHECK(r.out.find("-9223372036854775808") == std::string::npos);
  }
}

// ---------------------------------------------------------------- writes

TEST_CASE("stdout on a full disk is exit 2 with the reason", "[cli][hardening]") {
  const std::string db = (scratch() / "full.db").string();
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  const std::vector<std::string> commands{"list clusters", "search --cluster dgx2x16 --model gpt2-1.5b --no-db",
                                          "search --cluster dgx2x16 --model gpt2-1.5b --no-db --json",
                                          "export --format deepspeed '" + plan_file() + "'",
                                          "history --db '" + db + "'", "history show 1 --db '" + db + "'"};
  for (const auto& args : commands) {
    const auto r = run_command(in_subshell(ztune_bin() + " " + args + " >/dev/full"));
    INFO(args << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("ztune: error: writing standard output failed: No space left on device"));
  }
}

TEST_CASE("export --out on a full disk is exit 2 naming the file", "[cli][hardening]") {
  const auto r = run_ztune("export --format deepspeed '" + plan_file() + "' --out /dev/full");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: --out /dev/full: cannot write the file: No space left on device"));
  const auto m = run_ztune("export --format megatron '" + plan_file() + "' --out /dev/full");
  CHECK(m.exit_code == 2);
}

TEST_CASE("export --format megatron --out writes a script to run, taking the flags left to set", "[cli][hardening]") {
  // It had been written 0644, without "$@": the tokenizer and data flags the
  // export says to add meant editing the file.
  const std::string script = (scratch() / "launch.sh").string(), plan = (scratch() / "plan-megatron.json").string();
  fs::remove(script);
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --engine megatron --no-db --no-simulate --top 1 --out '" +
                    plan + "'").exit_code == 0);
  const auto r = run_ztune("export '" + plan + "' --out '" + script + "'");  // megatron: the plan's engine
  REQUIRE(r.exit_code == 0);
  CHECK((fs::status(script).permissions() & fs::perms::owner_exec) != fs::perms::none);
  const std::string text = read_file(script);
  CHECK_THAT(text, StartsWith("#!/bin/sh\n") && EndsWith(" \"$@\"\n"));
  // The shell reads it (syntax only: nothing is launched).
  CHECK(run_command("sh -n '" + script + "'").exit_code == 0);
}

TEST_CASE("an output the disk cannot take leaves the previous file whole, with the reason", "[cli][hardening]") {
  // A file-size limit (dash's ulimit -f counts 512-byte blocks) makes write(2)
  // fail part-way with EFBIG, as a full disk does; the files were truncated
  // before their new contents were written, and SIGXFSZ killed ztune silently.
  const std::string out = (scratch() / "kept_plan.json").string();
  const std::string sh = (scratch() / "kept_export.sh").string();
  write_file(out, "the previous plan file\n");
  write_file(sh, "the previous export\n");
  const auto s = run_command("ulimit -f 1; " + ztune_bin() +
                             " search --cluster dgx2x16 --model gpt2-1.5b --no-db --no-simulate --top 1 --out '" +
                             out + "'");
  CHECK(s.exit_code == 2);
  CHECK_THAT(s.err, Contains("--out " + out + ": cannot write the file: File too large"));
  CHECK(read_file(out) == "the previous plan file\n");
  const auto e = run_command("ulimit -f 1; " + ztune_bin() + " export --format deepspeed '" + plan_file() +
                             "' --out '" + sh + "'");
  CHECK(e.exit_code == 2);
  CHECK_THAT(e.err, Contains("--out " + sh + ": cannot write the file: File too large"));
  CHECK(read_file(sh) == "the previous export\n");
  std::size_t left = 0;
  for (const auto& f : fs::directory_iterator(scratch()))
    left += f.path().filename().string().find(".tmp.") != std::string::npos ? 1 : 0;
  CHECK(left == 0);
}

TEST_CASE("a reader that goes away ends ztune quietly", "[cli][hardening]") {
  // `head -c 1` closes the pipe after one byte; ztune must not print an error.
  auto r = run_command(in_subshell(ztune_bin() + " list clusters | head -c 1"));
  CHECK(r.out.size() == 1);
  CHECK(r.err.find("ztune: error") == std::string::npos);
  // With SIGPIPE ignored by the parent the write fails with EPIPE instead: still
  // quiet, and ended as SIGPIPE would (128 + 13). The reader is gone before ztune writes.
  r = run_command(in_subshell("trap '' PIPE; (sleep 0.3; " + ztune_bin() +
                              " list clusters; echo \"rc=$?\" >&2) | true"));
  CHECK(r.err == "rc=141\n");
}

// ---------------------------------------------------------------- database rows

namespace {

void exec_sql(const std::string& db, const std::string& sql) {
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(h, sql.c_str(), nullptr, nullptr, &err);
  INFO((err != nullptr ? err : ""));
  sqlite3_free(err);
  sqlite3_close(h);
  REQUIRE(rc == SQLITE_OK);
}

}  // namespace

TEST_CASE("the commands that read the results database create and lay out none", "[cli][hardening]") {
  const std::string dir = (scratch() / "readers").string();
  fs::create_directories(dir);
  // The user's own database before any command wrote it: nothing stored yet,
  // an answer (exit 0) that creates neither the file nor its directory.
  const std::string xdg = "XDG_DATA_HOME='" + dir + "/xdg' " + ztune_bin() + " ";
  auto r = run_command(xdg + "history");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("(not there yet: search, run and calibrate create it)") && Contains("  none"));
  r = run_command(xdg + "history --json");
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("searches").empty());
  CHECK(j.at("runs_stored") == 0);
  r = run_command(xdg + "calibrate --report --cluster local-cpu");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("does not exist yet"));
  r = run_command(xdg + "history show 1");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(dir + "/xdg/ztune/results.db: no such file"));
  CHECK(!fs::exists(dir + "/xdg"));
  // The default database is named as such: the user gave no --db.
  fs::create_directories(dir + "/xdg/ztune");
  { std::ofstream touched(dir + "/xdg/ztune/results.db"); }
  r = run_command(xdg + "history");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("the default results database " + dir + "/xdg/ztune/results.db: an empty file (0 bytes)"));
  CHECK_THAT(r.err, !Contains("--db " + dir));
  fs::remove_all(dir + "/xdg");
  // An SQLite file with no tables: a writer would lay the schema out in it.
  const std::string bare = dir + "/bare.db";
  exec_sql(bare, "CREATE TABLE t(x); DROP TABLE t;");
  const std::string before = ztune::test::read_bytes(bare);
  REQUIRE(!before.empty());
  for (const std::string& args : {"history --db " + bare, "history show s1 --db " + bare,
                                  "calibrate --report --cluster local-cpu --db " + bare}) {
    r = run_ztune(args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("--db " + bare + ": an SQLite database without ztune's tables, not yet a results "
                                                "database (search, run and calibrate create one in it); left as it is"));
  }
  CHECK(ztune::test::read_bytes(bare) == before);
  r = run_ztune("calibrate --report --cluster local-cpu --db " + dir + "/none.db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--db " + dir + "/none.db: no such file"));
  CHECK(!fs::exists(dir + "/none.db"));
}

TEST_CASE("damage deep in a results database, past what opening it reads, is said with the salvage", "[cli][hardening]") {
  // The open checks the first pages; a page overwritten further in surfaced
  // later as SQLite's bare "database disk image is malformed".
  const std::string db = (scratch() / "deep-damage.db").string();
  fs::remove(db);
  for (int i = 0; i < 4; ++i)
    REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  REQUIRE(run_ztune("history --db '" + db + "'").exit_code == 0);  // merges the WAL into the file
  const auto size = fs::file_size(db);
  REQUIRE(size > 16 * 4096);
  {
    std::fstream f(db, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 8 * 4096));
    const std::string junk(8 * 4096, '\xff');
    f.write(junk.data(), static_cast<std::streamsize>(junk.size()));
  }
  const auto r = run_ztune("history show 4 --db '" + db + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("malformed") && Contains("sqlite3 " + db + " .recover > recovered.sql"));
}

TEST_CASE("history says when --limit cut its list, and how many are stored", "[cli][hardening]") {
  // 20 of 301 stored searches had listed as if they were all (session-41 audit).
  const std::string db = (scratch() / "limit.db").string();
  fs::remove(db);
  for (int i = 0; i < 3; ++i)
    REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --top 1 --db '" + db + "'").exit_code == 0);
  auto r = run_ztune("history --limit 2 --db '" + db + "'");
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("Searches (newest first, 2 of 3; --limit 3 lists them all):") &&
                        Contains("Runs (newest first):"));
  CHECK_THAT(run_ztune("history --db '" + db + "'").out, Contains("Searches (newest first):"));
  r = run_ztune("history --limit 2 --json --db '" + db + "'");
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("searches").size() == 2);
  CHECK(j.at("searches_stored") == 3);
  CHECK(j.at("runs_stored") == 0);
}

TEST_CASE("history show of a row with malformed or misshapen JSON is exit 2 naming the row", "[cli][hardening]") {
  const std::string db = (scratch() / "damaged.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  REQUIRE(run_ztune("history show 1 --db '" + db + "'").exit_code == 0);

  exec_sql(db, "UPDATE searches SET options = '{\"top\": ' WHERE id = 1");
  auto r = run_ztune("history show 1 --db '" + db + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: " + db + " (search 1, column options):1:") && Contains("malformed JSON"));
  CHECK(r.out.empty());

  exec_sql(db, "UPDATE searches SET options = '{\"top\": 1e309}' WHERE id = 1");
  r = run_ztune("history show 1 --db '" + db + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(db + " (search 1, column options):1:") && Contains("$.top: number 1e309"));

  exec_sql(db, "UPDATE searches SET options = '{}' WHERE id = 1");
  exec_sql(db, "UPDATE models SET doc = '{\"no_name\": 1}'");
  r = run_ztune("history show 1 --db '" + db + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: " + db + ": search 1: the stored search has an unexpected shape"));
  CHECK(r.out.empty());
}

TEST_CASE("a number column holding inf, NaN or text is named by row and column, and the list shows the other rows",
          "[cli][hardening]") {
  // Audit 3: shown as "-inf s" and "-nan%" (null in --json) without a word.
  const std::string db = (scratch() / "inf.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  // Each edit (the other columns restored) and what is said of it. A
  // whole-number column holding text had read as 0 ("0/0 plans fit").
  struct Edit {
    std::string set, column, said;
  };
  for (const auto& e : std::vector<Edit>{
           {"elapsed_s = 9e999", "elapsed_s", "expected a finite number, got inf"},
           {"elapsed_s = -9e999", "elapsed_s", "expected a finite number, got -inf"},
           {"elapsed_s = 'fast'", "elapsed_s", "expected a number, got text"},
           {"elapsed_s = 1, space = 'lots'", "space", "expected a whole number, got text"}}) {
    exec_sql(db, "UPDATE searches SET " + e.set + " WHERE id = 1");
    INFO(e.set);
    const std::string why = "search 1: column \"" + e.column + "\": " + e.said;
    const auto show = run_ztune("history show 1 --db '" + db + "'");
    CHECK(show.exit_code == 2);
    CHECK_THAT(show.err, StartsWith("ztune: error: " + db) && Contains(why));
    // The list names the damaged row and its reason, and shows the other
    // rows as usual: one bad row had failed the whole list.
    const auto list = run_ztune("history --db '" + db + "'");
    INFO(list.out << list.err);
    CHECK(list.exit_code == 0);
    CHECK_THAT(list.out, Contains("  s1  damaged: " + why) && Contains("  s2  ") && Contains("gpt2-1.5b on dgx2x16"));
    CHECK_THAT(list.err, Contains("warning: " + db + ": 1 row(s) cannot be read whole"));
    const auto j = run_ztune("history --json --db '" + db + "'");
    REQUIRE(j.exit_code == 0);
    const auto doc = nlohmann::json::parse(j.out);
    REQUIRE(doc["searches"].size() == 2);
    CHECK(doc["searches"][0]["id"] == "s2");
    CHECK(doc["searches"][0]["feasible"].is_number());
    CHECK(doc["searches"][1] == nlohmann::json{{"id", "s1"}, {"damaged", why}});
  }
}

TEST_CASE("a stored run whose time is not > 0 lists as damaged, not as a negative time", "[cli][hardening]") {
  const std::string db = (scratch() / "negative.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("run --cluster local-cpu --model tiny --steps 2 --db '" + db + "'").exit_code == 0);
  exec_sql(db, "UPDATE runs SET measured_iteration_s = -5 WHERE id = 1");
  const auto r = run_ztune("history --db '" + db + "'");
  INFO(r.out << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("  r1  damaged: run 1: column \"measured_iteration_s\": expected a time > 0 s and at most "
                             "1e+06, got -5"));
  CHECK_THAT(r.out, !Contains("-5.000 s"));
  // Nor a time no run takes (printed as 300 digits before), nor a search's impossible figures.
  exec_sql(db, "UPDATE runs SET measured_iteration_s = 1e300 WHERE id = 1");
  CHECK_THAT(run_ztune("history --db '" + db + "'").out,
             Contains("  r1  damaged: run 1: column \"measured_iteration_s\": expected a time > 0 s and at most 1e+06, "
                      "got 1e+300"));
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --top 1 --db '" + db + "'").exit_code == 0);
  exec_sql(db, "UPDATE searches SET feasible = space + 5 WHERE id = 1");
  CHECK_THAT(run_ztune("history --db '" + db + "'").out,
             Contains("  s1  damaged: search 1: column \"feasible\": expected a count of plans that fit, at most the "
                      "space's"));
  exec_sql(db, "UPDATE searches SET feasible = 0 WHERE id = 1");
  exec_sql(db, "UPDATE candidates SET tokens_per_s = -100 WHERE search_id = 1");
  CHECK_THAT(run_ztune("history --db '" + db + "'").out,
             Contains("  s1  damaged: search 1: column \"tokens_per_s\": expected a throughput > 0"));
}

TEST_CASE("a results database whose version marker was reset is refused as such, untouched", "[cli][hardening]") {
  // It had failed half-way through a migration: "table clusters already exists".
  const std::string db = (scratch() / "reset-version.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  exec_sql(db, "PRAGMA user_version = 0");
  const std::string before = read_file(db);
  const auto r = run_ztune("history --db '" + db + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("holds tables under schema version 0 (PRAGMA user_version was reset") &&
                        Contains("the file was left untouched"));
  CHECK(read_file(db) == before);
}

TEST_CASE("a database row or an argument that is not UTF-8 is exit 2 naming it, not an abort", "[cli][hardening]") {
  const std::string db = (scratch() / "latin1.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  // Another program wrote Latin-1 into a text column: history's JSON must not abort.
  exec_sql(db, "UPDATE searches SET created_at = X'E9'");
  const std::string said = "column \"created_at\": expected UTF-8 text, byte 0xE9 at offset 0 is not";
  {
    const auto r = run_ztune("history show 1 --json --db '" + db + "'");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, StartsWith("ztune: error: " + db) && Contains(said));
  }
  // The list names the row as damaged, with the reason, in valid JSON.
  for (const char* args : {"history --json", "history"}) {
    const auto r = run_ztune(std::string(args) + " --db '" + db + "'");
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.err, Contains("1 row(s) cannot be read whole"));
    if (std::string(args) == "history --json")
      CHECK(nlohmann::json::parse(r.out).at("searches").at(0).at("damaged") == "search 1: " + said);
    else
      CHECK_THAT(r.out, Contains("s1  damaged: search 1: " + said));
  }
  // A Latin-1 file name reaches the database and --json as JSON text: refused by position up front.
  const auto r = run_ztune("search --cluster \"$(printf '/tmp/\\351.json')\" --model gpt2-1.5b --no-db");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, StartsWith("ztune: error: argument 3: byte 0xE9 at offset 5 is not UTF-8"));
}

TEST_CASE("a search waiting for another process's lock says so, then stores when it is released", "[cli][hardening]") {
  // A silent wait of up to 30 s had looked like a hang.
  const std::string db = (scratch() / "locked.db").string();
  fs::remove(db);
  const std::string search = "search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --top 1 --db '" + db + "'";
  REQUIRE(run_ztune(search).exit_code == 0);
  sqlite3* h = nullptr;
  REQUIRE(sqlite3_open(db.c_str(), &h) == SQLITE_OK);
  REQUIRE(sqlite3_exec(h, "BEGIN EXCLUSIVE", nullptr, nullptr, nullptr) == SQLITE_OK);
  std::thread release([h] {
    std::this_thread::sleep_for(std::chrono::milliseconds(3500));
    sqlite3_exec(h, "COMMIT", nullptr, nullptr, nullptr);
    sqlite3_close(h);
  });
  const auto r = run_ztune(search);
  release.join();
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("ztune: waiting for the results database " + db +
                             ": another process holds its lock (up to 30 s)"));
  CHECK_THAT(r.out, Contains("Stored as search 2"));
}

TEST_CASE("a results database named by a symbolic link to nothing says where the link points", "[cli][hardening]") {
  // SQLite had said only "unable to open database file".
  const fs::path link = scratch() / "dangling.db";
  fs::remove(link);
  fs::create_symlink("/nonexistent-dir/x.db", link);
  const auto r = run_ztune("search --cluster local-cpu --model tiny --no-simulate --db '" + link.string() + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--db " + link.string() + ": a symbolic link to /nonexistent-dir/x.db, which does not "
                             "exist"));
}

// A --db where no file can be made though the directory passes access(W_OK)
// (root's /proc): SQLite says only "unable to open database file"; the reason
// creating it fails is said beside it. As another user, the directory's own
// refusal is said instead.
TEST_CASE("a results database that cannot be created says why", "[cli][hardening]") {
  const auto r = run_ztune("search --cluster local-cpu --model tiny --no-simulate --db /proc/ztune-x.db");
  CHECK(r.exit_code == 2);
  INFO(r.err);
  CHECK_THAT(r.err, Contains("/proc/ztune-x.db: cannot open the results database: unable to open database file (") &&
                        (Contains("(cannot create /proc/ztune-x.db: No such file or directory") ||
                         Contains("cannot be written by this user")));
}

TEST_CASE("history show takes an id of digits only, as it reads them", "[cli][hardening]") {
  const std::string db = (scratch() / "ids.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  CHECK(run_ztune("history show 1 --db '" + db + "'").exit_code == 0);
  for (const char* id : {"' 1'", "'1 '", "+1", "s+1", "0x1"}) {
    const auto r = run_ztune(std::string("history show ") + id + " --db '" + db + "'");
    INFO(id << ": " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("expected a search id (12 or s12), a run id (r3) or a profile id (p2)"));
  }
}

TEST_CASE("history show pN prints a stored profile's figures, and --json the file --profile reads", "[cli][hardening]") {
  // `history` lists profiles by pN; show had refused those ids. A search stores
  // the profile it priced with: dgx2x16's, data/profiles/v100.json.
  const std::string db = (scratch() / "profile-ids.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --db '" + db + "'").exit_code == 0);
  const auto shipped = nlohmann::json::parse(read_file(std::string(ZTUNE_SOURCE_DIR) + "/data/profiles/v100.json"));
  auto r = run_ztune("history show p1 --db '" + db + "'");
  REQUIRE(r.exit_code == 0);
  const auto intra = shipped.at("fabric").at("intra_node");
  char expected[128];
  std::snprintf(expected, sizeof expected, "intra-node: bus bandwidth %.0f%% of the links, %.1f us a step",
                100 * intra.at("busbw_efficiency").get<double>(), intra.at("latency_us").get<double>());
  CHECK_THAT(r.out, StartsWith("Profile p1 stored ") && Contains(expected) && Contains("(V100)"));
  CHECK_THAT(r.out, Contains("ztune history show p1 --json > p1.json, then --profile p1.json"));
  // --json is the document, which predict reads back as --profile.
  r = run_ztune("history show p1 --json --db '" + db + "'");
  REQUIRE(r.exit_code == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("schema") == "ztune.profile/1");
  CHECK(doc.at("gemm").at("waves") == shipped.at("gemm").at("waves"));
  const std::string file = write_file("p1.json", r.out);
  const auto with = run_ztune("predict --cluster dgx2x16 --model gpt2-1.5b --profile '" + file + "' --json");
  const auto without = run_ztune("predict --cluster dgx2x16 --model gpt2-1.5b --json");
  REQUIRE(with.exit_code == 0);
  // The same figures, through µs and back.
  CHECK(nlohmann::json::parse(with.out).at("time").at("iteration_s").get<double>() ==
        Approx(nlohmann::json::parse(without.out).at("time").at("iteration_s").get<double>()).epsilon(1e-12));
  r = run_ztune("history show p9 --db '" + db + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("history show p9: no profile 9 in " + db));
}

// ---------------------------------------------------------------- a database that refuses the store

namespace {

/// The search's printed plan table, its --out file and the refusal, as issue 20
/// asks: the output is out before the store, and the exit is non-zero.
void require_output_kept(const CommandResult& r, const std::string& plan, const std::string& db) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.out, Contains("Best plan: ") && Contains("Wrote the best plan to " + plan));
  CHECK_THAT(r.out, !Contains("Stored as search"));
  CHECK_THAT(r.err, StartsWith("ztune: error: the search was not stored in the results database: " + db));
  CHECK_THAT(r.err, Contains("the best plan is in " + plan));
  const auto doc = nlohmann::json::parse(read_file(plan));
  CHECK(doc.at("schema") == "ztune.planfile/1");
}

}  // namespace

TEST_CASE("a database that refuses the store keeps the printed result and --out", "[cli][hardening]") {
  const std::string db = (scratch() / "refusing.db").string();
  fs::remove(db);
  const std::string search = "search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --top 1 ";
  REQUIRE(run_ztune(search + "--db '" + db + "'").exit_code == 0);
  // Any writer is refused, root included (a permission bit is not, for root).
  exec_sql(db, "CREATE TRIGGER refuse BEFORE INSERT ON searches BEGIN SELECT RAISE(ABORT, 'no writes here'); END");
  const std::string plan = (scratch() / "refused-store-plan.json").string();
  fs::remove(plan);
  auto r = run_ztune(search + "--db '" + db + "' --out '" + plan + "'");
  require_output_kept(r, plan, db);
  CHECK_THAT(r.err, Contains("no writes here"));

  // Infeasible searches are stored too: the refusal is still said, after the explanation.
  r = run_ztune("search --cluster local-cpu --model llama-405b --gpus 1 --no-simulate --db '" + db + "'");
  CHECK_THAT(r.out, Contains("0 fit"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("the search was not stored") && !Contains("the best plan is in"));
}

TEST_CASE("a read-only database file or directory keeps the printed result and --out", "[cli][hardening]") {
  // Permission bits bind only a user without CAP_DAC_OVERRIDE: as root the
  // search runs as nobody (setpriv), in a directory nobody may write.
  std::string as_user;
  if (::geteuid() == 0) {
    if (std::system("command -v setpriv >/dev/null 2>&1") != 0) {
      WARN("skipped: running as root without setpriv, a read-only file cannot be made");
      return;
    }
    as_user = "setpriv --reuid=65534 --regid=65534 --clear-groups ";
  }
  const fs::path dir = scratch() / "read-only-db";
  fs::create_directories(dir);
  ::chmod(dir.c_str(), 0777);
  const std::string search = "search --cluster dgx2x16 --model gpt2-1.5b --no-simulate --top 1 ";

  const std::string file_db = (dir / "file-444.db").string();
  REQUIRE(run_ztune(search + "--db '" + file_db + "'").exit_code == 0);
  ::chmod(file_db.c_str(), 0444);
  const std::string plan = (dir / "plan-444.json").string();
  auto r = run_command(as_user + ztune_bin() + " " + search + "--db '" + file_db + "' --out '" + plan + "'");
  require_output_kept(r, plan, file_db);
  // Another user reads it as it stands: the stored search is listed, and no
  // -wal or -shm of that user's is left beside it (its owner could not write
  // past them: "attempt to write a readonly database").
  fs::remove(file_db + "-wal");
  fs::remove(file_db + "-shm");
  r = run_command(as_user + ztune_bin() + " history --db '" + file_db + "'");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("gpt2-1.5b on dgx2x16"));
  CHECK_FALSE(fs::exists(file_db + "-wal"));
  CHECK_FALSE(fs::exists(file_db + "-shm"));
  // Commits its owner has not merged yet (in -wal: a writer still open, or
  // killed) would be invisible to an immutable read: said, not hidden.
  if (!as_user.empty()) {
    sqlite3* owner = nullptr;
    REQUIRE(sqlite3_open(file_db.c_str(), &owner) == SQLITE_OK);
    REQUIRE(sqlite3_exec(owner, "PRAGMA wal_autocheckpoint = 0; UPDATE searches SET elapsed_s = elapsed_s + 1",
                         nullptr, nullptr, nullptr) == SQLITE_OK);
    REQUIRE(fs::file_size(file_db + "-wal") > 0);
    r = run_command(as_user + ztune_bin() + " history --db '" + file_db + "'");
    sqlite3_close(owner);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(" bytes of commits are in " + file_db + "-wal, not yet merged into the database") &&
                          Contains("ask its owner to run `ztune history --db " + file_db + "` once"));
  }

  const fs::path ro_dir = dir / "dir-555";
  fs::create_directories(ro_dir);
  const std::string dir_db = (ro_dir / "r.db").string();
  REQUIRE(run_ztune(search + "--db '" + dir_db + "'").exit_code == 0);
  fs::remove(dir_db + "-wal");
  fs::remove(dir_db + "-shm");
  ::chmod(dir_db.c_str(), 0666);
  ::chmod(ro_dir.c_str(), 0555);
  const std::string plan2 = (dir / "plan-555.json").string();
  r = run_command(as_user + ztune_bin() + " " + search + "--db '" + dir_db + "' --out '" + plan2 + "'");
  require_output_kept(r, plan2, dir_db);
  // Reading it there works: the WAL journal's files cannot be made beside it,
  // so it is read as it stands ("attempt to write a readonly database" before).
  r = run_command(as_user + ztune_bin() + " history --db '" + dir_db + "'");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("gpt2-1.5b on dgx2x16"));
  ::chmod(ro_dir.c_str(), 0755);
}

// Issue 23: a plan file written by search --out carries its cluster and model,
// so `predict --plan` needs neither flag; without them in the file, the flag
// that is missing is named with the file.
TEST_CASE("predict --plan takes the cluster and model from the plan file", "[cli][hardening]") {
  auto r = run_ztune("predict --plan '" + plan_file() + "'");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("gpt2-1.5b") && Contains("dgx2x16"));
  // --nodes applies to the file's cluster.
  r = run_ztune("predict --plan '" + plan_file() + "' --nodes 32");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("dgx2x16 (32 × 16"));
  auto j = nlohmann::json::parse(read_file(plan_file()));
  j.erase("cluster");
  const std::string bare = write_file("plan-without-cluster.json", j.dump());
  r = run_ztune("predict --plan '" + bare + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--cluster: required") && Contains("plan-without-cluster.json has no $.cluster"));
  r = run_ztune("predict --plan '" + bare + "' --cluster dgx2x16");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, !Contains("note:"));  // nothing embedded was replaced
  // A flag beside the file's own cluster or model predicts the plan there (a
  // what-if), and says so on stderr: the answer had been silently elsewhere.
  r = run_ztune("predict --plan '" + plan_file() + "' --cluster dgx-a100-80gb --nodes 32 --json");
  CHECK(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out).at("cluster") == "dgx-a100-80gb");
  CHECK_THAT(r.err, Contains("ztune: note: --cluster dgx-a100-80gb replaces the cluster dgx2x16 embedded in " +
                             plan_file()));
  r = run_ztune("predict --plan '" + plan_file() + "' --model gpt2-1.5b");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("ztune: note: --model gpt2-1.5b replaces the model gpt2-1.5b embedded in"));
}

TEST_CASE("a plan file keeps the engine it was searched for: predict prices it so, export takes its format",
          "[cli][hardening]") {
  // Reopened, a DeepSpeed plan had been priced as ztune's executor keeps its
  // states (21.9 against 24.6 GiB for 100b on dgx2x16), without a word.
  const std::string ds = (scratch() / "plan-deepspeed.json").string();
  REQUIRE(run_ztune("search --cluster dgx2x16 --model 100b --engine deepspeed --no-db --no-simulate --top 1 --json "
                    "--out '" + ds + "'").exit_code == 0);
  const auto doc = nlohmann::json::parse(read_file(ds));
  CHECK(doc.at("engine") == "deepspeed");
  auto total = [](const CommandResult& r) {
    return nlohmann::json::parse(r.out).at("memory").at("gpu").at("total_bytes").get<double>();
  };
  const auto reopened = run_ztune("predict --plan '" + ds + "' --json");
  const auto stated = run_ztune("predict --plan '" + ds + "' --engine deepspeed --json");
  const auto own = run_ztune("predict --plan '" + ds + "' --engine ztune --json");
  REQUIRE(reopened.exit_code == 0);
  REQUIRE(stated.exit_code == 0);
  REQUIRE(own.exit_code == 0);
  CHECK(nlohmann::json::parse(reopened.out).at("engine") == "deepspeed");
  CHECK(total(reopened) == total(stated));
  CHECK(total(own) != total(stated));  // ztune's executor counts its states otherwise
  CHECK_THAT(own.err, Contains("ztune: note: --engine ztune replaces the engine deepspeed the plan in " + ds));
  CHECK_THAT(stated.err, !Contains("note:"));
  // export: the format of the engine, unless --format says otherwise (noted).
  const auto exported = run_ztune("export '" + ds + "'");
  CHECK(exported.exit_code == 0);
  CHECK_THAT(exported.out + exported.err, Contains("--deepspeed_config ds_config.json"));
  const auto other = run_ztune("export --format torchtitan '" + ds + "'");
  CHECK_THAT(other.err, Contains("was searched for the deepspeed engine (its rules and memory); exported to torchtitan"));
  const auto own_plan = run_ztune("export '" + plan_file() + "'");  // searched for ztune's executor
  CHECK(own_plan.exit_code == 2);
  CHECK_THAT(own_plan.err, Contains("--format: required: " + plan_file() + " was searched for ztune's own executor"));
  // An fsdp plan torchtitan (its export) cannot train is said at the search.
  const auto gpt = run_ztune("search --cluster dgx2x16 --model 100b --engine fsdp --no-db --no-simulate --top 1");
  REQUIRE(gpt.exit_code == 0);
  CHECK_THAT(gpt.out, Contains("note: these plans are for PyTorch FSDP wrapped around 100b by hand: ztune export "
                               "--format torchtitan refuses the model ($.model.activation:"));
  const auto llama = run_ztune("search --cluster dgx-h100 --model llama-7b --engine fsdp --no-db --no-simulate --top 1");
  REQUIRE(llama.exit_code == 0);
  CHECK_THAT(llama.out, !Contains("by hand"));
  // An engine ztune does not know is refused naming the field.
  auto bad = doc;
  bad["engine"] = "colossal";
  const std::string unknown = write_file("plan-unknown-engine.json", bad.dump());
  const auto refused = run_ztune("predict --plan '" + unknown + "'");
  CHECK(refused.exit_code == 2);
  CHECK_THAT(refused.err, Contains(unknown + ": $.engine:"));
}

TEST_CASE("predict names the split degree the model cannot take, not the batch it leaves", "[cli][hardening]") {
  // 100b has 64 heads (data/models/100b.json): tp 3 divides neither them nor 256 GPUs.
  auto r = run_ztune("predict --cluster dgx2x16 --model 100b --tp 3");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--tp: 3 does not divide the model's 64 heads"));
  CHECK_THAT(r.err, !Contains("--global-batch"));
  // A dividing tp whose dp leaves devices idle says where the dp came from.
  r = run_ztune("predict --cluster dgx2x16 --model 100b --tp 16 --pp 3");
  CHECK(r.exit_code == 2);
  // The batch is the model file's, said as such (no --global-batch was passed).
  CHECK_THAT(r.err, Contains("the model's global_batch 1024 (100b's; --global-batch overrides it) is not a multiple "
                             "of micro-batch × dp = 5") &&
                        Contains("dp defaulted to the 256 devices / 48 model-parallel ways = 5, 16 devices idle"));
  // With no device idle the defaulted dp is said too.
  r = run_ztune("predict --cluster dgx2x16 --model 100b --tp 16 --global-batch 8");
  // And --min-gpus beyond the cluster, with no --max-gpus, names the cluster's count, not a flag never passed.
  const auto gpus = run_ztune("search --cluster dgx-h100 --model llama-7b --min-gpus 16 --no-db");
  CHECK(gpus.exit_code == 2);
  CHECK_THAT(gpus.err, Contains("--min-gpus: 16 exceeds the cluster's 8 devices") && !Contains("--max-gpus"));
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--global-batch: 8 is not a multiple of micro-batch × dp = 16") &&
                        Contains("dp defaulted to the 256 devices / 16 model-parallel ways = 16: pass --dp, or a "
                                 "--global-batch that 16 divides"));
}

TEST_CASE("predict and search say a Hugging Face config's sequence is its position limit", "[cli][hardening]") {
  const std::string config = std::string(ZTUNE_SOURCE_DIR) + "/tests/vocab/fixtures/hf/mistral-7b-v0.1/config.json";
  auto r = run_ztune("predict --cluster dgx-h100 --model '" + config + "' --zero 3 --recompute full --attention flash");
  CHECK_THAT(r.out, Contains("32768-token sequences") && Contains("maximum positions") && Contains("--seq N"));
  r = run_ztune("predict --cluster dgx-h100 --model '" + config + "' --seq 4096 --zero 3");
  CHECK_THAT(r.out, Contains("4096-token sequences") && !Contains("maximum positions"));
  r = run_ztune("search --cluster dgx-h100 --model '" + config + "' --no-db --no-simulate --top 1 --seq 4096");
  CHECK_THAT(r.out, Contains("ztune search: mistral-7b-v0.1 (4096-token sequences) on dgx-h100"));
}

// How far a stored search's best figure was to be trusted is kept with it
// (the validation data may change later): history show prints the band the
// search printed.
TEST_CASE("history show of a search prints the best plan's band as the search gave it", "[cli][history][accuracy]") {
  const std::string db = (scratch() / "band.db").string();
  fs::remove(db);
  const auto s = run_ztune("search --cluster dgx-h100 --model llama-7b --engine megatron --no-simulate --json --db '" +
                           db + "'");
  REQUIRE(s.exit_code == 0);
  const auto band = nlohmann::json::parse(s.out).at("accuracy").at("band").at("tokens_per_s");
  auto commas = [](double v) {  // 12345.6 -> "12,346"
    std::string digits = std::to_string(static_cast<long long>(std::llround(v)));
    for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(static_cast<std::size_t>(i), ",");
    return digits;
  };
  const std::string text = "best plan's band when searched: " + commas(band.at(0).get<double>()) + "-" +
                           commas(band.at(1).get<double>()) + " tokens/s (iteration ";
  const auto h = run_ztune("history show 1 --db '" + db + "'");
  REQUIRE(h.exit_code == 0);
  CHECK_THAT(h.out, Contains(text) && Contains("cross-validated on H100/megatron"));
  CHECK_THAT(h.out, !Contains("\"accuracy\""));  // not repeated among the options
  // A band widened for a plan beyond the runs says so when shown again.
  const double widening = nlohmann::json::parse(s.out).at("accuracy").at("cross_validated").at("band_widening");
  if (widening != 1) CHECK_THAT(h.out, Contains("widened 1.3x beyond the runs it was checked on"));
  else CHECK_THAT(h.out, !Contains("widened"));
}

// CLI11 converts integers with strtoll's base 0: --tp 010 had been tp 8, --tp 08
// "could not convert". The oracle: decimal, as a user writes it.
TEST_CASE("integer flags with leading zeros are decimal", "[cli][hardening]") {
  check_refusals({
      // Hex is not a count a user types: said, where CLI11 had read 0x10 as 16.
      {"search --cluster dgx2 --model gpt2-1.5b --no-db --max-plans 0x10",
       "--max-plans: expected a plan count from 1 to 9223372036854775807, got \"0x10\""},
      {"validate --worst 0x3", "--worst: expected a case count from 0 to 2147483647, got \"0x3\""},
      {"predict --cluster dgx-h100 --model llama-7b --tp 010", "--tp/--pp: tp×pp = 10 exceeds the cluster's 8 devices"},
      {"predict --cluster dgx-h100 --model llama-7b --tp=012", "--tp/--pp: tp×pp = 12 exceeds the cluster's 8 devices"},
      // A refused value is quoted as typed beside the decimal it was read as.
      {"predict --cluster dgx-h100 --model llama-7b --zero 04",
       "--zero: expected a ZeRO stage from 0 to 3, got \"4\" (given as 04)"},
      {"predict --cluster dgx-h100 --model llama-7b --micro-batch=00",
       "--micro-batch: expected a micro-batch size from 1 to 1048576, got \"0\" (given as 00)"},
  });
  for (const char* flags : {"--tp 08", "--tp=08 --pp 01", "--pp 2 --stage-layers 016 016"}) {
    const auto r = run_ztune(std::string("predict --cluster dgx-h100 --model llama-7b ") + flags);
    INFO(flags << ": " << r.err);
    CHECK(r.exit_code == 0);
  }
  CHECK_THAT(run_ztune("predict --cluster dgx-h100 --model llama-7b --tp 08").out, Contains("dp1×tp8×pp1"));
  CHECK_THAT(run_ztune("predict --cluster dgx-h100 --model llama-7b --pp 2 --stage-layers 010 022").out,
             Contains("stages:10+22"));
  // Only an option's own values: a plan file named 0042 after --steps 1 is
  // read as named (it had become ./42, another file or none).
  const fs::path dir = scratch() / "numbered";
  fs::create_directories(dir);
  REQUIRE(run_ztune("search --cluster local-cpu --model tiny --no-db --no-simulate --top 1 --out " +
                    (dir / "0042").string())
              .exit_code == 0);
  const auto r = run_command("cd " + dir.string() + " && " + ztune_bin() + " run --steps 1 0042 --no-db");
  INFO(r.err);
  CHECK(r.exit_code == 0);
  CHECK_FALSE(fs::exists(dir / "42"));
}

// An empty path (an unset shell variable) had meant "not given": --plan ""
// predicted the default plan, --profile "" used the default profile, --record ""
// kept no record, and export "" said ": cannot open file".
TEST_CASE("an empty path is refused naming its flag", "[cli][hardening]") {
  const std::string empty = "expected a path, got an empty one (an unset shell variable?)";
  check_refusals({
      {"predict --cluster dgx2 --model gpt2-1.5b --plan ''", "--plan: " + empty},
      {"predict --cluster dgx2 --model gpt2-1.5b --profile ''", "--profile: " + empty},
      {"search --cluster dgx2 --model gpt2-1.5b --no-db --profile ''", "--profile: " + empty},
      {"validate --dir ''", "--dir: " + empty},
      {"validate --profile ''", "--profile: " + empty},
      {"export ''", "plan: " + empty},
      {"run '' --no-db", "plan: " + empty},
      {"run --cluster local-cpu --model tiny --no-db --steps 1 --record ''", "--record: " + empty},
      {"run --cluster local-cpu --model tiny --no-db --steps 1 --checkpoint-dir ''", "--checkpoint-dir: " + empty},
      {"calibrate --cluster local-cpu --no-db --records ''", "--records: " + empty},
      {"calibrate --cluster local-cpu --no-db --measurements ''", "--measurements: " + empty},
      {"calibrate --cluster local-cpu --no-db --holdout-records ''", "--holdout-records: " + empty},
      {"run --cluster local-cpu --model tiny --no-db --steps 1 --data ''", "--data: " + empty},
      {"search --cluster local-cpu --model tiny --no-db --run --data ''", "--data: " + empty},
      // Not a directory: said as such, not "/dev/null/validation.json: cannot open file".
      {"validate --dir /dev/null", "--dir: /dev/null: not a directory"},
  });
}

// The shipped leave-one-source-out figures are data/validation's: with --dir
// naming another set they had been printed as that set's.
TEST_CASE("validate --dir of another set shows none of the shipped set's left-out figures", "[cli][hardening]") {
  const fs::path root = scratch() / "other-set";
  fs::create_directories(root);
  fs::copy(fs::path(ZTUNE_TEST_DATA_DIR) / "validation", root / "validation", fs::copy_options::recursive);
  fs::copy(fs::path(ZTUNE_TEST_DATA_DIR) / "clusters", root / "clusters", fs::copy_options::recursive);
  const auto other = run_ztune("validate --source TinyLlama --json --dir " + (root / "validation").string());
  REQUIRE(other.exit_code == 0);
  const auto j = nlohmann::json::parse(other.out);
  CHECK_THAT(j.value("loso_stale", std::string()), Contains("not --dir " + (root / "validation").string()));
  for (const auto& c : j.at("cells")) CHECK(c.at("loso_runs") == 0);
  const auto shipped = run_ztune("validate --source TinyLlama --json");
  REQUIRE(shipped.exit_code == 0);
  CHECK_FALSE(nlohmann::json::parse(shipped.out).contains("loso_stale"));
}

// A validation set's mistakes are said with where validation.json makes them:
// a misspelt metric or id prefixes no run has had dropped the source from the
// report at exit 0, and a missing cluster file was named only by its resolved path.
TEST_CASE("validate --dir: a source that selects nothing, an unknown metric and a missing cluster name the field",
          "[cli][hardening]") {
  const fs::path root = scratch() / "broken-set";
  fs::remove_all(root);
  fs::create_directories(root);
  fs::copy(fs::path(ZTUNE_TEST_DATA_DIR) / "validation", root / "validation", fs::copy_options::recursive);
  const fs::path spec = root / "validation" / "validation.json";
  const auto original = nlohmann::json::parse(read_file(spec.string()));
  // No ../clusters beside the copy: the first source with a cluster says so.
  auto r = run_ztune("validate --dir " + (root / "validation").string());
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(spec.string() + ": $.sources[") && Contains("../clusters/") &&
                        Contains(": no such file (paths are relative to the validation folder"));
  fs::copy(fs::path(ZTUNE_TEST_DATA_DIR) / "clusters", root / "clusters", fs::copy_options::recursive);
  auto broken = original;
  broken["sources"][0]["metrics"] = {"bogus"};
  std::ofstream(spec) << broken.dump(2);
  r = run_ztune("validate --dir " + (root / "validation").string());
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(spec.string() + ": $.sources[0].metrics[0]: unknown metric \"bogus\" (expected one of "));
  broken = original;
  broken["sources"][0]["id_prefixes"] = {"zzz_"};
  std::ofstream(spec) << broken.dump(2);
  r = run_ztune("validate --dir " + (root / "validation").string());
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(spec.string() + ": $.sources[0] (\"" + original["sources"][0]["name"].get<std::string>() +
                             "\"): selects no run of "));
  std::ofstream(spec) << original.dump(2);
  CHECK(run_ztune("validate --source TinyLlama --dir " + (root / "validation").string()).exit_code == 0);
}

// Flags and fields said as the user gives them (audit49 L2-L5): the flag a
// plan check names is one that exists, a qualifying flag without what it
// qualifies is refused rather than ignored, a block recomputation deeper than
// any chunk is refused, and a GPT-NeoX config without its MLP width says so.
TEST_CASE("flags that qualify a missing one, block counts past a chunk and a NeoX config without its MLP width",
          "[cli][hardening]") {
  const std::string base = "predict --cluster dgx-h100 --model llama-7b ";
  for (const auto& [args, said] : std::vector<std::pair<std::string, std::string>>{
           {"--sparse-attention fixed --sparse-block 16 --seq 8", "--sparse-block: 16 does not divide the sequence length 8"},
           {"--recompute-every 2", "--recompute-every: says how often torchtitan's layer checkpointing recomputes"},
           {"--freeze-step 5", "--freeze-step: 1-bit Adam's warm-up steps; needs --onebit-adam"},
           {"--recompute full --recompute-num-layers 1000",
            "--recompute-num-layers: 1000 layers of each model chunk, whose largest holds 32; expected at most 32"}}) {
    const auto r = run_ztune(base + args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains(said));
  }
  // The same with what they qualify: taken.
  CHECK(run_ztune(base + "--engine fsdp --recompute selective --recompute-policy alternate_layers --recompute-every 4")
            .exit_code == 0);
  CHECK(run_ztune(base + "--recompute full --recompute-num-layers 32").exit_code == 0);
  const fs::path dir = scratch() / "neox-no-ffn";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"model_type": "gpt_neox", "num_hidden_layers": 4, "hidden_size": 512,
    "num_attention_heads": 8, "vocab_size": 50304, "max_position_embeddings": 2048})";
  const auto r = run_ztune("predict --cluster dgx-h100 --model " + (dir / "config.json").string());
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("config.json") && Contains("intermediate_size"));
}

TEST_CASE("a plan on its own given as a plan file says how a plan file holds it", "[cli][hardening]") {
  const fs::path bare = scratch() / "bare-plan.json";
  std::ofstream(bare) << R"({"schema": "ztune.plan/1", "tp": 1, "pp": 1, "dp": 8})";
  const auto r = run_ztune("predict --plan " + bare.string());
  INFO(r.err);
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains(bare.string() + ": $.schema: expected \"ztune.planfile/1\", got \"ztune.plan/1\": this "
                                             "is a plan on its own"));
}

// A constraint ztune's own rows always keep, failing on a store, is damage whose
// pages still read (audit49: cell pointers overwritten on one page made an
// insert fail its foreign key): said as such, with the check and the salvage.
// The damage here is made by hand: a trigger that deletes each new search row.
TEST_CASE("a store that breaks a constraint ztune keeps says the database is likely damaged", "[cli][hardening]") {
  const std::string db = (scratch() / "vanishing-searches.db").string();
  fs::remove(db);
  REQUIRE(run_ztune("search --cluster dgx-h100 --model llama-7b --no-simulate --db " + db).exit_code == 0);
  exec_sql(db, "CREATE TRIGGER vanish AFTER INSERT ON searches BEGIN DELETE FROM searches WHERE id = NEW.id; END");
  const auto r = run_ztune("search --cluster dgx-h100 --model llama-7b --no-simulate --db " + db);
  INFO(r.err);
  CHECK_THAT(r.err, Contains("storing the search failed") && Contains("FOREIGN KEY constraint failed") &&
                        Contains("the database is likely damaged: `sqlite3 " + db + " 'PRAGMA integrity_check'`") &&
                        Contains(".recover > recovered.sql"));
}

// Both ends of a range are said with the whole range (docs49 L3: a 0 had read
// "expected a number > 0", a 1.5 the range), and run --json says why a run
// with --no-db was not stored (docs49 L6: null).
TEST_CASE("a fraction or share out of range at either end names the range, and run --json names --no-db",
          "[cli][hardening]") {
  auto cluster = nlohmann::json::parse(read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/clusters/dgx-h100.json"));
  cluster["fabric"]["intra_node"]["collective_efficiency"] = 0;
  const auto c = write_file("efficiency-0.json", cluster.dump(2));
  auto r = run_ztune("predict --cluster '" + c + "' --model llama-7b");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("$.fabric.intra_node.collective_efficiency: expected a fraction in (0, 1], got 0"));
  auto model = nlohmann::json::parse(read_file(std::string(ZTUNE_TEST_DATA_DIR) + "/models/llama-7b.json"));
  model["rotary_fraction"] = 0;
  const auto m = write_file("rotary-0.json", model.dump(2));
  r = run_ztune("predict --cluster dgx-h100 --model '" + m + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("$.rotary_fraction: expected a share of the head's channels in (0, 1], got 0"));
  r = run_ztune("run --cluster local-cpu --model tiny --dp 1 --micro-batch 2 --global-batch 2 --steps 1 --json --no-db");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(nlohmann::json::parse(r.out).at("not_stored_why") == "--no-db");
}
