// `ztune run` end to end on the tiny model with CPU ranks (issue 20, part 5):
// SIGTERM stops the whole job — no rank survives ztune — and its temporary
// directory goes with it; --checkpoint-every and --resume reproduce the losses
// of the uninterrupted run bit for bit (the single run is the oracle); where the
// run writes and what the worker would refuse are checked before mpirun starts.
// Needs mpirun: without it the executable exits 77 (skipped).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "run_command.hpp"

extern char** environ;

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Clock = std::chrono::steady_clock;

namespace {

fs::path scratch() {
  const fs::path dir = fs::temp_directory_path() / ("ztune-test-run-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The tiny model on 2 CPU ranks (data parallel), one thread each.
const std::string kPlan = "--model tiny --dp 2 --micro-batch 2 --global-batch 4 --no-db";

CommandResult ztune(const std::string& args) { return run_command(ztune_bin() + " run " + kPlan + " " + args); }

std::vector<double> losses_of(const fs::path& record) {
  return nlohmann::json::parse(slurp(record)).at("losses").get<std::vector<double>>();
}

// Live (not zombie) processes whose command line contains `needle`, each with its arguments.
std::vector<std::vector<std::string>> live_processes_with(const std::string& needle) {
  std::vector<std::vector<std::string>> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos || pid == std::to_string(::getpid())) continue;
    const std::string stat = slurp(e.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] == 'Z') continue;
    const std::string cmdline = slurp(e.path() / "cmdline");
    if (cmdline.find(needle) == std::string::npos) continue;
    std::vector<std::string> args;
    std::stringstream ss(cmdline);
    for (std::string a; std::getline(ss, a, '\0');) args.push_back(a);
    out.push_back(args);
  }
  return out;
}

// Starts `ztune run ARGS` in the background (stdout and stderr to files); its pid.
pid_t start_ztune(const std::string& run_args, const fs::path& out, const fs::path& err, const std::string& env = "") {
  std::vector<std::string> argv{"/bin/sh", "-c", env + "exec " + std::string(ZTUNE_BIN) + " run " + run_args};
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, "/bin/sh", &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// The live ztune-worker ranks whose command line holds `marker` (the job's --record).
std::vector<std::vector<std::string>> ranks_of(const std::string& marker) {
  auto ranks = live_processes_with(marker);
  ranks.erase(std::remove_if(ranks.begin(), ranks.end(),
                             [](const auto& a) { return a.empty() || a[0].find("ztune-worker") == std::string::npos; }),
              ranks.end());
  return ranks;
}

// Waits until `n` ranks of the job run (and `also` holds); false after 120 s.
bool wait_for_ranks(const std::string& marker, std::size_t n, const std::function<bool()>& also = [] { return true; }) {
  const auto start = Clock::now();
  while (Clock::now() - start < std::chrono::seconds(120)) {
    if (ranks_of(marker).size() == n && also()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// Whether nothing of the job runs any more, waiting up to `limit`.
bool gone_within(const std::string& marker, std::chrono::seconds limit) {
  const auto start = Clock::now();
  while (!live_processes_with(marker).empty()) {
    if (Clock::now() - start > limit) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return true;
}

}  // namespace

TEST_CASE("ztune run: SIGTERM stops every rank and removes the temporary directory", "[cli][run]") {
  const fs::path record = scratch() / "sigterm-record.json";  // unique: it marks this job's ranks
  const fs::path ckpt = scratch() / "sigterm-ckpt";
  const fs::path out = scratch() / "sigterm.out", err = scratch() / "sigterm.err";
  const pid_t pid = start_ztune(kPlan + " --steps 100000 --checkpoint-every 2 --checkpoint-dir " + ckpt.string() +
                                    " --record " + record.string(),
                                out, err);
  REQUIRE(pid > 0);

  // Training: both ranks up and a checkpoint committed.
  const bool up = wait_for_ranks(record.string(), 2, [&] { return fs::exists(ckpt / "latest"); });
  const auto ranks = ranks_of(record.string());
  INFO("stderr: " << slurp(err));
  REQUIRE(up);
  REQUIRE(ranks.size() == 2);
  REQUIRE(fs::exists(ckpt / "latest"));
  // The worker's plan file lives in ztune's temporary directory.
  REQUIRE(ranks[0].size() > 1);
  const fs::path temp_dir = fs::path(ranks[0][1]).parent_path();
  CHECK(temp_dir.filename().string().rfind("ztune-run-", 0) == 0);
  CHECK(fs::exists(temp_dir));

  REQUIRE(::kill(pid, SIGTERM) == 0);
  int status = 0;
  const auto killed = Clock::now();
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (Clock::now() - killed > std::chrono::seconds(30)) {
      ::kill(pid, SIGKILL);
      FAIL("ztune run did not end within 30 s of SIGTERM");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // ztune has exited: nothing of its job may still run.
  CHECK(live_processes_with(record.string()).empty());
  CHECK_FALSE(fs::exists(temp_dir));
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGTERM);
  const std::string e = slurp(err);
  CHECK_THAT(e, Contains("ztune run: interrupted (SIGTERM)"));
  CHECK_THAT(e, Contains("--resume " + ckpt.string()));
  CHECK(fs::exists(ckpt / "latest"));  // the user's checkpoints stay
}

// A run that does not finish is stored with its status and reason (history
// had shown nothing of a job killed mid-run), and a database the run could not
// be stored in is refused before anything is launched (it had trained first).
TEST_CASE("ztune run: an interrupted run is stored as such and a bad --db is refused before launch", "[cli][run][db]") {
  const std::string plan = "--model tiny --dp 2 --micro-batch 2 --global-batch 4";
  const fs::path db = scratch() / "unfinished.db";
  const fs::path record = scratch() / "unfinished-record.json";
  const pid_t pid = start_ztune(plan + " --steps 100000 --db " + db.string() + " --record " + record.string(),
                                scratch() / "unfinished.out", scratch() / "unfinished.err");
  REQUIRE(pid > 0);
  REQUIRE(wait_for_ranks(record.string(), 2));
  // A few steps done first: what it finished is said and stored with it.
  for (int i = 0; i < 600 && slurp(scratch() / "unfinished.out").find("step 3 loss") == std::string::npos; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  REQUIRE(::kill(pid, SIGINT) == 0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 128 + SIGINT);
  CHECK_THAT(slurp(scratch() / "unfinished.err"), Contains("ztune run: interrupted (SIGINT) after steps 1-") &&
                                                      Contains("median step") && Contains("last loss"));
  const auto h = run_command(ztune_bin() + " history --json --db " + db.string());
  REQUIRE(h.exit_code == 0);
  const auto runs = nlohmann::json::parse(h.out).at("runs");
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].at("status") == "interrupted");
  const auto shown = run_command(ztune_bin() + " history show " + runs[0].at("id").get<std::string>() +
                                 " --db " + db.string());
  CHECK_THAT(shown.out, Contains("why: interrupted by SIGINT"));
  // Every step the output printed is among those stored (the worker keeps a
  // step before printing it; mpirun forwards the output a little later).
  const std::string out = slurp(scratch() / "unfinished.out");
  const auto at = out.rfind("\nstep ");
  REQUIRE(at != std::string::npos);
  const int printed = std::stoi(out.substr(at + 6));
  const std::string said = "finished before it stopped: steps 1-";
  const auto s = shown.out.find(said);
  REQUIRE(s != std::string::npos);
  const int stored = std::stoi(shown.out.substr(s + said.size()));
  CHECK(stored >= printed);
  CHECK(printed >= 3);
  CHECK_THAT(shown.out, Contains(", median step ") && Contains(", last loss "));

  const fs::path directory = scratch() / "db-is-a-directory";
  fs::create_directories(directory);
  const fs::path never = scratch() / "never-written.json";
  const auto r = run_command(ztune_bin() + " run " + plan + " --steps 2 --record " + never.string() + " --db " +
                             directory.string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--db " + directory.string()) && Contains("nothing was launched"));
  CHECK_FALSE(fs::exists(never));
}

TEST_CASE("ztune run: no rank outlives a kill -9 of mpirun or of ztune itself", "[cli][run]") {
  const std::string long_run = kPlan + " --steps 100000 --record ";
  {
    const fs::path record = scratch() / "kill-mpirun.json";
    const pid_t pid = start_ztune(long_run + record.string(), scratch() / "kill-mpirun.out", scratch() / "kill-mpirun.err");
    REQUIRE(pid > 0);
    REQUIRE(wait_for_ranks(record.string(), 2));
    // The launcher: ztune's child mpirun.
    std::vector<pid_t> launchers;
    for (const auto& e : fs::directory_iterator("/proc")) {
      const std::string p = e.path().filename().string();
      if (p.find_first_not_of("0123456789") != std::string::npos) continue;
      const std::string st = slurp(e.path() / "stat");
      const auto close = st.rfind(')');
      if (close == std::string::npos || st.find("(mpirun)") == std::string::npos) continue;
      std::istringstream f(st.substr(close + 1));
      char state = 0;
      long ppid = 0;
      f >> state >> ppid;
      if (ppid == pid) launchers.push_back(static_cast<pid_t>(std::stol(p)));
    }
    REQUIRE(launchers.size() == 1);
    REQUIRE(::kill(launchers[0], SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    CHECK(live_processes_with(record.string()).empty());  // ztune swept the orphaned ranks before exiting
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);  // a failed run
    // Nothing else says what happened (mpirun died before a word): the message does.
    CHECK_THAT(slurp(scratch() / "kill-mpirun.err"),
               Contains("the launcher mpirun was killed by SIGKILL (signal 9); its ranks were ended"));
  }
  {
    // A TMPDIR of its own: any other ztune run on the machine (a parallel
    // test) would remove the directory this one leaves, as the next does here.
    const fs::path tmp = scratch() / "kill-ztune-tmp";
    fs::create_directories(tmp);
    const std::string env = "TMPDIR=" + tmp.string() + " ";
    const fs::path record = scratch() / "kill-ztune.json";
    const pid_t pid =
        start_ztune(long_run + record.string(), scratch() / "kill-ztune.out", scratch() / "kill-ztune.err", env);
    REQUIRE(pid > 0);
    REQUIRE(wait_for_ranks(record.string(), 2));
    const auto ranks = ranks_of(record.string());
    REQUIRE((!ranks.empty() && ranks[0].size() > 1));
    const fs::path temp_dir = fs::path(ranks[0][1]).parent_path();
    REQUIRE(::kill(pid, SIGKILL) == 0);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    // ztune cannot sweep after kill -9; its launcher gets SIGTERM from the kernel and ends the ranks.
    CHECK(gone_within(record.string(), std::chrono::seconds(20)));
    // Nor can it remove its temporary directory: the next ztune run does
    // (the directory names its owner, whose process is gone).
    REQUIRE(temp_dir.filename().string().rfind("ztune-run-", 0) == 0);
    CHECK(fs::exists(temp_dir / ".ztune-owner"));
    const auto next = run_command(env + ztune_bin() + " run " + kPlan + " --steps 1");
    INFO(next.err);
    CHECK(next.exit_code == 0);
    CHECK(!fs::exists(temp_dir));
    std::error_code ec;
    fs::remove_all(temp_dir, ec);
  }
}

TEST_CASE("ztune run: --checkpoint-every then --resume gives the uninterrupted run's losses bit for bit",
          "[cli][run]") {
  const fs::path whole = scratch() / "whole.json", first = scratch() / "first.json", rest = scratch() / "rest.json";
  const fs::path ckpt = scratch() / "resume-ckpt";
  const auto a = ztune("--steps 6 --record " + whole.string());
  INFO(a.err);
  REQUIRE(a.exit_code == 0);
  const auto b = ztune("--steps 6 --checkpoint-every 4 --checkpoint-dir " + ckpt.string() + " --record " +
                       first.string());
  INFO(b.err);
  REQUIRE(b.exit_code == 0);
  REQUIRE(fs::exists(ckpt / "step_00000004"));
  // What a kill -9 mid-write leaves (DurableFile's temporaries) goes with the next run on the directory.
  std::ofstream(ckpt / "step_00000004" / "rank_00001.ckpt.tmp.99999") << "half a shard";
  std::ofstream(ckpt / "latest.tmp.12345") << "4";
  std::ofstream(ckpt / "notes.tmp.txt") << "the user's";
  const auto c = ztune("--steps 6 --resume " + ckpt.string() + " --record " + rest.string());
  INFO(c.err);
  REQUIRE(c.exit_code == 0);
  CHECK_THAT(c.err, Contains("resumed after step 4"));
  CHECK_FALSE(fs::exists(ckpt / "step_00000004" / "rank_00001.ckpt.tmp.99999"));
  CHECK_FALSE(fs::exists(ckpt / "latest.tmp.12345"));
  CHECK(fs::exists(ckpt / "notes.tmp.txt"));

  const std::vector<double> reference = losses_of(whole);
  REQUIRE(reference.size() == 6);
  CHECK(losses_of(first) == reference);  // writing checkpoints changes nothing
  const std::vector<double> resumed = losses_of(rest);
  REQUIRE(resumed.size() == 2);
  CHECK(resumed[0] == reference[4]);  // exact: == on doubles, not Approx
  CHECK(resumed[1] == reference[5]);

  // Another plan on the same checkpoints is refused before the launch, naming
  // both plans and the command that resumes them (each rank had refused it
  // amid mpirun's report); that command resumes them.
  const auto other = run_command(ztune_bin() + " run --model tiny --tp 2 --dp 2 --micro-batch 2 --global-batch 4 --no-db "
                                               "--steps 6 --resume " + ckpt.string());
  INFO(other.err);
  CHECK(other.exit_code == 2);
  CHECK_THAT(other.err, Contains("ztune: error: --resume " + ckpt.string() +
                                 ": its checkpoints were written by another plan dp2×tp1×pp1") &&
                            Contains("this run's dp2×tp2×pp1") &&
                            Contains("resume them with `ztune run " + (ckpt / "plan.json").string() + " --resume " +
                                     ckpt.string() + "`"));
  CHECK_THAT(other.err + other.out, !Contains("mpirun"));
  // So are steps the checkpoint has already run, and a fresh run into its directory.
  for (const auto& [args, said] : std::vector<std::pair<std::string, std::string>>{
           {"--steps 4 --resume " + ckpt.string(),
            "--steps 4: the checkpoint in " + ckpt.string() + " is after step 4 already"},
           {"--steps 8 --resume " + ckpt.string() + " --record " + (ckpt / "latest").string(),
            "--record " + (ckpt / "latest").string() + ": is the file --resume reads"},
           {"--steps 2 --checkpoint-every 1 --checkpoint-dir " + ckpt.string(),
            "--checkpoint-dir " + ckpt.string() + ": already holds a run's committed checkpoints; continue it with "
            "--resume " + ckpt.string()}}) {
    const auto r = ztune(args);
    INFO(args << "\n" << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("ztune: error: " + said));
    CHECK_THAT(r.err + r.out, !Contains("mpirun"));
  }
  // Without DIR/data (the token stream's identity) any seed had resumed them.
  fs::rename(ckpt / "data", ckpt / "data.keep");
  const auto no_data = ztune("--steps 6 --seed 99 --resume " + ckpt.string());
  INFO(no_data.err);
  CHECK(no_data.exit_code == 2);
  CHECK_THAT(no_data.err, Contains("ztune: error: --resume " + ckpt.string() + ": " + (ckpt / "data").string() +
                                   ": missing, though the checkpoints beside it were written with it"));
  CHECK_THAT(no_data.err + no_data.out, !Contains("mpirun"));
  fs::rename(ckpt / "data.keep", ckpt / "data");
  const auto suggested = run_command(ztune_bin() + " run " + (ckpt / "plan.json").string() + " --no-db --steps 6 "
                                     "--resume " + ckpt.string() + " --record " + rest.string());
  INFO(suggested.err);
  REQUIRE(suggested.exit_code == 0);
  CHECK(losses_of(rest) == std::vector<double>{reference[4], reference[5]});
}

TEST_CASE("ztune run: --resume with another token file of the same length is refused, naming both", "[cli][run]") {
  // A token file's identity had been its length only: a resume on other data
  // of the same length trained on without a word.
  auto tokens = [](const fs::path& p, unsigned seed) {
    std::vector<std::uint16_t> ids(4096);
    for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::uint16_t>((i * 31 + seed * 17 + i / 7) % 200);
    std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(ids.data()),
                                             static_cast<std::streamsize>(ids.size() * sizeof ids[0]));
  };
  const fs::path a = scratch() / "tokens-a.bin", b = scratch() / "tokens-b.bin", ckpt = scratch() / "data-ckpt";
  tokens(a, 1);
  tokens(b, 2);
  REQUIRE(ztune("--steps 3 --data " + a.string() + " --checkpoint-every 1 --checkpoint-dir " + ckpt.string()).exit_code == 0);
  const auto other = ztune("--steps 4 --data " + b.string() + " --resume " + ckpt.string());
  INFO(other.err);
  CHECK(other.exit_code == 2);
  CHECK_THAT(other.err, Contains(ckpt.string() + "/data: the checkpoints were written reading a token file of 4096 "
                                 "uint16 tokens (FNV-1a ") &&
                            Contains("this run reads a token file of 4096 uint16 tokens (FNV-1a "));
  const auto same = ztune("--steps 4 --data " + a.string() + " --resume " + ckpt.string());
  INFO(same.err);
  CHECK(same.exit_code == 0);
  CHECK_THAT(same.err, Contains("resumed after step 3"));
}

TEST_CASE("ztune run: bad places and plans are refused before mpirun, naming the flag", "[cli][run]") {
  auto before_launch = [](const CommandResult& r, const std::string& message) {
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains("ztune: error: " + message));
    CHECK_THAT(r.err + r.out, !Contains("mpirun") && !Contains("ztune-worker") && !Contains("/tmp/ztune-run-"));
  };
  before_launch(ztune("--steps 1 --record /nonexistent-dir/r.json"),
                "--record /nonexistent-dir/r.json: the directory /nonexistent-dir does not exist");
  before_launch(ztune("--steps 1 --record " + scratch().string()), "--record " + scratch().string() + ": is a directory");
  before_launch(ztune("--steps 1 --seq 2147483647"), "--seq: expected a sequence length from 1 to 16777216");
  before_launch(ztune("--steps 1 --tp 3"), "--tp: 3 does not divide the model's 4 heads");
  before_launch(ztune("--steps 1 --resume " + (scratch() / "no-such").string()),
                "--resume " + (scratch() / "no-such").string() + ": no such directory");
  fs::create_directories(scratch() / "empty-ckpt");
  before_launch(ztune("--steps 1 --resume " + (scratch() / "empty-ckpt").string()),
                "--resume " + (scratch() / "empty-ckpt").string() + ": no committed checkpoint in it");
  before_launch(ztune("--steps 1 --checkpoint-every 1"), "--checkpoint-every: the checkpoints would go to the temporary");
  // The record is read back after the run: a FIFO had hung it, /dev/null had lost it after training.
  const fs::path fifo = scratch() / "record.fifo";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  for (const std::string& stream : {fifo.string(), std::string("/dev/null")})
    before_launch(ztune("--steps 1 --record " + stream), "--record " + stream + ": not a regular file");
  if (::geteuid() != 0) {  // root writes anywhere
    const fs::path ro = scratch() / "read-only";
    fs::create_directories(ro);
    ::chmod(ro.c_str(), 0555);
    before_launch(ztune("--steps 1 --record " + (ro / "r.json").string()), "is not writable");
  }
}

TEST_CASE("ztune run --dry-run: the launch and the plan file, nothing started or stored", "[cli][run]") {
  const fs::path tmp = scratch() / "dry";
  fs::create_directories(tmp);
  const fs::path db = tmp / "results.db";
  const std::string env = "TMPDIR=" + tmp.string() + " ";
  const std::string plan = "--model tiny --dp 2 --micro-batch 2 --global-batch 4";
  const auto r = run_command(env + ztune_bin() + " run " + plan + " --steps 3 --dry-run --json --db " + db.string());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto j = nlohmann::json::parse(r.out);
  CHECK(j.at("dry_run") == true);
  CHECK(j.at("ranks") == 2);
  const auto launch = j.at("launch").get<std::vector<std::string>>();
  REQUIRE(launch.size() > 4);
  CHECK(std::find(launch.begin(), launch.end(), "-np") != launch.end());
  CHECK(std::find(launch.begin(), launch.end(), "--steps") + 1 < launch.end());
  CHECK(*(std::find(launch.begin(), launch.end(), "--steps") + 1) == "3");
  // The plan file the launch names is kept, and it holds the plan asked for.
  const fs::path plan_file = j.at("plan_file").get<std::string>();
  CHECK(plan_file.parent_path().parent_path() == tmp);
  const auto pf = nlohmann::json::parse(slurp(plan_file));
  CHECK(pf.at("plan").at("dp") == 2);
  CHECK(pf.at("plan").at("micro_batch") == 2);
  // Nothing ran: no record, no database.
  CHECK_FALSE(fs::exists(plan_file.parent_path() / "record.json"));
  CHECK_FALSE(fs::exists(db));
  // The prediction is predict's for the same plan (the oracle: the other command).
  const auto p = run_command(ztune_bin() + " predict --cluster local-cpu --precision fp32 " + plan + " --json");
  REQUIRE(p.exit_code == 0);
  CHECK(j.at("predicted_iteration_s").get<double>() ==
        Approx(nlohmann::json::parse(p.out).at("time").at("iteration_s").get<double>()));
  // A GPU plan is checked here too, where a launch is refused for want of a device.
  const std::string gpu = " run --cluster dgx-h100 --model llama-7b --tp 2 --no-db";
  if (!fs::exists("/dev/nvidia0")) {
    CHECK(run_command(env + ztune_bin() + gpu).exit_code == 2);
    const auto g = run_command(env + ztune_bin() + gpu + " --dry-run");
    INFO(g.err);
    CHECK(g.exit_code == 0);
    CHECK_THAT(g.out, Contains("--backend cuda") && Contains("(dry run: nothing was launched"));
    // ... and its warnings say what a launch here would meet, in --json too.
    const auto gj = run_command(env + ztune_bin() + gpu + " --dry-run --json");
    REQUIRE(gj.exit_code == 0);
    const auto warnings = nlohmann::json::parse(gj.out).at("warnings");
    REQUIRE(warnings.size() == 1);
    CHECK_THAT(warnings[0].get<std::string>(), Contains("no NVIDIA device"));
  }
  // Checkpoints: the schedule file `ztune run` writes before a launch is
  // named for a launch by hand, and nothing is written into the directory.
  const fs::path ck = tmp / "ck";
  const auto c = run_command(env + ztune_bin() + " run " + plan + " --steps 3 --no-db --dry-run --json "
                             "--checkpoint-every 1 --checkpoint-dir " + ck.string());
  REQUIRE(c.exit_code == 0);
  const auto cw = nlohmann::json::parse(c.out).at("warnings");
  REQUIRE(cw.size() == 1);
  CHECK_THAT(cw[0].get<std::string>(), Contains("\"steps 3\"") && Contains(ck.string()));
  CHECK_FALSE(fs::exists(ck));
  // The database is checked as a run checks it (a directory is refused), and
  // a missing one is not created.
  const auto bad_db = run_command(env + ztune_bin() + " run " + plan + " --dry-run --db " + tmp.string());
  CHECK(bad_db.exit_code == 2);
  CHECK_THAT(bad_db.err, Contains("is a directory"));
  // The printed launch line pastes into a shell: a path with a space and a quote.
  const fs::path odd = tmp / "a b'c.json";
  const auto q = run_command(env + ztune_bin() + " run " + plan + " --dry-run --no-db --record \"" + odd.string() + "\"");
  REQUIRE(q.exit_code == 0);
  const auto at = q.out.find("launch: ");
  REQUIRE(at != std::string::npos);
  const std::string line = q.out.substr(at + 8, q.out.find('\n', at) - at - 8);
  // The shell's own reading of the line (printf '%s\n' of each word) holds the path whole.
  const auto words = run_command("true; for w in " + line + "; do printf '%s\\n' \"$w\"; done");
  CHECK_THAT(words.out, Contains("\n" + odd.string() + "\n"));
  fs::remove_all(tmp);
}

TEST_CASE("ztune run: a time far off the prediction on a quiet machine points at calibrate", "[cli][run]") {
  // A profile whose kernels run at 1/200 of the shipped CPU profile's rates:
  // whatever this machine is, the prediction is far off the measured time.
  const fs::path dir = scratch() / "slow-profile";
  fs::create_directories(dir);
  auto profile = nlohmann::json::parse(slurp(fs::path(ZTUNE_TEST_DATA_DIR) / "profiles/cpu.json"));
  profile["name"] = "cpu-slow";
  for (auto& row : profile["gemm"]["efficiency_by_flops"]) row[1] = row[1].get<double>() / 200;
  profile["memory_bound"]["bandwidth_efficiency"] = profile["memory_bound"]["bandwidth_efficiency"].get<double>() / 200;
  const fs::path file = dir / "cpu-slow.json";
  std::ofstream(file) << profile.dump(2);
  const auto r = ztune("--steps 2 --profile " + file.string());
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Other work on the machine (a parallel ctest) is no evidence either way: said instead.
  if (r.err.find("other processes took") != std::string::npos) {
    CHECK_THAT(r.out, !Contains("ztune calibrate --cluster"));
  } else {
    CHECK_THAT(r.out, Contains("the profile cpu-slow was measured on another machine") &&
                          Contains("`ztune calibrate --cluster local-cpu`"));
  }
  fs::remove_all(dir);
}

TEST_CASE("ztune run: the temporary directory is removed unless --keep", "[cli][run]") {
  // A private TMPDIR, so that other runs on the machine do not count.
  const fs::path tmp = scratch() / "tmp";
  fs::create_directories(tmp);
  auto temp_dirs = [&] {
    std::vector<fs::path> d;
    for (const auto& e : fs::directory_iterator(tmp)) d.push_back(e.path());
    return d;
  };
  const std::string env = "TMPDIR=" + tmp.string() + " ";
  const auto r = run_command(env + ztune_bin() + " run " + kPlan + " --steps 1 --json");
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  const auto s = nlohmann::json::parse(r.out);
  CHECK(s.at("record").is_null());  // the record was in the directory that is gone
  CHECK(s.at("losses").size() == 1);
  CHECK(temp_dirs().empty());

  const auto failed = run_command(env + ztune_bin() + " run " + kPlan + " --steps 1 --data /dev/null");
  CHECK(failed.exit_code == 2);  // the worker refuses the data: the job fails, the directory goes anyway
  CHECK(temp_dirs().empty());

  const auto k = run_command(env + ztune_bin() + " run " + kPlan + " --steps 1 --json --keep");
  INFO(k.err);
  REQUIRE(k.exit_code == 0);
  const fs::path kept = nlohmann::json::parse(k.out).at("record").get<std::string>();
  CHECK(kept.parent_path().parent_path() == tmp);
  CHECK(kept.parent_path().filename().string().rfind("ztune-run-", 0) == 0);
  CHECK(fs::exists(kept));
  CHECK(fs::exists(kept.parent_path() / "plan.json"));
  CHECK(temp_dirs().size() == 1);
  // A kept directory names no owner: a later run's sweep of orphaned ones
  // (a ztune killed by SIGKILL) leaves it, and one whose owner still runs.
  CHECK(!fs::exists(kept.parent_path() / ".ztune-owner"));
  // The owner file: pid, start time (/proc/self/stat's field 22), and where
  // that pid means something: host name / boot id / pid namespace.
  std::string started;
  {
    const std::string stat = slurp("/proc/self/stat");
    std::istringstream rest(stat.substr(stat.rfind(')') + 2));
    for (int i = 3; i <= 22; ++i) rest >> started;
  }
  char host[256] = {};
  REQUIRE(::gethostname(host, sizeof host - 1) == 0);
  std::string boot = slurp("/proc/sys/kernel/random/boot_id");
  while (!boot.empty() && boot.back() == '\n') boot.pop_back();
  const std::string scope = std::string(host) + "/" + boot + "/" + fs::read_symlink("/proc/self/ns/pid").string();
  auto owned = [&](const std::string& name, const std::string& owner) {
    fs::create_directories(tmp / name);
    std::ofstream(tmp / name / ".ztune-owner") << owner << "\n";
    return tmp / name;
  };
  const pid_t me = ::getpid();
  const fs::path live = owned("ztune-run-live", std::to_string(me) + " " + started + " " + scope);
  // This pid with another start time: a reused pid, its ztune gone.
  const fs::path dead = owned("ztune-run-dead", std::to_string(me) + " 1 " + scope);
  // Another machine's (a $TMPDIR shared over NFS) or another container's:
  // its pid means nothing here, so it is never judged (a review found a
  // live run on another node removed).
  const fs::path elsewhere = owned("ztune-run-elsewhere", "4242 1 otherhost/" + boot + "/pid:[1]");
  const fs::path older = owned("ztune-run-older", std::to_string(me) + " 1");  // no scope written
  REQUIRE(run_command(env + ztune_bin() + " run " + kPlan + " --steps 1").exit_code == 0);
  CHECK(fs::exists(kept));
  CHECK(fs::exists(live));
  CHECK(!fs::exists(dead));
  CHECK(fs::exists(elsewhere));
  CHECK(fs::exists(older));
  CHECK(temp_dirs().size() == 4);
}

TEST_CASE("ztune run: a run the database refuses keeps its record, says where and exits 1", "[cli][run]") {
  // A trigger refuses every insert into runs (root included, as a permission
  // bit would not); a locked, read-only or full database fails the same way.
  const fs::path db = scratch() / "refusing-runs.db";
  const std::string plan = "--model tiny --dp 2 --micro-batch 2 --global-batch 4 --steps 2 --db '" + db.string() + "'";
  REQUIRE(run_command(ztune_bin() + " run " + plan).exit_code == 0);
  REQUIRE(run_command("/usr/bin/python3 -c \"import sqlite3; c = sqlite3.connect('" + db.string() +
                      "'); c.execute(\\\"CREATE TRIGGER refuse BEFORE INSERT ON runs BEGIN SELECT RAISE(ABORT, "
                      "'no writes here'); END\\\"); c.commit()\"")
              .exit_code == 0);
  const auto r = run_command(ztune_bin() + " run " + plan);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("the run was not stored in the results database") && Contains("no writes here") &&
                        Contains("its record is kept at "));
  const std::string after = "its record is kept at ";
  const auto at = r.err.find(after);
  REQUIRE(at != std::string::npos);
  const std::string record = r.err.substr(at + after.size(), r.err.find(' ', at + after.size()) - at - after.size());
  CHECK(losses_of(record).size() == 2);  // the measurement, whole
  fs::remove_all(fs::path(record).parent_path());
}

TEST_CASE("calibrate refuses a damaged stored run before any microbenchmark runs", "[cli][run][calibrate]") {
  const fs::path db = scratch() / "damaged-run.db";
  REQUIRE(run_command(ztune_bin() + " run --model tiny --dp 2 --micro-batch 2 --global-batch 4 --steps 1 --db '" +
                      db.string() + "'")
              .exit_code == 0);
  REQUIRE(run_command("/usr/bin/python3 -c \"import sqlite3; c = sqlite3.connect('" + db.string() +
                      "'); c.execute(\\\"UPDATE runs SET record = '{bad'\\\"); c.commit()\"")
              .exit_code == 0);
  const auto r = run_command(ztune_bin() + " calibrate --cluster local-cpu --quick --np 2 --out '" +
                             (scratch() / "never.json").string() + "' --db '" + db.string() + "'");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("(run 1, column record)") && Contains("--no-db-runs calibrates without the stored runs"));
  CHECK_THAT(r.out, !Contains("rank(s) of cluster"));  // no benchmark started: nothing measured is lost
  CHECK_FALSE(fs::exists(scratch() / "never.json"));
}

// What calibrate had gone on without, saying it in one line of a long report
// or not at all: a database it cannot open (damaged, its tables changed), a
// stored record that is valid JSON but not a record, a contention share out of
// [0, 1]. Each is refused, naming the file and the place, before any
// microbenchmark runs.
TEST_CASE("calibrate refuses a damaged database and out-of-range stored values before measuring",
          "[cli][run][calibrate]") {
  const fs::path good = scratch() / "calibrate-good.db";
  REQUIRE(run_command(ztune_bin() + " run --model tiny --dp 2 --micro-batch 2 --global-batch 4 --steps 1 --db '" +
                      good.string() + "'")
              .exit_code == 0);
  const fs::path db = scratch() / "calibrate-damaged.db";
  auto sql = [&](const std::string& statement) {
    return run_command("/usr/bin/python3 -c \"import sqlite3; c = sqlite3.connect('" + db.string() + "'); c.execute(\\\"" +
                       statement + "\\\"); c.commit()\"")
        .exit_code;
  };
  const struct {
    const char* statement;  // applied to a copy of the good database ("" : cut the file short instead)
    std::vector<std::string> said;
  } cases[] = {
      {"UPDATE runs SET record = '42'", {"(run 1, column record): expected the run record object, got number"}},
      {"UPDATE measurements SET value = 1e308 WHERE name = 'machine.others_cpu_fraction'",
       {"(run 1, table measurements): machine.others_cpu_fraction: expected a fraction in [0, 1], got 1e+308"}},
      {"UPDATE measurements SET value = -5 WHERE name = 'machine.others_cpu_fraction'",
       {"expected a fraction in [0, 1], got -5"}},
      {"DROP TABLE measurements", {"whose tables were changed outside ztune: table measurements is missing"}},
      {"ALTER TABLE runs RENAME COLUMN measured_iteration_s TO m", {"table runs has no column measured_iteration_s"}},
      {"", {"a damaged SQLite database", "--no-db calibrates without it; nothing was measured"}},
  };
  for (const auto& k : cases) {
    INFO(k.statement);
    fs::copy_file(good, db, fs::copy_options::overwrite_existing);
    if (*k.statement != '\0') {
      REQUIRE(sql(k.statement) == 0);
    } else {
      fs::resize_file(db, fs::file_size(db) / 2);
    }
    const auto r = run_command(ztune_bin() + " calibrate --cluster local-cpu --quick --np 2 --out '" +
                               (scratch() / "never.json").string() + "' --db '" + db.string() + "'");
    INFO(r.err);
    CHECK(r.exit_code == 2);
    for (const auto& s : k.said) CHECK_THAT(r.err, Contains(db.string()) && Contains(s));
    CHECK_THAT(r.out, !Contains("rank(s) of cluster"));
    CHECK_FALSE(fs::exists(scratch() / "never.json"));
  }
}

int main(int argc, char** argv) {
  if (std::system("command -v mpirun >/dev/null 2>&1") != 0) {
    std::printf("skipped: mpirun is not on PATH (ztune run launches its ranks with it)\n");
    return 77;
  }
  const int rc = Catch::Session().run(argc, argv);
  std::error_code ec;
  fs::remove_all(scratch(), ec);
  return rc;
}

// Resuming with another --steps continues on another learning-rate schedule
// (warm-up, cosine decay over --steps): said, not refused (extending a run is
// what a user may want). A damaged latest checkpoint names the step
// directories kept before it, which the run can go back to.
TEST_CASE("ztune run: a resume with another --steps is noted and a damaged latest names the earlier steps",
          "[cli][run][resume]") {
  const fs::path dir = scratch() / "schedule-ckpt";
  fs::remove_all(dir);
  auto r = ztune("--steps 6 --checkpoint-every 2 --checkpoint-dir " + dir.string());
  REQUIRE(r.exit_code == 0);
  CHECK(slurp(dir / "schedule") == "steps 6\n");
  fs::resize_file(dir / "latest", 0);
  std::ofstream(dir / "latest") << "4\n";  // back to step 4: the run continues from there
  r = ztune("--steps 8 --resume " + dir.string());
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.err, Contains("--steps 8: the checkpoints in " + dir.string() +
                             " were written on a learning-rate schedule over 6 steps") &&
                        Contains("(--steps 6 continues it as it was)"));
  r = ztune("--steps 6 --resume " + dir.string());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, !Contains("learning-rate schedule"));

  std::ofstream(dir / "step_00000004" / "rank_00000.ckpt", std::ios::trunc) << "garbage";
  r = ztune("--steps 8 --resume " + dir.string());
  CHECK(r.exit_code == 2);
  // Step 6's directory is after the latest (4): only step 2 is before it.
  CHECK_THAT(r.err, Contains(dir.string() + " also keeps the checkpoint after step 2: to go back to it, write its "
                             "step count into " + (dir / "latest").string()));

  // A damaged schedule file is named, as every other file there is: read as
  // missing, it had let a resume on another --steps go ahead unsaid.
  for (const char* junk : {"junk\n", "steps -5\n", "steps 99999999999999999999\n", "steps 6 more\n", ""}) {
    std::ofstream(dir / "schedule", std::ios::trunc) << junk;
    r = ztune("--steps 8 --resume " + dir.string());
    INFO(junk);
    CHECK(r.exit_code == 2);
    CHECK_THAT(r.err, Contains((dir / "schedule").string() + ": expected \"steps N\""));
  }
  // A FIFO in its place is refused, not opened (the read would wait forever).
  fs::remove(dir / "schedule");
  REQUIRE(::mkfifo((dir / "schedule").c_str(), 0644) == 0);
  r = ztune("--steps 8 --resume " + dir.string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains((dir / "schedule").string() + ": expected \"steps N\" in a regular file"));
  // Missing (checkpoints of an older ztune): resumed without the check.
  fs::remove(dir / "schedule");
  std::ofstream(dir / "latest", std::ios::trunc) << "2\n";
  r = ztune("--steps 8 --resume " + dir.string());
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.err, !Contains("learning-rate schedule"));
  // No latest at all: the step directories there are named, and how to commit one.
  fs::remove(dir / "latest");
  r = ztune("--steps 10 --resume " + dir.string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("no committed checkpoint in it") && Contains("it holds the step directories of steps ") &&
                        Contains(", write its step count into " + (dir / "latest").string()));
}

// A second run on a checkpoint directory another run holds is refused before
// its launch: the worker's own refusal had come after mpirun started, stored
// a run that never began as failed, and told the user to resume the other
// run's directory.
TEST_CASE("ztune run: a checkpoint directory another run holds is refused before the launch", "[cli][run][resume]") {
  const fs::path dir = scratch() / "held-ckpt";
  fs::remove_all(dir);
  REQUIRE(ztune("--steps 2 --checkpoint-every 2 --checkpoint-dir " + dir.string()).exit_code == 0);
  // The lock as the worker holds it: an exclusive flock on DIR/lock, its pid inside.
  const int fd = ::open((dir / "lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::flock(fd, LOCK_EX | LOCK_NB) == 0);
  REQUIRE(::ftruncate(fd, 0) == 0);
  REQUIRE(::pwrite(fd, "4242\n", 5, 0) == 5);
  const auto r = ztune("--steps 4 --resume " + dir.string());
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("--checkpoint-dir " + dir.string() + ": in use by another run (pid 4242)") &&
                        Contains("nothing was launched"));
  CHECK_THAT(r.err, !Contains("mpirun") && !Contains("ztune-worker"));  // refused before the launch
  ::close(fd);  // released: the same resume runs
  CHECK(ztune("--steps 4 --resume " + dir.string()).exit_code == 0);
}

// history show says which steps a stored run trained: a resumed run's first
// step is the one after its checkpoint (the record's own step numbers).
TEST_CASE("history show names the steps a run trained and the checkpoint it resumed after", "[cli][run][history]") {
  const std::string plan = "--model tiny --dp 2 --micro-batch 2 --global-batch 4";
  const fs::path dir = scratch() / "history-steps-ckpt";
  const fs::path db = scratch() / "history-steps.db";
  fs::remove_all(dir);
  fs::remove(db);
  const std::string run = ztune_bin() + " run " + plan + " --db " + db.string();
  REQUIRE(run_command(run + " --steps 2 --checkpoint-every 2 --checkpoint-dir " + dir.string()).exit_code == 0);
  REQUIRE(run_command(run + " --steps 4 --resume " + dir.string()).exit_code == 0);
  CHECK_THAT(run_command(ztune_bin() + " history show r1 --db " + db.string()).out, Contains("  steps 1-2\n"));
  CHECK_THAT(run_command(ztune_bin() + " history show r2 --db " + db.string()).out,
             Contains("  steps 3-4 (resumed after step 2)\n"));
}
