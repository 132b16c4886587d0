#include "ztune/calibration/point_model.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "ztune/model/op_costs.hpp"

namespace ztune {

namespace {

template <class T>
std::vector<T> fold_of(const std::vector<T>& v, int folds, int fold, bool take) {
  std::vector<T> out;
  for (std::size_t i = 0; i < v.size(); ++i)
    if ((static_cast<int>(i % static_cast<std::size_t>(folds)) == fold) == take) out.push_back(v[i]);
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::vector<PointPrediction> predict_points(const Measurements& m, const Cluster& c, const HardwareProfile& hw) {
  std::vector<PointPrediction> out;
  const double peak = c.node.gpu.peak_flops(m.gemm_precision);
  for (std::size_t i = 0; i < m.gemm.size(); ++i) {
    const auto& s = m.gemm[i];
    out.push_back({"gemm", i, s.time_s, s.flops / (peak * hw.gemm_efficiency_of(s.m, s.n, s.k))});
  }
  const double peak32 = c.node.gpu.peak_flops(Precision::fp32);
  for (std::size_t i = 0; i < m.attention.size(); ++i) {
    const auto& s = m.attention[i];
    out.push_back({"attention", i, s.time_s,
                   s.flops / (peak32 * hw.gemm_efficiency_at(s.flops) * hw.attention_gemm_factor)});
  }
  const double hbm = c.node.gpu.hbm_bandwidth_gbps * 1e9;
  for (std::size_t i = 0; i < m.memory.size(); ++i) {
    const auto& s = m.memory[i];
    const std::optional<double> work = memory_work_bytes(s, c.device_kind);
    if (!work) continue;  // a kernel the time model does not price: not judged (nor fitted)
    const double eff = s.kernel == "copy" ? 1.0 : hw.memory_bandwidth_efficiency;
    out.push_back({"memory-bound", i, s.time_s, *work / (hbm * eff) + s.kernels * hw.kernel_launch_s});
  }
  const double pcie = c.node.pcie_bandwidth_gbps * 1e9 * hw.pcie_efficiency;
  for (const std::size_t i : copies_in_fit(m.copies)) {
    const auto& s = m.copies[i];
    out.push_back({"copies", i, s.time_s, s.bytes / pcie});
  }
  for (std::size_t i = 0; i < m.collectives.size(); ++i) {
    const auto& s = m.collectives[i];
    const FabricLevel& lv = s.crosses_nodes ? c.inter_node : c.intra_node;
    const FabricProfile& fp = s.crosses_nodes ? hw.inter_node : hw.intra_node;
    const double figure = s.crosses_nodes ? c.inter_node_gbps_per_gpu() * 1e9 * s.per_node : lv.bandwidth_gbps * 1e9;
    const double eff = lv.collective_efficiency.value_or(fp.busbw_efficiency);
    const double t = fp.base_latency_s + latency_time(s.kind, GroupPlacement{s.ranks, s.per_node}, c, hw) +
                     s.bytes * bus_factor(s.kind, s.ranks) / (figure * eff);
    out.push_back({"collectives", i, s.time_s, t});
  }
  return out;
}

PointErrors point_errors(const std::vector<PointPrediction>& p) {
  std::map<std::string, std::vector<double>> by_section;
  for (const auto& x : p)
    if (x.measured_s > 0 && x.predicted_s > 0 && std::isfinite(x.predicted_s))
      by_section[x.section].push_back(std::abs(std::log(x.predicted_s / x.measured_s)));
  PointErrors out;
  double sum = 0;
  for (auto& [section, e] : by_section) {
    out.points += static_cast<int>(e.size());
    const double med = median(e);
    out.by_section[section] = med;
    sum += med;
  }
  if (!by_section.empty()) out.median_abs_log_error = sum / static_cast<double>(by_section.size());
  return out;
}

Measurements measurement_fold(const Measurements& m, int folds, int fold, bool take) {
  Measurements out = m;
  folds = std::max(1, folds);
  out.gemm = fold_of(m.gemm, folds, fold, take);
  out.attention = fold_of(m.attention, folds, fold, take);
  out.memory = fold_of(m.memory, folds, fold, take);
  out.copies = fold_of(m.copies, folds, fold, take);
  out.collectives = fold_of(m.collectives, folds, fold, take);
  return out;
}

}  // namespace ztune
