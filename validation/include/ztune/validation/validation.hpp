#pragma once
// Validation against published runs (STYLE.md #13): data/validation/validation.json
// names the sources (published_runs.json rows by id prefix, vTrain's CSVs), the
// cluster each ran on, and the tolerance each states; run_validation predicts
// every case and reports Published / Predicted / Δ% per case and MAPE per source.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/prediction.hpp"

namespace ztune {

/// The shape of the plan a published run ran (time cases; all zero for the
/// hardware-free formula cases): what the runs ztune was checked on span
/// (accuracy.hpp, Envelope).
struct RunShape {
  int gpus = 0;
  double params = 0;  // the model's parameters
  int hidden = 0;
  int seq_len = 0;
  int tp = 0;
  int pp = 0;
  int cp = 1;
  int ulysses = 1;
  std::uint32_t features = 0;  // RunFeature bits: the modes the plan uses that change its time
  [[nodiscard]] bool empty() const { return gpus == 0; }
};

/// The modes of a plan that a band measured on runs without them does not
/// cover (each is priced by its own terms: an offload's transfers, 1-bit
/// Adam's compressed exchange, a sparse layout's kernels, another precision).
enum RunFeature : std::uint32_t {
  kOptimizerOffloadCpu = 1u << 0,
  kOptimizerOffloadNvme = 1u << 1,
  kParamOffload = 1u << 2,
  kOnebitAdam = 1u << 3,
  kSparseAttention = 1u << 4,
  kFp8 = 1u << 5,
  kFp32 = 1u << 6,
  kZero3 = 1u << 7,
  kHybridShard = 1u << 8,
  kCpuCheckpointing = 1u << 9,
  kZeroPP = 1u << 10,
  kParamOffloadNvme = 1u << 11,
  kFp16 = 1u << 12,
  // Tensor-parallel communication overlapped with the GEMMs (Megatron-Core's
  // --tp-comm-overlap): its hidden share is fitted on the runs that used it.
  kTpCommOverlap = 1u << 13,
};
/// What each RunFeature bit is called in the extrapolation line ("CPU optimizer offload").
[[nodiscard]] const char* run_feature_name(std::uint32_t bit);
[[nodiscard]] RunShape run_shape(const Transformer& m, const Plan& p);

struct ValidationCase {
  std::string source;     // the source's name ("Korthikanti2022-T5")
  std::string id;         // run id (published_runs.json) or "csv:<line>"
  std::string metric;     // "iteration_time_s", "memory_gb_per_gpu", ...
  std::string detail;     // model and plan in one line
  std::string gpu;        // the GPU the run was measured on ("" for hardware-free formulas)
  std::string engine;     // the engine family that ran it ("megatron", "deepspeed", "fsdp"; "" for formulas)
  double published = 0;
  double predicted = 0;
  double tolerance_pct = 0;  // the case fails above this |Δ%|
  std::string assumed;       // what the run does not publish and ztune assumed to predict it ("" = nothing)
  /// Time cases of runs that ran: the memory model's GPU bytes for the plan
  /// (the most loaded stage) over the GPU's capacity; 0 where not a run's
  /// time. Above 1 the model says the run could not have fitted.
  double memory_fraction = 0;
  RunShape shape;  // the run's plan and model (time cases of runs)
  [[nodiscard]] double error_pct() const { return published != 0 ? 100.0 * (predicted - published) / published : 0; }
  /// The error as speed: > 0 when ztune predicts the run faster than measured
  /// (a shorter time, a higher throughput or MFU), whatever the metric.
  [[nodiscard]] double optimism_pct() const;
  [[nodiscard]] bool ok() const;
};

struct SourceSummary {
  std::string name;
  std::string description;
  std::string kind;    // validation.json's kind: published_runs, vtrain_csv, engine_runs
  std::string engine;  // the source's engine family ("" for formulas)
  int cases = 0;
  int failed = 0;               // cases above their tolerance
  double mape = 0;              // mean |Δ%|
  double mean_signed_pct = 0;   // mean optimism_pct() of the time cases (> 0: ztune predicts too fast)
  double max_abs_pct = 0;
  double mape_tolerance_pct = 0;
  [[nodiscard]] bool ok() const { return failed == 0 && mape <= mape_tolerance_pct; }
};

/// A published run ztune cannot predict, and why (never dropped silently).
struct SkippedRun {
  std::string source;
  std::string id;
  std::string reason;
};

struct ValidationReport {
  std::vector<ValidationCase> cases;
  std::vector<SkippedRun> skipped;
  std::vector<SourceSummary> sources;
  double overall_mape = 0;
  [[nodiscard]] bool ok() const;
};

struct ValidationOptions {
  /// Replaces every case's default profile (data/profiles/<gpu>.json) when set.
  const HardwareProfile* profile = nullptr;
  /// The iteration-time predictor; predict_time by default. The simulator
  /// plugs in here for `ztune validate --simulate`.
  std::function<TimePrediction(const Transformer&, const Plan&, const Cluster&, const HardwareProfile&)> time;
  /// Only sources whose name contains this (empty: all).
  std::string only;
  /// Only sources run by this engine family ("megatron", "deepspeed", "fsdp";
  /// empty: all, the hardware-free formula sources included).
  std::string engine;
};

/// The time metrics of `r` (iteration time, MFU, per-layer times) measured on
/// GPUs of the family of `gpu` (its name up to the first '-': "A100" for
/// "A100-SXM4-80GB"), one summary per source, in the report's order: what a
/// prediction for that GPU has been checked against. Empty when none.
[[nodiscard]] std::vector<SourceSummary> time_accuracy(const ValidationReport& r, const std::string& gpu);
/// Whether a case's metric is a time metric (iteration time, throughput, MFU, per-layer time).
[[nodiscard]] bool is_time_metric(const std::string& metric);
/// "A100" for "A100-SXM4-80GB" (and "a100-sxm4-80gb"), "cpu" for "cpu-rank".
[[nodiscard]] std::string gpu_family(const std::string& gpu_name);

/// Runs every source of `<dir>/validation.json` (dir: data/validation by default).
/// Throws InputError naming the file and path for malformed data.
ValidationReport run_validation(const std::string& dir, const ValidationOptions& opt = {});

/// The default validation directory: <data_dir>/validation.
std::string default_validation_dir();

}  // namespace ztune
