// ztune calibrate: not implemented yet (see the issue that builds it).
#include "command.hpp"

namespace ztune::cli {

Command add_calibrate(CLI::App& root) {
  auto* app = root.add_subcommand("calibrate", "(calibrate: not implemented yet)");
  app->allow_extras();
  return {app, [] { return not_implemented("calibrate"); }};
}

}  // namespace ztune::cli
