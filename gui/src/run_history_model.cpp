#include "ztune/gui/run_history_model.hpp"

#include "ztune/gui/units.hpp"

namespace ztune::gui {
namespace {

/// (predicted − measured) / measured, when both exist.
std::optional<double> relative_error(const RunSummary& r) {
  if (!r.predicted_iteration_s || !r.measured_iteration_s || *r.measured_iteration_s <= 0) return std::nullopt;
  return (*r.predicted_iteration_s - *r.measured_iteration_s) / *r.measured_iteration_s;
}

}  // namespace

RunHistoryModel::RunHistoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunHistoryModel::set_runs(std::vector<RunSummary> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

int RunHistoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int RunHistoryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : column_count; }

QVariant RunHistoryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const RunSummary& r = rows_[static_cast<std::size_t>(index.row())];
  const QString none = QStringLiteral("—");
  if (role == IdRole) return static_cast<qlonglong>(r.id);
  // A row the database could not give whole: its id, and why in its plan's place.
  if (!r.damaged.empty() && (role == Qt::DisplayRole || role == Qt::ToolTipRole)) {
    if (index.column() == id && role == Qt::DisplayRole) return static_cast<qlonglong>(r.id);
    if (index.column() == status && role == Qt::DisplayRole) return QStringLiteral("damaged");
    return index.column() == plan || role == Qt::ToolTipRole ? QStringLiteral("damaged row: %1").arg(QString::fromStdString(r.damaged))
                                                             : none;
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case id: return static_cast<qlonglong>(r.id);
      case created: return QString::fromStdString(r.created_at);
      case cluster: return r.cluster.empty() ? none : QString::fromStdString(r.cluster);
      case model: return r.model.empty() ? none : QString::fromStdString(r.model);
      case plan: return QString::fromStdString(r.plan);
      case status: return QString::fromStdString(r.status);
      case predicted: return r.predicted_iteration_s ? format_duration(*r.predicted_iteration_s) : none;
      case measured: return r.measured_iteration_s ? format_duration(*r.measured_iteration_s) : none;
      case error: {
        const auto e = relative_error(r);
        return e ? QStringLiteral("%1%2").arg(*e >= 0 ? "+" : "").arg(format_percent(*e)) : none;
      }
      default: return {};
    }
  }
  // The free-text cells whole: the dialog caps their columns' width (History's fit_columns).
  if (role == Qt::ToolTipRole && (index.column() == cluster || index.column() == model || index.column() == plan))
    return data(index, Qt::DisplayRole);
  if (role == SortRole) {
    switch (index.column()) {
      case id: return static_cast<qlonglong>(r.id);
      case predicted: return r.predicted_iteration_s.value_or(0.0);
      case measured: return r.measured_iteration_s.value_or(0.0);
      case error: return relative_error(r).value_or(0.0);
      default: return data(index, Qt::DisplayRole);
    }
  }
  return {};
}

QVariant RunHistoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[column_count] = {"ID",     "When",      "Cluster",  "Model",
                                                   "Plan",   "Status",    "Predicted", "Measured", "Error"};
  return section >= 0 && section < column_count ? QVariant(QString::fromUtf8(kNames[section])) : QVariant();
}

}  // namespace ztune::gui
