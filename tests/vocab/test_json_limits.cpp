// The JSON reading layer's limits (issue 20): no input crashes, hangs or runs
// away. Numbers out of range for a double, nesting deeper than kMaxJsonDepth,
// repeated keys, oversized and non-regular files are InputErrors naming the file
// and, where there is one, the JSON path; messages quote a bounded prefix.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/hardware_profile.hpp"
#include "ztune/vocab/json_reader.hpp"
#include "ztune/vocab/transformer.hpp"
#include "../tuner/temp_files.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;
using ztune::InputError;

namespace {

using ztune::test::scratch;
using ztune::test::write_file;

std::string error_of(const std::string& text, const std::string& file = "f.json") {
  try {
    (void)ztune::parse_json_text(text, file);
  } catch (const InputError& e) {
    return e.what();
  }
  return "(accepted)";
}

/// `levels` nested arrays around `inner`: [[[...inner...]]].
std::string nested(int levels, const std::string& inner = "1") {
  return std::string(static_cast<std::size_t>(levels), '[') + inner + std::string(static_cast<std::size_t>(levels), ']');
}

}  // namespace

TEST_CASE("a number out of range for a double names the file, line, column and path", "[json][limits]") {
  CHECK(error_of("{\n  \"layers\": 1e309\n}") ==
        "f.json:2:17: $.layers: number 1e309 is out of range for a double (at most about 1.8e308)");
  CHECK_THAT(error_of(R"({"node": {"gpu": {"memory_gb": -1e309}}})"), Contains("$.node.gpu.memory_gb: number -1e309"));
  CHECK_THAT(error_of(R"({"steps": [1, 2, 1e999]})"), Contains("f.json:1:") && Contains("$.steps[2]: number 1e999"));
  // A 10,000-digit number is quoted by its first digits only.
  const std::string big = "1" + std::string(10000, '0') + ".0";
  const std::string msg = error_of(R"({"a": )" + big + "}");
  CHECK_THAT(msg, Contains("$.a: number 1000") && Contains("...") && Contains("out of range"));
  CHECK(msg.size() < 300);
  // Underflow is not an error: 1e-400 reads as 0, which the typed readers judge.
  CHECK(ztune::parse_json_text(R"({"a": 1e-400})", "f.json").at("a").get<double>() == 0.0);
}

TEST_CASE("an integer above INT64_MAX is refused, not wrapped negative", "[json][limits]") {
  const auto doc = ztune::parse_json_text(R"({"a": 18446744073709551615, "b": 9223372036854775807})", "f.json");
  ztune::ObjectReader r(doc, "f.json", "$");
  REQUIRE_THROWS_WITH(r.integer("a", -10, 10), "f.json: $.a: expected an integer in [-10, 10], got 18446744073709551615");
  CHECK(r.integer("b", 0, INT64_MAX) == INT64_MAX);
}

TEST_CASE("nesting deeper than the limit is refused with the path, at any depth", "[json][limits]") {
  // At the limit: read.
  CHECK_NOTHROW(ztune::parse_json_text(nested(ztune::kMaxJsonDepth), "f.json"));
  // One more: refused, naming where.
  CHECK_THAT(error_of(nested(ztune::kMaxJsonDepth + 1)),
             StartsWith("f.json: $[0][0]") && Contains("nested deeper than 64 levels"));
  // 100,000 levels as a field's value (this used to SIGSEGV): quick, bounded message.
  const auto t0 = std::chrono::steady_clock::now();
  const std::string msg = error_of(R"({"layers": )" + nested(100000) + "}");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  CHECK_THAT(msg, StartsWith("f.json: $.layers[0][0]") && Contains("nested deeper than 64 levels"));
  CHECK(msg.size() < 600);
  // Objects count as levels too.
  std::string objs;
  for (int i = 0; i < 200; ++i) objs += "{\"k\": ";
  objs += "1" + std::string(200, '}');
  CHECK_THAT(error_of(objs), StartsWith("f.json: $.k.k.k") && Contains("nested deeper than 64 levels"));
}

TEST_CASE("a key given twice in one object is refused with its path", "[json][limits]") {
  CHECK(error_of(R"({"node": {"gpus": 8, "gpus": 16}})") == "f.json: $.node.gpus: key given twice in one object");
}

TEST_CASE("syntax errors keep their line and column and a bounded message", "[json][limits]") {
  const std::string msg = error_of("{\"a\": \"" + std::string(100000, 'x') + "\\q\"}");
  CHECK_THAT(msg, StartsWith("f.json:1:") && Contains("malformed JSON"));
  CHECK(msg.size() < 400);
}

TEST_CASE("describe_json is bounded for deep and long values", "[json][limits]") {
  // Built directly (not parsed), so the depth limit does not apply: describe_json must
  // neither recurse over it nor copy it whole.
  nlohmann::json deep = 1;
  for (int i = 0; i < 100000; ++i) deep = nlohmann::json::array({std::move(deep)});
  CHECK(ztune::describe_json(deep) == "[[[[...]]]]");
  CHECK(ztune::describe_json(std::string(1000000, 'x')).size() == 40);
  CHECK(ztune::describe_json(nlohmann::json::array({1, 2, "three"})) == "[1,2,\"three\"]");
  CHECK(ztune::describe_json(nlohmann::json{{"a", {{"b", 1}}}}) == "{\"a\":{\"b\":1}}");
  CHECK(ztune::describe_json("32GB") == "\"32GB\"");
  // A string cut inside a multi-byte character does not throw.
  CHECK_NOTHROW(ztune::describe_json(std::string(39, 'x') + "\xc3\xa9\xc3\xa9"));
}

TEST_CASE("non-regular files are refused without blocking", "[json][limits]") {
  const fs::path fifo = scratch() / "plan.fifo";
  fs::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // Opening a FIFO with no writer would block forever; it must be refused at once.
  const auto t0 = std::chrono::steady_clock::now();
  REQUIRE_THROWS_WITH(ztune::read_json_file(fifo.string()),
                      fifo.string() + ": is a FIFO (named pipe), expected a regular JSON file");
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));
  REQUIRE_THROWS_WITH(ztune::read_json_file(scratch().string()),
                      scratch().string() + ": is a directory, expected a regular JSON file");
  REQUIRE_THROWS_WITH(ztune::read_json_file("/dev/zero"), "/dev/zero: is a character device, expected a regular JSON file");
  // Through a loader too: the cluster loader names the file.
  REQUIRE_THROWS_WITH(ztune::load_cluster(fifo.string()), StartsWith(fifo.string() + ": is a FIFO"));
  fs::remove(fifo);
}

TEST_CASE("a file over the size limit is refused before it is read", "[json][limits]") {
  const fs::path big = scratch() / "big.json";
  {
    std::ofstream out(big, std::ios::binary);
    out << "[1]";
  }
  fs::resize_file(big, ztune::kMaxJsonFileBytes + 1);  // sparse: no disk used
  REQUIRE_THROWS_WITH(ztune::read_json_file(big.string()),
                      big.string() + ": is " + std::to_string(ztune::kMaxJsonFileBytes + 1) +
                          " bytes; JSON input files are limited to 64 MiB");
  fs::remove(big);
}

TEST_CASE("1e309 in a catalog-shaped cluster file is an InputError, not out_of_range", "[json][limits][cluster]") {
  auto doc = ztune::cluster_to_json(ztune::load_cluster("dgx-a100-80gb"));
  std::string text = doc.dump(2);
  const std::string key = "\"nodes\": ";
  const auto at = text.find(key);
  REQUIRE(at != std::string::npos);
  const auto end = text.find_first_of(",\n}", at + key.size());
  text.replace(at + key.size(), end - at - key.size(), "1e309");
  const auto path = write_file("huge-cluster.json", text);
  REQUIRE_THROWS_WITH(ztune::load_cluster(path), StartsWith(path + ":") && Contains("$.nodes: number 1e309"));
}

TEST_CASE("a GPU name longer than a file name finds no profile, without a filesystem error", "[json][limits][profile]") {
  auto c = ztune::load_cluster("dgx-a100-80gb");
  c.node.gpu.name = std::string(300, 'a');
  REQUIRE_THROWS_WITH(ztune::default_profile_for(c),
                      Contains("$.node.gpu.name: no hardware profile for GPU \"aaaa") && Contains("not a catalog name"));
  c.node.gpu.name = "../../etc/passwd";
  REQUIRE_THROWS_AS(ztune::default_profile_for(c), InputError);
  c.node.gpu.name = "A100-SXM4-80GB";
  CHECK_NOTHROW(ztune::default_profile_for(c));
}
