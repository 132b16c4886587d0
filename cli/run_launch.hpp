#pragma once
// How `ztune run` starts the executor's ranks: srun inside a Slurm allocation,
// else Open MPI's mpirun (with --allow-run-as-root and --oversubscribe: CI and
// these machines run as root, and the CPU backend runs more ranks than cores).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ztune::cli {

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
};
/// ztune-worker's argument list for `job` (worker path first).
std::vector<std::string> worker_args(const WorkerJob& job);
/// The launcher command line for `np` ranks of `worker_args` (worker path first).
std::vector<std::string> launch_command(int np, const std::string& hosts, const std::vector<std::string>& worker_args);
/// Runs argv (no shell); the child's stdout goes to our stderr when `stdout_to_stderr`.
/// Returns the exit status (128 + signal when killed).
int run_process(const std::vector<std::string>& argv, bool stdout_to_stderr);

}  // namespace ztune::cli
