#include "run_launch.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune::cli {

std::string sibling_program(const std::string& name, const char* built) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const auto next = self.parent_path() / name;
    if (std::filesystem::exists(next)) return next.string();
  }
  return built != nullptr ? std::string(built) : name;
}

std::string worker_path() {
#ifdef ZTUNE_WORKER_PATH
  return sibling_program("ztune-worker", ZTUNE_WORKER_PATH);
#else
  return sibling_program("ztune-worker", nullptr);
#endif
}

std::vector<std::string> worker_args(const WorkerJob& job) {
  std::vector<std::string> a{worker_path(),   job.plan_path, "--steps",          std::to_string(job.steps),
                             "--record",      job.record_path, "--data",         job.data,
                             "--threads",     std::to_string(job.threads), "--checkpoint-dir", job.checkpoint_dir,
                             "--backend",     job.backend};
  if (job.seed) a.insert(a.end(), {"--seed", std::to_string(*job.seed)});
  if (!job.nvme_dir.empty()) a.insert(a.end(), {"--nvme-dir", job.nvme_dir});
  if (job.checkpoint_every > 0) a.insert(a.end(), {"--checkpoint-every", std::to_string(job.checkpoint_every)});
  if (job.keep_checkpoints > 0) a.insert(a.end(), {"--keep-checkpoints", std::to_string(job.keep_checkpoints)});
  if (job.collective_timeout_s)
    a.insert(a.end(), {"--collective-timeout", std::to_string(*job.collective_timeout_s)});
  if (job.resume) a.emplace_back("--resume");
  if (!job.record_fallback.empty()) a.insert(a.end(), {"--record-fallback", job.record_fallback});
  if (!job.progress.empty()) a.insert(a.end(), {"--progress", job.progress});
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

namespace {
// A temporary directory not kept names the process that removes it: a ztune
// killed by SIGKILL (or the OOM killer) never reaches its destructor, and the
// next one removes what it left. The process's start time beside its pid
// (/proc/PID/stat, field 22) tells a reused pid from the owner; the host, its
// boot and the pid namespace say the pid is one this process can look up at
// all (a $TMPDIR on NFS or bind-mounted into containers is shared by ztunes
// whose pids mean nothing here).
constexpr const char* kOwnerFile = ".ztune-owner";

std::string first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Where a pid means this process table: host name, boot id, pid namespace.
std::string pid_scope() {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  std::error_code ec;
  const std::string ns = std::filesystem::read_symlink("/proc/self/ns/pid", ec).string();
  const std::string boot = first_line("/proc/sys/kernel/random/boot_id");
  if (host[0] == '\0' || ns.empty() || boot.empty()) return "";  // unknown: never swept
  return std::string(host) + "/" + boot + "/" + ns;
}

std::string process_start(long pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  // The command name (field 2) is in parentheses and may hold spaces.
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return "";
  std::istringstream rest(stat.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && rest >> field; ++i)
    if (i == 22) return field;
  return "";
}

std::string owner_line(long pid) {
  return std::to_string(pid) + " " + process_start(pid) + " " + pid_scope() + "\n";
}

// Removes base's PREFIX-* directories whose owner file names a process that
// is gone; kept ones have no owner file, foreign ones are not ours to judge.
void remove_orphans(const std::string& base, const std::string& prefix) {
  const std::string here = pid_scope();
  if (here.empty()) return;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix + "-") || !entry.is_directory(ec)) continue;
    // Only this user's: another's processes may be hidden from it (/proc's hidepid).
    struct stat st {};
    if (::stat(entry.path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    std::ifstream in(entry.path() / kOwnerFile);
    long pid = 0;
    std::string started, scope;
    if (!(in >> pid >> started >> scope) || pid <= 0) continue;
    if (scope != here) continue;                  // another host, boot or container's
    if (process_start(pid) == started) continue;  // its owner still runs
    std::filesystem::remove_all(entry.path(), ec);
  }
}
}  // namespace

TempDir::TempDir(bool keep, const std::string& prefix) : keep_(keep) {
  // $TMPDIR (else /tmp), as the worker and mpirun place their files.
  std::error_code ec;
  const std::string base = std::filesystem::temp_directory_path(ec).string();
  const std::string parent = ec ? std::string("/tmp") : base;
  remove_orphans(parent, prefix);
  std::string tmpl = parent + "/" + prefix + "-XXXXXX";
  if (mkdtemp(tmpl.data()) == nullptr)
    throw InputError("cannot create a temporary directory " + tmpl + ": " + std::strerror(errno));
  path_ = tmpl;
  if (!keep_) std::ofstream(path_ + "/" + kOwnerFile) << owner_line(::getpid());
}

void TempDir::keep() {
  keep_ = true;
  std::error_code ec;
  std::filesystem::remove(path_ + "/" + kOwnerFile, ec);
}

TempDir::~TempDir() {
  if (keep_) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool has_nvidia_device() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/dev", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 6 && name.starts_with("nvidia") &&
        name.find_first_not_of("0123456789", 6) == std::string::npos)
      return true;
  }
  return false;
}

namespace {
bool under_slurm() { return std::getenv("SLURM_JOB_ID") != nullptr && on_path("srun"); }

// The first whitespace-separated number in `path` (a cgroup limit file), or
// after `key` in /proc/meminfo's "Key: N kB" lines; absent when the file
// cannot be read or holds "max" (no limit).
std::optional<double> number_in(const std::string& path, const std::string& key = "") {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    if (!key.empty() && !line.starts_with(key)) continue;
    std::istringstream ss(key.empty() ? line : line.substr(key.size()));
    double v = 0;
    if (!(ss >> v)) return std::nullopt;
    std::string unit;
    ss >> unit;
    return unit == "kB" ? v * 1024.0 : v;
  }
  return std::nullopt;
}
}  // namespace

bool ranks_run_here(const std::string& hosts) { return hosts.empty() && !under_slurm(); }

std::optional<double> machine_memory_bytes() {
  std::optional<double> bytes = number_in("/proc/meminfo", "MemTotal:");
  // The limits of this process's own cgroup and of every cgroup above it
  // (/proc/self/cgroup: "0::PATH" in v2, "N:...memory...:PATH" in v1; a job
  // or slice limit sits on an ancestor). A v1 "no limit" is a number near
  // 2^63; v2 says "max" (no number).
  auto limit_along = [&](const std::filesystem::path& mount, const std::string& path, const char* file) {
    for (std::filesystem::path p = mount / std::filesystem::path(path).relative_path();; p = p.parent_path()) {
      if (const auto l = number_in((p / file).string()); l && *l > 0 && *l < 1e18)
        bytes = bytes ? std::min(*bytes, *l) : *l;
      if (p == mount || !p.has_parent_path() || p.parent_path() == p) break;
    }
  };
  std::ifstream cgroups("/proc/self/cgroup");
  for (std::string line; std::getline(cgroups, line);) {
    const auto a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) {
      const bool unified = std::filesystem::exists("/sys/fs/cgroup/cgroup.controllers");
      limit_along(unified ? "/sys/fs/cgroup" : "/sys/fs/cgroup/unified", path, "memory.max");
    } else if (("," + controllers + ",").find(",memory,") != std::string::npos) {
      limit_along("/sys/fs/cgroup/memory", path, "memory.limit_in_bytes");
    }
  }
  return bytes;
}

std::vector<std::string> launch_command(int np, const std::string& hosts, const std::vector<std::string>& worker_args) {
  std::vector<std::string> cmd;
  if (under_slurm()) {
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

namespace {

// The launcher being waited for and the first signal ztune received meanwhile.
// Signal handlers can only reach these through statics (async-signal-safe state).
volatile sig_atomic_t g_child = 0;
volatile sig_atomic_t g_signal = 0;

extern "C" void forward_signal(int sig) {
  // A second interrupt does not wait for the job to wind down.
  const bool again = g_signal != 0;
  if (!again) g_signal = sig;
  if (g_child > 0) ::kill(static_cast<pid_t>(g_child), again ? SIGKILL : sig);
}

// The processes of session `sid` other than its leader (the launcher's ranks,
// which Open MPI puts in process groups of their own, but which stay in the
// launcher's session even when orphaned). Zombies are gone already.
std::vector<pid_t> session_members(pid_t sid) {
  std::vector<pid_t> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(e.path() / "stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');  // the command name may hold spaces and parentheses
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    if (!(fields >> state >> ppid >> pgrp >> session)) continue;
    const auto pid = static_cast<pid_t>(std::stol(name));
    if (session == sid && pid != sid && state != 'Z' && state != 'X') out.push_back(pid);
  }
  return out;
}

// Kills what is left of session `sid` and waits (up to about 5 s) until it is gone.
void kill_session(pid_t sid) {
  for (int i = 0; i < 250; ++i) {
    const auto left = session_members(sid);
    if (left.empty()) return;
    for (pid_t p : left) ::kill(p, SIGKILL);
    ::usleep(20'000);
  }
}

using Clock = std::chrono::steady_clock;

}  // namespace

int run_process(const std::vector<std::string>& argv, bool stdout_to_stderr, int* interrupted, int* killed_by) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // SIGINT, SIGTERM and SIGHUP to ztune go to the job while it runs (without
  // SA_RESTART, so that the wait below wakes up).
  g_signal = 0;
  g_child = 0;
  struct sigaction forward {}, old_int {}, old_term {}, old_hup {};
  forward.sa_handler = forward_signal;
  sigemptyset(&forward.sa_mask);
  ::sigaction(SIGINT, &forward, &old_int);
  ::sigaction(SIGTERM, &forward, &old_term);
  ::sigaction(SIGHUP, &forward, &old_hup);
  auto restore = [&] {
    ::sigaction(SIGINT, &old_int, nullptr);
    ::sigaction(SIGTERM, &old_term, nullptr);
    ::sigaction(SIGHUP, &old_hup, nullptr);
    g_child = 0;
  };

  // The child: a session of its own, so that every rank the launcher starts
  // stays findable by its session id even after the launcher is gone (kill -9
  // of mpirun); SIGTERM when ztune dies, however it dies (kill -9, the
  // planner closing); no input (mpirun would otherwise forward the terminal's).
  // Only async-signal-safe calls between fork and exec.
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setsid();
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != parent) ::_exit(127);  // ztune died before the line above
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    // SIGXFSZ too: main ignores it for ztune's own writes; the launcher gets the default it had.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGXFSZ}) ::sigaction(sig, &dfl, nullptr);
    const int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, STDIN_FILENO);
    if (stdout_to_stderr) ::dup2(STDERR_FILENO, STDOUT_FILENO);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  if (pid < 0) {
    restore();
    return 127;
  }
  g_child = pid;
  if (g_signal != 0) ::kill(pid, g_signal);  // arrived between the handler and the spawn

  // Wait for the launcher to end without reaping it (WNOWAIT), so that its pid,
  // and with it the session id, cannot be reused while its ranks are swept.
  bool forwarded_to_ranks = false;
  Clock::time_point deadline{};
  for (;;) {
    siginfo_t info{};
    const int flags = WEXITED | WNOWAIT | (g_signal != 0 ? WNOHANG : 0);
    const int w = ::waitid(P_PID, static_cast<id_t>(pid), &info, flags);
    if (w == 0 && info.si_pid == pid) break;
    if (w < 0 && errno != EINTR) break;
    if (g_signal == 0) continue;
    // Interrupted: the launcher has the signal; the ranks get it too, and
    // whatever still runs after a grace period is killed.
    if (!forwarded_to_ranks) {
      forwarded_to_ranks = true;
      for (pid_t p : session_members(pid)) ::kill(p, g_signal);
      deadline = Clock::now() + std::chrono::seconds(2);
    } else if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      for (pid_t p : session_members(pid)) ::kill(p, SIGKILL);
    }
    ::usleep(20'000);
  }
  kill_session(pid);  // ranks orphaned by a launcher that died (or was killed) before them
  int status = 0;
  pid_t reaped = -1;
  while ((reaped = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
  }
  const int sig = g_signal;
  restore();
  if (reaped != pid) return 127;
  if (interrupted != nullptr) *interrupted = sig;
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (killed_by != nullptr && WIFSIGNALED(status)) *killed_by = WTERMSIG(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string launch_failure(const std::string& launcher, int rc, int killed_by) {
  if (killed_by != 0)
    return "the launcher " + launcher + " was killed by " + signal_name(killed_by) + " (signal " +
           std::to_string(killed_by) + "); its ranks were ended";
  // Also stored with the run (history show), where nothing is "above".
  return "the job failed (exit " + std::to_string(rc) + "); its ranks' messages went to the launching terminal";
}

}  // namespace ztune::cli
