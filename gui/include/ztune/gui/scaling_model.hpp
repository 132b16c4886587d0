#pragma once
// The scaling curve: the best plan's throughput and MFU at each GPU count. Columns
// 0-3 hold numbers in Qt::DisplayRole (for QVXYModelMapper); FormattedRole has
// readable text. Infeasible counts stay as rows (feasible = false, zeros), so
// the table shows them; the chart skips them.
#include <vector>

#include <QAbstractTableModel>

#include "ztune/gui/search_outcome.hpp"

namespace ztune::gui {

class ScalingModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column : int { gpus, tokens_per_s, mfu_percent, tflops_per_gpu, plan, column_count };
  enum Role : int { FormattedRole = Qt::UserRole + 1, FeasibleRole };

  explicit ScalingModel(QObject* parent = nullptr);

  void clear();
  /// Adds or replaces the point for its GPU count; rows stay sorted by GPU count.
  void add_point(const ScalingPoint& p);
  [[nodiscard]] const std::vector<ScalingPoint>& points() const { return points_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<ScalingPoint> points_;
};

}  // namespace ztune::gui
