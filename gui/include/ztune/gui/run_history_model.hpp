#pragma once
// Past runs from the results database: predicted against measured iteration time.
#include <vector>

#include <QAbstractTableModel>

#include "ztune/tuner/results_db.hpp"

namespace ztune::gui {

class RunHistoryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column : int { id, created, cluster, model, plan, status, predicted, measured, error, column_count };
  enum Role : int { SortRole = Qt::UserRole + 1, IdRole };

  explicit RunHistoryModel(QObject* parent = nullptr);
  void set_runs(std::vector<RunSummary> rows);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<RunSummary> rows_;
};

}  // namespace ztune::gui
