#include "ztune/executor/token_source.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "ztune/vocab/input_error.hpp"

namespace ztune::executor {
namespace {

class TokenFile final : public TokenSource {
 public:
  TokenFile(std::string path, const std::uint16_t* data, std::size_t count, std::size_t bytes)
      : path_(std::move(path)), data_(data), count_(count), bytes_(bytes) {}
  ~TokenFile() override { munmap(const_cast<std::uint16_t*>(data_), bytes_); }
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  void sequence(std::int64_t index, int t, std::int32_t* out) const override {
    const auto span = static_cast<std::int64_t>(count_) - t - 1;
    const std::int64_t start = (index * t) % (span + 1);
    for (int i = 0; i <= t; ++i) out[i] = data_[start + i];
  }
  [[nodiscard]] std::string describe() const override {
    return path_ + " (" + std::to_string(count_) + " uint16 tokens)";
  }
  [[nodiscard]] std::string identity() const override {
    return "a token file of " + std::to_string(count_) + " uint16 tokens";
  }

 private:
  std::string path_;
  const std::uint16_t* data_;
  std::size_t count_, bytes_;
};

class Synthetic final : public TokenSource {
 public:
  Synthetic(std::uint64_t seed, int vocab) : seed_(seed), vocab_(vocab) {}
  void sequence(std::int64_t index, int t, std::int32_t* out) const override {
    std::uint64_t h = mix(seed_ ^ mix(static_cast<std::uint64_t>(index)));
    const auto v = static_cast<std::uint64_t>(vocab_);
    std::uint64_t x = h % v;
    const std::uint64_t stride = 1 + (h >> 32) % 7;
    for (int i = 0; i <= t; ++i) {
      out[i] = static_cast<std::int32_t>(x);
      x = (x + stride) % v;
    }
  }
  [[nodiscard]] std::string describe() const override { return "synthetic (seed " + std::to_string(seed_) + ")"; }
  [[nodiscard]] std::string identity() const override { return describe(); }

 private:
  static std::uint64_t mix(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
  }
  std::uint64_t seed_;
  int vocab_;
};

}  // namespace

std::unique_ptr<TokenSource> open_token_file(const std::string& path, int vocab, int t) {
  // O_NONBLOCK: opening a FIFO must not wait for a writer; the file type is
  // checked before anything is read.
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK);
  if (fd < 0) throw InputError(path + ": cannot open token file: " + std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) == 0 && !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InputError(path + ": not a regular file (expected a file of little-endian uint16 tokens)");
  }
  if (fstat(fd, &st) != 0 || st.st_size < 2) {
    ::close(fd);
    throw InputError(path + ": empty token file (expected little-endian uint16 tokens)");
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes % 2 != 0) {
    ::close(fd);
    throw InputError(path + ": odd size " + std::to_string(bytes) + " bytes: not a uint16 token file");
  }
  void* p = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) throw InputError(path + ": mmap failed: " + std::strerror(errno));
  const auto* data = static_cast<const std::uint16_t*>(p);
  const std::size_t count = bytes / 2;
  auto file = std::make_unique<TokenFile>(path, data, count, bytes);  // unmaps on any throw below
  if (count < static_cast<std::size_t>(t) + 2)
    throw InputError(path + ": " + std::to_string(count) + " tokens, fewer than one sequence of " +
                     std::to_string(t + 1));
  for (std::size_t i = 0; i < count; ++i)
    if (data[i] >= vocab)
      throw InputError(path + ": token " + std::to_string(i) + " is " + std::to_string(data[i]) +
                       ", outside the model's vocabulary of " + std::to_string(vocab));
  return file;
}

std::unique_ptr<TokenSource> synthetic_tokens(std::uint64_t seed, int vocab) {
  return std::make_unique<Synthetic>(seed, vocab);
}

}  // namespace ztune::executor
