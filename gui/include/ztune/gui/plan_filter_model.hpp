#pragma once
// Sorting and filtering of the plans table: numeric sort through
// PlanTableModel::SortRole, and filters on the plan's attributes (only one
// ZeRO stage, only plans without offload, only a given GPU count).
#include <optional>

#include <QSortFilterProxyModel>

namespace ztune::gui {

class PlanFilterModel : public QSortFilterProxyModel {
  Q_OBJECT
 public:
  explicit PlanFilterModel(QObject* parent = nullptr);

  /// Only plans with this ZeRO stage; nullopt = any.
  void set_zero_stage(std::optional<int> stage);
  /// Hide plans that offload optimizer states or parameters.
  void set_hide_offload(bool hide);
  /// Only plans with this many GPUs; nullopt = any.
  void set_gpus(std::optional<int> gpus);

  [[nodiscard]] std::optional<int> zero_stage() const { return zero_stage_; }
  [[nodiscard]] bool hide_offload() const { return hide_offload_; }

 protected:
  bool filterAcceptsRow(int source_row, const QModelIndex& source_parent) const override;

 private:
  std::optional<int> zero_stage_;
  std::optional<int> gpus_;
  bool hide_offload_ = false;
};

}  // namespace ztune::gui
