// ztune history: not implemented yet (see the issue that builds it).
#include "command.hpp"

namespace ztune::cli {

Command add_history(CLI::App& root) {
  auto* app = root.add_subcommand("history", "(history: not implemented yet)");
  app->allow_extras();
  return {app, [] { return not_implemented("history"); }};
}

}  // namespace ztune::cli
