// Acceptance against published measurements (data/validation): the oracle is
// what others measured; ztune's one A100 profile must reproduce it.
#include <catch2/catch.hpp>

#include <cmath>

#include "ztune/model/text.hpp"
#include "ztune/model/validation.hpp"

using namespace ztune;

namespace {

const ValidationReport& report() {
  static const ValidationReport r = run_validation(std::string(ZTUNE_TEST_DATA_DIR) + "/validation");
  return r;
}

const SourceSummary& source(const std::string& name) {
  for (const auto& s : report().sources)
    if (s.name == name) return s;
  FAIL("no validation source " << name);
  throw;
}

}  // namespace

TEST_CASE("Korthikanti Table 5: mean |error| ≤ 3.5%, every run within 8%", "[validation]") {
  const auto& s = source("Korthikanti2022-T5");
  CHECK(s.cases == 8);
  CHECK(s.mape <= 3.5);
  CHECK(s.max_abs_pct <= 8.0);
}

TEST_CASE("vTrain: MAPE ≤ 10% on 109 multi-node and 1,440 single-node runs", "[validation]") {
  const auto& multi = source("vTrain-multi");
  CHECK(multi.cases == 109);
  CHECK(multi.mape <= 10.0);
  const auto& single = source("vTrain-single");
  CHECK(single.cases == 1440);
  CHECK(single.mape <= 10.0);
}

TEST_CASE("ZeRO Table 1 reproduced to the printed precision; Korthikanti Figure 7 ratios", "[validation]") {
  const auto& zero = source("ZeRO2020-T1");
  CHECK(zero.cases == 54);
  CHECK(zero.failed == 0);
  const auto& fig7 = source("Korthikanti2022-Fig7");
  CHECK(fig7.cases == 20);
  CHECK(fig7.failed == 0);
}

TEST_CASE("every case carries its source, a published value and a tolerance", "[validation]") {
  for (const auto& c : report().cases) {
    CHECK_FALSE(c.source.empty());
    CHECK(c.published > 0);
    CHECK(c.tolerance_pct > 0);
    CHECK(std::isfinite(c.predicted));
  }
}

TEST_CASE("counts read with thousands separators", "[text]") {
  CHECK(ztune::grouped(0) == "0");
  CHECK(ztune::grouped(999) == "999");
  CHECK(ztune::grouped(1440) == "1,440");
  CHECK(ztune::grouped(1234567.4) == "1,234,567");
  CHECK(ztune::grouped(-12345) == "-12,345");
  CHECK(ztune::grouped(INFINITY) == "-");
}
