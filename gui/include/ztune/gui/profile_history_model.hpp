#pragma once
// The loop shown in the planner (issue 21): per cluster, the shipped profile
// and each calibrated one stored since, with its error on the runs measured
// after it (calibration/history.hpp computes the rows; this only shows them).
#include <string>
#include <vector>

#include <QAbstractTableModel>

#include "ztune/calibration/history.hpp"
#include "ztune/tuner/results_db.hpp"

namespace ztune::gui {

using calibration::ClusterProfileHistory;

/// Every cluster's history from the database (clusters the catalog does not
/// know are named in `notes` and left out).
std::vector<ClusterProfileHistory> load_profile_histories(const ResultsDb& db, std::vector<std::string>& notes);

class ProfileHistoryModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column : int { cluster, order, stored, profile, runs_since, mean_error, next_error, column_count };
  enum Role : int { SortRole = Qt::UserRole + 1 };

  explicit ProfileHistoryModel(QObject* parent = nullptr);
  void set_histories(const std::vector<ClusterProfileHistory>& histories);

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  struct Row {
    std::string cluster;
    int order = 0;  // its place in the cluster's history (the shipped profile first, when there is one)
    calibration::ProfileHistoryRow row;
  };
  std::vector<Row> rows_;
};

}  // namespace ztune::gui
