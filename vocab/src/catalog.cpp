#include "ztune/vocab/catalog.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>

#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/text.hpp"

#ifndef ZTUNE_DEFAULT_DATA_DIR
#define ZTUNE_DEFAULT_DATA_DIR "data"
#endif

namespace fs = std::filesystem;

namespace ztune {

std::string data_dir() {
  if (const char* env = std::getenv("ZTUNE_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return ZTUNE_DEFAULT_DATA_DIR;
}

std::vector<std::string> catalog_names(const std::string& kind) {
  std::vector<std::string> names;
  fs::path dir = fs::path(data_dir()) / kind;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".json") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

// Why a path that is named but cannot be followed is not there: a symbolic
// link that loops or dangles exists as a link (lstat) but not as a file, and
// "no such file" had hidden that. nullopt when nothing is at the path at all.
std::optional<std::string> broken_link(const std::string& path) {
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return std::nullopt;
  struct stat target {};
  if (::stat(path.c_str(), &target) == 0) return std::nullopt;
  return errno == ELOOP ? std::string("a symbolic link that loops (") + std::strerror(ELOOP) + ")"
                        : std::string("a symbolic link to a missing file");
}

}  // namespace

std::string resolve_catalog_path(const std::string& kind, const std::string& name_or_path) {
  std::error_code ec;
  const std::string singular = kind.substr(0, kind.size() - 1);
  const std::string flag = "--" + singular;
  const std::vector<std::string> names = catalog_names(kind);
  // One rule: a bare name the catalog has is the catalog's, whatever the
  // working directory holds (./NAME names a local file or folder of that name);
  // anything else is a path. A file named like a catalog entry had won over it
  // while a folder of that name had lost.
  bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                         (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (!looks_like_path && std::find(names.begin(), names.end(), name_or_path) != names.end())
    return (fs::path(data_dir()) / kind / (name_or_path + ".json")).string();
  // A Hugging Face checkpoint's folder stands for the config.json in it.
  if (kind == "models" && fs::is_directory(name_or_path, ec)) {
    const std::string config = (fs::path(name_or_path) / "config.json").string();
    if (fs::is_regular_file(config, ec)) return config;
    if (auto why = broken_link(config)) throw InputError(config + ": " + *why + ", expected the folder's config.json");
  }
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  if (looks_like_path) {
    // Something that is there but not a regular file (a directory, a FIFO) goes on
    // to read_json_file, which says what it is (and does not block on a FIFO).
    if (fs::exists(name_or_path, ec)) return name_or_path;
    if (auto why = broken_link(name_or_path)) throw InputError(name_or_path + ": " + *why);
    // llama-7b.json typed for the catalog's llama-7b.
    const std::string stem = fs::path(name_or_path).stem().string();
    const bool in_catalog = name_or_path.find('/') == std::string::npos &&
                            std::find(names.begin(), names.end(), stem) != names.end();
    throw InputError(name_or_path + ": no such file" +
                     (in_catalog ? " (the catalog's " + singular + " is " + flag + " " + stem + ")" : std::string()));
  }
  if (fs::exists(name_or_path, ec)) return name_or_path;  // a bare directory's name: the reader says what it is
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  std::string near;
  if (const std::string n = nearest_name(name_or_path, names); !n.empty()) near = " (did you mean " + n + "?)";
  // Spaces around a name are shown (quoted) and said: the planner trims them,
  // the command line takes a name as given (a file may begin with a space).
  const bool padded = !name_or_path.empty() && (std::isspace(static_cast<unsigned char>(name_or_path.front())) ||
                                                std::isspace(static_cast<unsigned char>(name_or_path.back())));
  if (padded) near += " (the name has spaces around it)";
  throw InputError(flag + " " + (padded ? "\"" + name_or_path + "\"" : name_or_path) + ": not a file and not a catalog " +
                   singular + near + " (catalog: " +
                   (known.empty() ? "empty; is ZTUNE_DATA_DIR right?" : known) + ")");
}

std::string user_data_dir() {
  if (const char* xdg = std::getenv("XDG_DATA_HOME"); xdg != nullptr && *xdg == '/')
    return (fs::path(xdg) / "ztune").string();
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return (fs::path(home) / ".local" / "share" / "ztune").string();
  throw InputError("neither XDG_DATA_HOME nor HOME is set: ztune has no user data directory (give the output "
                   "file explicitly)");
}

std::optional<std::string> output_file_problem(const std::string& path, bool creates_directories) {
  std::error_code ec;
  if (path.empty()) return "expected a file name";
  if (fs::is_directory(path, ec)) return "is a directory; expected a file to write";
  fs::path up = fs::path(path).parent_path();
  if (up.empty()) up = ".";
  if (!creates_directories && !fs::exists(up, ec)) return "the directory " + up.string() + " does not exist";
  while (!fs::exists(up, ec) && up.has_parent_path() && up != up.parent_path()) up = up.parent_path();
  if (!fs::is_directory(up, ec)) return up.string() + " is not a directory";
  if (::access(up.c_str(), W_OK) != 0) return "the directory " + up.string() + " is not writable";
  return std::nullopt;
}

void write_file_atomically(const std::string& path, const std::string& text, const std::string& what) {
  const fs::path target(path);
  std::error_code ec;
  if (target.has_parent_path()) fs::create_directories(target.parent_path(), ec);
  if (ec) throw InputError(what + " " + path + ": cannot create its directory: " + ec.message());
  if (auto why = write_file_durably(path, text)) throw InputError(what + " " + path + ": cannot write: " + *why);
}

}  // namespace ztune
