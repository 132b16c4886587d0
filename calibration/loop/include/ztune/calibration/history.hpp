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
#include "ztune/vocab/input_error.hpp"

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

/// The runs a profile history reads: the newest this many.
inline constexpr int kHistoryRuns = 1000;

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

// Reading a results database. Calibration never opens one and may not
// include the tuner's ResultsDb (docs/design.md, "Rooms"): these take any
// store with its reads -- runs(limit) rows of {id, cluster, status,
// created_at, damaged}, run(id) -> optional document, profiles() rows of
// {id, created_at, name, doc}, path() -- the one reading the CLI and the
// planner share.

/// What to do with a run whose documents cannot be read: a fit refuses
/// (before any microbenchmark runs: calibrate says --no-db-runs), a list
/// leaves it out and says so (history, calibrate --report).
enum class UnreadableRun : unsigned char { refuse, leave_out };

/// The stored runs, newest first (at most `limit`); a row whose summary the
/// store cannot give whole is left out, said in `notes` once.
template <class Store>
std::vector<StoredRun> stored_runs_of(const Store& db, std::vector<std::string>& notes, int limit,
                                      UnreadableRun unreadable = UnreadableRun::refuse) {
  std::vector<StoredRun> out;
  for (const auto& s : db.runs(limit)) {
    if (!s.damaged.empty()) {
      notes.push_back(db.path() + ": " + s.damaged + " (the run is left out)");
      continue;
    }
    StoredRun r;
    r.id = s.id;
    r.cluster = s.cluster;
    r.status = s.status;
    r.created = s.created_at;
    // A run whose documents cannot be read (its record, plan, cluster or
    // model row edited into malformed JSON): in a list, left out and said, as
    // a damaged summary is, so one bad row does not hide the others.
    if (s.status == "ok") {
      try {
        if (const auto run = db.run(s.id)) read_stored_run(r, *run, db.path() + " (run " + std::to_string(s.id));
      } catch (const InputError& e) {
        if (unreadable == UnreadableRun::refuse) throw;
        notes.push_back(std::string(e.what()) + " (the run is left out)");
        continue;
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

/// Every stored profile, oldest first; a row the store cannot give whole is
/// left out, said in `notes`.
template <class Store>
std::vector<StoredProfile> stored_profiles_of(const Store& db, std::vector<std::string>& notes) {
  std::vector<StoredProfile> out;
  for (auto& p : db.profiles()) {
    if (!p.damaged.empty()) {
      notes.push_back(p.damaged + " (the profile is left out)");
      continue;
    }
    out.push_back({p.id, p.created_at, p.name, std::move(p.doc)});
  }
  return out;
}

/// One cluster's history, for every cluster with calibrated profiles stored.
struct ClusterProfileHistory {
  std::string cluster;
  std::vector<ProfileHistoryRow> rows;
};
/// The histories of every calibrated cluster (the catalog's or a file's
/// cluster of that name: `load`), the runs read once; a cluster that cannot
/// be loaded is named in `notes` and left out.
template <class Store, class LoadCluster>
std::vector<ClusterProfileHistory> profile_histories_of(const Store& db, const LoadCluster& load,
                                                        std::vector<std::string>& notes) {
  const std::vector<StoredProfile> profiles = stored_profiles_of(db, notes);
  const std::vector<StoredRun> runs = stored_runs_of(db, notes, kHistoryRuns, UnreadableRun::leave_out);
  std::vector<ClusterProfileHistory> out;
  for (const auto& name : calibrated_cluster_names(profiles)) {
    try {
      out.push_back({name, profile_history_from_stored(load(name), profiles, runs, db.path(), notes)});
    } catch (const InputError& e) {
      notes.push_back("profiles of " + name + " not shown: " + e.what());
    }
  }
  return out;
}

void print_profile_history(std::FILE* out, const std::string& cluster, const std::vector<ProfileHistoryRow>& rows);
nlohmann::json profile_history_json(const std::string& cluster, const std::vector<ProfileHistoryRow>& rows);

}  // namespace ztune::calibration
