#include "ztune/gui/plan_filter_model.hpp"

#include "ztune/gui/plan_table_model.hpp"

namespace ztune::gui {

PlanFilterModel::PlanFilterModel(QObject* parent) : QSortFilterProxyModel(parent) {
  setSortRole(PlanTableModel::SortRole);
}

void PlanFilterModel::set_zero_stage(std::optional<int> stage) {
  if (stage == zero_stage_) return;
  zero_stage_ = stage;
  invalidateFilter();
}

void PlanFilterModel::set_hide_offload(bool hide) {
  if (hide == hide_offload_) return;
  hide_offload_ = hide;
  invalidateFilter();
}

void PlanFilterModel::set_gpus(std::optional<int> gpus) {
  if (gpus == gpus_) return;
  gpus_ = gpus;
  invalidateFilter();
}

bool PlanFilterModel::filterAcceptsRow(int source_row, const QModelIndex& source_parent) const {
  const QAbstractItemModel* src = sourceModel();
  if (src == nullptr) return false;
  const QModelIndex idx = src->index(source_row, PlanTableModel::rank, source_parent);
  if (zero_stage_ && src->data(idx, PlanTableModel::ZeroStageRole).toInt() != *zero_stage_) return false;
  if (hide_offload_ && src->data(idx, PlanTableModel::OffloadRole).toBool()) return false;
  if (gpus_ && src->data(src->index(source_row, PlanTableModel::gpus, source_parent), PlanTableModel::SortRole)
                       .toInt() != *gpus_)
    return false;
  return true;
}

}  // namespace ztune::gui
