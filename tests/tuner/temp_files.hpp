#pragma once
// Scratch files for the tests: a fresh directory removed at the end of the
// test (or, scratch(), of the test binary), writing and reading whole files.
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace ztune::test {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    char tmpl[] = "/tmp/ztune-test-XXXXXX";
    path = mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  [[nodiscard]] std::string file(const char* name) const { return (path / name).string(); }
};

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
inline std::string read_file(const std::string& path) { return read_bytes(path); }

/// One directory for the whole test binary, removed when it exits; readable
/// by other users (tests that run a command as `nobody` reach files in it).
inline std::filesystem::path scratch() {
  namespace fs = std::filesystem;
  static const TempDir dir;
  static const bool opened = (fs::permissions(dir.path, fs::perms::owner_all | fs::perms::group_read |
                                                            fs::perms::group_exec | fs::perms::others_read |
                                                            fs::perms::others_exec),
                              true);
  (void)opened;
  return dir.path;
}

/// Writes `text` to scratch()/name and returns the path.
inline std::string write_file(const std::string& name, const std::string& text) {
  const std::filesystem::path path = scratch() / name;
  std::ofstream(path, std::ios::binary) << text;
  return path.string();
}

}  // namespace ztune::test
