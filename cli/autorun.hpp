#pragma once
// `ztune --cluster C --model M --run`: after the search, run its best plan.
// Writes the plan file, checks the devices it needs are there (else refuses,
// offering --dry-run), launches the executor's ranks (`ztune run`'s launcher:
// mpirun, or srun inside Slurm), reads the run record, prints measured beside
// predicted (iteration time, tokens/s, peak memory per rank, per-operation
// time), stores both in the results database, and refits the profile to the
// stored runs of the cluster (--no-refine skips it). --dry-run prints the
// launch command, the plan and the exported DeepSpeed/Megatron configs only.
#include <optional>
#include <string>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/results_db.hpp"

namespace ztune::cli {

struct AutorunOptions {
  int steps = 10;
  bool refine = true;
  bool dry_run = false;
  std::string plan_out;   // where to write the plan (default: a new directory under /tmp)
  std::string hosts;      // Open MPI host list for several nodes
  int threads = 1;        // compute threads per rank
  std::string data = "synthetic";
  std::string nvme_dir;   // NVMe offload's per-rank files (default: the worker's, the temporary directory)
};

/// Runs `plan` (the search's best) and reports; returns the process exit code
/// (0 ok, 1 refused or failed run, 2 bad input). `db` may be empty (--no-db).
/// `c` is `catalog_cluster` with `hw`'s measured figures (what predicts).
int run_best_plan(const Plan& plan, const Transformer& m, const Cluster& catalog_cluster, const Cluster& c,
                  const HardwareProfile& hw,
                  const AutorunOptions& o, std::optional<ResultsDb>& db);

}  // namespace ztune::cli
