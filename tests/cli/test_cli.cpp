#include <catch2/catch.hpp>

#include "run_command.hpp"

using Catch::Matchers::Contains;

TEST_CASE("ztune --help lists every subcommand and the exit codes", "[cli]") {
  auto r = run_command(ztune_bin() + " --help");
  CHECK(r.exit_code == 0);
  for (const char* sub : {"search", "predict", "validate", "run", "calibrate", "history", "export", "list"})
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
