// ztune run: not implemented yet (see the issue that builds it).
#include "command.hpp"

namespace ztune::cli {

Command add_run(CLI::App& root) {
  auto* app = root.add_subcommand("run", "(run: not implemented yet)");
  app->allow_extras();
  return {app, [] { return not_implemented("run"); }};
}

}  // namespace ztune::cli
