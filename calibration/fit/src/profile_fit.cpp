// The microbenchmark fit (profile_fit.hpp, part 1): each section of the
// measurements is fitted by robust relative-error least squares against the
// formula op_costs.cpp predicts with, so the fitted profile reproduces the
// measured times through the same code that predicts plans.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "robust_least_squares.hpp"
#include "ztune/calibration/profile_fit.hpp"

namespace ztune {

namespace {

using fit_detail::LsSolution;
using fit_detail::robust_relative_ls;

std::string fmt(const char* f, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

// Latency steps of one collective call as collective_time() counts them
// (op_costs.cpp): ring 2(n−1) for all-reduce, or the double binary tree's
// 2⌈log2 n⌉ when fewer (NCCL picks the faster: the `best` algorithm);
// n−1 for reduce-scatter, all-gather, broadcast; 1 for a point-to-point send.
double latency_steps(Collective k, int n) {
  switch (k) {
    case Collective::all_reduce:
      return std::min(2.0 * (n - 1), 2.0 * std::ceil(std::log2(static_cast<double>(n))));
    case Collective::reduce_scatter:
    case Collective::all_gather:
    case Collective::all_to_all:
    case Collective::broadcast:
    case Collective::reduce: return n - 1.0;
    case Collective::p2p: return 1.0;
  }
  return 1.0;
}

// The bandwidth figure (bytes/s, before efficiency) op_costs' group_bus_bandwidth
// divides by for a layout: the intra-node link, or the NICs' share per GPU times
// the GPUs of the group on one node.
double layout_figure(const CollectiveSample& s, const Cluster& c) {
  if (!s.crosses_nodes) return c.intra_node.bandwidth_gbps * 1e9;
  return c.inter_node_gbps_per_gpu() * 1e9 * s.per_node;
}

struct Accumulator {
  ProfileFit& fit;
  void value(const std::string& name, double before, double after, const std::string& unit, const LsSolution* s) {
    fit.values.push_back({name, before, after, unit, s != nullptr ? s->points : 0,
                          s != nullptr ? s->rms_rel_residual : 0.0});
  }
  void note(const std::string& n) { fit.notes.push_back(n); }
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
    y(i) = s.flops / (peak * s.time_s);
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
  const LsSolution s = robust_relative_ls(au, y, std::vector<bool>(used.size(), true));
  std::vector<EfficiencyPoint> table;
  double top = 0;
  for (std::size_t j = 0; j < used.size(); ++j) {
    const double e = s.x(static_cast<Eigen::Index>(j));
    table.push_back({sizes[static_cast<std::size_t>(used[j])], e});
    top = std::max(top, e);
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
  if (fp32 && (original.device_kind == DeviceKind::cpu || top > 1)) {
    new_peak = peak * top;
    acc.note("gemm: cluster fp32 peak " + fmt("%.4g", peak / 1e12) + " → " + fmt("%.4g", new_peak / 1e12) +
             " TFLOP/s per rank (" +
             (original.device_kind == DeviceKind::cpu ? std::string("CPU figures are measured, not datasheet")
                                                      : std::string("measured above the datasheet figure")) +
             ")");
  }
  for (auto& row : table) row.efficiency = std::clamp(row.efficiency * peak / new_peak, 1e-6, 1.0);
  // Zero-efficiency rows (dropped by the non-negative fit) take their neighbour's value.
  for (std::size_t j = 0; j < table.size(); ++j)
    if (table[j].efficiency <= 1e-6) table[j].efficiency = j > 0 ? table[j - 1].efficiency : 1e-6;
  if (fp32) fit.cluster.node.gpu.peak_tflops_fp32 = new_peak / 1e12;
  for (const auto& row : table)
    acc.value("gemm rate @" + fmt("%.0e", row.size) + " FLOPs", fit.profile.gemm_efficiency_at(row.size) * peak / 1e9,
              row.efficiency * new_peak / 1e9, "GFLOP/s", &s);
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
  const LsSolution s = robust_relative_ls(a, y, {true});
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

// Memory: the plain copy is the memory figure (what the "HBM bandwidth" of a
// cluster file means); the kernels training runs (norms, GeLU, residual adds,
// the optimizer) give the efficiency η and the per-call launch time:
// t = bytes / (figure · η) + kernels · launch.
void fit_memory(const Measurements& m, const Cluster& original, ProfileFit& fit, Accumulator& acc) {
  std::vector<const MemorySample*> copies, kernels;
  for (const auto& s : m.memory) (s.kernel == "copy" ? copies : kernels).push_back(&s);
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
    const double copy_bw = c.x(0) > 0 ? 1.0 / c.x(0) : 0.0;
    if (copy_bw > 0 && (original.device_kind == DeviceKind::cpu || copy_bw > before_figure)) {
      figure = copy_bw;
      fit.cluster.node.gpu.hbm_bandwidth_gbps = figure / 1e9;
      acc.note("memory-bound: cluster memory bandwidth " + fmt("%.4g", before_figure / 1e9) + " → " +
               fmt("%.4g", figure / 1e9) + " GB/s per rank, the measured copy bandwidth (" +
               (original.device_kind == DeviceKind::cpu ? std::string("CPU figures are measured")
                                                        : std::string("measured above the datasheet figure")) +
               ")");
    }
    acc.value("copy bandwidth", before_figure / 1e9, copy_bw / 1e9, "GB/s", &c);
  }
  const auto rows = static_cast<Eigen::Index>(kernels.size());
  Eigen::MatrixXd a(rows, 2);
  Eigen::VectorXd y(rows);
  for (Eigen::Index i = 0; i < rows; ++i) {
    const auto& s = *kernels[static_cast<std::size_t>(i)];
    a(i, 0) = s.bytes;
    a(i, 1) = s.kernels;
    y(i) = s.time_s;
  }
  const LsSolution s = robust_relative_ls(a, y, {true, true});
  if (!(s.x(0) > 0)) {
    acc.note("memory-bound: no bandwidth term in the fit; kept from the prior profile");
    return;
  }
  const double bw = 1.0 / s.x(0);  // achieved bytes/s of the training kernels
  double eff = bw / figure;
  if (eff > 1) {
    fit.cluster.node.gpu.hbm_bandwidth_gbps = bw / 1e9;
    acc.note("memory-bound: kernels ran at " + fmt("%.4g", bw / 1e9) + " GB/s, above the memory figure; raised to it");
    eff = 1;
  }
  acc.value("memory-bound kernels bandwidth", before_figure * fit.profile.memory_bandwidth_efficiency / 1e9,
            bw / 1e9, "GB/s", &s);
  acc.value("memory-bound efficiency", fit.profile.memory_bandwidth_efficiency, eff, "", &s);
  acc.value("kernel launch", fit.profile.kernel_launch_s * 1e6, s.x(1) * 1e6, "us", &s);
  fit.profile.memory_bandwidth_efficiency = eff;
  fit.profile.kernel_launch_s = s.x(1);
}

void fit_copies(const Measurements& m, const Cluster& original, ProfileFit& fit, Accumulator& acc) {
  // The offload path moves large tensors: fit the bandwidth where it dominates
  // (≥ 1 MiB), as nccl-tests quotes bandwidth at large sizes.
  std::vector<const CopySample*> use;
  for (const auto& s : m.copies)
    if (s.bytes >= 1048576) use.push_back(&s);
  if (use.empty())
    for (const auto& s : m.copies) use.push_back(&s);
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
  const LsSolution s = robust_relative_ls(a, y, {true});
  if (!(s.x(0) > 0)) return;
  const double bw = 1.0 / s.x(0);
  const double figure = original.node.pcie_bandwidth_gbps * 1e9;
  double eff = bw / figure;
  if (original.device_kind == DeviceKind::cpu || eff > 1) {
    fit.cluster.node.pcie_bandwidth_gbps = bw / 1e9;
    acc.note("copies: cluster host<->device bandwidth " + fmt("%.4g", figure / 1e9) + " → " + fmt("%.4g", bw / 1e9) +
             " GB/s" + (original.device_kind == DeviceKind::cpu ? " (on the CPU backend: memcpy)" : ""));
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
  for (Eigen::Index i = 0; i < rows; ++i) {
    const auto& s = *use[static_cast<std::size_t>(i)];
    a(i, 0) = 1;
    a(i, 1) = latency_steps(s.kind, s.ranks);
    a(i, 2) = s.bytes * bus_factor(s.kind, s.ranks) / layout_figure(s, original);
    y(i) = s.time_s;
  }
  const LsSolution s = robust_relative_ls(a, y, {true, true, true});
  FabricLevel& lv = inter ? fit.cluster.inter_node : fit.cluster.intra_node;
  FabricProfile& fp = inter ? fit.profile.inter_node : fit.profile.intra_node;
  const FabricLevel& ov = inter ? original.inter_node : original.intra_node;
  const double before_eff = ov.collective_efficiency.value_or(fp.busbw_efficiency);
  if (ov.collective_efficiency) {
    acc.note(std::string(level) + ": the cluster's collective_efficiency overrode the profile; the calibrated "
                                  "cluster drops it so the fitted profile applies");
    lv.collective_efficiency.reset();
  }
  if (s.x(2) > 0) {
    double eff = 1.0 / s.x(2);
    if (original.device_kind == DeviceKind::cpu || eff > 1) {
      lv.bandwidth_gbps = ov.bandwidth_gbps * eff;
      acc.note(std::string(level) + ": cluster bandwidth " + fmt("%.4g", ov.bandwidth_gbps) + " → " +
               fmt("%.4g", lv.bandwidth_gbps) + " GB/s (" +
               (original.device_kind == DeviceKind::cpu ? std::string("CPU figures are measured")
                                                        : std::string("measured above the cluster's figure")) +
               ")");
      eff = 1;
    }
    acc.value(std::string(level) + " busbw efficiency", before_eff, eff, "", &s);
    fp.busbw_efficiency = eff;
  } else {
    acc.note(std::string(level) + ": no bandwidth term in the fit; busbw efficiency kept");
  }
  // α: the cluster's latency plus the profile's; the profile's part cannot be negative.
  const double alpha = s.x(1);
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
            (lv.latency_us * 1e-6 + profile_alpha) * 1e6, "us", &s);
  acc.value(std::string(level) + " base latency per call", fp.base_latency_s * 1e6, s.x(0) * 1e6, "us", &s);
  fp.latency_s = profile_alpha;
  fp.base_latency_s = s.x(0);
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

}  // namespace

ProfileFit fit_profile(const Measurements& m, const Cluster& c, const HardwareProfile& prior, const std::string& name) {
  ProfileFit fit;
  fit.profile = prior;
  fit.cluster = c;
  Accumulator acc{fit};
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
