#pragma once
#include <functional>
#include <string_view>
// The planner's window: inputs on the left, the ranked plans, the selected
// plan's memory, time and scaling charts, and tabs for its simulated timeline,
// the comparison and the run. It only wires widgets to the PlannerDocument.
#include <QMainWindow>
#include <QTemporaryDir>

#include "ztune/gui/child_process.hpp"
#include "ztune/gui/planner_document.hpp"

class QCheckBox;
class QComboBox;
class QLabel;
class QProgressBar;
class QSplitter;
class QTableView;
class QTimer;
class QTabWidget;
class QToolButton;

namespace ztune::gui {

class InputPanel;
class RunPanel;
class TimelineWidget;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  InputPanel& inputs() { return *inputs_; }
  PlannerDocument& document() { return doc_; }
  void start_search();
  /// Restores window state and the last inputs (not in screenshot mode: it must be reproducible).
  void restore_settings();
  /// --screenshot: search, select the best plan, wait for its simulation and the
  /// scaling curve, save the window to `file`, then quit with 0 (1 when nothing
  /// could be shown, 2 when the picture could not be written, 3 on timeout).
  /// Headless, it says on stderr what the picture says went wrong: a refused
  /// input, no plan that fits, a search the database did not store.
  void screenshot_when_ready(const QString& file, int timeout_ms);
  /// --screenshot-set DIR: the views one by one into DIR (screenshot_tour.cpp):
  /// search.png, compare.png, stale.png, timeline-interleaved.png, history.png
  /// and, on a CPU cluster, run.png; quits with 0 when every shot was written,
  /// 1 when the search was refused, 2 when DIR or a shot could not be written
  /// (before any training when DIR cannot be made), 3 on timeout.
  void screenshot_tour(const QString& dir, int timeout_ms);
  /// Writes `w`'s picture to `path` whole or not at all (a temporary file
  /// renamed over it: a full disk had left a truncated PNG in place of the
  /// previous one); false, with the reason on stderr, when it could not.
  static bool save_picture(QWidget* w, const QString& path);
  /// Says on stderr what the window's layout hides behind a sideways scroll
  /// (the plan table's last columns, the input panel's line ends); a headless
  /// screenshot cannot show it otherwise (screenshot_test fails on the words).
  void report_sideways_scroll() const;

 protected:
  void closeEvent(QCloseEvent* event) override;
  /// The plan table's viewport resized (the window, a splitter, the dock):
  /// its columns are sized again (they had been fitted only when a search finished).
  bool eventFilter(QObject* watched, QEvent* event) override;

 private:
  void build_actions();
  void on_search_finished();
  /// The status line of a finished search: its counts, and "storing…" while
  /// `storing`, else why it was not stored.
  [[nodiscard]] static QString search_status(const SearchOutcome& out, bool storing);
  /// The search shown is ready for a picture: searched, stored (or not), its
  /// scaling curve drawn and the selected plan simulated, or its simulation
  /// failed (`simulation_failed`).
  [[nodiscard]] bool results_settled(bool simulation_failed) const;
  /// Calls `f` on every signal after which results_settled may have turned true.
  void on_results_change(const std::function<void()>& f);
  void on_selection_changed();
  /// Sizes the plan table's columns to their contents, caps the free-text
  /// ones, then fit_plan_columns.
  void size_plan_columns();
  /// Narrows the plan table's free-text columns (elided) until the last one
  /// fits; where that is not enough, hides the columns least needed (named in
  /// the header's tooltip).
  void fit_plan_columns();
  /// Writes an export to `path` whole, or warns with the reason (false).
  bool write_or_warn(const QString& path, std::string_view text);
  void export_plan_json();
  void export_with_ztune(const QString& format);
  void compare_selected();
  void show_history();
  void update_plan_count();

  PlannerDocument doc_;
  InputPanel* inputs_ = nullptr;
  QTableView* table_ = nullptr;
  QTimer* resize_columns_ = nullptr;  // size_plan_columns once a resize settles
  QLabel* hidden_columns_ = nullptr;  // names the plan table's columns hidden to fit the window
  QComboBox* zero_filter_ = nullptr;
  QCheckBox* no_offload_ = nullptr;
  QLabel* plan_count_ = nullptr;
  QLabel* stale_ = nullptr;  // shown while the results are not for the inputs as they are now
  QSplitter* vertical_ = nullptr;
  QSplitter* charts_ = nullptr;
  QTabWidget* tabs_ = nullptr;
  TimelineWidget* timeline_ = nullptr;
  RunPanel* run_ = nullptr;
  QProgressBar* progress_ = nullptr;
  QToolButton* cancel_ = nullptr;
  QLabel* status_ = nullptr;
  ChildProcess exporter_;
  QTemporaryDir scratch_;  // the plan file `ztune export` reads: this planner's own (run_panel.hpp)
  bool restoring_selection_ = false;
  bool save_settings_ = false;
};

}  // namespace ztune::gui
