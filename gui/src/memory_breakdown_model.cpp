#include "ztune/gui/memory_breakdown_model.hpp"

#include "ztune/gui/labels.hpp"

namespace ztune::gui {
namespace {

QStringList line_labels() {
  QStringList l;
  for (std::size_t i = 0; i < static_cast<std::size_t>(MemLine::count); ++i) l << mem_line_label(i);
  return l;
}

}  // namespace

MemoryBreakdownModel::MemoryBreakdownModel(QObject* parent) : BreakdownModel(Unit::gib, line_labels(), parent) {}

void MemoryBreakdownModel::set_memory(const QStringList& labels, const std::vector<MemoryPrediction>& memory) {
  memory_ = memory;
  std::vector<std::vector<double>> raw;
  for (const auto& m : memory) raw.emplace_back(m.gpu.begin(), m.gpu.end());
  set_columns(labels, std::move(raw));
}

}  // namespace ztune::gui
