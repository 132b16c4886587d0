#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ztune/tuner/digest.hpp"

using ztune::sha256_hex;

TEST_CASE("SHA-256 matches the FIPS 180-4 / NIST example digests", "[tuner][digest]") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("equal JSON documents have equal digests whatever the key order", "[tuner][digest]") {
  auto a = nlohmann::json::parse(R"({"x": 1, "y": [1, 2]})");
  auto b = nlohmann::json::parse(R"({"y": [1, 2], "x": 1})");
  CHECK(ztune::json_digest(a) == ztune::json_digest(b));
  b["x"] = 2;
  CHECK(ztune::json_digest(a) != ztune::json_digest(b));
}
