#pragma once
// How `ztune run` starts the executor's ranks: srun inside a Slurm allocation,
// else Open MPI's mpirun (with --allow-run-as-root and --oversubscribe: CI and
// these machines run as root, and the CPU backend runs more ranks than cores).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ztune::cli {

/// The program `name` next to this ztune (/proc/self/exe's folder) when it is
/// there, else `built` (the build's path of it, when the build gave one), else
/// `name` for PATH to find.
std::string sibling_program(const std::string& name, const char* built);
/// The ztune-worker next to this ztune, or the build's (ZTUNE_WORKER_PATH).
std::string worker_path();
/// What one training job of ztune-worker needs, as `ztune run` and `ztune --run` launch it.
struct WorkerJob {
  std::string plan_path;
  std::string record_path;
  std::string checkpoint_dir;
  std::string backend = "cpu";  // ztune-worker --backend
  int steps = 10;
  int threads = 1;
  std::string data = "synthetic";
  std::string nvme_dir;         // empty: the worker's default
  std::optional<std::uint64_t> seed;
  int checkpoint_every = 0;     // ztune-worker --checkpoint-every (0: none)
  int keep_checkpoints = 0;     // ztune-worker --keep-checkpoints (0: every one)
  std::optional<int> collective_timeout_s{};  // ztune-worker --collective-timeout (absent: its default)
  bool resume = false;          // ztune-worker --resume: from checkpoint_dir's latest checkpoint
  std::string record_fallback{};  // ztune-worker --record-fallback (empty: none)
  std::string progress{};         // ztune-worker --progress (empty: none)
};

/// ztune-worker's argument list for `job` (worker path first).
std::vector<std::string> worker_args(const WorkerJob& job);
/// A temporary directory ($TMPDIR, else /tmp; named PREFIX-XXXXXX) removed
/// when it goes out of scope, however the command ends, unless kept (--keep,
/// or keep() when a message points at what it holds). One not kept holds its
/// owner's pid and start time (.ztune-owner); making one first removes the
/// PREFIX-* directories whose owner is gone (a ztune killed by SIGKILL).
class TempDir {
 public:
  TempDir(bool keep, const std::string& prefix);
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();
  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] bool kept() const { return keep_; }
  /// Leaves the directory on disk after all (what it holds is needed).
  void keep();

 private:
  std::string path_;
  bool keep_;
};

/// Whether this machine has an NVIDIA device (the driver's /dev/nvidia0, /dev/nvidia1, ...):
/// CUDA ranks started here without one would each find none (run and calibrate say so first).
[[nodiscard]] bool has_nvidia_device();
/// Whether `launch_command` starts the ranks on this machine: no --hosts and
/// not srun inside a Slurm allocation.
[[nodiscard]] bool ranks_run_here(const std::string& hosts);
/// The memory this machine's processes may use together, in bytes: the
/// physical memory (/proc/meminfo MemTotal), less when the cgroup ztune runs
/// in, or one above it, is limited (v2 memory.max, v1 memory.limit_in_bytes);
/// absent when none of them can be read.
[[nodiscard]] std::optional<double> machine_memory_bytes();
/// The launcher command line for `np` ranks of `worker_args` (worker path first).
std::vector<std::string> launch_command(int np, const std::string& hosts, const std::vector<std::string>& worker_args);
/// Runs argv (no shell) in a session of its own, stdin from /dev/null; the child's
/// stdout goes to our stderr when `stdout_to_stderr`. While it runs, SIGINT,
/// SIGTERM and SIGHUP to ztune are forwarded to it and to every process of its
/// session (the ranks), and what still runs 2 s later is killed; a second signal
/// kills at once. The child gets SIGTERM if ztune itself dies (kill -9). When the launcher ends, any rank left in its session (after a
/// kill -9 of mpirun) is killed before this returns. Returns the exit status
/// (128 + signal when killed); `interrupted`, when given, gets the signal ztune
/// received (0: none), and `killed_by` the signal that ended the launcher
/// itself (0: it exited).
int run_process(const std::vector<std::string>& argv, bool stdout_to_stderr, int* interrupted = nullptr,
                int* killed_by = nullptr);

/// Why a launch that returned `rc` failed, for "ztune run: ...": the launcher
/// `launcher` (argv[0]) killed by a signal says so, as nothing else does;
/// else the exit status, the ranks' and launcher's messages having gone to
/// the terminal (the text is stored with the run too).
[[nodiscard]] std::string launch_failure(const std::string& launcher, int rc, int killed_by);

}  // namespace ztune::cli
