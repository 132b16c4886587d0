#pragma once
// What `ztune calibrate` prints: the fitted values (before → after), the α–β
// table per collective and layout, the notes, and the prediction error of the
// measured runs before and after the fit — as tables, or as one JSON document.
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/calibration/profile_fit.hpp"

namespace ztune::calibration {

/// One run's iteration time as measured and as predicted by each profile.
struct RunComparison {
  std::string label;
  std::string plan;
  bool held_out = false;      // evaluated, not fitted
  double measured_s = 0;
  double before_s = 0;        // the profile in place (the one a new fit must beat)
  double micro_s = 0;         // microbenchmark fit
  double after_s = 0;         // microbenchmark + run fit (the candidate profile)
};

void print_fitted_values(std::FILE* out, const std::string& title, const std::vector<FittedValue>& values);
void print_collective_fits(std::FILE* out, const std::vector<CollectiveFit>& fits);
void print_notes(std::FILE* out, const std::vector<std::string>& notes);
void print_run_comparisons(std::FILE* out, const std::vector<RunComparison>& rows);

nlohmann::json fitted_values_json(const std::vector<FittedValue>& values);
nlohmann::json collective_fits_json(const std::vector<CollectiveFit>& fits);
nlohmann::json run_comparisons_json(const std::vector<RunComparison>& rows);

/// Mean |predicted − measured| / measured over the rows of one set
/// (held_out true/false) for one column (0 before, 1 micro, 2 after).
double mean_abs_error(const std::vector<RunComparison>& rows, bool held_out, int column);

}  // namespace ztune::calibration
