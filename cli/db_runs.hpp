#pragma once
// The CLI's side of calibration's run sources: reads the stored runs of the
// results database (tuner/) and hands them to calibration::runs_from_stored.
#include <string>
#include <vector>

#include "ztune/calibration/run_sources.hpp"
#include "ztune/tuner/results_db.hpp"

namespace ztune::cli {

/// The stored runs of the database, newest first (at most `limit`).
std::vector<calibration::StoredRun> stored_runs(const ResultsDb& db, int limit = 200);

/// The successful runs stored for cluster `name` (or its calibrated copy) whose
/// record embeds its model (calibration::runs_from_stored).
std::vector<RunObservation> runs_from_db(const ResultsDb& db, const std::string& cluster_name,
                                         std::vector<std::string>& notes, int limit = 200);

}  // namespace ztune::cli
