#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <set>
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

CLI::Validator integer_in(const IntegerRange& r) { return integer_in(r.lo, r.hi, r.what); }

CLI::Validator number_in(double lo, double hi, const std::string& what, bool lo_allowed) {
  char name[64];
  std::snprintf(name, sizeof name, "NUMBER in %c%g, %g]", lo_allowed ? '[' : '(', lo, hi);
  return CLI::Validator(
      [=](const std::string& v) { return number_complaint(v, NumberRange{lo, hi, what.c_str(), lo_allowed}); }, name);
}

CLI::Validator number_in(const NumberRange& r) { return number_in(r.lo, r.hi, r.what, r.lo_allowed); }

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

namespace {

// Each option name that takes integers, with the most values it takes
// (--stage-layers several, --tp one), and the names that take anything else.
void integer_option_names(const CLI::App& app, std::map<std::string, int>& ints, std::set<std::string>& others) {
  for (const CLI::Option* o : app.get_options()) {
    const std::string type = o->get_type_name();
    const bool integer = type.starts_with("INT") || type.starts_with("UINT");
    auto add = [&](const std::string& name) {
      if (integer)
        ints[name] = std::max(ints[name], std::max(1, o->get_items_expected_max()));
      else
        others.insert(name);
    };
    for (const auto& n : o->get_lnames()) add("--" + n);
    for (const auto& n : o->get_snames()) add("-" + n);
  }
  for (const CLI::App* sub : app.get_subcommands({})) integer_option_names(*sub, ints, others);
}

// An optional sign then decimal digits only ("-7", "010"; not "", "-", "0x10").
bool is_number(const std::string& v) {
  const std::size_t digits = (!v.empty() && (v[0] == '-' || v[0] == '+')) ? 1 : 0;
  return v.size() > digits && std::all_of(v.begin() + static_cast<std::ptrdiff_t>(digits), v.end(),
                                          [](char c) { return c >= '0' && c <= '9'; });
}

// "010" -> "10", "-007" -> "-7", "000" -> "0", " 010" -> "10" (strtoll, as
// CLI11 converts, skips the blanks); anything else unchanged.
std::string without_leading_zeros(std::string v) {
  if (const std::size_t start = v.find_first_not_of(" \t\n\v\f\r"); start != std::string::npos) v.erase(0, start);
  if (!is_number(v)) return v;
  const std::size_t digits = (v[0] == '-' || v[0] == '+') ? 1 : 0;
  const std::size_t first = v.find_first_not_of('0', digits);
  if (first == digits) return v;  // no leading zero
  return v.substr(0, digits) + (first == std::string::npos ? std::string("0") : v.substr(first));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> decimal_integer_values(const CLI::App& root,
                                                                         std::vector<std::string>& args) {
  std::vector<std::pair<std::string, std::string>> rewritten;
  auto rewrite = [&](std::string& v, const std::string& decimal) {
    if (decimal != v) rewritten.emplace_back(v, decimal);
    v = decimal;
  };
  std::map<std::string, int> ints;
  std::set<std::string> others;
  integer_option_names(root, ints, others);
  // A name that takes integers in one command and text in another is left alone.
  for (const auto& n : others) ints.erase(n);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") return rewritten;  // the rest are positional
    if (const std::size_t eq = a.find('='); a.starts_with("--") && eq != std::string::npos) {
      if (ints.count(a.substr(0, eq)) != 0) {
        std::string value = a.substr(eq + 1);
        rewrite(value, without_leading_zeros(value));
        args[i] = a.substr(0, eq + 1) + value;
      }
      continue;
    }
    const auto option = ints.find(a);
    if (option == ints.end()) continue;
    // The option's values, as many as it takes, up to the next option: a
    // positional after `--steps 2` (a plan file named 0042) is not one.
    for (std::size_t j = i + 1, taken = 0;
         j < args.size() && taken < static_cast<std::size_t>(option->second) &&
         (!args[j].starts_with("-") || is_number(args[j]));
         ++j, ++taken)
      rewrite(args[j], without_leading_zeros(args[j]));
  }
  return rewritten;
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

const CLI::Validator GivenPath(
    [](const std::string& v) {
      return v.empty() ? std::string("expected a path, got an empty one (an unset shell variable?)") : std::string();
    },
    "PATH");

const CLI::Validator ExistingDirectory(
    [](const std::string& v) {
      std::error_code ec;
      return std::filesystem::is_directory(v, ec) ? std::string() : v + ": not a directory";
    },
    "DIR");

}  // namespace ztune::cli
