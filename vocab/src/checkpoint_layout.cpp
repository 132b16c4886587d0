#include "ztune/vocab/checkpoint_layout.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string_view>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "ztune/vocab/input_error.hpp"

namespace ztune {

std::string checkpoint_step_dir(const std::string& dir, int steps) {
  char name[32];
  std::snprintf(name, sizeof name, "step_%08d", steps);
  return dir + "/" + name;
}

std::string checkpoint_latest_path(const std::string& dir) { return dir + "/latest"; }
std::string checkpoint_plan_path(const std::string& dir) { return dir + "/plan.json"; }
std::string checkpoint_data_path(const std::string& dir) { return dir + "/data"; }
std::string checkpoint_schedule_path(const std::string& dir) { return dir + "/schedule"; }

std::string checkpoint_lock_path(const std::string& dir) { return dir + "/lock"; }

std::string checkpoint_dir_in_use(const std::string& dir, int lock_fd) {
  char holder[32] = {};
  const ssize_t n = ::pread(lock_fd, holder, sizeof holder - 1, 0);
  std::string pid = n > 0 ? std::string(holder, static_cast<std::size_t>(n)) : "";
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return "--checkpoint-dir " + dir + ": in use by another run" + (pid.empty() ? "" : " (pid " + pid + ")") +
         "; wait for it to end, or choose another directory";
}

std::optional<std::string> checkpoint_dir_held(const std::string& dir) {
  const std::string path = checkpoint_lock_path(dir);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> held;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) held = checkpoint_dir_in_use(dir, fd);
  } else {
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return held;
}

std::optional<int> checkpoint_schedule_steps(const std::string& dir) {
  const std::string path = checkpoint_schedule_path(dir);
  std::error_code ec;
  if (!std::filesystem::exists(std::filesystem::symlink_status(path, ec))) return std::nullopt;
  // Read whole (it is one short line; more is not this file) and parsed
  // strictly: a damaged schedule had read as a missing one, and a resume on
  // another --steps went ahead on another learning-rate schedule unsaid.
  // Not opened unless a regular file (a FIFO would block the read).
  if (!std::filesystem::is_regular_file(path, ec))
    throw InputError(path + ": expected \"steps N\" in a regular file (the --steps of the run that wrote these "
                     "checkpoints), got " + (std::filesystem::is_directory(path, ec) ? "a directory" : "no regular file") +
                     "; remove it to resume without checking them");
  std::ifstream in(path, std::ios::binary);
  std::string text(256, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(std::max<std::streamsize>(in.gcount(), 0)));
  const bool too_long = !in.eof() && text.size() == 256;  // longer than any schedule line
  // "steps", blanks, the count, and nothing but whitespace after it.
  auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  std::string_view v(text);
  while (!v.empty() && blank(v.back())) v.remove_suffix(1);
  long long steps = 0;
  bool parsed = !too_long && v.starts_with("steps") && v.size() > 5 && blank(v[5]);
  if (parsed) {
    v.remove_prefix(5);
    while (!v.empty() && blank(v.front())) v.remove_prefix(1);
    const auto [end, err] = std::from_chars(v.data(), v.data() + v.size(), steps);
    parsed = err == std::errc() && end == v.data() + v.size() && steps >= 1 && steps <= std::numeric_limits<int>::max();
  }
  if (!parsed) {
    std::string shown = text;
    while (!shown.empty() && blank(shown.back())) shown.pop_back();
    if (shown.size() > 40) shown = shown.substr(0, 40) + "...";
    for (char& c : shown)
      if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
    throw InputError(path + ": expected \"steps N\" (the --steps of the run that wrote these checkpoints, N >= 1), " +
                     (in.bad() ? std::string("which cannot be read") : "got \"" + shown + "\"") +
                     "; write the original run's --steps there, or remove the file to resume without checking them");
  }
  return static_cast<int>(steps);
}

std::optional<std::string> missing_data_identity(const std::string& dir) {
  std::error_code ec;
  const std::string data = checkpoint_data_path(dir);
  const std::string plan = checkpoint_plan_path(dir);
  if (std::filesystem::exists(data, ec) || !std::filesystem::exists(plan, ec)) return std::nullopt;
  return data + ": missing, though the checkpoints beside it were written with it (" + plan +
         " is there): it names the token stream they were trained on; restore it, or start without --resume";
}

std::vector<int> checkpoint_steps_present(const std::string& dir) {
  std::vector<int> steps;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string();
    int n = 0;
    if (name.size() == 13 && name.starts_with("step_") && std::sscanf(name.c_str() + 5, "%8d", &n) == 1 &&
        checkpoint_step_dir(dir, n) == e.path().string())
      steps.push_back(n);
  }
  std::sort(steps.begin(), steps.end(), std::greater<>());
  return steps;
}

std::optional<int> latest_checkpoint(const std::string& dir, std::string& error) {
  const std::string latest = checkpoint_latest_path(dir);
  std::error_code ec;
  if (!std::filesystem::exists(latest, ec)) {
    error = latest + ": no committed checkpoint to resume from (run with --checkpoint-every N first)";
    return std::nullopt;
  }
  // Checked before opening: opening a FIFO would wait for a writer forever.
  if (!std::filesystem::is_regular_file(latest, ec)) {
    error = latest + ": not a regular file (expected the committed checkpoint's step number)";
    return std::nullopt;
  }
  std::ifstream in(latest);
  if (!in) {
    error = latest + ": cannot be read";
    return std::nullopt;
  }
  // The commit writes the step number alone; anything else is not ours.
  std::string text(32, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
  std::size_t used = 0;
  long long steps = -1;
  try {
    steps = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (text.empty() || used != text.size() || steps < 1 || steps > std::numeric_limits<int>::max()) {
    error = latest + ": expected the committed checkpoint's step number (1 or more), got \"" + text.substr(0, 40) +
            "\"";
    return std::nullopt;
  }
  // The commit writes latest only after every shard of the step is in place.
  if (const std::string committed = checkpoint_step_dir(dir, static_cast<int>(steps));
      !std::filesystem::is_directory(committed, ec)) {
    error = latest + ": names step " + std::to_string(steps) + ", but " + committed +
            " is not there (the checkpoint directory was changed after the commit)";
    return std::nullopt;
  }
  return static_cast<int>(steps);
}

}  // namespace ztune
