// ztune validate: not implemented yet (see the issue that builds it).
#include "command.hpp"

namespace ztune::cli {

Command add_validate(CLI::App& root) {
  auto* app = root.add_subcommand("validate", "(validate: not implemented yet)");
  app->allow_extras();
  return {app, [] { return not_implemented("validate"); }};
}

}  // namespace ztune::cli
