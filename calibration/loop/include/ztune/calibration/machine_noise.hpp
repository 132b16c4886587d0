#pragma once
// Is this machine quiet enough to measure? (issue 21, part 1). Three signs of
// a busy machine: the load average against the cores (other processes
// competing), the steal time of /proc/stat (a hypervisor giving the cores to
// other guests), and the run-to-run spread of the microbenchmark rounds
// themselves (what the competition did to the measurements). `calibrate`
// reports them, can wait for the load to fall (--wait-quiet), and refuses to
// fit through measurements that are too noisy.
#include <cstdint>
#include <optional>
#include <string>

namespace ztune::calibration {

/// One look at the machine: /proc/loadavg's 1-minute load and /proc/stat's
/// aggregate CPU counters.
struct MachineSample {
  double load1 = 0;
  int cores = 1;
  std::uint64_t total_ticks = 0;  // every field of the "cpu" line
  std::uint64_t steal_ticks = 0;  // its 8th field
  bool valid = false;
};

/// Parses /proc/loadavg text ("0.49 1.76 2.21 1/129 3114"); nullopt when malformed.
std::optional<double> parse_loadavg(const std::string& text);
/// Parses the aggregate "cpu" line of /proc/stat into (total, steal) ticks.
std::optional<std::pair<std::uint64_t, std::uint64_t>> parse_proc_stat(const std::string& text);
/// Reads the files (valid false where /proc is not there).
MachineSample sample_machine();

struct NoiseLimits {
  double max_median_spread = 0.10;   // median over points of IQR / median
  double max_dropped_fraction = 0.25;
  double max_steal_fraction = 0.05;
  double busy_load_per_core = 0.75;  // load average per core that counts as "busy"
};

struct NoiseReport {
  double load_before = 0, load_after = 0;
  int cores = 1;
  double steal_fraction = 0;  // of the CPU time while measuring
  double median_spread = 0;
  int points = 0, dropped = 0;
  bool loaded = false;  // the load average says other work competes
  bool noisy = false;   // the measurements themselves say so: refuse to fit
  std::string summary;  // one line naming the figures
};

NoiseReport assess_noise(const MachineSample& before, const MachineSample& after, double median_spread, int points,
                         int dropped, const NoiseLimits& limits = {});

}  // namespace ztune::calibration
