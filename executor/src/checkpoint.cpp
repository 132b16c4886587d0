#include "ztune/executor/checkpoint.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <sstream>
#include <vector>

#include "ztune/vocab/checkpoint_layout.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/run_record.hpp"

namespace ztune::executor {
namespace {

constexpr char kMagic[8] = {'Z', 'T', 'C', 'K', 'P', 'T', '0', '1'};

struct Header {
  char magic[8];
  std::uint32_t version;
  std::uint32_t world;
  std::uint64_t plan_digest;
  std::uint32_t rank;
  std::uint32_t steps;
  std::uint64_t bytes;  // of the payload (format 2; format 1 counted floats)
};

std::string shard_path(const std::string& dir, int steps, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank_%05d.ckpt", rank);
  return checkpoint_step_dir(dir, steps) + "/" + name;
}

// One line into DIR/name through DurableFile: a crash or a failed write
// leaves the old line (latest, data).
std::optional<std::string> replace_line(const std::string& path, const std::string& line) {
  if (auto why = write_file_durably(path, line + "\n", DurableTarget::file)) return path + ": " + *why;
  return std::nullopt;
}

// Removes the temporaries in DIR and its step directories. Called with the
// directory's lock held, before this run writes anything there: no writer of
// another run can be at work, so every temporary is a crashed one's.
void remove_crash_leftovers(const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> found;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory(ec) && name.starts_with("step_")) {
      for (const auto& f : std::filesystem::directory_iterator(e.path(), ec))
        if (is_durable_temporary(f.path().filename().string())) found.push_back(f.path());
    } else if (is_durable_temporary(name)) {
      found.push_back(e.path());
    }
  }
  for (const auto& f : found) std::filesystem::remove(f, ec);
}

}  // namespace

std::optional<std::string> write_checkpoint_shard(const std::string& dir, int steps, const CheckpointId& id,
                                                  const std::string& bytes) {
  std::error_code ec;
  std::filesystem::create_directories(checkpoint_step_dir(dir, steps), ec);
  if (ec) return checkpoint_step_dir(dir, steps) + ": cannot create: " + ec.message();
  Header h{};
  std::memcpy(h.magic, kMagic, sizeof kMagic);
  h.version = kCheckpointVersion;
  h.world = static_cast<std::uint32_t>(id.world);
  h.plan_digest = id.plan_digest;
  h.rank = static_cast<std::uint32_t>(id.rank);
  h.steps = static_cast<std::uint32_t>(steps);
  h.bytes = bytes.size();
  const std::uint64_t sum = fnv1a(bytes);
  const std::string path = shard_path(dir, steps, id.rank);
  DurableFile out(path, DurableTarget::file);  // a shard in /dev/null would be committed and lost
  out.write(&h, sizeof h);
  out.write(bytes);
  out.write(&sum, sizeof sum);
  if (auto why = out.commit()) return path + ": " + *why;
  return std::nullopt;
}

CheckpointDirLock::~CheckpointDirLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

std::optional<std::string> CheckpointDirLock::take(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return dir + ": cannot create: " + ec.message();
  const std::string path = checkpoint_lock_path(dir);
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) return path + ": cannot open: " + std::strerror(errno);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string why =
        err == EWOULDBLOCK ? checkpoint_dir_in_use(dir, fd_) : path + ": cannot lock: " + std::strerror(err);
    ::close(fd_);
    fd_ = -1;
    return why;
  }
  const std::string me = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) == 0) (void)!::pwrite(fd_, me.data(), me.size(), 0);
  remove_crash_leftovers(dir);
  return std::nullopt;
}

void prune_checkpoints(const std::string& dir, int latest, int keep) {
  std::vector<int> steps = checkpoint_steps_present(dir);
  std::erase_if(steps, [&](int n) { return n > latest; });
  std::error_code ec;
  for (std::size_t i = static_cast<std::size_t>(std::max(keep, 1)); i < steps.size(); ++i)
    std::filesystem::remove_all(checkpoint_step_dir(dir, steps[i]), ec);
}

void remove_uncommitted_steps(const std::string& dir, int latest, int world) {
  std::error_code ec;
  for (int n : checkpoint_steps_present(dir)) {
    if (n <= latest) continue;
    // A step with every rank's shard is whole: a latest the user moved back
    // (past a damaged one, as the resume's message says how) leaves it, and
    // the run replaces it only when it gets there.
    bool whole = true;
    for (int r = 0; r < world && whole; ++r) whole = std::filesystem::is_regular_file(shard_path(dir, n, r), ec);
    if (!whole) std::filesystem::remove_all(checkpoint_step_dir(dir, n), ec);
  }
}

std::optional<std::string> keep_plan(const std::string& dir, const std::string& plan_file_json) {
  return replace_line(checkpoint_plan_path(dir), plan_file_json);
}

std::optional<std::string> commit_checkpoint(const std::string& dir, int steps) {
  return replace_line(checkpoint_latest_path(dir), std::to_string(steps));
}

std::optional<std::string> write_data_identity(const std::string& dir, const std::string& identity) {
  return replace_line(checkpoint_data_path(dir), identity);
}

std::optional<std::string> check_data_identity(const std::string& dir, const std::string& identity) {
  const std::string path = checkpoint_data_path(dir);
  std::error_code ec;
  if (auto missing = missing_data_identity(dir)) return missing;
  if (!std::filesystem::exists(path, ec)) return std::nullopt;  // checkpoints of an older build
  if (!std::filesystem::is_regular_file(path, ec))
    return path + ": not a regular file (expected the token stream the checkpoints were written reading)";
  std::ifstream in(path);
  std::string written;
  std::getline(in, written);
  if (written == identity) return std::nullopt;
  // Checkpoints of builds before a token file's identity held its digest
  // recorded only its length: the same length is all they can check.
  if (identity.starts_with(written + " (FNV-1a ")) return std::nullopt;
  return path + ": the checkpoints were written reading " + written + "; this run reads " + identity +
         ": resume with the same --data (and --seed, for synthetic data) to continue the same run";
}

std::optional<std::string> read_checkpoint_shard(const std::string& dir, int steps, const CheckpointId& id,
                                                 const std::function<std::size_t(std::uint32_t)>& expected_bytes,
                                                 CheckpointPayload& payload) {
  const std::string path = shard_path(dir, steps, id.rank);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return path + ": missing checkpoint shard";
  // A directory or a FIFO in a shard's place: said before opening (a FIFO would block).
  if (!std::filesystem::is_regular_file(path, ec)) return path + ": not a regular file (expected a checkpoint shard)";
  std::ifstream in(path, std::ios::binary);
  if (!in) return path + ": cannot be read";
  Header h{};
  in.read(reinterpret_cast<char*>(&h), sizeof h);
  if (!in) return path + ": truncated (shorter than a checkpoint shard's header)";
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0) return path + ": not a ztune checkpoint shard (bad magic)";
  if (h.version < kCheckpointOldestVersion || h.version > kCheckpointVersion)
    return path + ": checkpoint format version " + std::to_string(h.version) + ", this build reads " +
           std::to_string(kCheckpointOldestVersion) + " to " + std::to_string(kCheckpointVersion);
  // Which plan wrote it: the copy keep_plan left beside the checkpoints (older ones have none).
  const std::string kept = checkpoint_plan_path(dir);
  const std::string which = std::filesystem::is_regular_file(kept, ec) ? " (" + kept + ")" : "";
  if (h.world != static_cast<std::uint32_t>(id.world))
    return path + ": written by a job of " + std::to_string(h.world) + " ranks; this one has " +
           std::to_string(id.world) + ": resume with the plan that wrote it" + which + " on " +
           std::to_string(h.world) + " ranks, or start without --resume";
  if (h.plan_digest != id.plan_digest)
    return path + ": written by another plan or model (plan file digest " + digest_hex(h.plan_digest) +
           "; this run's is " + digest_hex(id.plan_digest) + "): resume with the plan that wrote it" + which +
           ", or start without --resume";
  if (h.rank != static_cast<std::uint32_t>(id.rank) || h.steps != static_cast<std::uint32_t>(steps))
    return path + ": header says rank " + std::to_string(h.rank) + " step " + std::to_string(h.steps) +
           ", expected rank " + std::to_string(id.rank) + " step " + std::to_string(steps);
  // Checked before allocating: a damaged header could ask for any size.
  if (const std::size_t expected = expected_bytes(h.version); h.bytes != expected)
    return path + ": holds " + std::to_string(h.bytes) + " bytes of state, this rank's state has " +
           std::to_string(expected);
  std::string bytes(h.bytes, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  std::uint64_t sum = 0;
  in.read(reinterpret_cast<char*>(&sum), sizeof sum);
  if (!in) return path + ": truncated (the file ends before its payload and checksum)";
  if (sum != fnv1a(bytes)) return path + ": corrupt (checksum mismatch)";
  // Nothing may follow the checksum: bytes appended to a shard mean it is not
  // the file this rank wrote.
  if (in.peek() != std::char_traits<char>::eof())
    return path + ": corrupt (bytes after the checksum; the shard is longer than its header says)";
  payload.bytes = std::move(bytes);
  payload.version = h.version;
  return std::nullopt;
}

}  // namespace ztune::executor
