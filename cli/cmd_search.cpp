// ztune search: not implemented yet (see the issue that builds it).
#include "command.hpp"

namespace ztune::cli {

Command add_search(CLI::App& root) {
  auto* app = root.add_subcommand("search", "(search: not implemented yet)");
  app->allow_extras();
  return {app, [] { return not_implemented("search"); }};
}

}  // namespace ztune::cli
