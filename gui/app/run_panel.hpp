#pragma once
// Run the selected plan: `ztune run plan.json --json` as a child process, its
// log streamed here, then the measured step time against the prediction.
#include <QTemporaryDir>
#include <QWidget>

#include "ztune/gui/child_process.hpp"

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace ztune::gui {

class PlannerDocument;

class RunPanel : public QWidget {
  Q_OBJECT
 public:
  explicit RunPanel(PlannerDocument* doc, QWidget* parent = nullptr);
  void run_selected();
  void stop();

 signals:
  void message(const QString& text);

 private:
  PlannerDocument* doc_;
  ChildProcess child_;
  QSpinBox* steps_ = nullptr;
  QPushButton* run_ = nullptr;
  QPushButton* stop_ = nullptr;
  QLabel* result_ = nullptr;
  QPlainTextEdit* log_ = nullptr;
  double predicted_step_s_ = 0;
  // This planner's own directory for the plan and record it hands `ztune
  // run` (mode 0700, removed with the window): a fixed name in the shared
  // temporary directory let two planners train each other's plans and a
  // planted link redirect the write.
  QTemporaryDir scratch_;
  static constexpr int kLogLineChars = 4096;
  int log_line_chars_ = 0;  // characters of the log's last line so far
  QString plan_path_;
  QString record_path_;  // the run record ztune run writes (--record), read back strictly
};

}  // namespace ztune::gui
