// A token file is read as it was checked: sequences at the documented
// offsets, and a file changed during the run (cut short, or rewritten with
// ids outside the vocabulary) is an error naming it, not a SIGBUS or an
// embedding indexed out of bounds (audit 3: a rewritten file trained to a
// loss of -9.19 with exit 0).
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "ztune/executor/token_source.hpp"
#include "ztune/vocab/input_error.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::Contains;

namespace {

fs::path write_tokens(const std::string& name, const std::vector<std::uint16_t>& ids) {
  const fs::path p = fs::temp_directory_path() / ("ztune_tokens_" + name + "_" + std::to_string(::getpid()) + ".bin");
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  for (std::uint16_t id : ids) {
    const char le[2] = {static_cast<char>(id & 0xff), static_cast<char>(id >> 8)};  // little-endian
    out.write(le, 2);
  }
  return p;
}

std::vector<std::uint16_t> iota(std::size_t n, int vocab) {
  std::vector<std::uint16_t> ids(n);
  for (std::size_t i = 0; i < n; ++i) ids[i] = static_cast<std::uint16_t>(i % static_cast<std::size_t>(vocab));
  return ids;
}

}  // namespace

TEST_CASE("a token file's sequence j starts at (j*T) mod (count - T)", "[executor][tokens]") {
  const int t = 4, vocab = 1000;
  const auto path = write_tokens("offsets", iota(11, vocab));  // count 11: starts mod 7
  const auto src = ztune::executor::open_token_file(path.string(), vocab, t);
  std::vector<std::int32_t> seq(t + 1);
  for (std::int64_t j : {0, 1, 2, 5}) {
    src->sequence(j, t, seq.data());
    const std::int64_t start = (j * t) % 7;
    for (int i = 0; i <= t; ++i) CHECK(seq[static_cast<std::size_t>(i)] == start + i);
  }
  fs::remove(path);
}

TEST_CASE("one sequence's T + 1 tokens are enough, fewer are refused naming both counts", "[executor][tokens]") {
  const auto exact = write_tokens("exact", iota(65, 256));
  CHECK_NOTHROW(ztune::executor::open_token_file(exact.string(), 256, 64));
  const auto shorter = write_tokens("short", iota(64, 256));
  CHECK_THROWS_WITH(ztune::executor::open_token_file(shorter.string(), 256, 64),
                    Contains("64 tokens, fewer than one sequence of 65"));
  fs::remove(exact);
  fs::remove(shorter);
}

TEST_CASE("a token file cut short during the run is an error naming it", "[executor][tokens]") {
  const int t = 8;
  const auto path = write_tokens("cut", iota(100, 256));
  const auto src = ztune::executor::open_token_file(path.string(), 256, t);
  std::vector<std::int32_t> seq(t + 1);
  src->sequence(3, t, seq.data());
  fs::resize_file(path, 40);  // 20 tokens left: sequence 3 starts at token 24
  CHECK_THROWS_AS(src->sequence(3, t, seq.data()), std::runtime_error);
  CHECK_THROWS_WITH(src->sequence(3, t, seq.data()),
                    Contains(path.string() + ": the token file changed during the run: it held 100 tokens"));
  fs::remove(path);
}

TEST_CASE("a token file rewritten with ids outside the vocabulary is an error, not an out-of-bounds read",
          "[executor][tokens]") {
  const int t = 8;
  const auto path = write_tokens("rewritten", iota(100, 256));
  const auto src = ztune::executor::open_token_file(path.string(), 256, t);
  {
    std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
    f.seekp(2 * 10);
    const char ff[2] = {'\xff', '\xff'};
    f.write(ff, 2);  // token 10 becomes 65535, in place
  }
  std::vector<std::int32_t> seq(t + 1);
  CHECK_NOTHROW(src->sequence(0, t, seq.data()));  // tokens 0..8
  CHECK_THROWS_WITH(src->sequence(1, t, seq.data()),  // tokens 8..16
                    Contains("token 10 is 65535, outside the model's vocabulary of 256 (the file changed"));
  // The same file opened afresh is refused before training.
  CHECK_THROWS_AS(ztune::executor::open_token_file(path.string(), 256, t), ztune::InputError);
  fs::remove(path);
}
