#include "ztune/vocab/checkpoint_layout.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <fstream>
#include <limits>

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

std::optional<int> checkpoint_schedule_steps(const std::string& dir) {
  std::ifstream in(checkpoint_schedule_path(dir));
  std::string word;
  long long steps = 0;
  if (!(in >> word >> steps) || word != "steps" || steps < 1 || steps > std::numeric_limits<int>::max())
    return std::nullopt;
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
