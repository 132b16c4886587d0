#include "ztune/calibration/machine_noise.hpp"
#include "ztune/vocab/text.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include <sys/resource.h>
#include <unistd.h>

namespace ztune::calibration {

namespace {
std::string slurp(const char* path) {
  std::ifstream in(path);
  if (!in) return {};
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

std::optional<double> parse_loadavg(const std::string& text) {
  std::istringstream in(text);
  double l1 = 0;
  if (!(in >> l1) || l1 < 0) return std::nullopt;
  return l1;
}

std::optional<CpuTicks> parse_proc_stat(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    std::string name;
    l >> name;
    if (name != "cpu") continue;
    std::vector<std::uint64_t> f;
    std::uint64_t v = 0;
    while (l >> v) f.push_back(v);
    if (f.size() < 8) return std::nullopt;  // user nice system idle iowait irq softirq steal [guest guest_nice]
    std::uint64_t total = 0;
    // guest and guest_nice are already counted in user and nice.
    for (std::size_t i = 0; i < std::min<std::size_t>(f.size(), 8); ++i) total += f[i];
    return CpuTicks{total, f[3] + f[4], f[7]};
  }
  return std::nullopt;
}

MachineSample sample_machine() {
  MachineSample s;
  s.cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  const auto load = parse_loadavg(slurp("/proc/loadavg"));
  const auto stat = parse_proc_stat(slurp("/proc/stat"));
  if (!load || !stat) return s;
  s.load1 = *load;
  s.total_ticks = stat->total;
  s.idle_ticks = stat->idle;
  s.steal_ticks = stat->steal;
  if (const long hz = ::sysconf(_SC_CLK_TCK); hz > 0) s.ticks_per_s = static_cast<double>(hz);
  rusage children{};
  if (::getrusage(RUSAGE_CHILDREN, &children) == 0)
    s.children_cpu_s = static_cast<double>(children.ru_utime.tv_sec + children.ru_stime.tv_sec) +
                       1e-6 * static_cast<double>(children.ru_utime.tv_usec + children.ru_stime.tv_usec);
  s.valid = true;
  return s;
}

RunContention run_contention(const MachineSample& before, const MachineSample& after) {
  RunContention c;
  if (!before.valid || !after.valid || after.total_ticks <= before.total_ticks) return c;
  const double total = static_cast<double>(after.total_ticks - before.total_ticks);
  const double idle = static_cast<double>(after.idle_ticks - before.idle_ticks);
  const double steal = static_cast<double>(after.steal_ticks - before.steal_ticks);
  // Busy time not stolen, less the run's own (its processes, waited for by now).
  const double own = (after.children_cpu_s - before.children_cpu_s) * before.ticks_per_s;
  c.others_fraction = std::clamp((total - idle - steal - own) / total, 0.0, 1.0);
  c.steal_fraction = std::clamp(steal / total, 0.0, 1.0);
  c.valid = true;
  return c;
}

std::optional<std::string> contention_problem(const RunContention& c, const NoiseLimits& limits) {
  if (!c.valid) return std::nullopt;
  if (c.others_fraction > limits.max_others_fraction)
    return "other processes took " + formatted("%.0f", 100 * c.others_fraction) + "% of this machine's CPU time during the "
           "run (limit " + formatted("%.0f", 100 * limits.max_others_fraction) + "%)";
  if (c.steal_fraction > limits.max_steal_fraction)
    return "the hypervisor stole " + formatted("%.0f", 100 * c.steal_fraction) + "% of the CPU time during the run (limit " +
           formatted("%.0f", 100 * limits.max_steal_fraction) + "%)";
  return std::nullopt;
}

NoiseReport assess_noise(const MachineSample& before, const MachineSample& after, double median_spread, int points,
                         int dropped, const NoiseLimits& limits) {
  NoiseReport r;
  r.cores = std::max(1, before.cores);
  r.load_before = before.load1;
  r.load_after = after.load1;
  if (before.valid && after.valid && after.total_ticks > before.total_ticks)
    r.steal_fraction = static_cast<double>(after.steal_ticks - before.steal_ticks) /
                       static_cast<double>(after.total_ticks - before.total_ticks);
  r.median_spread = median_spread;
  r.points = points;
  r.dropped = dropped;
  r.loaded = before.valid && before.load1 > limits.busy_load_per_core * r.cores;
  const double dropped_fraction = points > 0 ? static_cast<double>(dropped) / points : 0.0;
  std::vector<std::string> why;
  if (median_spread > limits.max_median_spread)
    why.push_back("median spread of the rounds " + formatted("%.0f", 100 * median_spread) + "% (limit " +
                  formatted("%.0f", 100 * limits.max_median_spread) + "%)");
  if (dropped_fraction > limits.max_dropped_fraction)
    why.push_back(std::to_string(dropped) + " of " + std::to_string(points) + " points too wide to use");
  if (r.steal_fraction > limits.max_steal_fraction)
    why.push_back("steal time " + formatted("%.0f", 100 * r.steal_fraction) + "% of the CPU time");
  r.noisy = !why.empty();
  r.summary = (before.valid && after.valid
                   ? "load average " + formatted("%.2f", r.load_before) + " before, " + formatted("%.2f", r.load_after) +
                         " after, on " + std::to_string(r.cores) + " core(s); steal " +
                         formatted("%.1f", 100 * r.steal_fraction) + "%; "
                   : std::string("load and steal not sampled (measurements read from a file); ")) +
              "median spread of the rounds " + formatted("%.1f", 100 * median_spread) + "%; " + std::to_string(dropped) +
              " of " + std::to_string(points) + " point(s) too wide";
  if (r.noisy) {
    std::string list;
    for (const auto& w : why) list += (list.empty() ? "" : ", ") + w;
    r.summary += " -- too noisy: " + list;
  }
  return r;
}

}  // namespace ztune::calibration
