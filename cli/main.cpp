// ztune: plan, predict and run large-model training. Thin shell over the libraries.
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "command.hpp"
#include "ztune/model/input_error.hpp"

namespace {

using ztune::cli::kExitUsage;

/// Flushes standard output and checks that everything written to it arrived: a
/// full disk (ENOSPC, `>/dev/full`) or any other write error is an error with the
/// reason (exit 2), never a silent exit 0. A reader gone away (EPIPE: `| head`,
/// with SIGPIPE ignored by whoever started us) ends quietly, as SIGPIPE would.
int finish_output(int rc) {
  std::cout.flush();
  errno = 0;
  const bool flushed = std::fflush(stdout) == 0;
  int why = errno;
  if (flushed && !std::ferror(stdout) && std::cout.good()) return rc;
  // The failed write was earlier and its errno is gone: ask the descriptor again
  // (what was written is incomplete already; one more newline cannot hurt it).
  if (why == 0 && ::write(STDOUT_FILENO, "\n", 1) < 0) why = errno;
  if (why == EPIPE) {
    std::signal(SIGPIPE, SIG_DFL);
    std::raise(SIGPIPE);
    return kExitUsage;
  }
  std::fprintf(stderr, "ztune: error: writing standard output failed: %s\n",
               why != 0 ? std::strerror(why) : "write error");
  return kExitUsage;
}

}  // namespace

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
    if (e.get_exit_code() == 0) return finish_output(root.exit(e)) == 0 ? kExitOk : kExitUsage;  // --help, --version
    std::fprintf(stderr, "ztune: error: %s\nRun with --help for more information.\n", e.what());
    return kExitUsage;
  }
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return finish_output(c.run());
  } catch (const ztune::InputError& e) {
    std::cout.flush();
    std::fprintf(stderr, "ztune: error: %s\n", e.what());
    return kExitUsage;
  }
  std::cout << root.help();
  return finish_output(kExitUsage);
}
