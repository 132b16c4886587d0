#pragma once
// A breakdown of one or more plans into fixed named lines: one row per line
// (memory category or time part), one column per plan. Qt::DisplayRole is the
// number the charts plot (GiB or seconds) so a QHBarModelMapper can feed a
// stacked bar series straight from this model; FormattedRole is the same cell
// in readable units for tables; ShareRole its fraction of the column's total.
#include <vector>

#include <QAbstractTableModel>
#include <QStringList>

namespace ztune::gui {

class BreakdownModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum class Unit { gib, seconds };
  enum Role : int {
    FormattedRole = Qt::UserRole + 1,  // "12.3 GiB", "45.6 ms"
    ShareRole,                         // double: value / column total
    RawRole,                           // double: bytes or seconds
  };

  BreakdownModel(Unit unit, QStringList row_labels, QObject* parent = nullptr);

  /// One column per plan: `raw[c][r]` is line r of plan c, in bytes or seconds.
  void set_columns(QStringList column_labels, std::vector<std::vector<double>> raw);
  void clear() { set_columns({}, {}); }

  /// Sum of column c, in bytes or seconds.
  [[nodiscard]] double total(int column) const;
  /// The value of cell (row, column) in the plotted unit (seconds; for bytes
  /// GiB, or MiB/KiB when the largest column is under one GiB/MiB, so a tiny
  /// model's bars are not drawn at zero on a GiB axis).
  [[nodiscard]] double plotted(int row, int column) const;
  /// Bytes per plotted unit (1 for seconds) and its name ("GiB", "MiB", "KiB", "s").
  [[nodiscard]] double plot_unit_bytes() const { return plot_unit_; }
  [[nodiscard]] QString plot_unit_name() const;
  [[nodiscard]] Unit unit() const { return unit_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  Unit unit_;
  QStringList rows_;
  QStringList columns_;
  std::vector<std::vector<double>> raw_;  // [column][row]
  double plot_unit_ = 1;                  // set_columns: from the largest column
};

}  // namespace ztune::gui
