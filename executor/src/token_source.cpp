#include "ztune/executor/token_source.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/run_record.hpp"

namespace ztune::executor {
namespace {

// Up to `n` bytes at byte `at`, retrying interrupted and short reads: the
// bytes read (fewer only at the end of the file), or -1 with errno set.
std::int64_t read_at(int fd, void* buf, std::size_t n, std::int64_t at) {
  std::size_t got = 0;
  while (got < n) {
    const ssize_t r = ::pread(fd, static_cast<char*>(buf) + got, n - got, static_cast<off_t>(at) + static_cast<off_t>(got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return static_cast<std::int64_t>(got);
}

// Read with pread(2), a sequence at a time, rather than mapped: a file cut
// short during the run is then a short read said as such (a mapping's pages
// past the new end fault with SIGBUS), and each id is checked as it is used
// (a file rewritten in place would otherwise index the embedding out of
// bounds). One call of (T + 1) · 2 bytes per sequence.
class TokenFile final : public TokenSource {
 public:
  TokenFile(std::string path, int fd, std::size_t count, int vocab)
      : path_(std::move(path)), fd_(fd), count_(count), vocab_(vocab) {}
  void set_digest(std::uint64_t d) { digest_ = d; }
  ~TokenFile() override { ::close(fd_); }
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;
  void sequence(std::int64_t index, int t, std::int32_t* out) const override {
    const auto span = static_cast<std::int64_t>(count_) - t;
    const std::int64_t start = (index * t) % span;
    std::vector<std::uint16_t> ids(static_cast<std::size_t>(t) + 1);
    const std::int64_t got = read_at(fd_, ids.data(), ids.size() * 2, start * 2);
    if (got < 0) throw std::runtime_error(path_ + ": reading tokens failed: " + std::strerror(errno));
    if (got < static_cast<std::int64_t>(ids.size() * 2))
      throw std::runtime_error(path_ + ": the token file changed during the run: it held " + std::to_string(count_) +
                               " tokens and now ends before token " + std::to_string(start + got / 2));
    for (int i = 0; i <= t; ++i) {
      if (ids[static_cast<std::size_t>(i)] >= vocab_)
        throw std::runtime_error(path_ + ": token " + std::to_string(start + i) + " is " +
                                 std::to_string(ids[static_cast<std::size_t>(i)]) +
                                 ", outside the model's vocabulary of " + std::to_string(vocab_) +
                                 " (the file changed during the run: it was checked when opened)");
      out[i] = ids[static_cast<std::size_t>(i)];
    }
  }
  [[nodiscard]] std::string describe() const override {
    return path_ + " (" + std::to_string(count_) + " uint16 tokens)";
  }
  // Its length and its bytes' digest: another file of the same length (a
  // resume given the wrong --data) is another stream.
  [[nodiscard]] std::string identity() const override {
    return "a token file of " + std::to_string(count_) + " uint16 tokens (FNV-1a " + digest_hex(digest_) + ")";
  }

 private:
  std::string path_;
  int fd_;
  std::size_t count_;
  int vocab_;
  std::uint64_t digest_ = kFnv1aOffset;
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
  if (fstat(fd, &st) != 0 || st.st_size == 0) {
    ::close(fd);
    throw InputError(path + ": empty token file (expected little-endian uint16 tokens)");
  }
  const auto bytes = static_cast<std::size_t>(st.st_size);
  if (bytes % 2 != 0) {
    ::close(fd);
    throw InputError(path + ": odd size " + std::to_string(bytes) + " bytes: not a uint16 token file");
  }
  // Blocking reads from here (the file is regular).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  const std::size_t count = bytes / 2;
  auto file = std::make_unique<TokenFile>(path, fd, count, vocab);  // closes on any throw below
  if (count < static_cast<std::size_t>(t) + 1)
    throw InputError(path + ": " + std::to_string(count) + " tokens, fewer than one sequence of " +
                     std::to_string(t + 1) + " (the model's " + std::to_string(t) +
                     " positions and the next token of the last)");
  // Every id once, at open, so a bad file is refused before training; a
  // sequence checks its own ids again as it is read.
  std::vector<std::uint16_t> chunk(1 << 16);
  std::uint64_t digest = kFnv1aOffset;
  for (std::size_t at = 0; at < count;) {
    const std::size_t n = std::min(chunk.size(), count - at);
    const std::int64_t got = read_at(fd, chunk.data(), n * 2, static_cast<std::int64_t>(at) * 2);
    if (got != static_cast<std::int64_t>(n * 2))
      throw InputError(path + ": reading tokens failed: " + (got < 0 ? std::strerror(errno) : "short file"));
    for (std::size_t i = 0; i < n; ++i)
      if (chunk[i] >= vocab)
        throw InputError(path + ": token " + std::to_string(at + i) + " is " + std::to_string(chunk[i]) +
                         ", outside the model's vocabulary of " + std::to_string(vocab));
    digest = fnv1a(std::string_view(reinterpret_cast<const char*>(chunk.data()), n * 2), digest);
    at += n;
  }
  file->set_digest(digest);
  return file;
}

std::unique_ptr<TokenSource> synthetic_tokens(std::uint64_t seed, int vocab) {
  return std::make_unique<Synthetic>(seed, vocab);
}

}  // namespace ztune::executor
