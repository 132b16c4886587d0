#pragma once
// Past searches from the results database (tuner/results_db.hpp), newest first.
#include <vector>

#include <QAbstractTableModel>

#include "ztune/tuner/results_db.hpp"

namespace ztune::gui {

class SearchHistoryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column : int { id, created, cluster, model, engine, feasible, best, throughput, elapsed, column_count };
  enum Role : int { SortRole = Qt::UserRole + 1, IdRole };

  explicit SearchHistoryModel(QObject* parent = nullptr);
  void set_searches(std::vector<SearchSummary> rows);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  std::vector<SearchSummary> rows_;
};

}  // namespace ztune::gui
