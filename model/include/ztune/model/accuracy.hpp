#pragma once
// What a prediction for this GPU has been checked against: the time metrics of
// `ztune validate` (published measurements in data/validation) measured on the
// same GPU family, one line per source, so every predict and search shows the
// error of the same cost model against real runs beside its numbers.
//
//   accuracy on A100 (ztune validate: ...): Korthikanti2022-T5 0.8% MAPE over 8 runs, ...
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/model/cluster.hpp"
#include "ztune/model/hardware_profile.hpp"
#include "ztune/model/validation.hpp"

namespace ztune {

struct Accuracy {
  std::string family;                  // "A100"
  std::vector<SourceSummary> sources;  // empty: nothing measured on this GPU family
  std::string problem;                 // set when the validation data could not be read
};

/// Runs the validation sources (default profiles; ~20 ms) and keeps the time
/// metrics measured on `c`'s GPU family. Never throws: a missing or malformed
/// validation directory is reported in `problem`.
[[nodiscard]] Accuracy accuracy_for(const Cluster& c);

/// One line (no trailing newline). `profile`: the name of the profile the
/// prediction used; the figures are the default profile's, and the line says
/// when that profile was fitted on the same runs (in-sample) or is not the one used.
[[nodiscard]] std::string accuracy_line(const Accuracy& a, const std::string& profile,
                                        const HardwareProfile& default_profile);

[[nodiscard]] nlohmann::json accuracy_json(const Accuracy& a);

}  // namespace ztune
