// ztune: plan, predict and run large-model training. Thin shell over the libraries.
#include <unistd.h>

#include <algorithm>
#include <new>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include "command.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/durable_file.hpp"

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
  ztune::report_file_size_limit_as_error();
  CLI::App root{"ztune: plan, predict and run the training of very large models.\n"
                "Exit codes: 0 success, 1 no feasible plan or a failed run, 2 bad usage or input, "
                "128 + the signal when interrupted (130: Ctrl-C).",
                "ztune"};
  root.set_version_flag("--version", "ztune 0.1.0");
  root.require_subcommand(0, 1);
  std::vector<Command> commands{add_search(root), add_predict(root), add_validate(root),   add_run(root),
                                add_calibrate(root), add_history(root), add_export(root), add_list(root),
                                add_memory(root)};
  // Added after the subcommands, which would otherwise inherit it: only the
  // top-level help says what no subcommand means.
  root.footer("With no subcommand, ztune searches: ztune --cluster dgx2x16 --model 100b");

  // Arguments reach the results database and --json output as JSON strings,
  // which must be UTF-8: a path in another encoding is refused here, by
  // position, rather than failing inside the JSON writer after the work.
  for (int i = 1; i < argc; ++i) {
    const std::string_view a = argv[i];
    if (const std::size_t at = ztune::invalid_utf8_offset(a); at != std::string_view::npos) {
      std::fprintf(stderr,
                   "ztune: error: argument %d: byte 0x%02X at offset %zu is not UTF-8 (ztune keeps its arguments "
                   "as JSON text; rename the file or pass a UTF-8 path)\n",
                   i, static_cast<unsigned>(static_cast<unsigned char>(a[at])), at);
      return kExitUsage;
    }
  }

  // `ztune --cluster ...` means `ztune search --cluster ...`.
  std::vector<std::string> args;
  for (int i = argc - 1; i >= 1; --i) args.emplace_back(argv[i]);  // CLI11 wants them reversed
  if (argc > 1) {
    std::string first = argv[1];
    if (first.starts_with("-") && first != "-h" && first != "--help" && first != "--version")
      args.emplace_back("search");
    // A mistyped command: say so and suggest the nearest one, rather than
    // CLI11's list of every argument as unexpected (issue 23).
    if (!first.starts_with("-")) {
      std::vector<std::string> names;
      for (const auto& c : commands) names.push_back(c.app->get_name());
      if (std::find(names.begin(), names.end(), first) == names.end()) {
        std::fprintf(stderr, "ztune: error: unknown command '%s'", first.c_str());
        if (const std::string near = ztune::nearest_name(first, names); !near.empty())
          std::fprintf(stderr, " (did you mean '%s'?)", near.c_str());
        std::fprintf(stderr, "\nCommands: ");
        for (std::size_t i = 0; i < names.size(); ++i) std::fprintf(stderr, "%s%s", i ? ", " : "", names[i].c_str());
        std::fprintf(stderr, ". Run with --help for more information.\n");
        return kExitUsage;
      }
    }
  }
  std::reverse(args.begin(), args.end());
  const auto rewritten = decimal_integer_values(root, args);
  std::reverse(args.begin(), args.end());
  try {
    root.parse(args);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return finish_output(root.exit(e)) == 0 ? kExitOk : kExitUsage;  // --help, --version
    // CLI11's "--cluster: At Most 1 required but received 2" for a flag given twice.
    std::string what = e.what();
    // A refused value that had leading zeros is quoted as the decimal it was
    // read as: say what was typed ("--zero: ... got "4" (given as 04)").
    for (const auto& [given, decimal] : rewritten)
      if (const auto at = what.find("\"" + decimal + "\""); at != std::string::npos) {
        what.insert(at + decimal.size() + 2, " (given as " + given + ")");
        break;
      }
    if (const auto at = what.find("At Most 1 required but received "); at != std::string::npos)
      what = what.substr(0, at) + "given " + what.substr(at + 32) + " times; give it once";
    std::fprintf(stderr, "ztune: error: %s\nRun with --help for more information.\n", what.c_str());
    return kExitUsage;
  }
  try {
    for (auto& c : commands)
      if (c.app->parsed()) return finish_output(c.run());
  } catch (const ztune::InputError& e) {
    std::cout.flush();
    std::fprintf(stderr, "ztune: error: %s\n", e.what());
    return kExitUsage;
  } catch (const std::bad_alloc&) {
    // Said, not a core dump: what was written stays whole (DurableFile), and
    // the user learns which limit to raise or which input to shrink.
    std::cout.flush();
    std::fprintf(stderr, "ztune: error: out of memory (the work asked for more memory than this process may use: "
                         "see `ulimit -v` and free memory, or ask for less: a smaller plan space, fewer micro-batches, "
                         "no --simulate)\n");
    return kExitInfeasible;
  }
  std::cout << root.help();
  return finish_output(kExitUsage);
}
