#pragma once
// The run record (schema "ztune.runrecord/1"), written by rank 0: plan and model
// with their digests, per-step time, loss, gradient norm and learning rate, the
// median step time, per-operation-type time and count, per-collective bytes,
// algbw and busbw (nccl-tests' definitions, see comm_stats.hpp), peak memory per
// rank by category, and the environment. The CLI stores it; the executor never
// opens the database.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/executor/backend.hpp"
#include "ztune/executor/communicator.hpp"
#include "ztune/executor/trainer.hpp"
#include "ztune/vocab/run_record.hpp"  // json_fnv1a: the digests the reader checks; median_step_time

namespace ztune::executor {

struct StepRecord {
  int step = 0;  // 1-based
  StepResult result;
};


struct RunRecordInput {
  nlohmann::json plan_file;                  // plan_file_to_json of what ran
  std::vector<StepRecord> steps;
  int tokens_per_step = 0;
  Backend* backend = nullptr;                // rank 0's
  std::vector<Communicator*> comms;          // rank 0's groups
  // memory[rank][category] peak bytes, and the device-total peak per rank.
  std::vector<std::vector<double>> memory;
  std::vector<double> peak_total;
  std::vector<double> peak_host_total;
  // at_peak[rank][category]: what each device category held at that rank's
  // device-total peak (host categories 0).
  std::vector<std::vector<double>> at_peak;
  int threads = 1;
  std::string data;
  std::optional<bool> nvme_direct_io;  // NVMe offload: O_DIRECT granted (all ranks), or the page cache
};

nlohmann::json make_run_record(const RunRecordInput& in);

}  // namespace ztune::executor
