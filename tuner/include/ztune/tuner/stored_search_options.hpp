#pragma once
// The "options" document the results database keeps with each search: what
// was asked (the inputs as the user named them) and the search's options.
// One writer for `ztune search` and the planner, one reader for whoever
// reopens a search, so the two programs' rows read alike.
//
// Example: db.store_search({cluster, model, &hw, search_options_to_json(request, options), result});
#include <string>

#include <nlohmann/json.hpp>

#include "ztune/tuner/search_options.hpp"

namespace ztune {

/// What a search was asked besides its options: its inputs as named, and
/// which program asked.
struct SearchRequest {
  std::string source;   // "ztune search", "ztune-planner"
  std::string cluster;  // the cluster and model as the user named them (a catalog name or a path)
  std::string model;
  int nodes = 0;        // --nodes (0: the cluster file's)
  int seq = 0;          // --seq (0: the model file's)
  bool compile = false; // the engine runs under a graph compiler (--compile)
  std::string profile;  // --profile (empty: the GPU family's default)
};

/// The document: every option under its key, pins unset as 0 (tp, pp, cp,
/// ulysses, dp_shard) or -1 (zero), "any" for an unpinned precision or
/// attention kernel, the passes turned off under "passes_off".
[[nodiscard]] nlohmann::json search_options_to_json(const SearchRequest& request, const SearchOptions& o);

struct StoredSearchOptions {
  SearchRequest request;
  SearchOptions options;
};

/// Reads a stored document back. A key a row stored before it existed lacks
/// reads as its default (the engine as ztune's, the accounting as the
/// engine's; a null document, every default); a key of the wrong type or
/// out of its range, or one no version of ztune search or the planner
/// stored (a misspelt one), is an InputError naming `where` and the key. The
/// band ztune search stores beside the options ("accuracy") is left alone.
[[nodiscard]] StoredSearchOptions search_options_from_json(const nlohmann::json& j, const std::string& where);

}  // namespace ztune
