#pragma once
// The planner's access to the results database (issue 22: no widget opens it):
// what the History dialog lists, a stored search reopened as an outcome, and
// one stored run. Each call opens the database at `path` for its own work, so
// the dialog holds no connection between clicks. Errors throw (InputError,
// std::runtime_error) with the database's path in the text, for the dialog's
// status line.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <QString>
#include <nlohmann/json.hpp>

#include "ztune/gui/profile_history_model.hpp"
#include "ztune/gui/search_outcome.hpp"
#include "ztune/tuner/results_db.hpp"

namespace ztune::gui {

struct HistorySnapshot {
  std::vector<SearchSummary> searches;  // newest first, at most `limit`
  std::vector<RunSummary> runs;
  std::vector<ClusterProfileHistory> profiles;
  std::vector<std::string> notes;  // rows that could not be read, said so
};

/// The `limit` newest searches and runs and every cluster's profile history
/// (none, with a note, when nothing has created the database yet). The
/// database is read, never created or laid out (DbAccess::read).
HistorySnapshot load_history(const QString& path, int limit);

/// Search `id` reopened (stored_search.hpp); nullopt when it is no longer there.
std::optional<SearchOutcome> reopen_search(const QString& path, std::int64_t id);

/// Run `id`'s stored record; nullopt when it is no longer there.
std::optional<nlohmann::json> stored_run(const QString& path, std::int64_t id);

}  // namespace ztune::gui
