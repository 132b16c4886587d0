#pragma once
// The results database (SQLite, C API): clusters, models and hardware profiles
// by content digest; searches with their inputs, options, counts and time;
// their ranked candidates with predictions; runs with their records and
// measurements. Versioned schema (PRAGMA user_version, migrations), WAL,
// every write one IMMEDIATE transaction, a busy timeout so several ztune
// processes can write at once. A file that is not a ztune database, is
// corrupt, or was written by a newer ztune is refused with a clear InputError
// and left untouched.
//
// Example: auto db = ResultsDb::open(default_db_path()); db.store_search({...});
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/plan.hpp"
#include "ztune/model/prediction.hpp"
#include "ztune/vocab/transformer.hpp"
#include "ztune/tuner/search.hpp"

struct sqlite3;

namespace ztune {

/// $XDG_DATA_HOME/ztune/results.db, else $HOME/.local/share/ztune/results.db.
/// Throws InputError when neither variable is set.
std::string default_db_path();

/// The schema version this build writes (PRAGMA user_version).
inline constexpr int kResultsSchemaVersion = 1;

/// One search to store. `options` is the search's options as JSON (the command line's view).
struct SearchToStore {
  const Cluster& cluster;
  const Transformer& model;
  const HardwareProfile* profile = nullptr;
  nlohmann::json options;
  const SearchResult& result;
  /// Plans stored: the best this many of result.plans (the planner keeps every
  /// plan that fits for its table and stores the best `top`, as ztune search does).
  std::size_t max_plans = SIZE_MAX;
};

/// One named measurement of a run (e.g. "iteration_s", "peak_memory_bytes.rank0").
struct Measurement {
  std::string name;
  double value = 0;
  std::string unit;
};

/// One executed run: what the executor's run record says, plus what was predicted.
struct RunToStore {
  std::optional<Cluster> cluster;
  std::optional<Transformer> model;
  Plan plan;
  std::optional<Prediction> prediction;     // the cost model's prediction for this plan, if made
  nlohmann::json record;                    // the executor's run record, stored verbatim
  std::optional<double> measured_iteration_s;
  std::vector<Measurement> measurements;
  std::string status = "ok";                // "ok" | "failed" | ...
};

struct SearchSummary {
  std::int64_t id = 0;
  std::string created_at;
  std::string cluster, model;
  std::int64_t space = 0, feasible = 0;
  double elapsed_s = 0;
  bool interrupted = false;
  std::string best;                 // best plan's summary ("" when nothing fitted)
  std::optional<double> best_tokens_per_s;  // as it was ranked (simulated where re-timed)
  std::string engine;               // the engine searched for ("" when the stored options do not say)
  std::string damaged;              // why the row could not be read ("" when it could); only id is set then
};

struct RunSummary {
  std::int64_t id = 0;
  std::string created_at;
  std::string cluster, model;       // "" when the run record had none
  std::string plan;                 // summary
  std::string status;
  std::optional<double> predicted_iteration_s, measured_iteration_s;
  std::string damaged;              // why the row could not be read ("" when it could); only id is set then
};

struct ProfileSummary {
  std::int64_t id = 0;
  std::string created_at;           // when this content was first stored
  std::string name;
  nlohmann::json doc;               // ztune.profile/1 JSON as stored
  std::string damaged;              // profiles(): why the row could not be read whole ("" when it could)
};

/// What a command does with the database: `write` creates the file (and its
/// directory) where none is; `read` (history, the planner's history view,
/// calibrate --report) refuses a missing path, an empty file and an SQLite
/// file without ztune's schema, and never creates or lays out one.
enum class DbAccess { write, read };

/// What a connection's busy handler reads (results_db.cpp): the connection
/// and the caller's give-up flag.
struct ResultsDbLockWait;

class ResultsDb {
 public:
  /// Opens and migrates to the current schema (creating the file and its
  /// directory first with DbAccess::write). Throws InputError naming the file
  /// for a non-database, corrupt, foreign or newer-schema file, which it leaves
  /// untouched, and with DbAccess::read for a missing or empty one.
  /// `give_up`, when given, ends a wait for another writer's lock as soon as
  /// it is set (the planner's Cancel): the call then throws DbFailure
  /// (SQLITE_BUSY) instead of waiting out the 30 s busy timeout.
  static ResultsDb open(const std::string& path, DbAccess access = DbAccess::write,
                        const std::atomic<bool>* give_up = nullptr);
  ResultsDb(ResultsDb&&) noexcept;
  ResultsDb& operator=(ResultsDb&&) noexcept;
  ~ResultsDb();

  std::int64_t store_search(const SearchToStore& s);
  std::int64_t store_run(const RunToStore& r);
  /// Stores a hardware profile (once per content); returns its id.
  std::int64_t store_profile(const HardwareProfile& p);

  [[nodiscard]] std::vector<SearchSummary> searches(int limit = 50) const;
  [[nodiscard]] std::vector<RunSummary> runs(int limit = 50) const;
  /// How many searches and runs are stored (what a limited list leaves out).
  [[nodiscard]] std::int64_t search_count() const;
  [[nodiscard]] std::int64_t run_count() const;
  /// The stored profiles named `name` (every profile when empty), oldest first.
  [[nodiscard]] std::vector<ProfileSummary> profiles(const std::string& name = "", int limit = 500) const;
  /// One stored profile (`history show p3`); nullopt if no such id.
  [[nodiscard]] std::optional<ProfileSummary> profile(std::int64_t id) const;
  /// The whole search: inputs, options, counts, passes and candidates; nullopt if no such id.
  [[nodiscard]] std::optional<nlohmann::json> search(std::int64_t id) const;
  /// The whole run: plan, prediction, record, measurements; nullopt if no such id.
  [[nodiscard]] std::optional<nlohmann::json> run(std::int64_t id) const;

  [[nodiscard]] const std::string& path() const { return path_; }
  [[nodiscard]] int schema_version() const;

 private:
  struct Closer {
    void operator()(sqlite3* db) const;
  };
  ResultsDb(std::unique_ptr<sqlite3, Closer> db, std::unique_ptr<ResultsDbLockWait> wait, std::string path);
  std::unique_ptr<ResultsDbLockWait> wait_;  // on the heap: the handler keeps its address across moves
  std::unique_ptr<sqlite3, Closer> db_;
  std::string path_;
};

}  // namespace ztune
