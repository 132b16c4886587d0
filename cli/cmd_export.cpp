// ztune export: not implemented yet (see the issue that builds it).
#include "command.hpp"

namespace ztune::cli {

Command add_export(CLI::App& root) {
  auto* app = root.add_subcommand("export", "(export: not implemented yet)");
  app->allow_extras();
  return {app, [] { return not_implemented("export"); }};
}

}  // namespace ztune::cli
