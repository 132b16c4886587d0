#pragma once
// Reopening a search from the results database: the stored cluster, model and
// profile are loaded back, and each stored plan is predicted again with them
// (the cost model is deterministic, so the numbers are the stored ones unless
// the cost model changed since; simulated times are not kept, so reopened
// plans carry the analytical time).
#include <nlohmann/json_fwd.hpp>

#include "ztune/gui/search_outcome.hpp"

namespace ztune::gui {

/// `stored` is ResultsDb::search(id). Throws InputError naming the search when a stored document no
/// longer loads (or nlohmann::json::exception when the stored row lacks a field).
SearchOutcome outcome_from_stored_search(const nlohmann::json& stored);

}  // namespace ztune::gui
