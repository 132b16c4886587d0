#pragma once
// Searches, runs and calibrated profiles (with their error on later runs) from
// the results database; a search reopens in the window.
#include <QDialog>

#include "ztune/gui/profile_history_model.hpp"
#include "ztune/gui/run_history_model.hpp"
#include "ztune/gui/search_history_model.hpp"

class QLabel;
class QPlainTextEdit;
class QTableView;

namespace ztune::gui {

class PlannerDocument;

class HistoryDialog : public QDialog {
  Q_OBJECT
 public:
  HistoryDialog(PlannerDocument* doc, QWidget* parent = nullptr);
  void reload();

 private:
  void open_selected_search();
  void show_selected_run();

  PlannerDocument* doc_;
  SearchHistoryModel searches_;
  RunHistoryModel runs_;
  ProfileHistoryModel profiles_;
  QTableView* search_view_ = nullptr;
  QTableView* run_view_ = nullptr;
  QPlainTextEdit* run_detail_ = nullptr;
  QLabel* status_ = nullptr;
};

}  // namespace ztune::gui
