#include "ztune/gui/run_summary.hpp"

#include <algorithm>

#include <QList>
#include <nlohmann/json.hpp>

#include "ztune/gui/units.hpp"

namespace ztune::gui {
namespace {

std::optional<nlohmann::json> parse_json(const QByteArray& text) {
  auto doc = nlohmann::json::parse(text.constData(), text.constData() + text.size(), nullptr, false);
  if (!doc.is_discarded() && doc.is_object()) return doc;
  const QList<QByteArray> lines = text.split('\n');
  for (auto it = lines.rbegin(); it != lines.rend(); ++it) {
    const QByteArray line = it->trimmed();
    if (!line.startsWith('{')) continue;
    doc = nlohmann::json::parse(line.constData(), line.constData() + line.size(), nullptr, false);
    if (!doc.is_discarded() && doc.is_object()) return doc;
  }
  return std::nullopt;
}

}  // namespace

std::optional<MeasuredRun> parse_run_summary(const QByteArray& stdout_text) {
  const auto doc = parse_json(stdout_text);
  if (!doc) return std::nullopt;
  MeasuredRun r;
  if (auto it = doc->find("step_time_s"); it != doc->end() && it->is_number()) r.step_time_s = it->get<double>();
  if (auto it = doc->find("losses"); it != doc->end() && it->is_array())
    for (const auto& v : *it)
      if (v.is_number()) r.losses.push_back(v.get<double>());
  if (auto it = doc->find("peak_memory_bytes"); it != doc->end()) {
    if (it->is_number()) r.peak_memory_bytes = it->get<double>();
    if (it->is_array())
      for (const auto& v : *it)
        if (v.is_number()) r.peak_memory_bytes = std::max(r.peak_memory_bytes.value_or(0.0), v.get<double>());
  }
  return r;
}

QString compare_run(const MeasuredRun& measured, double predicted_step_s) {
  if (!measured.step_time_s) return QStringLiteral("the run printed no step time");
  const double m = *measured.step_time_s;
  QString s = QStringLiteral("measured %1 per step, predicted %2").arg(format_duration(m), format_duration(predicted_step_s));
  if (m > 0) {
    const double err = (predicted_step_s - m) / m;
    s += QStringLiteral(" (%1%2 off)").arg(err >= 0 ? "+" : "").arg(format_percent(err));
  }
  return s;
}

}  // namespace ztune::gui
