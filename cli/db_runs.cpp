#include "db_runs.hpp"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"

namespace ztune::cli {

void add_contention(std::vector<Measurement>& measurements, const calibration::RunContention& c) {
  if (!c.valid) return;
  measurements.push_back({calibration::kOthersCpuMeasurement, c.others_fraction, "fraction"});
  measurements.push_back({calibration::kStealMeasurement, c.steal_fraction, "fraction"});
}

void note_contention(const calibration::RunContention& c) {
  if (const auto why = calibration::contention_problem(c))
    std::fprintf(stderr, "ztune: note: %s: the measured time is slower than the plan's, and calibrate will not fit "
                 "this run\n", why->c_str());
}

void store_unfinished_run(ResultsDb& db, const std::optional<Cluster>& cluster, const std::optional<Transformer>& model,
                          const Plan& plan, const std::string& status, const std::string& why,
                          const std::string& checkpoint_dir, const std::optional<RunProgress>& done) {
  nlohmann::json doc{{"failure", why}};
  if (!checkpoint_dir.empty()) doc["checkpoint_dir"] = checkpoint_dir;
  if (done) doc["completed_steps"] = progress_to_json(*done);
  try {
    const auto id = db.store_run(RunToStore{cluster, model, plan, std::nullopt, doc, std::nullopt, {}, status});
    std::fprintf(stderr, "ztune: the %s run is stored as run %lld in %s\n", status.c_str(), static_cast<long long>(id),
                 db.path().c_str());
  } catch (const InputError& e) {
    std::fprintf(stderr, "ztune: the %s run was not stored: %s\n", status.c_str(), e.what());
  }
}

std::vector<RunObservation> runs_from_db(const ResultsDb& db, const std::string& cluster_name,
                                         std::vector<std::string>& notes, int limit) {
  return calibration::runs_from_stored(calibration::stored_runs_of(db, notes, limit), cluster_name, db.path(), notes);
}

std::vector<calibration::ProfileHistoryRow> profile_history_from_db(const ResultsDb& db, const Cluster& catalog_cluster,
                                                                    std::vector<std::string>& notes) {
  return calibration::profile_history_from_stored(catalog_cluster, calibration::stored_profiles_of(db, notes),
                                                  calibration::stored_runs_of(db, notes, calibration::kHistoryRuns,
                                                                               calibration::UnreadableRun::leave_out),
                                                  db.path(), notes);
}

}  // namespace ztune::cli
