#include "ztune/gui/profile_history_model.hpp"

#include "ztune/gui/units.hpp"
#include "ztune/vocab/cluster.hpp"
#include "ztune/vocab/input_error.hpp"

namespace ztune::gui {

std::vector<ClusterProfileHistory> load_profile_histories(const ResultsDb& db, std::vector<std::string>& notes) {
  return calibration::profile_histories_of(db, [](const std::string& name) { return load_cluster(name); }, notes);
}

ProfileHistoryModel::ProfileHistoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void ProfileHistoryModel::set_histories(const std::vector<ClusterProfileHistory>& histories) {
  beginResetModel();
  rows_.clear();
  for (const auto& h : histories)
    for (std::size_t i = 0; i < h.rows.size(); ++i) rows_.push_back({h.cluster, static_cast<int>(i), h.rows[i]});
  endResetModel();
}

int ProfileHistoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int ProfileHistoryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : column_count; }

QVariant ProfileHistoryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const Row& r = rows_[static_cast<std::size_t>(index.row())];
  const QString none = QStringLiteral("—");
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case cluster: return QString::fromStdString(r.cluster);
      case order: return r.row.id == 0 ? QStringLiteral("shipped") : QString::number(r.order);
      case stored: return r.row.created.empty() ? QStringLiteral("(catalog)") : QString::fromStdString(r.row.created);
      case profile: return QString::fromStdString(r.row.name);
      case runs_since: return r.row.runs_since;
      case mean_error: return r.row.mean_abs_error ? format_percent(*r.row.mean_abs_error) : none;
      case next_error: return r.row.last_error ? format_percent(*r.row.last_error) : none;
      default: return {};
    }
  }
  if (role == Qt::ToolTipRole && index.column() == profile) return QString::fromStdString(r.row.source);
  if (role == SortRole) {
    switch (index.column()) {
      case order: return r.order;
      case runs_since: return r.row.runs_since;
      case mean_error: return r.row.mean_abs_error.value_or(-1.0);
      case next_error: return r.row.last_error.value_or(-1.0);
      default: return data(index, Qt::DisplayRole);
    }
  }
  return {};
}

QVariant ProfileHistoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  switch (section) {
    case cluster: return QStringLiteral("Cluster");
    case order: return QStringLiteral("#");
    case stored: return QStringLiteral("Stored");
    case profile: return QStringLiteral("Profile");
    case runs_since: return QStringLiteral("Runs since");
    case mean_error: return QStringLiteral("Mean |error| on them");
    case next_error: return QStringLiteral("Next run's error");
    default: return {};
  }
}

}  // namespace ztune::gui
