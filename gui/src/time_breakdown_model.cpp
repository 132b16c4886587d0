#include "ztune/gui/time_breakdown_model.hpp"

#include "ztune/gui/labels.hpp"

namespace ztune::gui {
namespace {

QStringList part_labels() {
  QStringList l;
  for (std::size_t i = 0; i < static_cast<std::size_t>(TimePart::count); ++i) l << time_part_label(i);
  return l;
}

}  // namespace

TimeBreakdownModel::TimeBreakdownModel(QObject* parent) : BreakdownModel(Unit::seconds, part_labels(), parent) {}

void TimeBreakdownModel::set_times(const QStringList& labels, const std::vector<TimePrediction>& times) {
  times_ = times;
  std::vector<std::vector<double>> raw;
  for (const auto& t : times) raw.emplace_back(t.parts.begin(), t.parts.end());
  set_columns(labels, std::move(raw));
}

}  // namespace ztune::gui
