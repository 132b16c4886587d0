#include "ztune/model/catalog.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "ztune/model/input_error.hpp"

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

std::string resolve_catalog_path(const std::string& kind, const std::string& name_or_path) {
  std::error_code ec;
  bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                         (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (fs::is_regular_file(name_or_path, ec) || looks_like_path) {
    if (!fs::is_regular_file(name_or_path, ec)) throw InputError(name_or_path + ": no such file");
    return name_or_path;
  }
  fs::path candidate = fs::path(data_dir()) / kind / (name_or_path + ".json");
  if (fs::is_regular_file(candidate, ec)) return candidate.string();
  std::string known;
  for (const auto& n : catalog_names(kind)) known += (known.empty() ? "" : ", ") + n;
  std::string singular = kind.substr(0, kind.size() - 1);
  throw InputError("--" + (singular == "cluster" ? std::string("cluster") : std::string("model")) + " " +
                   name_or_path + ": not a file and not a catalog " + singular + " (catalog: " +
                   (known.empty() ? "empty; is ZTUNE_DATA_DIR right?" : known) + ")");
}

}  // namespace ztune
