#include "ztune/model/accuracy.hpp"

#include <cstdio>
#include <exception>

#include "ztune/model/text.hpp"

namespace ztune {

namespace {

std::string pct(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v < 10 ? "%.1f%%" : "%.0f%%", v);
  return buf;
}

}  // namespace

Accuracy accuracy_for(const Cluster& c) {
  Accuracy a;
  a.family = c.device_kind == DeviceKind::cpu ? "cpu" : gpu_family(c.node.gpu.name);
  try {
    a.sources = time_accuracy(run_validation(default_validation_dir()), c.node.gpu.name);
  } catch (const std::exception& e) {
    a.problem = e.what();
  }
  return a;
}

std::string accuracy_line(const Accuracy& a, const std::string& profile, const HardwareProfile& default_profile) {
  if (!a.problem.empty()) return "accuracy: the validation data could not be read (" + a.problem + ")";
  if (a.sources.empty())
    return "accuracy: no published training time measured on " + a.family +
           " is in data/validation, so this time is not checked against a real run (ztune validate lists what "
           "is; ztune calibrate fits a profile to your own runs)";
  // A default profile fitted on these runs (data/profiles/a100.json says so in
  // its source) makes the figures in-sample, which the line says.
  std::string s = "accuracy on " + a.family + " (ztune validate: the same cost model against published runs";
  if (default_profile.source.find("data/validation") != std::string::npos)
    s += ", which the default profile " + default_profile.name + " was fitted on";
  if (profile != default_profile.name) s += "; this prediction used " + profile;
  s += ")";
  s += ": ";
  for (std::size_t i = 0; i < a.sources.size(); ++i) {
    const SourceSummary& src = a.sources[i];
    if (i > 0) s += ", ";
    s += src.name + " " + pct(src.mape) + " MAPE over " + grouped(src.cases) + (src.cases == 1 ? " run" : " runs");
    if (src.max_abs_pct > 2 * src.mape && src.max_abs_pct >= 10) s += " (worst " + pct(src.max_abs_pct) + ")";
  }
  return s;
}

nlohmann::json accuracy_json(const Accuracy& a) {
  nlohmann::json sources = nlohmann::json::array();
  for (const auto& s : a.sources)
    sources.push_back({{"source", s.name},
                       {"description", s.description},
                       {"cases", s.cases},
                       {"mape_pct", s.mape},
                       {"max_abs_error_pct", s.max_abs_pct}});
  nlohmann::json j{{"gpu_family", a.family}, {"time_sources", sources}};
  if (!a.problem.empty()) j["problem"] = a.problem;
  return j;
}

}  // namespace ztune
