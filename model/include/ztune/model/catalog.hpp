#pragma once
// The data catalog: data/clusters/*.json and data/models/*.json.
#include <string>
#include <vector>

namespace ztune {

/// The data directory: $ZTUNE_DATA_DIR, else the source tree's data/ (compiled in).
std::string data_dir();
/// `name_or_path` is read as a file when it exists or contains '/' or ends in
/// ".json"; otherwise it is looked up as data/<kind>/<name>.json. Throws an
/// InputError listing the catalog when neither exists.
std::string resolve_catalog_path(const std::string& kind, const std::string& name_or_path);
/// Names (file stems) in data/<kind>/, sorted.
std::vector<std::string> catalog_names(const std::string& kind);

}  // namespace ztune
