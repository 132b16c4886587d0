#pragma once
// The state behind one planner window, apart from its widgets (hotspot keeps its
// parser and models outside the pages the same way): the last search and its
// models, the selected plan and the models its charts show, the plans being
// compared, the scaling curve and the selected plan's simulated timeline.
// Work runs on worker threads (WorkerRunner); results come back as signals.
// The widgets only forward user actions here and redraw on these signals.
#include <optional>

#include <QObject>

#include "ztune/gui/compare_model.hpp"
#include "ztune/gui/memory_breakdown_model.hpp"
#include "ztune/gui/plan_table_model.hpp"
#include "ztune/gui/scaling_model.hpp"
#include "ztune/gui/search_outcome.hpp"
#include "ztune/gui/time_breakdown_model.hpp"
#include "ztune/gui/worker_runner.hpp"

namespace ztune::gui {

class PlannerDocument : public QObject {
  Q_OBJECT
 public:
  explicit PlannerDocument(QObject* parent = nullptr);
  ~PlannerDocument() override;

  // The models the views show.
  /// Every plan that fits, sorted and filtered as the table shows it; the rows
  /// below are its rows.
  PlanTableModel& plans() { return plans_; }
  MemoryBreakdownModel& memory() { return memory_; }  // the selected plan (one column)
  TimeBreakdownModel& time() { return time_; }        // the selected plan: analytical, then simulated
  ScalingModel& scaling() { return scaling_; }
  CompareModel& compare() { return compare_; }
  MemoryBreakdownModel& compare_memory() { return compare_memory_; }
  TimeBreakdownModel& compare_time() { return compare_time_; }

  /// Where searches are stored ("" = nowhere). Default: the results database's default path, when it resolves.
  void set_database(const QString& path);
  [[nodiscard]] const QString& database() const { return db_path_; }
  /// Whether selecting a plan simulates it, and a finished search computes the scaling curve (both on by default).
  void set_auto_simulate(bool on) { auto_simulate_ = on; }
  void set_auto_scaling(bool on) { auto_scaling_ = on; }

  void start_search(const SearchInputs& inputs);
  void cancel_search();
  [[nodiscard]] bool searching() const { return search_runner_.busy(); }
  /// Shows a search reopened from history, selects its best plan and emits
  /// searchFinished (the worker's searches come through on_search_finished).
  void set_outcome(SearchOutcome outcome);
  [[nodiscard]] const std::optional<SearchOutcome>& outcome() const { return outcome_; }

  /// The inputs as the user has them now: the results shown go stale when they
  /// differ from the inputs those results were searched with (issue 23: an
  /// input changed and the old numbers stayed, unmarked). A search reopened
  /// from history is stale at the first edit. Emits staleChanged on a change.
  void note_inputs(const SearchInputs& now);
  /// Whether the results shown are not for the inputs as they are now.
  [[nodiscard]] bool stale() const { return stale_; }

  /// Selects row `row` of plans(); false (and no change) when out of range.
  bool select(int row);
  [[nodiscard]] const Candidate* selected() const;
  /// The selected plan's row in plans() (fetched or not yet), -1 when none or filtered out.
  [[nodiscard]] int selected_row() const;

  /// Compares the plans at these rows of plans() (two or more, else the comparison is cleared).
  void set_compared(const QList<int>& rows);

  /// Starts the scaling curve for the current search's inputs (cancels a running one).
  void start_scaling();
  void cancel_scaling();
  [[nodiscard]] bool scaling_running() const { return scaling_runner_.busy(); }
  /// The selected plan's simulated iteration, when it is done.
  [[nodiscard]] const std::optional<SimulationOutcome>& simulation() const { return simulation_; }

 signals:
  void searchRunning(bool running);
  void searchProgress(qint64 done, qint64 total, int phase);
  void searchExplaining(const QString& what);
  void searchFinished();  // outcome() is set, the best plan selected
  void searchFailed(const QList<ztune::gui::InputIssue>& issues);
  void searchStored();  // outcome()'s db_id and db_note are final (it is no longer `storing`)
  void selectionChanged();  // memory() and time() show the new selection
  void simulationStarted();
  void simulationFinished();  // simulation() is the selected plan's; time() got a "simulated" column
  void simulationFailed(const QString& message);
  void scalingRunning(bool running);
  void compareChanged();
  void staleChanged(bool stale);  // see note_inputs()

 private:
  void on_search_finished(const SearchOutcome& outcome);
  /// Shows an outcome and selects its best plan (set_outcome and a search's end).
  void show_outcome(SearchOutcome outcome);
  void on_simulated(const SimulationOutcome& outcome);
  void show_selected_time();

  PlanTableModel plans_;
  MemoryBreakdownModel memory_;
  TimeBreakdownModel time_;
  ScalingModel scaling_;
  CompareModel compare_;
  MemoryBreakdownModel compare_memory_;
  TimeBreakdownModel compare_time_;

  std::optional<SearchOutcome> outcome_;
  std::optional<SearchInputs> searched_;  // the inputs of the results shown (none: reopened from history)
  bool stale_ = false;
  std::optional<int> selected_;  // index into plans_.candidates()
  std::optional<SimulationOutcome> simulation_;
  quint64 simulation_tag_ = 0;
  quint64 scaling_tag_ = 0;
  QString db_path_;
  bool auto_simulate_ = true;
  bool auto_scaling_ = true;

  // Declared last: destroyed first, so no worker outlives the models it reports to.
  WorkerRunner search_runner_;
  WorkerRunner scaling_runner_;
  WorkerRunner simulation_runner_;
};

}  // namespace ztune::gui
