#include <catch2/catch.hpp>

#include "ztune/vocab/json_reader.hpp"

using ztune::InputError;
using ztune::ObjectReader;
using Catch::Matchers::Contains;

TEST_CASE("malformed JSON names the file, line and column", "[json]") {
  REQUIRE_THROWS_WITH(ztune::parse_json_text("{\n  \"a\": 1,\n  \"b\": }", "x.json"),
                      Contains("x.json:3:") && Contains("malformed JSON"));
  // The lexer stops at a NUL: zeros after the value (a padded file) were never read.
  REQUIRE_THROWS_WITH(ztune::parse_json_text(std::string("{\"a\": 1}\n\0\0\0", 12), "x.json"),
                      "x.json:2:1: a NUL byte; JSON text has none (a binary file, or one padded with zeros)");
  // A garbage byte is quoted as \xNN, not written raw to the user's terminal.
  REQUIRE_THROWS_WITH(ztune::parse_json_text("{\"name\": \"llama-\xff\x01\"}", "x.json"),
                      Contains("last read: '\"llama-\\xff'") && !Contains("\xff"));
}

TEST_CASE("typed reads name the path and what was expected", "[json]") {
  auto doc = nlohmann::json::parse(R"({"node": {"gpu": {"memory_gb": "32GB"}}})");
  ObjectReader r(doc, "dgx.json", "$");
  auto g = r.object("node").object("gpu");
  REQUIRE_THROWS_WITH(g.positive("memory_gb"),
                      "dgx.json: $.node.gpu.memory_gb: expected a number > 0, got \"32GB\"");
}

TEST_CASE("unknown and missing fields are rejected", "[json]") {
  auto doc = nlohmann::json::parse(R"({"a": 1, "typo": 2})");
  ObjectReader r(doc, "f.json", "$");
  CHECK(r.integer("a", 0, 5) == 1);
  REQUIRE_THROWS_WITH(r.finish(), Contains("f.json: $.typo: unknown field"));
  REQUIRE_THROWS_WITH(r.integer("b", 0, 5), "f.json: $.b: missing required field");
}

TEST_CASE("integers must be whole and in range", "[json]") {
  auto doc = nlohmann::json::parse(R"({"a": 2.5, "b": -1, "c": 4.0})");
  ObjectReader r(doc, "f.json", "$");
  REQUIRE_THROWS_WITH(r.integer("a", 1, 8), Contains("$.a: expected an integer in [1, 8], got 2.5"));
  REQUIRE_THROWS_WITH(r.integer("b", 1, 8), Contains("got -1"));
  CHECK(r.integer("c", 1, 8) == 4);
}
