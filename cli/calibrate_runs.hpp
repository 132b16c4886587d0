#pragma once
// The measured training runs `ztune calibrate` fits to and reports on: run
// records given on the command line, and the runs the results database holds
// for the cluster (stored by `ztune run` and `ztune --run`).
#include <optional>
#include <string>
#include <vector>

#include "ztune/model/cluster.hpp"
#include "ztune/model/profile_fit.hpp"
#include "ztune/tuner/results_db.hpp"

namespace ztune::cli {

/// Reads each run-record file (InputError names a bad one).
std::vector<RunObservation> runs_from_records(const std::vector<std::string>& files);

/// The successful runs stored for cluster `name` (or its calibrated copy) whose
/// record embeds its model; the label is "run N". Runs that cannot be used are
/// counted in `notes`, not dropped silently.
std::vector<RunObservation> runs_from_db(const ResultsDb& db, const std::string& cluster_name,
                                         std::vector<std::string>& notes, int limit = 200);

}  // namespace ztune::cli
