#pragma once
// The CLI's side of calibration's run sources: reads the stored runs of the
// results database (tuner/) and hands them to calibration::runs_from_stored.
#include <string>
#include <vector>

#include "ztune/calibration/history.hpp"
#include "ztune/calibration/machine_noise.hpp"
#include "ztune/calibration/run_sources.hpp"
#include "ztune/tuner/results_db.hpp"
#include "ztune/vocab/run_progress.hpp"

namespace ztune::cli {

/// What other work did to a run (calibration/machine_noise.hpp), as the
/// measurements a stored run carries (read back by calibration::read_stored_run).
void add_contention(std::vector<Measurement>& measurements, const calibration::RunContention& c);
/// Says on stderr when other work disturbed the run (its time is not the
/// plan's; calibrate leaves it out).
void note_contention(const calibration::RunContention& c);

/// Stores a run that did not finish ("failed", "interrupted"): its plan,
/// the reason and, when it can be resumed, its checkpoint directory, no
/// measured time. Says on stderr where it went, or why it could not be stored
/// (the run's own failure stays the one reported).
/// `done`: the steps it finished (ztune-worker --progress), kept in its
/// record as "completed_steps".
void store_unfinished_run(ResultsDb& db, const std::optional<Cluster>& cluster, const std::optional<Transformer>& model,
                          const Plan& plan, const std::string& status, const std::string& why,
                          const std::string& checkpoint_dir, const std::optional<RunProgress>& done = std::nullopt);

/// The successful runs stored for cluster `name` (or its calibrated copy) whose
/// record embeds its model (calibration::runs_from_stored).
std::vector<RunObservation> runs_from_db(const ResultsDb& db, const std::string& cluster_name,
                                         std::vector<std::string>& notes, int limit = 200);

/// The cluster's profile history (calibration/history.hpp) from the database:
/// the shipped profile, then each stored "<cluster>-calibrated" profile, each
/// with its error on the runs stored after it. Rows the strict readers refuse
/// are counted in `notes`.
std::vector<calibration::ProfileHistoryRow> profile_history_from_db(const ResultsDb& db, const Cluster& catalog_cluster,
                                                                    std::vector<std::string>& notes);

}  // namespace ztune::cli
