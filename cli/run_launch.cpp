#include "run_launch.hpp"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

extern char** environ;

namespace ztune::cli {

std::string worker_path() {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto next = self.parent_path() / "ztune-worker";
    if (std::filesystem::exists(next)) return next.string();
  }
#ifdef ZTUNE_WORKER_PATH
  return ZTUNE_WORKER_PATH;
#else
  return "ztune-worker";
#endif
}

std::vector<std::string> worker_args(const WorkerJob& job) {
  std::vector<std::string> a{worker_path(),   job.plan_path, "--steps",          std::to_string(job.steps),
                             "--record",      job.record_path, "--data",         job.data,
                             "--threads",     std::to_string(job.threads), "--checkpoint-dir", job.checkpoint_dir,
                             "--backend",     job.backend};
  if (job.seed) a.insert(a.end(), {"--seed", std::to_string(*job.seed)});
  if (!job.nvme_dir.empty()) a.insert(a.end(), {"--nvme-dir", job.nvme_dir});
  return a;
}

namespace {
bool on_path(const char* program) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return false;
  std::string p(path);
  std::size_t start = 0;
  while (start <= p.size()) {
    const auto end = p.find(':', start);
    const auto dir = p.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!dir.empty() && ::access((dir + "/" + program).c_str(), X_OK) == 0) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}
}  // namespace

std::vector<std::string> launch_command(int np, const std::string& hosts, const std::vector<std::string>& worker_args) {
  std::vector<std::string> cmd;
  if (std::getenv("SLURM_JOB_ID") != nullptr && on_path("srun")) {
    cmd = {"srun", "-n", std::to_string(np)};
  } else {
    cmd = {"mpirun", "--allow-run-as-root", "--oversubscribe", "-np", std::to_string(np)};
    if (!hosts.empty()) {
      cmd.emplace_back("--host");
      cmd.push_back(hosts);
    }
  }
  cmd.insert(cmd.end(), worker_args.begin(), worker_args.end());
  return cmd;
}

int run_process(const std::vector<std::string>& argv, bool stdout_to_stderr) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  if (stdout_to_stderr) posix_spawn_file_actions_adddup2(&actions, STDERR_FILENO, STDOUT_FILENO);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return 127;
  int status = 0;
  if (waitpid(pid, &status, 0) < 0) return 127;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

}  // namespace ztune::cli
