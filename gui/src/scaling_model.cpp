#include "ztune/gui/scaling_model.hpp"

#include <algorithm>

#include "ztune/gui/units.hpp"

namespace ztune::gui {

ScalingModel::ScalingModel(QObject* parent) : QAbstractTableModel(parent) {}

void ScalingModel::clear() {
  beginResetModel();
  points_.clear();
  endResetModel();
}

void ScalingModel::add_point(const ScalingPoint& p) {
  auto it = std::lower_bound(points_.begin(), points_.end(), p.gpus,
                             [](const ScalingPoint& a, int g) { return a.gpus < g; });
  const int row = static_cast<int>(it - points_.begin());
  if (it != points_.end() && it->gpus == p.gpus) {
    *it = p;
    emit dataChanged(index(row, 0), index(row, column_count - 1));
    return;
  }
  beginInsertRows({}, row, row);
  points_.insert(it, p);
  endInsertRows();
}

int ScalingModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(points_.size());
}

int ScalingModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : column_count; }

QVariant ScalingModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const ScalingPoint& p = points_[static_cast<std::size_t>(index.row())];
  if (role == FeasibleRole) return p.feasible;
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case gpus: return p.gpus;
      case tokens_per_s: return p.tokens_per_s;
      case mfu_percent: return p.mfu * 100;
      case tflops_per_gpu: return p.tflops_per_gpu;
      case plan: return p.plan;
      default: return {};
    }
  }
  if (role == FormattedRole) {
    const QString none = QStringLiteral("does not fit");
    switch (index.column()) {
      case gpus: return QString::number(p.gpus);
      case tokens_per_s: return p.feasible ? format_tokens_per_s(p.tokens_per_s) : none;
      case mfu_percent: return p.feasible ? format_percent(p.mfu) : none;
      case tflops_per_gpu: return p.feasible ? format_tflops(p.tflops_per_gpu) : none;
      case plan: return p.feasible ? p.plan : (p.plan.isEmpty() ? none : p.plan);
      default: return {};
    }
  }
  return {};
}

QVariant ScalingModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case gpus: return QStringLiteral("GPUs");
    case tokens_per_s: return QStringLiteral("Throughput");
    case mfu_percent: return QStringLiteral("MFU");
    case tflops_per_gpu: return QStringLiteral("TFLOP/s/GPU");
    case plan: return QStringLiteral("Best plan");
    default: return {};
  }
}

}  // namespace ztune::gui
