#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/transformer.hpp"

using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

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

TEST_CASE("norm_eps: optional (1e-5), round-trips, written only when it differs", "[transformer]") {
  auto t = ztune::load_transformer("tiny");
  CHECK(t.norm_eps == 1e-5);  // a model file without the key (every catalog file before the field)
  auto doc = ztune::transformer_to_json(t);
  CHECK_FALSE(doc.contains("norm_eps"));  // the default is not written: digests stay as they were
  t.norm_eps = 1e-6;  // Llama 1, Qwen2, Gemma
  doc = ztune::transformer_to_json(t);
  REQUIRE(doc.contains("norm_eps"));
  CHECK(doc["norm_eps"] == 1e-6);
  CHECK(ztune::transformer_from_json(doc, "m.json").norm_eps == 1e-6);
  doc["norm_eps"] = 0.5;  // large, but a legal ε
  CHECK(ztune::transformer_from_json(doc, "m.json").norm_eps == 0.5);
}

TEST_CASE("norm_eps must be a number in (0, 1), named with file and path", "[transformer][bad-input]") {
  auto doc = ztune::transformer_to_json(ztune::load_transformer("tiny"));
  const std::string expected = "m.json: $.norm_eps: expected a number > 0 and < 1 (the norms' ε, e.g. 1e-5), got ";
  doc["norm_eps"] = 0;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"), expected + "0");
  doc["norm_eps"] = -1e-5;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"), StartsWith(expected + "-1"));
  doc["norm_eps"] = 1;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"), expected + "1");
  doc["norm_eps"] = "1e-5";
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"), expected + "\"1e-5\"");
  // A Transformer built in code is checked too.
  auto t = ztune::load_transformer("tiny");
  t.norm_eps = 2;
  REQUIRE_THROWS_WITH(ztune::validate_transformer(t, "gui"),
                      StartsWith("gui: $.norm_eps: expected a number > 0 and < 1"));
}

TEST_CASE("qkv_bias: optional, round-trips, counted, and only without all-layer biases", "[transformer]") {
  auto t = ztune::load_transformer("tiny-llama");
  REQUIRE_FALSE(t.bias);
  auto doc = ztune::transformer_to_json(t);
  CHECK_FALSE(doc.contains("qkv_bias"));  // absent = false: older files and digests unchanged
  const double without = t.total_params();
  t.qkv_bias = true;
  doc = ztune::transformer_to_json(t);
  REQUIRE(doc.contains("qkv_bias"));
  const auto back = ztune::transformer_from_json(doc, "m.json");
  CHECK(back.qkv_bias);
  // One bias per Q, K and V output channel in every layer: h + 2·kv_heads·d.
  CHECK(back.total_params() - without == t.layers * (t.hidden + 2.0 * t.kv_heads * t.head_dim()));
  doc["bias"] = true;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                      "m.json: $.qkv_bias: expected false when bias is true (every linear layer already carries a "
                      "bias), got true");
  doc["bias"] = false;
  doc["qkv_bias"] = "yes";
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"), StartsWith("m.json: $.qkv_bias: expected"));
}

TEST_CASE("attention_window: optional, round-trips, counted by hand, and checked", "[transformer]") {
  auto t = ztune::load_transformer("tiny-llama");
  auto doc = ztune::transformer_to_json(t);
  CHECK_FALSE(doc.contains("attention_window"));
  // s = 8, w = 3: rows keep 1, 2, 3, 3, 3, 3, 3, 3 = 21 of the 36 causal pairs.
  t.seq_len = 8;
  t.attention_window = 3;
  CHECK(t.attended_fraction() == Approx(21.0 / 36.0));
  doc = ztune::transformer_to_json(t);
  REQUIRE(doc.contains("attention_window"));
  CHECK(ztune::transformer_from_json(doc, "m.json").attention_window == 3);
  CHECK(ztune::transformer_from_json(doc, "m.json").total_params() == t.total_params());  // no parameters
  doc["attention_window"] = 0;  // what absent means, written out: the whole causal prefix
  CHECK(ztune::transformer_from_json(doc, "m.json").attention_window == 0);
  CHECK(ztune::transformer_from_json(doc, "m.json").attended_fraction() == 1.0);
  doc["attention_window"] = -1;
  REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"), StartsWith("m.json: $.attention_window: expected"));
}

TEST_CASE("head_token_fraction: optional (1), round-trips, written only when it differs, checked", "[transformer]") {
  auto t = ztune::load_transformer("tiny");
  CHECK(t.head_token_fraction == 1);
  auto doc = ztune::transformer_to_json(t);
  CHECK_FALSE(doc.contains("head_token_fraction"));
  t.head_token_fraction = 0.15;  // BERT's masked LM
  doc = ztune::transformer_to_json(t);
  CHECK(doc["head_token_fraction"] == 0.15);
  CHECK(ztune::transformer_from_json(doc, "m.json").head_token_fraction == 0.15);
  for (const nlohmann::json& bad : {nlohmann::json(0), nlohmann::json(1.5), nlohmann::json("0.15")}) {
    doc["head_token_fraction"] = bad;
    REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                        StartsWith("m.json: $.head_token_fraction: expected the share of positions the head runs on"));
  }
}

TEST_CASE("dropout: optional (GPT-2's 0.1), round-trips, written only when it differs, checked", "[transformer]") {
  auto t = ztune::load_transformer("tiny");
  CHECK(t.dropout == 0.1);
  auto doc = ztune::transformer_to_json(t);
  CHECK_FALSE(doc.contains("dropout"));
  t.dropout = 0;  // Llama's
  doc = ztune::transformer_to_json(t);
  CHECK(doc["dropout"] == 0);
  CHECK(ztune::transformer_from_json(doc, "m.json").dropout == 0);
  for (const nlohmann::json& bad : {nlohmann::json(-0.1), nlohmann::json(1), nlohmann::json("0")}) {
    doc["dropout"] = bad;
    REQUIRE_THROWS_WITH(ztune::transformer_from_json(doc, "m.json"),
                        StartsWith("m.json: $.dropout: expected the dropout probability, in [0, 1)"));
  }
  // The shipped Llama-family models train without dropout.
  for (const char* name : {"llama-7b", "llama-70b", "llama-405b", "tiny-llama"})
    CHECK(ztune::load_transformer(name).dropout == 0);
}
