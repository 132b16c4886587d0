// ztune: plan, predict and run large-model training. Thin shell over the libraries.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "command.hpp"
#include "ztune/model/input_error.hpp"

int main(int argc, char** argv) {
  using namespace ztune::cli;
  CLI::App root{"ztune: plan, predict and run the training of very large models.\n"
                "Exit codes: 0 success, 1 no feasible plan or a failed run, 2 bad usage or input."};
  root.set_version_flag("--version", "ztune 0.1.0");
  root.require_subcommand(0, 1);
  root.footer("With no subcommand, ztune searches: ztune --cluster dgx2x16 --model 100b");
  std::vector<Command> commands{add_search(root), add_predict(root), add_validate(root),   add_run(root),
                                add_calibrate(root), add_history(root), add_export(root), add_list(root)};

  // `ztune --cluster ...` means `ztune search --cluster ...`.
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) args.emplace_back(argv[i]);  // CLI11 wants them reversed
  if (argc > 1) {
    std::string first = argv[1];
    if (first.starts_with("-") && first != "-h" && first != "--help" && first != "--version")
      args.emplace_back("search");
  }
  try {
    root.parse(args);
  } catch (const CLI::ParseError& e) {
    int rc = root.exit(e);
    return rc == 0 ? kExitOk : kExitUsage;
  }
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return c.run();
  } catch (const ztune::InputError& e) {
    std::fprintf(stderr, "ztune: error: %s\n", e.what());
    return kExitUsage;
  }
  std::cout << root.help() << std::flush;
  return kExitUsage;
}
