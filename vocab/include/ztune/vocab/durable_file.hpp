#pragma once
// Writing a file that a crash, a full disk or a failed write cannot damage.
// The one owner of how ztune publishes what it writes (plan files, exports,
// run records, checkpoints, weights, measurements, profiles): every writer
// goes through DurableFile, so none truncates a good file before the new one
// is whole.
//
// The bytes go to a temporary beside the target (PATH.tmp.PID, in the same
// directory so the rename stays on one filesystem), written with write(2)
// and every result checked; commit() fsyncs and closes it, renames it over
// the target and fsyncs the directory (POSIX rename is atomic: a reader sees
// the old file or the new one, never half of one). A target that exists and
// is not a regular file (/dev/null, a FIFO, a pipe), and any name under /dev/
// or /proc/ (/dev/stdout, whatever it is open on), is a stream, not a file to
// replace: it is written directly, appending. A symbolic link is followed, so
// the file it names is replaced and the link kept; a replaced file keeps its
// permission bits.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace ztune {

/// What a target may be: a file (checkpoints, which are read back and must
/// never vanish into /dev/null or block on a FIFO), or also a stream (what
/// the user names as an output: --out /dev/stdout).
enum class DurableTarget { file_or_stream, file };

class DurableFile {
 public:
  /// Opens the temporary (or the stream). A failure is kept and reported by
  /// commit(); with DurableTarget::file a stream or a non-regular target is one.
  explicit DurableFile(std::string path, DurableTarget target = DurableTarget::file_or_stream);
  /// Removes the temporary unless commit() published it: the target keeps its old contents.
  ~DurableFile();
  DurableFile(const DurableFile&) = delete;
  DurableFile& operator=(const DurableFile&) = delete;

  /// Appends bytes; after the first failure, later writes do nothing.
  void write(const void* data, std::size_t bytes);
  void write(std::string_view text) { write(text.data(), text.size()); }

  /// Publishes the file. nullopt when the target now holds every byte
  /// written; else why not (the system's words, e.g. "No space left on
  /// device"), the temporary removed and the target as it was.
  [[nodiscard]] std::optional<std::string> commit();

 private:
  std::string target_;  // the file replaced (a symbolic link resolved)
  std::string tmp_;     // empty when writing a stream directly
  int fd_ = -1;
  std::optional<std::string> error_;
  bool done_ = false;
};

/// True where DurableFile writes a stream, not a file it replaces: a name
/// under /dev/ or /proc/, or a target that exists and is not a regular file
/// (through links). A caller that reads the file back refuses it.
[[nodiscard]] bool is_stream_target(const std::string& path);
/// True for the name of DurableFile's temporary, NAME.tmp.PID: a crashed
/// writer's leftover where no writer can be at work.
[[nodiscard]] bool is_durable_temporary(const std::string& file_name);

/// For a program's main, before anything is written: a file-size limit
/// (ulimit -f) then makes write(2) fail with EFBIG, which DurableFile reports
/// with the file's name, instead of SIGXFSZ killing the process without a word.
/// Children started later get the default back where they need it (run_launch).
void report_file_size_limit_as_error();

/// `text` into `path` through DurableFile: why it failed, or nullopt.
[[nodiscard]] std::optional<std::string> write_file_durably(const std::string& path, std::string_view text,
                                                            DurableTarget target = DurableTarget::file_or_stream);

/// Where write_file_or_fallback put the text.
struct FallbackWrite {
  std::optional<std::string> error;           // why `path` could not be written (nullopt: it was)
  std::optional<std::string> fallback_error;  // why the fallback could not be either (none given, or it failed)
  [[nodiscard]] bool written() const { return !error || !fallback_error; }
};
/// `text` into `path`, and when that fails (a full disk) into `fallback`
/// instead, so that what a long computation produced is not thrown away.
[[nodiscard]] FallbackWrite write_file_or_fallback(const std::string& path, const std::string& fallback,
                                                   std::string_view text);

}  // namespace ztune
