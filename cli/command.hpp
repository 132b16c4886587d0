#pragma once
// Each subcommand lives in its own cmd_<name>.cpp and registers itself on the
// root CLI11 app; `run` is called after parsing when that subcommand was chosen.
#include <functional>

#include <CLI/CLI.hpp>

namespace ztune::cli {

/// Exit codes (README "Exit codes"): 0 success, 1 no feasible plan or failed run,
/// 2 bad usage or input.
inline constexpr int kExitOk = 0;
inline constexpr int kExitInfeasible = 1;
inline constexpr int kExitUsage = 2;

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

}  // namespace ztune::cli
