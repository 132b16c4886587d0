#pragma once
// The ranked plans of a search as a table: one row per plan, best first. Every
// column has a display text in readable units and a numeric SortRole value, so
// a QSortFilterProxyModel sorts "9.5 GiB" below "10.1 GiB" (hotspot's models
// expose SortRole the same way).
#include <vector>

#include <QAbstractTableModel>

#include "ztune/tuner/candidate.hpp"
#include "ztune/tuner/search_options.hpp"

namespace ztune::gui {

class PlanTableModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Column : int {
    rank,
    gpus,
    layout,
    zero,
    offload,
    batching,
    recompute,
    attention,
    schedule,
    precision,
    gpu_memory,
    throughput,
    tflops,
    mfu,
    days,
    iteration,
    column_count
  };
  enum Role : int {
    SortRole = Qt::UserRole + 1,  // numeric value of the cell
    ZeroStageRole,                // int 0..3
    OffloadRole,                  // bool: optimizer or parameters offloaded
    CandidateRole,                // int: index into candidates()
    SimulatedRole,                // bool: the time comes from the simulator
  };

  explicit PlanTableModel(QObject* parent = nullptr);

  /// Replaces the plans. `tokens` is the search's token budget (for days to train).
  void set_plans(std::vector<Candidate> plans, double tokens);
  void clear();
  [[nodiscard]] const std::vector<Candidate>& candidates() const { return plans_; }
  [[nodiscard]] const Candidate* candidate(int row) const;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  [[nodiscard]] QVariant display(const Candidate& c, int row, int column) const;
  [[nodiscard]] QVariant sort_value(const Candidate& c, int row, int column) const;
  [[nodiscard]] double days_of(const Candidate& c) const;

  std::vector<Candidate> plans_;
  double tokens_ = 0;
};

}  // namespace ztune::gui
