// DurableFile: a failed write leaves the old file whole. The failure is a
// real one: the kernel's file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored
// so write(2) returns EFBIG), which is what `ulimit -f` and a full disk do
// to a writer part-way through.
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "ztune/vocab/durable_file.hpp"

namespace fs = std::filesystem;

namespace {

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path fresh_dir(const std::string& name) {
  const fs::path d = fs::temp_directory_path() / ("ztune_durable_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// Lowers the soft file-size limit for its lifetime.
struct FileSizeLimit {
  rlimit old{};
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old);
    rlimit lim = old;
    lim.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &lim);
  }
  ~FileSizeLimit() { ::setrlimit(RLIMIT_FSIZE, &old); }
};

}  // namespace

TEST_CASE("DurableFile writes a new file and replaces an old one whole", "[vocab][durable]") {
  const fs::path d = fresh_dir("replace");
  const std::string path = (d / "plan.json").string();
  REQUIRE_FALSE(ztune::write_file_durably(path, "first\n"));
  CHECK(slurp(path) == "first\n");
  ::chmod(path.c_str(), 0640);
  REQUIRE_FALSE(ztune::write_file_durably(path, "second, longer\n"));
  CHECK(slurp(path) == "second, longer\n");
  CHECK((fs::status(path).permissions() & fs::perms::all) ==
        (fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read));  // kept
  CHECK(std::distance(fs::directory_iterator(d), fs::directory_iterator()) == 1);  // no temporary left
  fs::remove_all(d);
}

TEST_CASE("DurableFile: a write the kernel refuses part-way leaves the old file as it was", "[vocab][durable]") {
  const fs::path d = fresh_dir("efbig");
  const std::string path = (d / "weights.bin").string();
  REQUIRE_FALSE(ztune::write_file_durably(path, "the good file\n"));
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  std::optional<std::string> why;
  {
    FileSizeLimit limit(4096);
    ztune::DurableFile f(path);
    f.write(std::string(3000, 'a'));
    f.write(std::string(3000, 'b'));  // crosses 4096 bytes: EFBIG
    why = f.commit();
  }
  std::signal(SIGXFSZ, old_handler);
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Catch::Contains("too large"));  // strerror(EFBIG): "File too large"
  CHECK(slurp(path) == "the good file\n");
  CHECK(std::distance(fs::directory_iterator(d), fs::directory_iterator()) == 1);
  fs::remove_all(d);
}

TEST_CASE("DurableFile: abandoned before commit, the target keeps its contents", "[vocab][durable]") {
  const fs::path d = fresh_dir("abandon");
  const std::string path = (d / "record.json").string();
  REQUIRE_FALSE(ztune::write_file_durably(path, "old"));
  {
    ztune::DurableFile f(path);
    f.write("half of a new");
  }  // e.g. an exception between the writes
  CHECK(slurp(path) == "old");
  CHECK(std::distance(fs::directory_iterator(d), fs::directory_iterator()) == 1);
  fs::remove_all(d);
}

TEST_CASE("DurableFile follows a symbolic link and keeps it, writes a device directly", "[vocab][durable]") {
  const fs::path d = fresh_dir("link");
  fs::create_directories(d / "real");
  const fs::path target = d / "real" / "out.sh";
  REQUIRE_FALSE(ztune::write_file_durably(target.string(), "old"));
  fs::create_symlink("real/out.sh", d / "link.sh");
  REQUIRE_FALSE(ztune::write_file_durably((d / "link.sh").string(), "new"));
  CHECK(fs::is_symlink(fs::symlink_status(d / "link.sh")));
  CHECK(slurp(target) == "new");
  CHECK(std::distance(fs::directory_iterator(d / "real"), fs::directory_iterator()) == 1);
  // /dev/null is not replaced by a regular file; /dev/full reports the full disk;
  // /dev/stdout (a link to /proc/self/fd/1, whatever stdout is) is written through.
  CHECK_FALSE(ztune::write_file_durably("/dev/null", "x"));
  CHECK_FALSE(ztune::write_file_durably("/dev/stdout", ""));
  CHECK(fs::is_character_file("/dev/null"));
  const auto full = ztune::write_file_durably("/dev/full", "x");
  REQUIRE(full.has_value());
  CHECK_THAT(*full, Catch::Contains("No space left"));
  CHECK(fs::is_character_file("/dev/full"));
  // A directory that cannot be written: the reason names the temporary.
  const auto nodir = ztune::write_file_durably((d / "missing" / "x.json").string(), "x");
  REQUIRE(nodir.has_value());
  CHECK_THAT(*nodir, Catch::Contains("No such file or directory"));
  fs::remove_all(d);
}

TEST_CASE("DurableFile for a file only: a FIFO, a device or a link to one is refused, not written", "[vocab][durable]") {
  // Checkpoints are read back: a shard linked to /dev/null had been "committed"
  // with nothing kept, and a FIFO in plan.json's place had hung the run.
  const fs::path d = fresh_dir("file-only");
  const fs::path fifo = d / "plan.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  fs::create_symlink("/dev/null", d / "rank_00000.ckpt");
  for (const fs::path& p : {fifo, d / "rank_00000.ckpt", fs::path("/dev/null"), fs::path("/dev/stdout")}) {
    const auto why = ztune::write_file_durably(p.string(), "x", ztune::DurableTarget::file);
    INFO(p);
    REQUIRE(why.has_value());
    CHECK(*why == "not a regular file (a FIFO, device or stream); expected a file to replace");
  }
  CHECK(fs::is_fifo(fifo));
  CHECK(fs::is_symlink(fs::symlink_status(d / "rank_00000.ckpt")));
  // A regular file, and one through a link, are replaced as before.
  REQUIRE_FALSE(ztune::write_file_durably((d / "latest").string(), "3\n", ztune::DurableTarget::file));
  CHECK(slurp(d / "latest") == "3\n");
  fs::remove_all(d);
}

// ztune-worker's run record (--record-fallback): a record that cannot be
// written where asked at the end of a run goes to the fallback, so the
// measured steps are kept; a fallback that fails too is said with both reasons.
TEST_CASE("write_file_or_fallback keeps the text when its path cannot be written", "[vocab][durable]") {
  const fs::path d = fresh_dir("fallback");
  const std::string fallback = (d / "kept.json").string();
  ztune::FallbackWrite w = ztune::write_file_or_fallback((d / "record.json").string(), fallback, "steps\n");
  CHECK_FALSE(w.error);
  CHECK(w.written());
  CHECK(slurp(d / "record.json") == "steps\n");
  CHECK_FALSE(fs::exists(fallback));  // untouched when the path took it

  // A directory that is not there, as a full disk or a removed one fails.
  w = ztune::write_file_or_fallback((d / "gone" / "record.json").string(), fallback, "steps\n");
  REQUIRE(w.error);
  CHECK_FALSE(w.fallback_error);
  CHECK(w.written());
  CHECK(slurp(fallback) == "steps\n");

  w = ztune::write_file_or_fallback((d / "gone" / "record.json").string(), (d / "gone" / "too.json").string(), "x");
  CHECK(w.error);
  CHECK(w.fallback_error);
  CHECK_FALSE(w.written());
  w = ztune::write_file_or_fallback((d / "gone" / "record.json").string(), "", "x");
  CHECK_FALSE(w.written());
  CHECK(*w.fallback_error == "no fallback given");
  fs::remove_all(d);
}
