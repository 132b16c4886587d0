// ztune predict: not implemented yet (see the issue that builds it).
#include "command.hpp"

namespace ztune::cli {

Command add_predict(CLI::App& root) {
  auto* app = root.add_subcommand("predict", "(predict: not implemented yet)");
  app->allow_extras();
  return {app, [] { return not_implemented("predict"); }};
}

}  // namespace ztune::cli
