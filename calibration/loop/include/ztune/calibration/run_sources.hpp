#pragma once
// The measured training runs calibration fits to and reports on: run-record
// files, and the records a caller read from wherever it keeps them (the CLI
// reads them from the results database: cli/db_runs.cpp). Calibration never
// opens the database itself (docs/design.md, rooms).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/calibration/profile_fit.hpp"

namespace ztune::calibration {

/// Whether a run on cluster `run_cluster` measures cluster `cluster_name`:
/// the same name, or the calibrated copy `ztune calibrate` writes of it.
[[nodiscard]] bool run_of_cluster(const std::string& run_cluster, const std::string& cluster_name);

/// Reads each run-record file (InputError names a bad one).
std::vector<RunObservation> runs_from_records(const std::vector<std::string>& files);

/// How far past its devices' datasheet peak a run's model FLOPs may come
/// before it is refused: MFU above 1 cannot be measured, and a CPU cluster's
/// peak figure is a nominal one, so twice it.
inline constexpr double kFasterThanPeak = 2.0;

/// Why run `r` cannot have been measured on `c`: its model FLOPs a step over
/// its measured time exceed its devices' peak at its precision by more than
/// kFasterThanPeak (a record whose step times were scaled, 1e-6 of the real
/// ones, or edited). None when it could.
[[nodiscard]] std::optional<std::string> faster_than_hardware(const RunObservation& r, const Cluster& c);

/// One stored run as a results database holds it.
struct StoredRun {
  std::int64_t id = 0;
  std::string cluster;      // the cluster name it ran on
  std::string status;       // "ok" for a completed run
  std::string created;      // when it was stored (ISO 8601 UTC), "" if unknown
  nlohmann::json record;    // its run record (null when none was stored)
  std::optional<std::string> contended;  // why other work disturbed it (machine_noise.hpp), if it did
};

/// A stored successful run's record and contention, from the document the
/// results database gives for it (ResultsDb::run: "record", "measurements"):
/// the one reading of it, for the CLI and the planner. A record that is not
/// an object, or a contention share outside [0, 1], is an InputError that
/// begins with `where` ("DB (run N") and names the column or table.
void read_stored_run(StoredRun& run, const nlohmann::json& document, const std::string& where);

/// The successful runs of cluster `cluster_name` (or its calibrated copy) whose
/// record embeds its model; the label is "run N". Runs that cannot be used are
/// counted in `notes`, not dropped silently. `where` names the store in messages.
/// The fitted runs and the held-out ones with each measurement once: a run
/// read twice among the fitted (a record file given again, or the record of
/// a run the database also stored) is fitted once, and a held-out run's
/// fitted copy is left out of the fit (it would score itself). Each drop is
/// said in `notes`, naming both places.
void drop_repeated_measurements(std::vector<RunObservation>& fitted, const std::vector<RunObservation>& held_out,
                                std::vector<std::string>& notes);

std::vector<RunObservation> runs_from_stored(const std::vector<StoredRun>& stored, const std::string& cluster_name,
                                             const std::string& where, std::vector<std::string>& notes);

}  // namespace ztune::calibration
