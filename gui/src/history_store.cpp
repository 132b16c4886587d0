#include "ztune/gui/history_store.hpp"

#include "ztune/gui/stored_search.hpp"

namespace ztune::gui {

namespace {
ResultsDb open(const QString& path) { return ResultsDb::open(path.toStdString()); }
}  // namespace

HistorySnapshot load_history(const QString& path, int limit) {
  const auto db = open(path);
  HistorySnapshot h;
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
