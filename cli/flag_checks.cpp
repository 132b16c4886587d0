#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>

#include "command.hpp"
#include "ztune/vocab/catalog.hpp"
#include "ztune/vocab/flag_values.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/tuner/results_db.hpp"

namespace ztune::cli {

namespace {

CLI::Validator finite_at_least(double lo, bool allow_equal, const char* expect) {
  return CLI::Validator(
      [=](const std::string& v) {
        return finite_number_complaint(v, lo, allow_equal, std::numeric_limits<double>::max(), expect);
      },
      allow_equal ? "NUMBER >= 0" : "NUMBER > 0");
}

}  // namespace

const CLI::Validator Positive = finite_at_least(0.0, false, "a number > 0");
const CLI::Validator NonNegative = finite_at_least(0.0, true, "a number >= 0");
CLI::Validator integer_in(long long lo, long long hi, const std::string& what) {
  return CLI::Validator([=](const std::string& v) { return integer_complaint(v, lo, hi, what); },
                        "INT in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

CLI::Validator number_in(double lo, double hi, const std::string& what, bool lo_allowed) {
  char range[64];
  std::snprintf(range, sizeof range, lo_allowed ? " from %g to %g" : " above %g up to %g", lo, hi);
  char name[64];
  std::snprintf(name, sizeof name, "NUMBER in %c%g, %g]", lo_allowed ? '[' : '(', lo, hi);
  return CLI::Validator(
      [=](const std::string& v) { return finite_number_complaint(v, lo, lo_allowed, hi, what + range); }, name);
}

const CLI::Validator ThreadCount = integer_in(1, kMaxThreads, "a thread count");

// An output file given on the command line goes into a directory that exists,
// as --record's does: a typo in the path is said before the work, not made into
// new directories (calibrate --out /nonexist/x.json had created /nonexist).
const CLI::Validator WritableFile(
    [](const std::string& v) {
      if (v.empty()) return std::string("expected a file name, got an empty one");
      // "-" would become a file of that name; standard output has its own.
      if (v == "-") return std::string("-: expected a file name (for standard output, /dev/stdout)");
      const auto why = output_file_problem(v, false);
      return why ? v + ": " + *why : std::string();
    },
    "FILE");

void refuse_output_over_input(const std::string& out_flag, const std::string& out,
                              const std::vector<std::pair<std::string, std::string>>& inputs) {
  if (out.empty()) return;
  for (const auto& [flag, path] : inputs) {
    if (path.empty()) continue;
    // The same file, or the same name where the input is not there yet (a
    // database's -wal exists only while it is open).
    std::error_code ec, ec_out, ec_in;
    const bool same = (std::filesystem::equivalent(out, path, ec) && !ec) ||
                      (std::filesystem::weakly_canonical(out, ec_out) == std::filesystem::weakly_canonical(path, ec_in) &&
                       !ec_out && !ec_in);
    if (same)
      throw InputError(out_flag + " " + out + ": is the file " + flag + " reads (" + path +
                       "); writing it would replace the input: choose another file");
  }
}

std::vector<std::pair<std::string, std::string>> database_files(const std::string& db, bool no_db) {
  if (no_db) return {};
  std::string path = db;
  if (path.empty()) {
    try {
      path = default_db_path();
    } catch (const InputError&) {  // no home directory: no default database to overwrite
      return {};
    }
  }
  const std::string flag = db.empty() ? "the results database" : "--db";
  return {{flag, path}, {flag, path + "-wal"}, {flag, path + "-shm"}};
}

const CLI::Validator DatabasePath(
    [](const std::string& v) {
      return v.empty() ? std::string("expected a database file, got an empty path (leave --db out for the default "
                                     "database, or --no-db for none)")
                       : std::string();
    },
    "FILE");

const CLI::Validator ExistingDirectory(
    [](const std::string& v) {
      std::error_code ec;
      return std::filesystem::is_directory(v, ec) ? std::string() : v + ": not a directory";
    },
    "DIR");

}  // namespace ztune::cli
