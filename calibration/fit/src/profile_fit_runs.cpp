// The training-run fit (profile_fit.hpp, part 2): Levenberg–Marquardt
// (Marquardt 1963) on the relative error of predict_time() against the runs'
// measured iteration times, over the profile's scalar parameters, with a
// Gaussian prior around the starting profile (ridge in the parameters'
// natural log space) so the few runs cannot drag what they do not observe.
// Only as many parameters move as the runs determine (issue 21): the runs'
// Jacobian at the start, in units of each parameter's prior width, is
// factorised with column pivoting (QR; Businger & Golub 1965); its rank (the
// directions whose data precision beats the prior's 4×) bounds how many
// parameters are refined, and forward selection picks which (the one that
// lowers the misfit most, while it does so by 2σ). The rest stay at the start
// and are reported as such. Three runs of three plans refine at most three
// parameters (four residuals each where the records time the kernels by kind);
// one plan run three times, as many as one run.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <optional>

#include <Eigen/Dense>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/calibration/profile_fit.hpp"
#include "ztune/model/time_model.hpp"

namespace ztune {

namespace {

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The record's environment against its host: the ranks that shared rank 0's
// host (a plan file's cluster puts node.gpus on each; else all ran there, as
// `ztune run` without --hosts launches them) times the threads each ran.
std::optional<std::string> record_oversubscription(const RunRecord& record) {
  const auto& env = record.environment;
  auto count = [&](const char* key) -> long long {
    return env.is_object() && env.contains(key) && env[key].is_number_integer() ? env[key].get<long long>() : 0;
  };
  long long ranks = static_cast<long long>(record.memory.size());
  if (record.plan_file.cluster) ranks = std::min<long long>(ranks, record.plan_file.cluster->node.gpus);
  return oversubscription(ranks, count("threads_per_rank"), count("hardware_threads"));
}

}  // namespace

std::optional<std::string> oversubscription(long long ranks, long long threads_per_rank, long long hardware_threads) {
  // Single-threaded ranks beyond the cores are priced (oversubscribed_view
  // shares a node's cores among them); a rank's threads sharing them are not.
  const long long per_rank = std::max(1LL, threads_per_rank);
  if (hardware_threads <= 0 || per_rank <= 1 || ranks * per_rank <= hardware_threads) return std::nullopt;
  return std::to_string(ranks) + " rank(s) × " + std::to_string(per_rank) + " thread(s) on a host of " +
         std::to_string(hardware_threads) + " hardware threads";
}

RunObservation run_observation_from_record(const RunRecord& record) {
  if (!(record.step_time_s > 0))
    throw InputError(record.file + ": $.step_time_s: expected a time > 0 (a run with steps), got " +
                     fmt("%g", record.step_time_s));
  RunObservation o;
  o.label = record.file;  // as given: two records of one name in different folders stay apart
  if (record.plan_file.cluster) o.cluster = record.plan_file.cluster->name;
  if (record.environment.is_object() && record.environment.contains("backend") &&
      record.environment["backend"].is_string())
    o.backend = record.environment["backend"].get<std::string>();
  o.model = *record.plan_file.model;
  o.plan = record.plan_file.plan;
  o.measured_iteration_s = record.step_time_s;
  o.measured_tokens_per_s = record.tokens_per_s;
  o.peak_memory_bytes = record.peak_memory_bytes;
  for (const auto& [kind, op] : record.ops_rank0) o.op_seconds[kind] = op.time_s;
  o.steps = static_cast<int>(record.steps.size());
  o.oversubscribed = record_oversubscription(record);
  return o;
}

bool same_measurement(const RunObservation& a, const RunObservation& b) {
  return a.model.name == b.model.name && a.plan.summary() == b.plan.summary() && a.steps == b.steps &&
         a.measured_iteration_s == b.measured_iteration_s && a.measured_tokens_per_s == b.measured_tokens_per_s;
}

RunObservation run_observation_from_record(const nlohmann::json& record, const std::string& file) {
  return run_observation_from_record(run_record_from_json(record, file));
}

std::vector<PredictionError> prediction_errors(const std::vector<RunObservation>& runs, const Cluster& c,
                                               const HardwareProfile& hw) {
  std::vector<PredictionError> out;
  for (const auto& r : runs)
    out.push_back({r.label, r.plan.summary(), r.measured_iteration_s, predict_time(r.model, r.plan, c, hw).iteration_s});
  return out;
}

double mean_abs_error(const std::vector<PredictionError>& e) {
  if (e.empty()) return 0;
  double sum = 0;
  for (const auto& x : e) sum += std::abs(x.error());
  return sum / static_cast<double>(e.size());
}

namespace {

// The fitted parameters, all in log space so the prior is a factor: multipliers
// act on a rate (θ = θ0·e^u); overheads are times (θ = max(θ0, floor)·e^u, the
// floor a thousandth of their typical size so a zero start can grow); the
// overlap is a fraction (θ = logistic(v0 + u)).
enum class Kind { multiplier, time, fraction };
struct Param {
  const char* name;
  const char* unit;
  Kind kind;
  double scale;  // time parameters: typical size (s)
  double sigma;  // prior width in u
};

double logistic(double v) { return 1.0 / (1.0 + std::exp(-v)); }

struct Model {
  std::vector<Param> params;
  std::vector<double> start;  // θ0
  std::vector<double> v0;     // softplus / logistic offsets
  HardwareProfile base;
  Cluster cluster;

  std::vector<bool> fixed;  // held at the start (not determined by the runs)

  double value(std::size_t j, double u) const {
    if (j < fixed.size() && fixed[j]) return start[j];
    switch (params[j].kind) {
      case Kind::multiplier: return start[j] * std::exp(u);
      case Kind::time: return std::max(start[j], 1e-3 * params[j].scale) * std::exp(u);
      case Kind::fraction: return logistic(v0[j] + u);
    }
    return start[j];
  }

  // The profile and cluster at u (efficiencies may exceed 1 while fitting; finish() normalises).
  void apply(const Eigen::VectorXd& u, HardwareProfile& hw, Cluster& c) const {
    hw = base;
    c = cluster;
    const double g = value(0, u(0)) / start[0];
    for (auto& row : hw.gemm_efficiency) row.efficiency *= g;
    hw.attention_gemm_factor = value(1, u(1));
    hw.memory_bandwidth_efficiency = value(2, u(2));
    hw.kernel_launch_s = value(3, u(3));
    hw.engine.host_op_s = value(4, u(4));
    hw.engine.microbatch_overhead_s = value(5, u(5));
    hw.engine.step_overhead_s = value(6, u(6));
    hw.intra_node.busbw_efficiency = value(7, u(7));
    hw.intra_node.base_latency_s = value(8, u(8));
    hw.engine.dp_overlap = value(9, u(9));
  }
};

Model make_model(const Cluster& c, const HardwareProfile& start, const RunFitOptions& o) {
  Model m;
  m.base = start;
  m.cluster = c;
  const double measured = std::log(std::max(1.0001, o.measured_prior_factor));
  const double overhead = std::log(std::max(1.0001, o.overhead_prior_factor));
  m.params = {{"gemm rate (× the table)", "", Kind::multiplier, 0, measured},
              {"attention factor", "", Kind::fraction, 0, 2.0},
              {"memory-bound efficiency", "", Kind::multiplier, 0, measured},
              {"kernel launch", "us", Kind::time, 1e-6, overhead},
              {"host op dispatch", "us", Kind::time, 1e-6, overhead},
              {"micro-batch overhead", "us", Kind::time, 1e-4, overhead},
              {"step overhead", "us", Kind::time, 1e-3, overhead},
              {"intra-node busbw efficiency", "", Kind::multiplier, 0, measured},
              {"intra-node base latency", "us", Kind::time, 1e-6, overhead},
              {"dp overlap", "", Kind::fraction, 0, 2.0}};
  m.start = {1.0,
             start.attention_gemm_factor,
             start.memory_bandwidth_efficiency,
             start.kernel_launch_s,
             start.engine.host_op_s,
             start.engine.microbatch_overhead_s,
             start.engine.step_overhead_s,
             c.intra_node.collective_efficiency.value_or(start.intra_node.busbw_efficiency),
             start.intra_node.base_latency_s,
             start.engine.dp_overlap};
  m.v0.assign(m.params.size(), 0.0);
  for (std::size_t j = 0; j < m.params.size(); ++j) {
    if (m.params[j].kind == Kind::fraction) {
      const double f = std::clamp(m.start[j], 1e-3, 1 - 1e-3);
      m.v0[j] = std::log(f / (1 - f));
    }
  }
  m.cluster.intra_node.collective_efficiency.reset();
  return m;
}

// Rank 0's measured compute per step by operation kind, where the record has
// it: beside the iteration time it tells the fit which rate is off (a GEMM rate
// and a memory-bound efficiency can trade against each other in a total).
struct MeasuredKinds {
  bool present = false;
  double gemm = 0, attention = 0, memory_bound = 0;
};
// Per-kernel timings of small kernels are noisier than a step's median (and
// on a shared machine rank 0's kernels are timed through other ranks'
// descheduling): their residuals weigh a fifth of the iteration time's, so the
// split by kind steers the fit without outvoting the time it must predict.
constexpr double kKindNoiseFactor = 5.0;

// A kind the cost model cannot match (a kernel its formula does not describe
// on this machine) must not outvote the iteration time: the kinds' residuals
// pass through Cauchy's loss, ρ(r) = c² ln(1 + (r/c)²) with c = 2, as the
// residual sign(r)·√ρ(r) (Triggs et al. 2000, the square-root trick).
double robust_kind(double r) {
  constexpr double kC = 2.0;
  const double rho = kC * kC * std::log1p((r / kC) * (r / kC));
  return r < 0 ? -std::sqrt(rho) : std::sqrt(rho);
}

std::vector<MeasuredKinds> measured_kinds(const std::vector<RunObservation>& runs) {
  std::vector<MeasuredKinds> out;
  for (const auto& run : runs) {
    MeasuredKinds k;
    auto kind = [&](const char* name) {
      const auto it = run.op_seconds.find(name);
      if (it == run.op_seconds.end()) return 0.0;
      return it->second / std::max(1, run.steps);
    };
    k.gemm = kind("gemm");
    k.attention = kind("attention");
    k.memory_bound = kind("memory_bound");
    k.present = run.steps > 0 && k.gemm > 0 && k.attention > 0 && k.memory_bound > 0;
    out.push_back(k);
  }
  return out;
}

// Residuals: the runs' relative errors (iteration time, then rank 0's compute
// by kind), then the prior's u_j/σ_j.
Eigen::VectorXd residuals(const Model& m, const std::vector<RunObservation>& runs,
                          const std::vector<MeasuredKinds>& kinds, const Eigen::VectorXd& u, double noise) {
  HardwareProfile hw;
  Cluster c;
  m.apply(u, hw, c);
  const auto n = static_cast<Eigen::Index>(runs.size());
  Eigen::Index with_kinds = 0;
  for (const auto& k : kinds) with_kinds += k.present ? 1 : 0;
  Eigen::VectorXd r(n + 3 * with_kinds + u.size());
  Eigen::Index at = n;
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& run = runs[static_cast<std::size_t>(i)];
    const double t = predict_time(run.model, run.plan, c, hw).iteration_s;
    r(i) = (t - run.measured_iteration_s) / run.measured_iteration_s / noise;
    const MeasuredKinds& k = kinds[static_cast<std::size_t>(i)];
    if (!k.present) continue;
    const ComputeByKind pk = compute_by_kind_rank0(run.model, run.plan, c, hw);
    const double kind_noise = noise * kKindNoiseFactor;
    r(at++) = robust_kind((pk.gemm - k.gemm) / k.gemm / kind_noise);
    r(at++) = robust_kind((pk.attention - k.attention) / k.attention / kind_noise);
    r(at++) = robust_kind((pk.memory_bound - k.memory_bound) / k.memory_bound / kind_noise);
  }
  for (Eigen::Index j = 0; j < u.size(); ++j) r(at + j) = u(j) / m.params[static_cast<std::size_t>(j)].sigma;
  return r;
}

// The number of data residuals (the leading rows of residuals()).
Eigen::Index data_rows(const std::vector<RunObservation>& runs, const std::vector<MeasuredKinds>& kinds) {
  Eigen::Index n = static_cast<Eigen::Index>(runs.size());
  for (const auto& k : kinds) n += k.present ? 3 : 0;
  return n;
}

// What the runs can determine: the data Jacobian at the start, each column in
// units of its parameter's prior width. `budget` is its rank counted by
// column-pivoted QR, a pivot counting when |R_kk| ≥ 2 (the data's precision in
// that direction at least 4× the prior's: the posterior narrower than half
// the prior); `candidates` are the parameters whose own column reaches 2.
struct Determinable {
  std::size_t budget = 0;
  std::vector<std::size_t> candidates;
};
Determinable determinable(const Model& m, const std::vector<RunObservation>& runs,
                          const std::vector<MeasuredKinds>& kinds, double noise) {
  const auto p = static_cast<Eigen::Index>(m.params.size());
  const Eigen::Index rows = data_rows(runs, kinds);
  const Eigen::VectorXd u0 = Eigen::VectorXd::Zero(p);
  const Eigen::VectorXd r0 = residuals(m, runs, kinds, u0, noise).head(rows);
  Eigen::MatrixXd jac(rows, p);
  constexpr double kStep = 1e-4;
  for (Eigen::Index j = 0; j < p; ++j) {
    Eigen::VectorXd up = u0;
    up(j) += kStep;
    jac.col(j) = (residuals(m, runs, kinds, up, noise).head(rows) - r0) / kStep * m.params[static_cast<std::size_t>(j)].sigma;
    if (!jac.col(j).allFinite()) jac.col(j).setZero();
  }
  Determinable d;
  const Eigen::ColPivHouseholderQR<Eigen::MatrixXd> qr(jac);
  const Eigen::MatrixXd r = qr.matrixR().template triangularView<Eigen::Upper>();
  for (Eigen::Index i = 0; i < std::min(rows, p); ++i) {
    if (!(std::abs(r(i, i)) >= 2.0)) break;
    ++d.budget;
  }
  for (Eigen::Index j = 0; j < p; ++j)
    if (jac.col(j).norm() >= 2.0) d.candidates.push_back(static_cast<std::size_t>(j));
  return d;
}

struct LmResult {
  Eigen::VectorXd u;
  double cost = 0;
  int iterations = 0;
};

// Levenberg–Marquardt over the parameters in `free` (the rest held at the
// start), from `u`.
LmResult levenberg_marquardt(Model& m, const std::vector<RunObservation>& runs, const std::vector<MeasuredKinds>& kinds,
                             double noise, const std::vector<std::size_t>& free, Eigen::VectorXd u, int max_iterations,
                             double max_step) {
  m.fixed.assign(m.params.size(), true);
  for (std::size_t j : free) m.fixed[j] = false;
  const auto q = static_cast<Eigen::Index>(free.size());
  Eigen::VectorXd r = residuals(m, runs, kinds, u, noise);
  double cost = r.squaredNorm();
  double lambda = 1e-2;
  int it = 0;
  for (; it < max_iterations && q > 0; ++it) {
    // Forward-difference Jacobian (the model has max()/min() kinks; a step of
    // 1e-4 in log space stays on one side of them almost always).
    Eigen::MatrixXd jac(r.size(), q);
    constexpr double kStep = 1e-4;
    for (Eigen::Index j = 0; j < q; ++j) {
      Eigen::VectorXd up = u;
      up(static_cast<Eigen::Index>(free[static_cast<std::size_t>(j)])) += kStep;
      jac.col(j) = (residuals(m, runs, kinds, up, noise) - r) / kStep;
    }
    const Eigen::MatrixXd jtj = jac.transpose() * jac;
    const Eigen::VectorXd jtr = jac.transpose() * r;
    bool improved = false;
    bool converged = false;
    for (int tries = 0; tries < 12 && !improved; ++tries) {
      Eigen::MatrixXd a = jtj;
      for (Eigen::Index j = 0; j < q; ++j) a(j, j) += lambda * (jtj(j, j) + 1e-12);
      const Eigen::VectorXd step_q = a.ldlt().solve(-jtr);
      Eigen::VectorXd trial = u;
      for (Eigen::Index j = 0; j < q; ++j) {
        double& x = trial(static_cast<Eigen::Index>(free[static_cast<std::size_t>(j)]));
        x = std::clamp(x + step_q(j), -max_step, max_step);
      }
      const Eigen::VectorXd rt = residuals(m, runs, kinds, trial, noise);
      const double ct = rt.squaredNorm();
      if (std::isfinite(ct) && ct < cost) {
        const double gain = cost - ct;
        u = trial;
        r = rt;
        cost = ct;
        lambda = std::max(1e-9, lambda / 3);
        improved = true;
        converged = gain < 1e-10 * std::max(1.0, cost);
      } else {
        lambda *= 4;
      }
    }
    if (!improved || converged) break;
  }
  return {u, cost, it};
}

// A parameter joins the fit only if it lowers the cost (χ², the residuals
// being in units of their noise) by at least this: a 2σ improvement.
constexpr double kMinCostGain = 4.0;

}  // namespace

RunFit fit_profile_to_runs(const std::vector<RunObservation>& runs, const Cluster& c, const HardwareProfile& start,
                           const RunFitOptions& options) {
  RunFit out;
  out.profile = start;
  out.cluster = c;
  out.mean_abs_error_before = mean_abs_error(prediction_errors(runs, c, start));
  out.mean_abs_error_after = out.mean_abs_error_before;
  if (runs.empty()) {
    out.notes.push_back("runs: none measured; the profile is the microbenchmark fit");
    return out;
  }
  Model m = make_model(c, start, options);
  const std::vector<MeasuredKinds> kinds = measured_kinds(runs);
  const double noise = std::max(1e-4, options.measurement_noise);
  const auto p = static_cast<Eigen::Index>(m.params.size());
  // Forward selection (stepwise regression; Efroymson 1960): the parameter
  // that lowers the cost most joins, while it lowers it by a 2σ margin and
  // the runs determine that many directions. What never joins stays at the
  // start and is reported as the prior's.
  const Determinable d = determinable(m, runs, kinds, noise);
  std::size_t budget = d.budget;
  if (options.max_parameters >= 0) budget = std::min(budget, static_cast<std::size_t>(options.max_parameters));
  std::vector<std::size_t> free;
  Eigen::VectorXd u = Eigen::VectorXd::Zero(p);
  m.fixed.assign(m.params.size(), true);
  double cost = residuals(m, runs, kinds, u, noise).squaredNorm();
  int it = 0;
  while (free.size() < budget) {
    std::optional<LmResult> best;
    std::size_t best_j = 0;
    for (std::size_t j : d.candidates) {
      if (std::find(free.begin(), free.end(), j) != free.end()) continue;
      std::vector<std::size_t> trial = free;
      trial.push_back(j);
      LmResult res = levenberg_marquardt(m, runs, kinds, noise, trial, u, options.max_iterations, options.max_log_step);
      it += res.iterations;
      if (!best || res.cost < best->cost) {
        best = std::move(res);
        best_j = j;
      }
    }
    if (!best || cost - best->cost < kMinCostGain) break;
    free.push_back(best_j);
    u = best->u;
    cost = best->cost;
  }
  m.fixed.assign(m.params.size(), true);
  for (std::size_t j : free) m.fixed[j] = false;
  out.iterations = it;

  // Materialise: fractions above 1 become raised cluster figures (a rate
  // cannot exceed its figure in a profile), as the microbenchmark fit does.
  HardwareProfile hw;
  Cluster fitted;
  m.apply(u, hw, fitted);
  // On a GPU the datasheet figures bound the rates: efficiencies cap at 1. A
  // CPU cluster's figures are rough defaults, which a faster measurement raises.
  const bool cpu = c.device_kind == DeviceKind::cpu;
  double top = 0;
  for (const auto& row : hw.gemm_efficiency) top = std::max(top, row.efficiency);
  if (top > 1) {
    for (auto& row : hw.gemm_efficiency) row.efficiency = cpu ? row.efficiency / top : std::min(1.0, row.efficiency);
    if (cpu) fitted.node.gpu.peak_tflops_fp32 *= top;
    out.notes.push_back(cpu ? "runs: GEMMs ran above the fp32 peak figure; peak raised to " +
                                  fmt("%.4g", fitted.node.gpu.peak_tflops_fp32) + " TFLOP/s per rank"
                            : std::string("runs: GEMMs fitted above the datasheet peak; efficiencies capped at 1"));
  }
  if (hw.memory_bandwidth_efficiency > 1) {
    if (cpu) fitted.node.gpu.hbm_bandwidth_gbps *= hw.memory_bandwidth_efficiency;
    out.notes.push_back(cpu ? "runs: memory-bound kernels ran above the bandwidth figure; raised to " +
                                  fmt("%.4g", fitted.node.gpu.hbm_bandwidth_gbps) + " GB/s per rank"
                            : std::string("runs: memory-bound kernels fitted above the datasheet bandwidth; "
                                          "efficiency capped at 1"));
    hw.memory_bandwidth_efficiency = 1;
  }
  if (hw.intra_node.busbw_efficiency > 1) {
    if (cpu) fitted.intra_node.bandwidth_gbps *= hw.intra_node.busbw_efficiency;
    out.notes.push_back(cpu ? "runs: intra-node collectives ran above the link figure; raised to " +
                                  fmt("%.4g", fitted.intra_node.bandwidth_gbps) + " GB/s"
                            : std::string("runs: intra-node collectives fitted above the link's datasheet; "
                                          "busbw efficiency capped at 1"));
    hw.intra_node.busbw_efficiency = 1;
  }
  if (hw.attention_gemm_factor > 1) {
    out.notes.push_back("runs: the attention factor fitted to " + fmt("%.3f", hw.attention_gemm_factor) +
                        "; capped at 1 (a profile fraction)");
    hw.attention_gemm_factor = 1;
  }
  for (Eigen::Index j = 0; j < p; ++j) {
    const auto& prm = m.params[static_cast<std::size_t>(j)];
    const double scale = std::string(prm.unit) == "us" ? 1e6 : 1.0;
    const bool refined = std::find(free.begin(), free.end(), static_cast<std::size_t>(j)) != free.end();
    out.values.push_back({std::string("runs: ") + prm.name, m.start[static_cast<std::size_t>(j)] * scale,
                          m.value(static_cast<std::size_t>(j), u(j)) * scale, prm.unit,
                          static_cast<int>(runs.size()), 0.0, refined});
    (refined ? out.refined : out.held_at_prior).push_back(prm.name);
  }
  if (!out.held_at_prior.empty())
    out.notes.push_back("runs: " + std::to_string(runs.size()) + " run(s) determine " + std::to_string(free.size()) +
                        " of the " + std::to_string(p) + " run parameters; the other " +
                        std::to_string(out.held_at_prior.size()) + " stay at the starting profile");
  out.profile = hw;
  out.cluster = fitted;
  const auto errors = prediction_errors(runs, fitted, hw);
  out.mean_abs_error_after = mean_abs_error(errors);
  // Each value's residual column: the fitted profile's RMS relative error of
  // iteration time on the runs (in-sample; what the runs leave unexplained).
  double ss = 0;
  for (const auto& e : errors) ss += e.error() * e.error();
  const double rms = errors.empty() ? 0.0 : std::sqrt(ss / static_cast<double>(errors.size()));
  for (auto& v : out.values) v.rms_rel_residual = rms;
  return out;
}

}  // namespace ztune
