#pragma once
// Each subcommand lives in its own cmd_<name>.cpp and registers itself on the
// root CLI11 app; `run` is called after parsing when that subcommand was chosen.
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "ztune/vocab/flag_ranges.hpp"  // the ranges the planner shares
#include "ztune/vocab/flag_values.hpp"  // kMaxThreads

namespace ztune::cli {

/// Exit codes (README "Exit codes"): 0 success, 1 no feasible plan or failed run,
/// 2 bad usage or input, 130 a search stopped by Ctrl-C (128 + SIGINT, as `ztune run`).
inline constexpr int kExitOk = 0;
inline constexpr int kExitInfeasible = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitInterrupted = 130;

/// Flag checks used instead of CLI11's PositiveNumber/NonNegativeNumber, which accept
/// "nan" and quote DBL_MAX's 309 digits in their message ("--nodes 0"). A whole
/// flag's value must parse; an integer flag then also gets CLI11's conversion check.
extern const CLI::Validator Positive;     ///< a finite number > 0
extern const CLI::Validator NonNegative;  ///< a finite number >= 0
/// The --db flag's help, one wording for every command (catalog.cpp user_data_dir).
inline constexpr const char* kDbHelp =
    "Results database (default: results.db in $XDG_DATA_HOME/ztune, else ~/.local/share/ztune)";
extern const CLI::Validator ThreadCount;  ///< an integer in [1, kMaxThreads]
/// An integer in [lo, hi]; the message says "expected WHAT from LO to HI".
CLI::Validator integer_in(long long lo, long long hi, const std::string& what);
/// A finite number in [lo, hi] (above lo, not at it, unless `lo_allowed`); the
/// message says "expected WHAT from LO to HI" ("above LO up to HI").
CLI::Validator number_in(double lo, double hi, const std::string& what, bool lo_allowed = true);
/// The same for a range the planner's form shares (vocab/flag_ranges.hpp).
CLI::Validator integer_in(const IntegerRange& r);
CLI::Validator number_in(const NumberRange& r);
/// A path a file can be written at (vocab output_file_problem), checked when the
/// flags are parsed: an output flag naming a directory fails before the work.
extern const CLI::Validator WritableFile;
/// A database path that is not empty: `--db ""` (an unset shell variable) had
/// meant the user's default database, where a script's results then went.
extern const CLI::Validator DatabasePath;
/// A path that is not empty: `--plan ""`, `--profile ""` and the like had
/// silently meant "not given" (the default plan, the default profile).
extern const CLI::Validator GivenPath;
/// An existing directory (NVMe offload files are created in it).
extern const CLI::Validator ExistingDirectory;
/// Throws InputError when the output `out` (of flag `out_flag`) is the same file
/// as one of the command's inputs ({flag, path}; empty paths skipped): writing it
/// would replace what the command reads, a plan with a launch script.
void refuse_output_over_input(const std::string& out_flag, const std::string& out,
                              const std::vector<std::pair<std::string, std::string>>& inputs);
/// The results database's files as inputs of the above ({"--db", path} for
/// the database, its -wal and -shm; the default database's when `db` is
/// empty; none with --no-db): an output over one would replace every search,
/// run and profile stored.
std::vector<std::pair<std::string, std::string>> database_files(const std::string& db, bool no_db);
/// CLI11 converts integers with strtoll's base 0: `--tp 010` was tp 8 and
/// `--tp 08` "could not convert". Rewrites, in `args` (in command-line order),
/// every value of an option that takes integers (CLI11's INT and UINT types,
/// in `root` or any subcommand) written with leading zeros as the decimal a
/// user means ("010" -> "10"). Other arguments are left as they are. Returns
/// each rewritten value as (what was given, what it became), for the errors to
/// quote what the user typed.
std::vector<std::pair<std::string, std::string>> decimal_integer_values(const CLI::App& root,
                                                                         std::vector<std::string>& args);

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;
};

Command add_search(CLI::App& root);
Command add_predict(CLI::App& root);
Command add_validate(CLI::App& root);
Command add_run(CLI::App& root);
Command add_calibrate(CLI::App& root);
Command add_history(CLI::App& root);
Command add_export(CLI::App& root);
Command add_list(CLI::App& root);
Command add_memory(CLI::App& root);

}  // namespace ztune::cli
