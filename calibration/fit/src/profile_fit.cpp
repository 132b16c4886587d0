// The microbenchmark fit (profile_fit.hpp, part 1): each section of the
// measurements is fitted by robust relative-error least squares against the
// formula op_costs.cpp predicts with, so the fitted profile reproduces the
// measured times through the same code that predicts plans. Every parameter
// has the starting profile as its prior (robust_least_squares.hpp): one the
// data do not determine stays there and is reported so. The result is
// physical: efficiencies in (0, 1], the GEMM table non-decreasing in size
// (isotonic regression), latencies ≥ 0, and on a GPU no rate above its
// datasheet figure (a CPU cluster's figures are rough defaults, which the
// measured rates replace).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "robust_least_squares.hpp"
#include "ztune/calibration/profile_fit.hpp"
#include "ztune/model/cpu_executor_costs.hpp"
#include "ztune/model/op_costs.hpp"

namespace ztune {

namespace {

using fit_detail::LsPrior;
using fit_detail::LsSolution;
using fit_detail::robust_relative_ls;

// Prior widths: a measured rate within a factor of ~e of the shipped
// profile's (σ = 100 % of the value); a time (latency, launch) freer, σ = 3×
// the larger of the value and a floor, since shipped times are rough.
constexpr double kRatePriorRel = 1.0;
constexpr double kTimePriorRel = 3.0;
double time_sigma(double x0, double floor) { return kTimePriorRel * std::max(std::abs(x0), floor); }

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// The bandwidth figure (bytes/s, before efficiency) of a sample's layout, as
// the cost model's group_bus_bandwidth scales it (op_costs group_link_figure).
double layout_figure(const CollectiveSample& s, const Cluster& c) {
  return group_link_figure(GroupPlacement{s.ranks, s.crosses_nodes ? s.per_node : s.ranks}, c);
}

struct Accumulator {
  ProfileFit& fit;
  /// `col` ≥ 0: the solution's column the value comes from (its `determined`).
  void value(const std::string& name, double before, double after, const std::string& unit, const LsSolution* s,
             int col = -1) {
    const bool det = s == nullptr || col < 0 || static_cast<std::size_t>(col) >= s->determined.size() ||
                     s->determined[static_cast<std::size_t>(col)];
    fit.values.push_back({name, before, det ? after : before, unit, s != nullptr ? s->points : 0,
                          s != nullptr ? s->rms_rel_residual : 0.0, det});
  }
  void note(const std::string& n) { fit.notes.push_back(n); }
  /// Names the rows the robust fit set aside: `describe(i)` says which point,
  /// `measured(i)` and `fitted(i)` its time and the fit's.
  /// `rate`: y is a rate (GEMM efficiency), not a time.
  template <class Describe>
  void outliers(const char* section, const LsSolution& s, Describe describe, bool rate = false) {
    fit.scale[section] = s.scale;
    for (int i : s.outliers) {
      const double r = s.residuals[static_cast<std::size_t>(i)];  // (fit − y)/fit
      const double ratio = rate ? 1.0 / std::max(1e-12, 1.0 - r) : 1.0 - r;  // measured time / fitted time
      fit.outliers.push_back(std::string(section) + " " + describe(static_cast<std::size_t>(i)) + ": " +
                             (ratio >= 1 ? fmt("%.3g", ratio) + "x slower than" : fmt("%.3g", 1 / ratio) + "x faster than") +
                             " the fit; left out as an outlier");
    }
  }
};

// The GEMM efficiency table: rows at the decades the samples span; each sample's
// efficiency is the log-interpolation of its two neighbouring rows (as
// gemm_efficiency_at() reads the table), so the fit is linear in the rows.
void fit_gemm(const Measurements& m, const Cluster& original, ProfileFit& fit, Accumulator& acc) {
  if (m.gemm.empty()) {
    acc.note("gemm: no samples; efficiency table kept from the prior profile");
    return;
  }
  // Efficiency against the cluster's peak for the precision the GEMMs ran in
  // (fp32 on the CPU backend; bf16 by default on CUDA).
  const double peak = original.node.gpu.peak_flops(m.gemm_precision);
  if (!(peak > 0)) {
    acc.note("gemm: the cluster has no " + to_string(m.gemm_precision) + " peak; efficiency table kept");
    return;
  }
  double lo = 1e300, hi = 0;
  for (const auto& s : m.gemm) lo = std::min(lo, s.flops), hi = std::max(hi, s.flops);
  std::vector<double> sizes;  // descending
  for (double e = std::ceil(std::log10(hi)); e >= std::floor(std::log10(lo)) - 1e-9; e -= 1) sizes.push_back(std::pow(10.0, e));
  const auto rows = static_cast<Eigen::Index>(m.gemm.size());
  const auto cols = static_cast<Eigen::Index>(sizes.size());
  Eigen::MatrixXd a = Eigen::MatrixXd::Zero(rows, cols);
  Eigen::VectorXd y(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const auto& s = m.gemm[static_cast<std::size_t>(i)];
    // The table holds a full-wave GEMM's efficiency: the sample's own waves
    // (hw.gemm_waves, unset on CPU ranks) divided out.
    y(i) = s.flops / (peak * s.time_s) / fit.profile.gemm_waves.utilization(s.m, s.n, s.k);
    const double f = s.flops;
    if (f >= sizes.front()) { a(i, 0) = 1; continue; }
    if (f <= sizes.back()) { a(i, cols - 1) = 1; continue; }
    for (Eigen::Index j = 1; j < cols; ++j) {
      if (f >= sizes[static_cast<std::size_t>(j)]) {
        const double w = (std::log(f) - std::log(sizes[static_cast<std::size_t>(j)])) /
                         (std::log(sizes[static_cast<std::size_t>(j - 1)]) - std::log(sizes[static_cast<std::size_t>(j)]));
        a(i, j - 1) = w;
        a(i, j) = 1 - w;
        break;
      }
    }
  }
  // Rows no sample touches are left out of the table.
  std::vector<Eigen::Index> used;
  for (Eigen::Index j = 0; j < cols; ++j)
    if (a.col(j).sum() > 1e-9) used.push_back(j);
  Eigen::MatrixXd au(rows, static_cast<Eigen::Index>(used.size()));
  for (std::size_t j = 0; j < used.size(); ++j) au.col(static_cast<Eigen::Index>(j)) = a.col(used[j]);
  // Prior: the starting profile's efficiency at each row (of the same peak).
  LsPrior prior;
  for (std::size_t j = 0; j < used.size(); ++j) {
    const double x0 = fit.profile.gemm_efficiency_at(sizes[static_cast<std::size_t>(used[j])]);
    prior.x0.push_back(x0);
    prior.sigma.push_back(kRatePriorRel * x0);
  }
  const LsSolution s = robust_relative_ls(au, y, std::vector<bool>(used.size(), true), &prior);
  acc.outliers("gemm", s, [&](std::size_t i) {
    const auto& g = m.gemm[i];
    return fmt("%.0f", g.m) + "x" + fmt("%.0f", g.n) + "x" + fmt("%.0f", g.k);
  }, true);
  // A row the data do not determine (or fit at the bound 0: no GEMM runs at
  // zero speed) keeps the prior's efficiency; then the table is made
  // non-decreasing in size (isotonic regression, weighted by how many samples
  // each row has), ascending order for the regression.
  std::vector<double> eff(used.size()), weight(used.size());
  std::vector<bool> row_determined(used.size());
  for (std::size_t j = 0; j < used.size(); ++j) {
    const double e = s.x(static_cast<Eigen::Index>(j));
    row_determined[j] = s.determined[j] && e > 0;
    eff[j] = row_determined[j] ? e : prior.x0[j];
    weight[j] = row_determined[j] ? au.col(static_cast<Eigen::Index>(j)).sum() : 1e-3;
    if (!row_determined[j])
      acc.note("gemm: the row at " + fmt("%.0e", sizes[static_cast<std::size_t>(used[j])]) +
               " FLOPs is not determined by the samples; it stays at the prior's efficiency " + fmt("%.3g", eff[j]));
  }
  std::vector<double> asc(eff.rbegin(), eff.rend()), wasc(weight.rbegin(), weight.rend());
  const std::vector<double> iso = fit_detail::isotonic_non_decreasing(asc, wasc);
  bool pooled = false;
  for (std::size_t j = 0; j < used.size(); ++j) {
    const double e = iso[used.size() - 1 - j];
    pooled = pooled || std::abs(e - eff[j]) > 1e-9 * std::max(1.0, e);
    eff[j] = e;
  }
  if (pooled)
    acc.note("gemm: the fitted efficiencies fell with size somewhere; pooled into a non-decreasing table "
             "(isotonic regression: a larger GEMM is never slower per FLOP)");
  std::vector<EfficiencyPoint> table;
  double top = 0;
  for (std::size_t j = 0; j < used.size(); ++j) {
    table.push_back({sizes[static_cast<std::size_t>(used[j])], eff[j]});
    top = std::max(top, eff[j]);
  }
  if (!(top > 0)) {
    acc.note("gemm: the fit found no positive efficiency; table kept from the prior profile");
    return;
  }
  // Efficiency is a fraction of the peak: a CPU cluster's peak is a rough
  // default, so it becomes the best fitted rate; a GPU's datasheet peak is kept
  // unless the measurements beat it.
  // Only an fp32 peak is replaced (the profile's measured figures carry that
  // one); a 16-bit tensor-core rate above its datasheet peak caps at 1 instead.
  double new_peak = peak;
  const bool fp32 = m.gemm_precision == Precision::fp32;
  if (!fp32 && top > 1)
    acc.note("gemm: " + to_string(m.gemm_precision) + " GEMMs ran at up to " + fmt("%.3f", top) +
             "x the datasheet peak; efficiencies capped at 1");
  if (fp32 && original.device_kind == DeviceKind::cpu) {
    new_peak = peak * top;
    acc.note("gemm: cluster fp32 peak " + fmt("%.4g", peak / 1e12) + " → " + fmt("%.4g", new_peak / 1e12) +
             " TFLOP/s per rank (CPU figures are measured, not datasheet)");
  } else if (fp32 && top > 1) {
    acc.note("gemm: fp32 GEMMs ran at up to " + fmt("%.3f", top) +
             "x the datasheet peak; efficiencies capped at 1 (a rate never exceeds its datasheet)");
  }
  for (auto& row : table) row.efficiency = std::clamp(row.efficiency * peak / new_peak, 1e-6, 1.0);
  if (fp32) fit.cluster.node.gpu.peak_tflops_fp32 = new_peak / 1e12;
  for (std::size_t j = 0; j < table.size(); ++j) {
    const auto& row = table[j];
    FittedValue v{"gemm rate @" + fmt("%.0e", row.size) + " FLOPs", fit.profile.gemm_efficiency_at(row.size) * peak / 1e9,
                  row.efficiency * new_peak / 1e9, "GFLOP/s", s.points, s.rms_rel_residual, row_determined[j]};
    fit.values.push_back(v);
  }
  fit.profile.gemm_efficiency = table;
  acc.value(to_string(m.gemm_precision) + " peak per rank", peak / 1e12, new_peak / 1e12, "TFLOP/s", &s);
}

void fit_attention(const Measurements& m, ProfileFit& fit, Accumulator& acc) {
  if (m.attention.empty()) {
    acc.note("attention: no samples; attention factor kept from the prior profile");
    return;
  }
  const double peak = fit.cluster.node.gpu.peak_flops(Precision::fp32);
  const auto rows = static_cast<Eigen::Index>(m.attention.size());
  Eigen::MatrixXd a(rows, 1);
  Eigen::VectorXd y(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const auto& s = m.attention[static_cast<std::size_t>(i)];
    a(i, 0) = fit.profile.gemm_efficiency_at(s.flops);
    y(i) = s.flops / (peak * s.time_s);
  }
  const LsPrior prior{{fit.profile.attention_gemm_factor}, {kRatePriorRel * fit.profile.attention_gemm_factor}};
  const LsSolution s = robust_relative_ls(a, y, {true}, &prior);
  acc.outliers("attention", s, [&](std::size_t i) { return fmt("%.3g", m.attention[i].flops) + " FLOPs"; }, true);
  if (!s.determined[0]) {
    acc.value("attention factor", fit.profile.attention_gemm_factor, fit.profile.attention_gemm_factor, "", &s, 0);
    acc.note("attention: the samples do not determine the factor; it stays at the prior's");
    return;
  }
  double factor = s.x(0);
  if (factor > 1) {
    acc.note("attention: runs " + fmt("%.2f", factor) +
             "× faster than GEMMs of the same FLOPs; the factor is capped at 1 (a profile fraction)");
    factor = 1;
  }
  if (!(factor > 0)) {
    acc.note("attention: fit not positive; factor kept from the prior profile");
    return;
  }
  acc.value("attention factor", fit.profile.attention_gemm_factor, factor, "", &s);
  fit.profile.attention_gemm_factor = factor;
}

}  // namespace

std::vector<std::size_t> copies_in_fit(const std::vector<CopySample>& copies) {
  std::vector<std::size_t> large, all;
  for (std::size_t i = 0; i < copies.size(); ++i) {
    all.push_back(i);
    if (copies[i].bytes >= 1048576) large.push_back(i);
  }
  return large.empty() ? all : large;
}

std::optional<double> memory_work_bytes(const MemorySample& s, DeviceKind device) {
  if (device != DeviceKind::cpu || s.kernel == "copy") return s.bytes;
  const std::optional<double> r = cpu_benchmark_work_per_byte(s.kernel);
  if (!r) return std::nullopt;
  return s.bytes * *r;
}

namespace {

// Memory: the plain copy is the memory figure (what the "HBM bandwidth" of a
// cluster file means); the kernels training runs (norms, GeLU, residual adds,
// the optimizer) give the efficiency η and the per-call launch time:
// t = work / (figure · η) + kernels · launch, work = memory_work_bytes (the
// traffic on GPUs; on CPU ranks the time model's own count, so the rate the
// fit finds is the rate the time model multiplies).
void fit_memory(const Measurements& m, const Cluster& original, ProfileFit& fit, Accumulator& acc) {
  std::vector<const MemorySample*> copies, kernels;
  std::vector<double> work;  // each kernel sample's bytes at the memory-bound rate
  std::set<std::string> unknown;
  for (const auto& s : m.memory) {
    if (s.kernel == "copy") {
      copies.push_back(&s);
    } else if (const auto w = memory_work_bytes(s, original.device_kind)) {
      kernels.push_back(&s);
      work.push_back(*w);
    } else {
      unknown.insert(s.kernel);
    }
  }
  for (const auto& k : unknown)
    acc.note("memory-bound: kernel '" + k + "' is not one the CPU time model counts; not fitted");
  if (kernels.empty()) {
    acc.note("memory-bound: no kernel samples; bandwidth efficiency and launch time kept from the prior profile");
    return;
  }
  const double before_figure = original.node.gpu.hbm_bandwidth_gbps * 1e9;
  double figure = before_figure;
  if (!copies.empty()) {
    Eigen::MatrixXd a(static_cast<Eigen::Index>(copies.size()), 2);
    Eigen::VectorXd y(static_cast<Eigen::Index>(copies.size()));
    for (std::size_t i = 0; i < copies.size(); ++i) {
      a(static_cast<Eigen::Index>(i), 0) = copies[i]->bytes;
      a(static_cast<Eigen::Index>(i), 1) = copies[i]->kernels;
      y(static_cast<Eigen::Index>(i)) = copies[i]->time_s;
    }
    const LsSolution c = robust_relative_ls(a, y, {true, true});
    acc.outliers("memory copy", c, [&](std::size_t i) { return fmt("%.3g", copies[i]->bytes) + " B"; });
    const double copy_bw = c.x(0) > 0 ? 1.0 / c.x(0) : 0.0;
    // The copy measures the memory figure of a CPU rank; a GPU's datasheet
    // HBM figure stands (the kernels' efficiency is a fraction of it).
    if (copy_bw > 0 && original.device_kind == DeviceKind::cpu) {
      figure = copy_bw;
      fit.cluster.node.gpu.hbm_bandwidth_gbps = figure / 1e9;
      acc.note("memory-bound: cluster memory bandwidth " + fmt("%.4g", before_figure / 1e9) + " → " +
               fmt("%.4g", figure / 1e9) + " GB/s per rank, the measured copy bandwidth (CPU figures are measured)");
    }
    acc.value("copy bandwidth", before_figure / 1e9, copy_bw / 1e9, "GB/s", &c);
  }
  const auto rows = static_cast<Eigen::Index>(kernels.size());
  Eigen::MatrixXd a(rows, 2);
  Eigen::VectorXd y(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const auto& s = *kernels[static_cast<std::size_t>(i)];
    a(i, 0) = work[static_cast<std::size_t>(i)];
    a(i, 1) = s.kernels;
    y(i) = s.time_s;
  }
  const double x0_bw = 1.0 / (figure * fit.profile.memory_bandwidth_efficiency);
  const LsPrior prior{{x0_bw, fit.profile.kernel_launch_s},
                      {kRatePriorRel * x0_bw, time_sigma(fit.profile.kernel_launch_s, 1e-6)}};
  const LsSolution s = robust_relative_ls(a, y, {true, true}, &prior);
  acc.outliers("memory-bound", s, [&](std::size_t i) {
    return kernels[i]->kernel + " " + fmt("%.3g", kernels[i]->bytes) + " B";
  });
  if (!(s.x(0) > 0) || !s.determined[0]) {
    // The kernels' achieved bandwidth stays the prior's: against a memory
    // figure the copies changed, that is a rescaled efficiency.
    const double eff = std::clamp(fit.profile.memory_bandwidth_efficiency * before_figure / figure, 1e-6, 1.0);
    acc.note("memory-bound: the samples do not determine the kernels' bandwidth; it stays the prior's (" +
             fmt("%.4g", before_figure * fit.profile.memory_bandwidth_efficiency / 1e9) + " GB/s)");
    acc.value("memory-bound efficiency", fit.profile.memory_bandwidth_efficiency, eff, "", nullptr);
    fit.values.back().determined = false;
    fit.profile.memory_bandwidth_efficiency = eff;
    return;
  }
  const double bw = 1.0 / s.x(0);  // achieved bytes/s of the training kernels
  double eff = bw / figure;
  if (eff > 1) {
    if (original.device_kind == DeviceKind::cpu) {
      fit.cluster.node.gpu.hbm_bandwidth_gbps = bw / 1e9;
      acc.note("memory-bound: kernels ran at " + fmt("%.4g", bw / 1e9) + " GB/s, above the memory figure; raised to it");
    } else {
      acc.note("memory-bound: kernels ran at " + fmt("%.4g", bw / 1e9) +
               " GB/s, above the datasheet bandwidth; efficiency capped at 1");
    }
    eff = 1;
  }
  acc.value("memory-bound kernels bandwidth", before_figure * fit.profile.memory_bandwidth_efficiency / 1e9,
            bw / 1e9, "GB/s", &s, 0);
  acc.value("memory-bound efficiency", fit.profile.memory_bandwidth_efficiency, eff, "", &s, 0);
  acc.value("kernel launch", fit.profile.kernel_launch_s * 1e6, s.x(1) * 1e6, "us", &s, 1);
  fit.profile.memory_bandwidth_efficiency = eff;
  if (s.determined[1]) fit.profile.kernel_launch_s = std::max(0.0, s.x(1));
}

void fit_copies(const Measurements& m, const Cluster& original, ProfileFit& fit, Accumulator& acc) {
  std::vector<const CopySample*> use;
  for (const std::size_t i : copies_in_fit(m.copies)) use.push_back(&m.copies[i]);
  if (use.empty()) {
    acc.note("copies: no samples; PCIe efficiency kept from the prior profile");
    return;
  }
  Eigen::MatrixXd a(static_cast<Eigen::Index>(use.size()), 1);
  Eigen::VectorXd y(static_cast<Eigen::Index>(use.size()));
  for (std::size_t i = 0; i < use.size(); ++i) {
    a(static_cast<Eigen::Index>(i), 0) = use[i]->bytes;
    y(static_cast<Eigen::Index>(i)) = use[i]->time_s;
  }
  const double figure = original.node.pcie_bandwidth_gbps * 1e9;
  const double x0 = 1.0 / (figure * fit.profile.pcie_efficiency);
  // On a CPU cluster the memcpy replaces a rough figure: no prior to hold it.
  const LsPrior prior{{x0}, {original.device_kind == DeviceKind::cpu ? 0.0 : kRatePriorRel * x0}};
  const LsSolution s = robust_relative_ls(a, y, {true}, &prior);
  acc.outliers("copies", s, [&](std::size_t i) { return use[i]->direction + " " + fmt("%.3g", use[i]->bytes) + " B"; });
  if (!(s.x(0) > 0) || !s.determined[0]) {
    acc.note("copies: the samples do not determine the bandwidth; PCIe efficiency kept from the prior profile");
    return;
  }
  const double bw = 1.0 / s.x(0);
  double eff = bw / figure;
  if (original.device_kind == DeviceKind::cpu) {
    fit.cluster.node.pcie_bandwidth_gbps = bw / 1e9;
    acc.note("copies: cluster host<->device bandwidth " + fmt("%.4g", figure / 1e9) + " → " + fmt("%.4g", bw / 1e9) +
             " GB/s (on the CPU backend: memcpy)");
    eff = 1;
  } else if (eff > 1) {
    acc.note("copies: host<->device copies ran at " + fmt("%.4g", bw / 1e9) +
             " GB/s, above the datasheet PCIe figure; efficiency capped at 1");
    eff = 1;
  }
  acc.value("host<->device bandwidth", figure * fit.profile.pcie_efficiency / 1e9, bw / 1e9, "GB/s", &s);
  acc.value("pcie efficiency", fit.profile.pcie_efficiency, eff, "", &s);
  fit.profile.pcie_efficiency = eff;
}

void fit_host_adam(const Measurements& m, ProfileFit& fit, Accumulator& acc) {
  if (!m.host_adam_node_params_per_s) {
    acc.note("host Adam: not measured; the cluster's cpu_adam_gparams_per_s is kept");
    return;
  }
  const double rate = *m.host_adam_node_params_per_s / 1e9;
  acc.value("host Adam rate per node", fit.cluster.node.cpu_adam_gparams_per_s, rate, "Gparams/s", nullptr);
  fit.cluster.node.cpu_adam_gparams_per_s = rate;
}

// One fabric level: t = base + α·steps + S·bf/(F·η), pooled over collectives
// and layouts of that level (F the layout's bandwidth figure).
void fit_level(const Measurements& m, bool inter, const Cluster& original, ProfileFit& fit, Accumulator& acc) {
  const char* level = inter ? "inter-node" : "intra-node";
  std::vector<const CollectiveSample*> use;
  for (const auto& s : m.collectives)
    if (s.crosses_nodes == inter) use.push_back(&s);
  if (use.empty()) {
    acc.note(std::string(level) + " collectives: not measured; α/β kept from the prior profile and cluster");
    return;
  }
  const auto rows = static_cast<Eigen::Index>(use.size());
  Eigen::MatrixXd a(rows, 3);
  Eigen::VectorXd y(rows);
  // α of this level multiplies its own steps (vocab/collective latency_steps, by the
  // level each hop crosses); an inter-node sample's hops inside its nodes are
  // paid at the intra-node α, fitted before this level (fit_level(false)
  // runs first) and moved to the known side.
  const double intra_alpha = fit.cluster.intra_node.latency_us * 1e-6 + fit.profile.intra_node.latency_s;
  for (Eigen::Index i = 0; i < rows; ++i) {
    const auto& s = *use[static_cast<std::size_t>(i)];
    const GroupPlacement g{s.ranks, s.per_node};
    // The all-reduce takes the tree (NCCL's; MPI's recursive doubling on CPU
    // ranks) when it has fewer steps.
    LatencySteps st = latency_steps(s.kind, g, CollectiveAlgo::ring, original.device_kind);
    if (s.kind == Collective::all_reduce) {
      const LatencySteps tree = latency_steps(s.kind, g, CollectiveAlgo::tree, original.device_kind);
      if ((inter ? tree.inter : tree.intra) < (inter ? st.inter : st.intra)) st = tree;
    }
    a(i, 0) = 1;
    a(i, 1) = inter ? st.inter : st.intra;
    a(i, 2) = s.bytes * bus_factor(s.kind, s.ranks) / layout_figure(s, original);
    y(i) = s.time_s - (inter ? intra_alpha * st.intra : 0.0);
  }
  FabricLevel& lv = inter ? fit.cluster.inter_node : fit.cluster.intra_node;
  FabricProfile& fp = inter ? fit.profile.inter_node : fit.profile.intra_node;
  const FabricLevel& ov = inter ? original.inter_node : original.intra_node;
  const double before_eff = ov.collective_efficiency.value_or(fp.busbw_efficiency);
  const double alpha0 = ov.latency_us * 1e-6 + fp.latency_s;
  const LsPrior prior{{fp.base_latency_s, alpha0, 1.0 / before_eff},
                      {time_sigma(fp.base_latency_s, 1e-6), time_sigma(alpha0, 1e-6),
                       original.device_kind == DeviceKind::cpu ? 0.0 : kRatePriorRel / before_eff}};
  const LsSolution s = robust_relative_ls(a, y, {true, true, true}, &prior);
  acc.outliers(inter ? "inter-node collectives" : "intra-node collectives", s, [&](std::size_t i) {
    return use[i]->name + " " + use[i]->group + " " + fmt("%.3g", use[i]->bytes) + " B";
  });
  if (ov.collective_efficiency) {
    acc.note(std::string(level) + ": the cluster's collective_efficiency overrode the profile; the calibrated "
                                  "cluster drops it so the fitted profile applies");
    lv.collective_efficiency.reset();
  }
  if (s.x(2) > 0 && s.determined[2]) {
    double eff = 1.0 / s.x(2);
    if (original.device_kind == DeviceKind::cpu) {
      lv.bandwidth_gbps = ov.bandwidth_gbps * eff;
      acc.note(std::string(level) + ": cluster bandwidth " + fmt("%.4g", ov.bandwidth_gbps) + " → " +
               fmt("%.4g", lv.bandwidth_gbps) + " GB/s (CPU figures are measured)");
      eff = 1;
    } else if (eff > 1) {
      acc.note(std::string(level) + ": collectives ran at " + fmt("%.3f", eff) +
               "x the cluster's link figure; busbw efficiency capped at 1 (a rate never exceeds its datasheet)");
      eff = 1;
    }
    acc.value(std::string(level) + " busbw efficiency", before_eff, eff, "", &s, 2);
    fp.busbw_efficiency = eff;
  } else {
    acc.note(std::string(level) + ": the samples do not determine the bandwidth; busbw efficiency kept");
  }
  // α: the cluster's latency plus the profile's; the profile's part cannot be negative.
  const double alpha = s.determined[1] ? s.x(1) : alpha0;
  const double cluster_alpha = ov.latency_us * 1e-6;
  double profile_alpha = alpha - cluster_alpha;
  if (profile_alpha < 0) {
    if (original.device_kind == DeviceKind::cpu) {
      lv.latency_us = alpha * 1e6;
      acc.note(std::string(level) + ": cluster latency " + fmt("%.3g", ov.latency_us) + " → " +
               fmt("%.3g", lv.latency_us) + " us per step (measured)");
    } else {
      acc.note(std::string(level) + ": measured α " + fmt("%.3g", alpha * 1e6) + " us is below the cluster's " +
               fmt("%.3g", ov.latency_us) + " us; the profile adds none");
    }
    profile_alpha = 0;
  }
  acc.value(std::string(level) + " latency per step", (cluster_alpha + fp.latency_s) * 1e6,
            (lv.latency_us * 1e-6 + profile_alpha) * 1e6, "us", &s, 1);
  acc.value(std::string(level) + " base latency per call", fp.base_latency_s * 1e6, s.x(0) * 1e6, "us", &s, 0);
  fp.latency_s = profile_alpha;
  if (s.determined[0]) fp.base_latency_s = std::max(0.0, s.x(0));
}

// The report's α–β table: one line per collective and layout.
void fit_each_collective(const Measurements& m, ProfileFit& fit) {
  std::map<std::pair<std::string, std::string>, std::vector<const CollectiveSample*>> groups;
  for (const auto& s : m.collectives) groups[{s.name, s.group}].push_back(&s);
  for (const auto& [key, samples] : groups) {
    const auto rows = static_cast<Eigen::Index>(samples.size());
    if (rows < 2) continue;
    Eigen::MatrixXd a(rows, 2);
    Eigen::VectorXd y(rows);
    for (Eigen::Index i = 0; i < rows; ++i) {
      const auto& s = *samples[static_cast<std::size_t>(i)];
      a(i, 0) = 1;
      a(i, 1) = s.bytes * bus_factor(s.kind, s.ranks);
      y(i) = s.time_s;
    }
    const LsSolution s = robust_relative_ls(a, y, {true, true});
    CollectiveFit cf;
    cf.collective = key.first;
    cf.group = key.second;
    cf.crosses_nodes = samples.front()->crosses_nodes;
    cf.ranks = samples.front()->ranks;
    cf.latency_s = s.x(0);
    cf.busbw_gbps = s.x(1) > 0 ? 1.0 / s.x(1) / 1e9 : 0.0;
    cf.points = s.points;
    cf.rms_rel_residual = s.rms_rel_residual;
    fit.collectives.push_back(cf);
  }
}

// The points whose rounds spread too wide, left out and named; the median
// spread of all points (the run-to-run noise `calibrate` reports).
template <class T, class Describe>
std::vector<T> screen(const std::vector<T>& in, const char* section, ProfileFit& fit, std::vector<double>& spreads,
                      Describe describe) {
  std::vector<T> out;
  for (const auto& s : in) {
    spreads.push_back(s.spread);
    if (s.spread > kMaxPointSpread) {
      fit.dropped.push_back(std::string(section) + " " + describe(s) + ": rounds spread " + fmt("%.0f", 100 * s.spread) +
                            "% (IQR / median over " + std::to_string(s.repeats) + " rounds)");
      continue;
    }
    out.push_back(s);
  }
  return out;
}

Measurements screened(const Measurements& m, ProfileFit& fit) {
  Measurements out = m;
  std::vector<double> spreads;
  out.gemm = screen(m.gemm, "gemm", fit, spreads, [](const GemmSample& s) {
    return fmt("%.0f", s.m) + "x" + fmt("%.0f", s.n) + "x" + fmt("%.0f", s.k);
  });
  out.attention = screen(m.attention, "attention", fit, spreads,
                         [](const AttentionSample& s) { return fmt("%.3g", s.flops) + " FLOPs"; });
  out.memory = screen(m.memory, "memory-bound", fit, spreads,
                      [](const MemorySample& s) { return s.kernel + " " + fmt("%.3g", s.bytes) + " B"; });
  out.copies = screen(m.copies, "copies", fit, spreads,
                      [](const CopySample& s) { return s.direction + " " + fmt("%.3g", s.bytes) + " B"; });
  out.collectives = screen(m.collectives, "collectives", fit, spreads, [](const CollectiveSample& s) {
    return s.name + " " + s.group + " " + fmt("%.3g", s.bytes) + " B";
  });
  fit.points = static_cast<int>(spreads.size());
  if (!spreads.empty()) {
    std::sort(spreads.begin(), spreads.end());
    fit.median_spread = spreads[spreads.size() / 2];
  }
  return out;
}

}  // namespace

ProfileFit fit_profile(const Measurements& measured, const Cluster& c, const HardwareProfile& prior,
                       const std::string& name) {
  ProfileFit fit;
  fit.profile = prior;
  fit.cluster = c;
  Accumulator acc{fit};
  const Measurements m = screened(measured, fit);
  if (!fit.dropped.empty())
    acc.note(std::to_string(fit.dropped.size()) + " of " + std::to_string(fit.points) +
             " point(s) left out: their rounds spread wider than " + fmt("%.0f", 100 * kMaxPointSpread) +
             "% even after re-measuring (first: " + fit.dropped.front() + ")");
  if (m.wrong > 0)
    acc.note("the measurements report " + std::to_string(m.wrong) +
             " element(s) that failed their data check: the timings may be of broken collectives");
  for (const auto& n : m.notes) acc.note("measurements: " + n);
  fit_gemm(m, c, fit, acc);
  fit_attention(m, fit, acc);
  fit_memory(m, c, fit, acc);
  fit_copies(m, c, fit, acc);
  fit_host_adam(m, fit, acc);
  fit_level(m, false, c, fit, acc);
  fit_level(m, true, c, fit, acc);
  fit_each_collective(m, fit);
  fit.profile.name = name;
  fit.profile.source = "fitted by ztune calibrate from " + std::to_string(m.gemm.size() + m.attention.size() +
                                                                          m.memory.size() + m.copies.size() +
                                                                          m.collectives.size()) +
                       " microbenchmark points (" + m.backend + " backend, " + std::to_string(m.ranks) +
                       " rank(s) on " + std::to_string(m.nodes) + " node(s)) on cluster " + c.name +
                       "; its measured figures replace the cluster's (the calibrated cluster file beside it holds the same)";
  fit.cluster.name = c.name + "-calibrated";
  fit.cluster.source = c.source + " [calibrated by ztune calibrate: figures replaced by measurements, see the "
                                  "profile " + name + "]";
  return fit;
}

}  // namespace ztune
