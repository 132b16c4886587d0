#include "ztune/vocab/run_progress.hpp"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <vector>

#include "ztune/vocab/run_record.hpp"

namespace ztune {

namespace {
std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}
}  // namespace

std::string progress_line(int step, double loss, double seconds) {
  return "{\"step\": " + std::to_string(step) + ", \"loss\": " + (std::isfinite(loss) ? number(loss) : "null") +
         ", \"time_s\": " + number(seconds) + "}\n";
}

std::optional<RunProgress> read_progress(const std::string& path) {
  std::ifstream in(path);
  std::vector<double> times;
  RunProgress p;
  for (std::string line; std::getline(in, line);) {
    const auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("step") || !j["step"].is_number_integer() ||
        !j.contains("time_s") || !j["time_s"].is_number() || !j.contains("loss"))
      break;  // the line the kill cut short, or not the worker's
    const int step = j["step"].get<int>();
    if (times.empty()) p.first_step = step;
    p.last_step = step;
    times.push_back(j["time_s"].get<double>());
    p.last_loss = j["loss"].is_number() ? std::optional<double>(j["loss"].get<double>()) : std::nullopt;
  }
  if (times.empty()) return std::nullopt;
  p.median_step_s = median_step_time(std::move(times));
  return p;
}

std::string progress_summary(const RunProgress& p) {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %d%s%s, median step %.4g s", p.first_step == p.last_step ? "step" : "steps",
                p.first_step, p.first_step == p.last_step ? "" : "-",
                p.first_step == p.last_step ? "" : std::to_string(p.last_step).c_str(), p.median_step_s);
  std::string s = buf;
  if (p.last_loss) {
    std::snprintf(buf, sizeof buf, ", last loss %.4f", *p.last_loss);
    s += buf;
  }
  return s;
}

nlohmann::json progress_to_json(const RunProgress& p) {
  return {{"first", p.first_step},
          {"last", p.last_step},
          {"median_step_s", p.median_step_s},
          {"last_loss", p.last_loss ? nlohmann::json(*p.last_loss) : nlohmann::json(nullptr)}};
}

std::optional<RunProgress> progress_from_json(const nlohmann::json& j) {
  auto step = [&](const char* k) {
    return j.is_object() && j.contains(k) && j.at(k).is_number_integer() ? j.at(k).get<long long>() : 0LL;
  };
  const long long first = step("first"), last = step("last");
  if (first <= 0 || last < first || last > std::numeric_limits<int>::max() || !j.contains("median_step_s") ||
      !j.at("median_step_s").is_number())
    return std::nullopt;
  RunProgress p{static_cast<int>(first), static_cast<int>(last), j.at("median_step_s").get<double>(), std::nullopt};
  if (j.contains("last_loss") && j.at("last_loss").is_number()) p.last_loss = j.at("last_loss").get<double>();
  return p;
}

}  // namespace ztune
