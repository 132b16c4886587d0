#pragma once
// One calibration, start to verdict (issue 21): fit the microbenchmarks and the
// runs, cross-validate the result against the profile in place, check it on
// the reference plans, and decide. The CLI's `calibrate` and `--run` are thin
// shells over it: they gather the inputs (the worker's measurements, run
// records, the database's runs), print the result and write the profile only
// when the verdict accepts it (or when told to anyway).
//
// Example:
//   SessionInputs in{...};
//   SessionResult r = run_session(in);
//   if (r.verdict.accept) write(r.profile);
#include <optional>
#include <string>
#include <vector>

#include "ztune/calibration/acceptance.hpp"
#include "ztune/calibration/calibrate_report.hpp"
#include "ztune/calibration/machine_noise.hpp"
#include "ztune/calibration/profile_fit.hpp"

namespace ztune::calibration {

struct SessionInputs {
  Cluster catalog_cluster;                   // as the catalog (or the user's file) describes it
  HardwareProfile prior;                     // the fit's start (shipped, --profile, or the one in place)
  std::optional<HardwareProfile> previous;   // the calibrated profile in place (none: the prior is)
  const Measurements* measurements = nullptr;
  std::vector<RunObservation> runs;          // learned from
  std::vector<RunObservation> held_out;      // evaluated only
  /// The machine before and after the microbenchmarks ran (invalid samples
  /// when the measurements were read from a file): with the rounds' spread,
  /// the noise report that can refuse the fit.
  MachineSample machine_before, machine_after;
  NoiseLimits noise_limits;
  std::string name;                          // the new profile's name
  DecisionRules rules;
  RunFitOptions run_options;
};

struct SessionResult {
  std::optional<ProfileFit> micro;           // with measurements
  RunFit run_fit;
  HardwareProfile profile;                   // the candidate (named, with its measured figures)
  Cluster cluster;                           // the candidate's cluster
  std::vector<RunComparison> rows;           // each run: measured, previous, micro fit, candidate
  std::optional<NoiseReport> noise;          // with measurements
  CrossValidation cv;
  std::vector<ReferencePlanCheck> reference;
  Verdict verdict;
  std::vector<std::string> notes;
};

SessionResult run_session(const SessionInputs& in);

}  // namespace ztune::calibration
