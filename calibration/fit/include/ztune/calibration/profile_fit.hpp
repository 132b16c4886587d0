#pragma once
// Calibration: fitting the hardware profile (hardware_profile.hpp) to what was
// measured (DESIGN.md "Calibration"). Two sources, two least-squares fits, both
// with Eigen:
//
//  1. Microbenchmarks (ztune-calibrate-worker's measurements, schema
//     "ztune.measurements/1"): each rate is fitted by (robust, relative-error)
//     linear least squares against the same formula op_costs.cpp predicts with:
//       GEMM        t = FLOPs / (peak · eff(FLOPs))        → the efficiency table
//                   (linear in the table's rows: eff is log-interpolated)
//       attention   eff_att = attention_factor · eff(FLOPs)
//       memory      t = bytes / (HBM · η) + kernels · launch
//       collective  t = base + α · steps(kind, n) + S · busfactor(kind, n) / (bw · η)
//                   per fabric level (pooled over collectives: the profile's form)
//                   and per collective and layout (the report's α–β table)
//       copies      t = bytes / (PCIe · η)
//       host Adam   the node's parameters per second
//  2. Training runs (run records): Levenberg–Marquardt on the relative error of
//     the predicted iteration time (predict_time) over the profile's scalar
//     parameters, regularised towards the microbenchmark fit (a Gaussian prior
//     in log space), so parameters the runs cannot see stay where the
//     microbenchmarks put them.
//
// The profile holds fractions of the cluster's figures. Where a measured rate
// exceeds the figure (always the case for a CPU cluster, whose figures are
// declared rough defaults), the fit raises the figure in a calibrated copy of
// the cluster and says so in `notes`: a fraction above 1 cannot be written.
//
// Example:
//   auto m = load_measurements("measurements.json");
//   ProfileFit fit = fit_profile(m, cluster, default_profile_for(cluster));
//   RunFit runs = fit_profile_to_runs(observations, fit.cluster, fit.profile);
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/model/op_costs.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/vocab/run_record.hpp"
#include "ztune/vocab/transformer.hpp"

namespace ztune {

// ---------------------------------------------------------------- measurements

struct GemmSample {
  double m = 0, n = 0, k = 0;
  double flops = 0;   // 2·m·n·k
  double time_s = 0;  // median per call, slowest rank
  double spread = 0;  // (p75 − p25) / median of the timed rounds
  int repeats = 0;    // timed rounds
};
struct AttentionSample {
  double flops = 0;   // 4·b·s²·c, the cost model's count
  double time_s = 0;
  double spread = 0;
  int repeats = 0;
};
struct MemorySample {
  std::string kernel;
  double bytes = 0;   // minimum read + write traffic
  int kernels = 1;    // launches per call
  double time_s = 0;
  double spread = 0;
  int repeats = 0;
};
struct CopySample {
  std::string direction;  // "h2d" | "d2h"
  double bytes = 0;
  double time_s = 0;
  double spread = 0;
  int repeats = 0;
};
struct CollectiveSample {
  Collective kind = Collective::all_reduce;
  std::string name;        // as measured ("sendrecv" is Collective::send)
  std::string group;       // layout name ("intra:2")
  int ranks = 2;
  int per_node = 2;
  bool crosses_nodes = false;
  double bytes = 0;        // nccl-tests S
  double time_s = 0;
  double spread = 0;
  int repeats = 0;
};

/// ztune-calibrate-worker's output (schema "ztune.measurements/1").
struct Measurements {
  std::string backend;     // "cpu" | "cuda"
  Precision gemm_precision = Precision::fp32;  // the GEMM operands' precision (fp32 accumulation)
  int ranks = 1;
  int nodes = 1;
  int ranks_per_node = 1;
  int threads_per_rank = 1;
  std::vector<GemmSample> gemm;
  std::vector<AttentionSample> attention;
  std::vector<MemorySample> memory;
  std::vector<CopySample> copies;
  std::vector<CollectiveSample> collectives;
  std::optional<double> host_adam_node_params_per_s;
  std::vector<std::string> notes;
  std::int64_t wrong = 0;  // elements that failed a data check
  double elapsed_s = 0;
};

/// The bytes a memory-bound sample costs at the profile's memory-bound rate
/// (hbm_bandwidth · memory_bandwidth_efficiency): on GPUs its traffic; on CPU
/// ranks its work as the time model counts the CPU executor's kernels
/// (cpu_benchmark_work_per_byte), where GeLU's tanh, not its 8 bytes, bounds
/// it. nullopt: a CPU kernel the time model does not know (not fitted, not
/// judged). The fit and the point model both price samples through this.
std::optional<double> memory_work_bytes(const MemorySample& s, DeviceKind device);

/// The host<->device copies the PCIe fit uses and the point model judges:
/// those of ≥ 1 MiB (the offload path moves large tensors; nccl-tests quotes
/// bandwidth at large sizes, and a CPU rank's small memcpy stays in cache at
/// 3x the rate), or all of them when none is that large. Indices into `copies`.
std::vector<std::size_t> copies_in_fit(const std::vector<CopySample>& copies);

/// Parses a measurements document; InputError names the file and JSON path.
Measurements measurements_from_json(const nlohmann::json& doc, const std::string& file);
Measurements load_measurements(const std::string& path);

// ---------------------------------------------------------------- fit report

/// One fitted quantity: the value before (prior profile / cluster) and after,
/// from how many points, with the fit's RMS relative residual.
struct FittedValue {
  std::string name;    // "gemm efficiency @1e+08 FLOPs", "intra-node busbw efficiency", ...
  double before = 0;
  double after = 0;
  std::string unit;    // "", "us", "GB/s", ...
  int points = 0;
  double rms_rel_residual = 0;
  /// False: the data did not determine it (posterior no narrower than half
  /// the prior), so it stays at its prior (the starting profile's value).
  bool determined = true;
};

/// α–β of one collective on one layout (the report's table): t = α·steps + S·bf/busbw.
struct CollectiveFit {
  std::string collective;
  std::string group;
  bool crosses_nodes = false;
  int ranks = 0;
  double latency_s = 0;     // intercept per call (base + α·steps together)
  double busbw_gbps = 0;    // 1/slope × bus factor
  int points = 0;
  double rms_rel_residual = 0;
};

struct ProfileFit {
  HardwareProfile profile;
  Cluster cluster;                  // with re-measured figures (see the header comment)
  std::vector<FittedValue> values;  // profile and cluster fields, before → after
  std::vector<CollectiveFit> collectives;
  std::vector<std::string> notes;   // figures raised, levels not measured, caps
  /// Points the robust fit down-weighted as outliers, each named ("gemm
  /// 512x512x512: measured 1.2 ms, 100x the fit").
  std::vector<std::string> outliers;
  /// The fit's robust residual scale per section ("gemm", "memory-bound", ...).
  std::map<std::string, double> scale;
  /// Points left out before fitting because their rounds spread wider than
  /// kMaxPointSpread even after re-measuring (each named, with its spread).
  std::vector<std::string> dropped;
  double median_spread = 0;  // over every point measured (IQR / median of its rounds)
  int points = 0;            // points measured (before dropping)
};

/// A point whose rounds spread (IQR / median) wider than this after the
/// worker's adaptive re-measuring is left out of the fit and named.
inline constexpr double kMaxPointSpread = 0.25;

/// Fits `prior` (and the cluster's figures) to the microbenchmarks. Sections
/// with no samples keep the prior's values (noted). `name` names the result.
ProfileFit fit_profile(const Measurements& m, const Cluster& c, const HardwareProfile& prior,
                       const std::string& name);

// ---------------------------------------------------------------- training runs

/// One measured training run: what ran and what it took.
struct RunObservation {
  std::string label;                    // the record file as given, or the stored run's id
  std::string backend;                  // the record's environment.backend: "cpu" or "cuda-…"
  std::string cluster;                  // the cluster it ran on ($.plan_file.cluster.name; "" when not embedded)
  Transformer model;
  Plan plan;
  double measured_iteration_s = 0;      // the record's median step time
  double measured_tokens_per_s = 0;
  std::vector<double> peak_memory_bytes;  // per rank (device categories)
  std::map<std::string, double> op_seconds;  // rank 0's compute time by kind over the run (ops_rank0.*.time_s)
  int steps = 0;
  // Set when multi-threaded ranks asked for more threads than their host has
  // (ranks on the host × threads per rank > the record's hardware_threads):
  // they time-shared cores, a contention the cost model does not price, so
  // the run is kept out of fits. Says the counts.
  std::optional<std::string> oversubscribed;
};

/// "R rank(s) × T thread(s) on a host of H hardware threads" when
/// multi-threaded ranks ask for more threads than the host has (H 0: not
/// known, never judged), else nullopt: RunObservation::oversubscribed, and
/// `ztune run`'s note at launch.
std::optional<std::string> oversubscription(long long ranks, long long threads_per_rank, long long hardware_threads);

/// Whether two observations are one measurement read twice (a record file
/// given again, a copy of it, or the record of a run the database also
/// stored): the same model and plan, and the same steps and step time to the
/// last bit, which two runs never share.
[[nodiscard]] bool same_measurement(const RunObservation& a, const RunObservation& b);

/// The fields the fit needs from a run record (run_record.hpp). Its median step
/// time must be > 0 (a record without steps measured nothing).
RunObservation run_observation_from_record(const RunRecord& record);
/// run_record_from_json(record, file), then the above: the one strict reader.
RunObservation run_observation_from_record(const nlohmann::json& record, const std::string& file);

struct PredictionError {
  std::string label;
  std::string plan;        // plan summary
  double measured_s = 0;
  double predicted_s = 0;
  [[nodiscard]] double error() const { return measured_s > 0 ? (predicted_s - measured_s) / measured_s : 0; }
};

/// Predicted vs measured iteration time of each run under (cluster, profile).
std::vector<PredictionError> prediction_errors(const std::vector<RunObservation>& runs, const Cluster& c,
                                               const HardwareProfile& hw);
/// Mean of |error| (0 for none).
double mean_abs_error(const std::vector<PredictionError>& e);

struct RunFitOptions {
  /// Width of the prior around the starting profile, as a factor (log space):
  /// for values the microbenchmarks measured, and for the framework overheads
  /// (which only runs can see).
  double measured_prior_factor = 3.0;
  double overhead_prior_factor = 100.0;
  /// Relative timing noise of one run's median step time: the runs' residuals
  /// are divided by it, so it weighs the data against the prior.
  double measurement_noise = 0.05;
  int max_iterations = 60;
  /// At most this many parameters refined (< 0: as many as the runs determine).
  int max_parameters = -1;
  /// A trust region: each refined parameter moves at most this far in its log
  /// space (a factor e^max_log_step for rates and times; ∞: no limit). The
  /// calibration loop narrows it when a fit would leave the reference plans'
  /// bounds, so the loop learns in steps it can check.
  double max_log_step = std::numeric_limits<double>::infinity();
};

struct RunFit {
  HardwareProfile profile;
  Cluster cluster;
  std::vector<FittedValue> values;
  std::vector<std::string> notes;
  double mean_abs_error_before = 0;
  double mean_abs_error_after = 0;
  int iterations = 0;
  std::vector<std::string> refined;        // parameters the runs determined (and moved)
  std::vector<std::string> held_at_prior;  // parameters left at the starting profile
};

/// Fits the profile's scalars (GEMM and memory-bound rates, attention factor,
/// launch and framework overheads, intra-node collective rate, overlap) to the
/// runs' iteration times, starting from (and regularised towards) `start`.
/// Only the parameters the runs determine move (`refined`), at most as many as
/// the runs have independent measurements; the rest stay at `start`.
RunFit fit_profile_to_runs(const std::vector<RunObservation>& runs, const Cluster& c, const HardwareProfile& start,
                           const RunFitOptions& options = {});

}  // namespace ztune
