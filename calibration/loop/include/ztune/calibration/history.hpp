#pragma once
// The loop shown (issue 21, part 4): per cluster, the sequence of hardware
// profiles it has had — the shipped one, then each calibrated one in the
// order it was stored — with the error of each on the runs measured after it
// was stored (the runs it could not have learned from). A loop that only
// makes predictions better shows a falling error down the table.
//
// Example:
//   auto rows = profile_history(cluster, shipped, versions, runs);
//   print_profile_history(stdout, cluster.name, rows);
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/calibration/profile_fit.hpp"
#include "ztune/calibration/run_sources.hpp"

namespace ztune::calibration {

/// One stored profile of the cluster.
struct ProfileVersion {
  std::int64_t id = 0;
  std::string created;  // ISO 8601 UTC, as stored
  HardwareProfile profile;
};

/// One measured run with the time it was stored.
struct TimedRun {
  std::string created;
  RunObservation run;
};

struct ProfileHistoryRow {
  std::int64_t id = 0;       // 0: the shipped profile
  std::string created;       // "" for the shipped profile
  std::string name;
  std::string source;
  int runs_since = 0;        // runs stored after it (every run for the shipped one)
  std::optional<double> mean_abs_error;  // on those runs (none when there are none)
  std::optional<double> last_error;      // the first run after it (its own next prediction)
};

/// The history, oldest first. `runs` may come in any order.
std::vector<ProfileHistoryRow> profile_history(const Cluster& catalog_cluster, const std::optional<HardwareProfile>& shipped,
                                               const std::vector<ProfileVersion>& versions,
                                               const std::vector<TimedRun>& runs);

/// One profile as a results database stores it (calibration never opens the
/// database: the CLI and the planner read these rows and hand them over).
struct StoredProfile {
  std::int64_t id = 0;
  std::string created;
  std::string name;
  nlohmann::json doc;  // ztune.profile/1
};

/// The history of `catalog_cluster` from stored rows: its "<name>-calibrated"
/// profiles and its successful runs. Rows the strict readers refuse are left
/// out and counted in `notes`; `where` names the store in messages.
std::vector<ProfileHistoryRow> profile_history_from_stored(const Cluster& catalog_cluster,
                                                           const std::vector<StoredProfile>& profiles,
                                                           const std::vector<StoredRun>& runs, const std::string& where,
                                                           std::vector<std::string>& notes);

/// The clusters that have calibrated profiles among `profiles` ("local-cpu"
/// for "local-cpu-calibrated"), sorted, each once.
std::vector<std::string> calibrated_cluster_names(const std::vector<StoredProfile>& profiles);

void print_profile_history(std::FILE* out, const std::string& cluster, const std::vector<ProfileHistoryRow>& rows);
nlohmann::json profile_history_json(const std::string& cluster, const std::vector<ProfileHistoryRow>& rows);

}  // namespace ztune::calibration
