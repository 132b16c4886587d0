#pragma once
// Runs a shell command for end-to-end tests: exit code plus stdout and stderr.
#include <string>

struct CommandResult {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

/// Runs `command` through /bin/sh with ZTUNE_DATA_DIR pointing at the source data/.
CommandResult run_command(const std::string& command);
/// The ztune binary under test, quoted for the shell.
std::string ztune_bin();
