#pragma once
// The run record (schema "ztune.runrecord/1", docs/formats.md) as a typed value,
// and its one reader. ztune-worker writes the document (executor/run_record.hpp);
// everything that reads one — `ztune run`, `ztune --run`, `ztune calibrate
// --records`, the stored runs the fit takes from the database, the planner's run
// panel — goes through read_run_record / run_record_from_json, which is strict:
// the exact key set (unknown or missing fields fail), every value type-checked,
// finite and in range, and the parts consistent with each other (one loss per
// step, the median step time, the throughput it gives, one memory line per rank
// of the plan). Every refusal is an InputError naming the file and the JSON path:
//   record.json: $.tokens_per_s: expected a number in [0, 1e+15], got -5
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/vocab/plan.hpp"

namespace ztune {

/// Bounds of a record's values: a step of more than 10⁶ s (11.6 days), a run of
/// more than 10⁹ s, more than 10¹⁸ bytes or 10¹⁵ tokens/s is no measurement.
inline constexpr double kMaxRecordStepSeconds = 1e6;
inline constexpr double kMaxRecordRunSeconds = 1e9;
inline constexpr double kMaxRecordBytes = 1e18;
inline constexpr double kMaxRecordTokensPerS = 1e15;

struct RunRecordStep {
  int step = 0;                     // 1-based, increasing
  double loss = 0;                  // mean cross-entropy per token, finite and >= 0
  std::optional<double> grad_norm;  // before clipping; nullopt: not finite (an fp16 overflow, written as null)
  double lr = 0;
  double time_s = 0;                // wall time of the step
  double loss_scale = 1;            // fp16's dynamic loss scale (1 otherwise)
  bool skipped = false;             // fp16: the update was skipped on overflow
};

/// Rank 0's compute of one kind over the whole run.
struct RunRecordOp {
  double time_s = 0;
  std::int64_t count = 0;
  std::optional<double> bytes;  // copies only
};

/// One collective kind in one process group of rank 0, over the whole run.
struct RunRecordCollective {
  std::int64_t count = 0;
  double bytes = 0;
  double time_s = 0;     // launch to completion
  double algbw_gbps = 0;  // nccl-tests' definitions (GB/s, decimal)
  double busbw_gbps = 0;
};

/// The communicator groups a record's collectives_rank0 may hold, as the
/// executor names them (process_groups.cpp): the world, the weights'
/// data-parallel group and its two levels, tensor, pipeline, the tied
/// embedding's ends, the sequence slot (context-parallel ring or Ulysses
/// all-to-all) and hybrid sharding's replica group.
inline constexpr const char* kRunRecordGroups[] = {"world", "dp",      "tp",      "pp",        "embed",
                                                   "dp_intra", "dp_inter", "cp", "ulysses", "dp_replica"};

struct RunRecordGroup {
  int ranks = 0;
  std::map<std::string, RunRecordCollective> collectives;  // by kind: all_reduce, ...
};

struct RunRecordRankMemory {
  int rank = 0;
  double peak_bytes = 0;       // device
  double peak_host_bytes = 0;
  std::map<std::string, double> by_category;  // the memory model's lines, each its own peak
  // What each device line held at the device peak (they sum to peak_bytes);
  // empty in records written before it was kept.
  std::map<std::string, double> at_peak;
};

struct RunRecord {
  std::string file;  // where it was read from (messages)
  PlanFile plan_file;  // with its model (the worker only runs plan files that embed one)
  std::string plan_digest, model_digest;
  std::string data;  // the token source
  std::vector<RunRecordStep> steps;  // may be empty: a resume that had nothing left to run
  std::vector<double> losses;        // steps[i].loss
  double step_time_s = 0;            // median of steps[].time_s (0 without steps)
  std::int64_t tokens_per_step = 0;
  double tokens_per_s = 0;           // tokens_per_step / step_time_s (0 without steps)
  std::map<std::string, RunRecordOp> ops_rank0;  // gemm, attention, memory_bound, host_adam, offload_copy
  std::map<std::string, RunRecordGroup> collectives_rank0;  // by group: kRunRecordGroups
  std::vector<RunRecordRankMemory> memory;  // one per rank, in rank order
  std::vector<double> peak_memory_bytes;    // memory[i].peak_bytes
  nlohmann::json environment;               // backend, host, versions: strings and numbers
  std::optional<std::string> nvme_io;       // "direct" | "buffered" with NVMe offload
  nlohmann::json document;                  // the record as read (stored verbatim in the database)

  /// Rank 0's time of one compute kind per step (0 when the kind or the steps are absent).
  [[nodiscard]] double op_seconds_per_step(const std::string& kind) const;
  /// The rank whose device peak is the largest (the lowest of equal ones): the
  /// one the memory model's most loaded stage answers for. 0 without memory.
  [[nodiscard]] std::size_t peak_rank() const;
};

/// Reads a run record already parsed; `file` names it in messages ("record.json",
/// "results.db run 7").
RunRecord run_record_from_json(const nlohmann::json& doc, const std::string& file);
/// The record's plan_digest and model_digest (and the checkpoint shards' plan
/// digest): FNV-1a 64 of a JSON document's compact text; `_hex` as 16 hex digits.
std::uint64_t json_fnv1a(const nlohmann::json& doc);
std::string json_fnv1a_hex(const nlohmann::json& doc);
/// FNV-1a 64 of bytes (the digests above, a checkpoint shard's checksum).
inline constexpr std::uint64_t kFnv1aOffset = 0xcbf29ce484222325ULL;
/// FNV-1a of `bytes`, continuing from `h` (a digest of what came before; the
/// offset basis for none), so a file can be digested chunk by chunk.
std::uint64_t fnv1a(std::string_view bytes, std::uint64_t h = kFnv1aOffset);
/// A 64-bit digest as the 16 hex digits the records and messages print.
std::string digest_hex(std::uint64_t digest);
/// Reads a run record file (read_json_file's limits apply).
RunRecord read_run_record(const std::string& path);
/// A record's step_time_s: the median of its steps' times (the mean of the two
/// middle ones for an even count; 0 without steps). Its writer, its reader and
/// a run's progress (run_progress.hpp) all take it from here.
[[nodiscard]] double median_step_time(std::vector<double> times);

}  // namespace ztune
