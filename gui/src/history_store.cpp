#include "ztune/gui/history_store.hpp"

#include <filesystem>

#include "ztune/gui/stored_search.hpp"

namespace ztune::gui {

namespace {
// The history view reads: a database not there yet is said, not created.
ResultsDb open(const QString& path) { return ResultsDb::open(path.toStdString(), DbAccess::read); }
}  // namespace

HistorySnapshot load_history(const QString& path, int limit) {
  HistorySnapshot h;
  // Nothing stored yet (as `ztune history` says it): an empty history, and the
  // file left for the first search to create.
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path.toStdString(), ec))) {
    h.notes.push_back(path.toStdString() + " is not there yet (a search, run or calibration creates it)");
    return h;
  }
  const auto db = open(path);
  h.searches = db.searches(limit);
  h.runs = db.runs(limit);
  h.profiles = load_profile_histories(db, h.notes);
  return h;
}

std::optional<SearchOutcome> reopen_search(const QString& path, std::int64_t id) {
  const auto stored = open(path).search(id);
  if (!stored) return std::nullopt;
  return outcome_from_stored_search(*stored);
}

std::optional<nlohmann::json> stored_run(const QString& path, std::int64_t id) { return open(path).run(id); }

}  // namespace ztune::gui
