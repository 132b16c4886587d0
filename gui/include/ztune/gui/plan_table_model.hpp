#pragma once
// Every plan of a search that fits, as a table (issue 23: the planner showed
// "50 of 50" out of the 1,055 that fit, and sorting by memory sorted only
// those 50). The model owns all of them; its order and filters apply to every
// plan, and a view fetches the rows lazily, kFetchRows at a time
// (canFetchMore/fetchMore), so a search with 100,000 plans shows its first
// screen as fast as one with 50. Sorting and filtering are the model's own
// (a QSortFilterProxyModel over a lazily fetched model would sort only the
// rows fetched so far). Every column has a display text in readable units and
// a numeric SortRole value: "9.5 GiB" sorts below "10.1 GiB" (hotspot's models
// expose SortRole the same way).
#include <functional>
#include <optional>
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

  /// Rows a view fetches at a time.
  static constexpr int kFetchRows = 200;

  explicit PlanTableModel(QObject* parent = nullptr);

  /// Replaces the plans (in the search's rank order), keeping the sort column
  /// and the filters. `tokens` is the search's token budget (for days to train).
  /// Under the cost objective the days column shows each plan's cost instead
  /// (GPU-hours, or at `gpu_hour_price` a GPU-hour), what the plans rank by.
  /// `layers`: the model's, for the layout column's uneven stages (layout_label).
  void set_plans(std::vector<Candidate> plans, double tokens, Objective objective = Objective::throughput,
                 double gpu_hour_price = 0, int layers = 0);
  void clear();
  /// Every plan, in rank order (the "#" column is the position here + 1).
  [[nodiscard]] const std::vector<Candidate>& candidates() const { return plans_; }
  /// The plan a row of the table shows (nullptr out of range).
  [[nodiscard]] const Candidate* candidate(int row) const;
  /// The index into candidates() of a row's plan; -1 out of range.
  [[nodiscard]] int plan_index(int row) const;
  /// The row a plan is shown at once fetched (it may be beyond rowCount()); -1
  /// when the filters hide it.
  [[nodiscard]] int row_of(int plan_index) const;
  /// Fetches rows until `row` is one (no-op when it is, or beyond matching()).
  void fetch_to(int row);

  /// Plans that pass the filters, fetched or not; total() all of them.
  [[nodiscard]] int matching() const { return static_cast<int>(order_.size()); }
  [[nodiscard]] int total() const { return static_cast<int>(plans_.size()); }

  // Filters over every plan: only one ZeRO stage (nullopt: any), no offload,
  // only one GPU count (nullopt: any). Each resets the rows to the first fetch.
  void set_zero_stage(std::optional<int> stage);
  void set_hide_offload(bool hide);
  void set_gpus(std::optional<int> devices);
  [[nodiscard]] std::optional<int> zero_stage() const { return zero_stage_; }
  [[nodiscard]] bool hide_offload() const { return hide_offload_; }

  /// Orders every plan that passes the filters by `column`'s SortRole value
  /// (ties in rank order) and resets the rows to the first fetch.
  void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  bool canFetchMore(const QModelIndex& parent) const override;
  void fetchMore(const QModelIndex& parent) override;
  QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

 private:
  [[nodiscard]] QVariant display(const Candidate& c, int rank_index, int column) const;
  [[nodiscard]] QVariant sort_value(const Candidate& c, int rank_index, int column) const;
  [[nodiscard]] double days_of(const Candidate& c) const;
  [[nodiscard]] bool passes(const Candidate& c) const;
  /// Rebuilds order_ from the filters and the sort, inside a model reset.
  void rebuild();
  /// Applies `change` (a filter or the sort) and places every plan again, in one model reset.
  void replace_order(const std::function<void()>& change);

  std::vector<Candidate> plans_;
  std::vector<int> order_;  // indices into plans_ that pass the filters, in the table's order
  int fetched_ = 0;         // rows of order_ the views have (rowCount)
  double tokens_ = 0;
  int layers_ = 0;  // the model's (layout_label)
  Objective objective_ = Objective::throughput;
  double gpu_hour_price_ = 0;
  int sort_column_ = rank;
  Qt::SortOrder sort_order_ = Qt::AscendingOrder;
  std::optional<int> zero_stage_;
  std::optional<int> gpus_;
  bool hide_offload_ = false;
};

}  // namespace ztune::gui
