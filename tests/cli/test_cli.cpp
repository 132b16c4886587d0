#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "run_command.hpp"

using Catch::Matchers::Contains;

TEST_CASE("ztune --help lists every subcommand and the exit codes", "[cli]") {
  auto r = run_command(ztune_bin() + " --help");
  CHECK(r.exit_code == 0);
  for (const char* sub : {"search", "predict", "validate", "run", "calibrate", "history", "export", "list", "memory"})
    CHECK_THAT(r.out, Contains(sub));
  CHECK_THAT(r.out, Contains("Exit codes"));
}

TEST_CASE("ztune list shows the catalog", "[cli]") {
  auto r = run_command(ztune_bin() + " list clusters");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("dgx2x16") && Contains("V100-SXM3-32GB"));
  r = run_command(ztune_bin() + " list models");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("100b") && Contains("tiny"));
}

TEST_CASE("bad usage exits 2 with a message", "[cli]") {
  auto r = run_command(ztune_bin() + " list gpus");
  CHECK(r.exit_code == 2);
  r = run_command(ztune_bin() + " --cluster no-such-cluster --model 100b");
  CHECK(r.exit_code == 2);
}

namespace {

/// File stems of data/<kind>/*.json, listed independently of ztune's catalog code.
std::vector<std::string> catalog_files(const std::string& kind) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(ZTUNE_TEST_DATA_DIR) + "/" + kind))
    if (e.path().extension() == ".json") out.push_back(e.path().stem().string());
  return out;
}

}  // namespace

TEST_CASE("ztune list clusters shows every catalog cluster", "[cli][catalog]") {
  auto r = run_command(ztune_bin() + " list clusters");
  REQUIRE(r.exit_code == 0);
  const auto files = catalog_files("clusters");
  REQUIRE(files.size() >= 10);
  for (const auto& name : files) CHECK_THAT(r.out, Contains("\n" + name + " "));
  // Selene: 384 DGX A100 nodes, 3072 GPUs (Narayanan et al. 2021).
  CHECK_THAT(r.out, Contains("selene-3072") && Contains(" 384 ") && Contains(" 3072 "));
}

TEST_CASE("ztune list models shows every catalog model with its size", "[cli][catalog]") {
  auto r = run_command(ztune_bin() + " list models");
  REQUIRE(r.exit_code == 0);
  const auto files = catalog_files("models");
  REQUIRE(files.size() >= 17);
  for (const auto& name : files) CHECK_THAT(r.out, Contains("\n" + name + " "));
  // Narayanan et al. 2021 Table 1: 1008.0B and 529.6B parameters.
  CHECK_THAT(r.out, Contains("1008.04B") && Contains("529.60B"));
  // Below a billion in millions: the tiny test model (its file: 2 layers of
  // 64, vocab 256) is not "0.00B".
  CHECK_THAT(r.out, !Contains("0.00B"));
}

// Issue 23: a mistyped command is named with the nearest one, not reported as
// its arguments in reverse; help says the program name, shows the defaults of
// the flags that have one, and only the top level says what no command does.
TEST_CASE("a mistyped command is named and the nearest one suggested", "[cli]") {
  auto r = run_command(ztune_bin() + " serach 100b --model dgx2x16");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("unknown command 'serach' (did you mean 'search'?)"));
  CHECK_THAT(r.err, !Contains("were not expected"));
  r = run_command(ztune_bin() + " frobnicate");
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Contains("unknown command 'frobnicate'") && !Contains("did you mean"));
}

TEST_CASE("subcommand help names the program, shows defaults, and no top-level footer", "[cli]") {
  auto r = run_command(ztune_bin() + " search --help");
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("Usage: ztune search"));
  CHECK_THAT(r.out, Contains("=10") && Contains("Plans to show"));
  CHECK_THAT(r.out, !Contains("With no subcommand"));
  r = run_command(ztune_bin() + " --help");
  CHECK_THAT(r.out, Contains("With no subcommand"));
  // One wording of --db's default everywhere.
  for (const char* sub : {"search", "run", "history", "calibrate"}) {
    r = run_command(ztune_bin() + " " + sub + " --help");
    CHECK_THAT(r.out, Contains("$XDG_DATA_HOME/ztune, else ~/.local/share/ztune"));
  }
}
