#pragma once
// Two or more plans side by side: one column per plan, one row per attribute
// (layout, memory, throughput, ...). For numeric rows the best plan's cell is
// marked (BestRole), so the view can bold it.
#include <vector>

#include <QAbstractTableModel>

#include "ztune/tuner/candidate.hpp"

namespace ztune::gui {

class CompareModel : public QAbstractTableModel {
  Q_OBJECT
 public:
  enum Row : int {
    layout,
    gpus,
    zero,
    offload,
    batching,
    recompute,
    attention,
    schedule,
    precision,
    gpu_memory,
    host_memory,
    nvme,
    throughput,
    tflops,
    mfu,
    hfu,
    iteration,
    days,
    row_count
  };
  enum Role : int { BestRole = Qt::UserRole + 1, SortRole };

  explicit CompareModel(QObject* parent = nullptr);

  /// `labels` name the columns ("#1", "#4", ...); `tokens` is the token budget for days.
  /// `layers`: the model's, for uneven stages (layout_label).
  void set_plans(const QStringList& labels, std::vector<Candidate> plans, double tokens, int layers = 0);
  [[nodiscard]] const std::vector<Candidate>& plans() const { return plans_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  [[nodiscard]] QVariant value(int row, const Candidate& c) const;
  [[nodiscard]] QVariant text(int row, const Candidate& c) const;
  [[nodiscard]] bool is_best(int row, int column) const;

  QStringList labels_;
  std::vector<Candidate> plans_;
  double tokens_ = 0;
  int layers_ = 0;
};

}  // namespace ztune::gui
