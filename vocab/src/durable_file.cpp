#include "ztune/vocab/durable_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace ztune {

namespace fs = std::filesystem;

namespace {

// The file a path names, its symbolic links followed (relative ones against
// the link's directory) for up to 40 hops, as the kernel follows them; a
// dangling link names the file it would create.
std::string resolve_links(const std::string& path) {
  fs::path p(path);
  for (int hop = 0; hop < 40; ++hop) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) break;
    const fs::path next = fs::read_symlink(p, ec);
    if (ec) break;
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
  return p.string();
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

bool is_stream_target(const std::string& path) {
  if (path.starts_with("/dev/") || path.starts_with("/proc/")) return true;
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode);  // through any links
}

namespace {
constexpr const char* kTemporaryInfix = ".tmp.";
}  // namespace

bool is_durable_temporary(const std::string& name) {
  const auto at = name.rfind(kTemporaryInfix);
  if (at == std::string::npos || at == 0) return false;
  const std::size_t pid = at + std::string_view(kTemporaryInfix).size();
  return pid < name.size() && name.find_first_not_of("0123456789", pid) == std::string::npos;
}

DurableFile::DurableFile(std::string path, DurableTarget target) {
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;  // through any links
  // A device, a FIFO or a pipe, or a name for a stream (/dev/stdout,
  // /proc/self/fd/N, whatever it is open on: a shell's `> file` too): the
  // reader is on the other side, there is no file to replace. Opened by the
  // name given, which the kernel resolves (/proc/self/fd/1 names "pipe:[N]",
  // no path), appending, as the stream's other output goes there too.
  if (is_stream_target(path)) {
    target_ = std::move(path);
    if (target == DurableTarget::file) {
      error_ = "not a regular file (a FIFO, device or stream); expected a file to replace";
      return;
    }
    fd_ = ::open(target_.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd_ < 0) error_ = errno_text(errno);
    return;
  }
  target_ = resolve_links(path);
  tmp_ = target_ + kTemporaryInfix + std::to_string(::getpid());
  ::unlink(tmp_.c_str());  // one this process left behind (a failed earlier attempt)
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd_ < 0) {
    error_ = "cannot create " + tmp_ + ": " + errno_text(errno);
    tmp_.clear();
    return;
  }
  if (exists) (void)::fchmod(fd_, st.st_mode & 07777);  // the replaced file's permissions
}

DurableFile::~DurableFile() {
  if (done_) return;
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void DurableFile::write(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (!error_ && bytes > 0) {
    const ssize_t n = ::write(fd_, p, bytes);
    if (n < 0) {
      if (errno == EINTR) continue;
      error_ = errno_text(errno);
    } else {
      p += n;
      bytes -= static_cast<std::size_t>(n);
    }
  }
}

std::optional<std::string> DurableFile::commit() {
  if (done_) return "already committed";
  // fsync makes the bytes durable and reports a write-back error (NFS, a
  // full thin volume) that write(2) did not; a stream has nothing to sync.
  if (!error_ && !tmp_.empty() && ::fsync(fd_) != 0 && errno != EINVAL) error_ = errno_text(errno);
  if (fd_ >= 0 && ::close(fd_) != 0 && !error_) error_ = errno_text(errno);
  fd_ = -1;
  if (!error_ && !tmp_.empty()) {
    if (std::rename(tmp_.c_str(), target_.c_str()) != 0) {
      error_ = "cannot replace it with the written file: " + errno_text(errno);
    } else {
      tmp_.clear();
      // The rename is durable once the directory is.
      fs::path dir = fs::path(target_).parent_path();
      if (dir.empty()) dir = ".";
      if (const int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); d >= 0) {
        (void)::fsync(d);
        ::close(d);
      }
    }
  }
  if (error_ && !tmp_.empty()) ::unlink(tmp_.c_str());
  tmp_.clear();
  done_ = true;
  return error_;
}

void report_file_size_limit_as_error() { std::signal(SIGXFSZ, SIG_IGN); }

std::optional<std::string> write_file_durably(const std::string& path, std::string_view text, DurableTarget target) {
  DurableFile f(path, target);
  f.write(text);
  return f.commit();
}

FallbackWrite write_file_or_fallback(const std::string& path, const std::string& fallback, std::string_view text) {
  FallbackWrite w;
  w.error = write_file_durably(path, text);
  if (!w.error) return w;
  w.fallback_error = fallback.empty() ? std::optional<std::string>("no fallback given") : write_file_durably(fallback, text);
  return w;
}

}  // namespace ztune
