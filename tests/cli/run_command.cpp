#include "run_command.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace {
std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}
}  // namespace

std::string ztune_bin() { return std::string("'") + ZTUNE_BIN + "'"; }

CommandResult run_command(const std::string& command) {
  char out_path[] = "/tmp/ztune-test-out-XXXXXX";
  char err_path[] = "/tmp/ztune-test-err-XXXXXX";
  int fo = mkstemp(out_path);
  int fe = mkstemp(err_path);
  std::string full = "ZTUNE_DATA_DIR='" + std::string(ZTUNE_TEST_DATA_DIR) + "' " + command + " >" + out_path +
                     " 2>" + err_path + " </dev/null";
  int status = std::system(full.c_str());
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  if (fo >= 0) ::close(fo);
  if (fe >= 0) ::close(fe);
  std::remove(out_path);
  std::remove(err_path);
  return r;
}
