#include "ztune/gui/search_history_model.hpp"

#include "ztune/gui/units.hpp"

namespace ztune::gui {

SearchHistoryModel::SearchHistoryModel(QObject* parent) : QAbstractTableModel(parent) {}

void SearchHistoryModel::set_searches(std::vector<SearchSummary> rows) {
  beginResetModel();
  rows_ = std::move(rows);
  endResetModel();
}

int SearchHistoryModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int SearchHistoryModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : column_count; }

QVariant SearchHistoryModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const SearchSummary& s = rows_[static_cast<std::size_t>(index.row())];
  if (role == IdRole) return static_cast<qlonglong>(s.id);
  // A row the database could not give whole: its id, and why in its best plan's place.
  if (!s.damaged.empty() && (role == Qt::DisplayRole || role == Qt::ToolTipRole)) {
    if (index.column() == id && role == Qt::DisplayRole) return static_cast<qlonglong>(s.id);
    return index.column() == best || role == Qt::ToolTipRole ? QStringLiteral("damaged row: %1").arg(QString::fromStdString(s.damaged))
                                                             : QStringLiteral("—");
  }
  if (role == Qt::DisplayRole) {
    switch (index.column()) {
      case id: return static_cast<qlonglong>(s.id);
      case created: return QString::fromStdString(s.created_at);
      case cluster: return QString::fromStdString(s.cluster);
      case model: return QString::fromStdString(s.model);
      // Which engine's space and profile the search ranked by ("—" when its stored options do not say).
      case engine: return s.engine.empty() ? QStringLiteral("—") : QString::fromStdString(s.engine);
      case feasible:
        return QStringLiteral("%1 of %2%3")
            .arg(format_count(static_cast<double>(s.feasible)), format_count(static_cast<double>(s.space)),
                 s.interrupted ? QStringLiteral(" (cancelled)") : QString());
      case best: return s.best.empty() ? QStringLiteral("nothing fits") : QString::fromStdString(s.best);
      case throughput: return s.best_tokens_per_s ? format_tokens_per_s(*s.best_tokens_per_s) : QStringLiteral("—");
      case elapsed: return format_duration(s.elapsed_s);
      default: return {};
    }
  }
  // The free-text cells whole: the dialog caps their columns' width (History's fit_columns).
  if (role == Qt::ToolTipRole && (index.column() == cluster || index.column() == model || index.column() == best))
    return data(index, Qt::DisplayRole);
  if (role == SortRole) {
    switch (index.column()) {
      case id: return static_cast<qlonglong>(s.id);
      case feasible: return static_cast<qlonglong>(s.feasible);
      case throughput: return s.best_tokens_per_s.value_or(0.0);
      case elapsed: return s.elapsed_s;
      default: return data(index, Qt::DisplayRole);
    }
  }
  return {};
}

QVariant SearchHistoryModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kNames[column_count] = {"ID",       "When",      "Cluster",         "Model",      "Engine",
                                                   "Feasible", "Best plan", "Best throughput", "Search time"};
  return section >= 0 && section < column_count ? QVariant(QString::fromUtf8(kNames[section])) : QVariant();
}

}  // namespace ztune::gui
