#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ztune/model/input_error.hpp"
#include "ztune/model/transformer.hpp"

using Catch::Matchers::Contains;

TEST_CASE("parameter count follows 12·L·h²·(1 + 13/(12h)) + (V+s)·h", "[transformer]") {
  // DESIGN.md's closed form for a GPT with biases, layernorm, learned positions, tied head.
  auto t = ztune::load_transformer("100b");
  double L = t.layers, h = t.hidden, V = t.vocab, s = t.seq_len;
  double closed = 12 * L * h * h * (1 + 13 / (12 * h)) + (V + s) * h;
  // The closed form omits the final layernorm (2h).
  CHECK(t.total_params() == Approx(closed + 2 * h).epsilon(1e-12));
  CHECK(t.total_params() / 1e9 == Approx(101.1).epsilon(0.01));
}

TEST_CASE("heads must divide hidden", "[transformer]") {
  auto t = ztune::load_transformer("tiny");
  auto doc = ztune::transformer_to_json(t);
  doc["heads"] = 5;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      Contains("m.json: $.heads: expected a divisor of hidden (64), got 5"));
}
