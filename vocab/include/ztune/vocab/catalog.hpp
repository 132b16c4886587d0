#pragma once
// The data catalog: data/clusters/*.json and data/models/*.json.
#include <optional>
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

/// The user's own ztune directory, where ztune writes what it learns (results
/// database, calibrated profiles): $XDG_DATA_HOME/ztune, else
/// ~/.local/share/ztune. The catalog (data_dir()) is never written to.
/// Throws InputError when neither XDG_DATA_HOME nor HOME is set.
std::string user_data_dir();

/// Writes `text` to `path` through DurableFile (durable_file.hpp), so a crash
/// or a failed write leaves the old file or the new one, never half of one.
/// Creates the parent directories. Throws InputError "<what> <path>: ...".
void write_file_atomically(const std::string& path, const std::string& text, const std::string& what);

/// Why a file cannot be written at `path`: it is a directory, its directory does
/// not exist (unless the writer `creates_directories`, as write_file_atomically
/// does), or the nearest existing one is a file or not writable; nullopt when
/// it can be tried. Commands check their output flags with it before the work,
/// not after it.
std::optional<std::string> output_file_problem(const std::string& path, bool creates_directories = true);

}  // namespace ztune
