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
  std::uint64_t idle_ticks = 0;   // its 4th and 5th (idle, iowait)
  std::uint64_t steal_ticks = 0;  // its 8th field
  double ticks_per_s = 100;       // sysconf(_SC_CLK_TCK)
  double children_cpu_s = 0;      // this process's waited-for children's CPU time (getrusage RUSAGE_CHILDREN)
  bool valid = false;
};

/// The aggregate "cpu" line of /proc/stat.
struct CpuTicks {
  std::uint64_t total = 0, idle = 0, steal = 0;
};

/// Parses /proc/loadavg text ("0.49 1.76 2.21 1/129 3114"); nullopt when malformed.
std::optional<double> parse_loadavg(const std::string& text);
/// Parses the aggregate "cpu" line of /proc/stat.
std::optional<CpuTicks> parse_proc_stat(const std::string& text);
/// Reads the files (valid false where /proc is not there).
MachineSample sample_machine();

struct NoiseLimits {
  double max_median_spread = 0.10;   // median over points of IQR / median
  double max_dropped_fraction = 0.25;
  double max_steal_fraction = 0.05;
  double busy_load_per_core = 0.75;  // load average per core that counts as "busy"
  double max_others_fraction = 0.2;  // of the machine's CPU time, other processes' during a run
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

/// What other work did to a run launched between two samples: the share of
/// the machine's CPU time that went to processes other than the run (its own
/// CPU time, the children's, taken out of the busy time) and the share the
/// hypervisor stole. A run that shared its cores is slower than its plan by
/// a contention the cost model does not price.
struct RunContention {
  double others_fraction = 0;
  double steal_fraction = 0;
  bool valid = false;
};
RunContention run_contention(const MachineSample& before, const MachineSample& after);
/// The measurement names a stored run carries them under.
inline constexpr const char* kOthersCpuMeasurement = "machine.others_cpu_fraction";
inline constexpr const char* kStealMeasurement = "machine.steal_fraction";
/// Why such a run should not be fitted ("other processes took 41 % of this
/// machine's CPU time during the run"), or nullopt.
std::optional<std::string> contention_problem(const RunContention& c, const NoiseLimits& limits = {});

NoiseReport assess_noise(const MachineSample& before, const MachineSample& after, double median_spread, int points,
                         int dropped, const NoiseLimits& limits = {});

}  // namespace ztune::calibration
