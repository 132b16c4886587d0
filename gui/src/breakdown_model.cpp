#include "ztune/gui/breakdown_model.hpp"

#include <algorithm>
#include <numeric>

#include "ztune/gui/units.hpp"
#include "ztune/vocab/text.hpp"

namespace ztune::gui {

BreakdownModel::BreakdownModel(Unit unit, QStringList row_labels, QObject* parent)
    : QAbstractTableModel(parent), unit_(unit), rows_(std::move(row_labels)) {}

void BreakdownModel::set_columns(QStringList column_labels, std::vector<std::vector<double>> raw) {
  Q_ASSERT(column_labels.size() == static_cast<qsizetype>(raw.size()));
  beginResetModel();
  columns_ = std::move(column_labels);
  raw_ = std::move(raw);
  for (auto& col : raw_) col.resize(static_cast<std::size_t>(rows_.size()), 0.0);
  plot_unit_ = 1;
  if (unit_ == Unit::gib) {
    double largest = 0;
    for (int col = 0; col < static_cast<int>(raw_.size()); ++col) largest = std::max(largest, total(col));
    plot_unit_ = byte_unit_for(raw_.empty() ? kBytesPerGiB : largest).bytes;
  }
  endResetModel();
}

double BreakdownModel::total(int column) const {
  if (column < 0 || column >= static_cast<int>(raw_.size())) return 0;
  const auto& col = raw_[static_cast<std::size_t>(column)];
  return std::accumulate(col.begin(), col.end(), 0.0);
}

double BreakdownModel::plotted(int row, int column) const {
  const double raw = raw_[static_cast<std::size_t>(column)][static_cast<std::size_t>(row)];
  return unit_ == Unit::gib ? raw / plot_unit_ : raw;
}

QString BreakdownModel::plot_unit_name() const {
  if (unit_ != Unit::gib) return QStringLiteral("s");
  return QString::fromLatin1(byte_unit_for(plot_unit_).name);
}

int BreakdownModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int BreakdownModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(columns_.size());
}

QVariant BreakdownModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
  const double raw = raw_[static_cast<std::size_t>(index.column())][static_cast<std::size_t>(index.row())];
  switch (role) {
    case Qt::DisplayRole: return plotted(index.row(), index.column());
    case RawRole: return raw;
    case FormattedRole: return unit_ == Unit::gib ? format_bytes(raw) : format_duration(raw);
    case ShareRole: {
      const double t = total(index.column());
      return t > 0 ? raw / t : 0.0;
    }
    case Qt::ToolTipRole: {
      const double t = total(index.column());
      return QStringLiteral("%1: %2 (%3)")
          .arg(rows_[index.row()], unit_ == Unit::gib ? format_bytes(raw) : format_duration(raw),
               format_percent(t > 0 ? raw / t : 0.0));
    }
    case Qt::TextAlignmentRole: return static_cast<int>(Qt::AlignRight | Qt::AlignVCenter);
    default: return {};
  }
}

QVariant BreakdownModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole) return {};
  if (orientation == Qt::Vertical) return section >= 0 && section < rows_.size() ? QVariant(rows_[section]) : QVariant();
  return section >= 0 && section < columns_.size() ? QVariant(columns_[section]) : QVariant();
}

}  // namespace ztune::gui
