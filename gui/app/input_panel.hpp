#pragma once
// The input form: cluster and model (catalog or file), profile and search
// constraints. Each field shows the library's message for it inline when it is
// wrong (resolve_inputs, the same text the command line prints). No logic:
// reading and writing SearchInputs, and showing issues.
#include <map>

#include <QLabel>
#include <QTimer>
#include <QWidget>

#include "ztune/gui/search_inputs.hpp"

class QComboBox;
class QDoubleSpinBox;
class QFormLayout;
class QLineEdit;
class QPushButton;
class QSpinBox;

namespace ztune::gui {

class InputPanel : public QWidget {
  Q_OBJECT
 public:
  explicit InputPanel(QWidget* parent = nullptr);

  [[nodiscard]] SearchInputs inputs() const;
  void set_inputs(const SearchInputs& in);
  /// Marks each issue on its field (issues on no field go under the Search button).
  void show_issues(const QList<InputIssue>& issues);
  void clear_issues();
  /// A one-line description of the loaded cluster and model (or "").
  void set_summary(const QString& text);
  /// What the last search did (rich text), under the summary.
  void set_search_report(const QString& html);
  QPushButton* search_button() const { return search_; }

 signals:
  void searchRequested();
  void inputsEdited();  // any input changed (immediately, before the debounced validation)

 private:
  void add_row(QFormLayout* form, const QString& label, QWidget* field, InputField which);
  void validate_now();

  QComboBox* cluster_ = nullptr;
  QComboBox* model_ = nullptr;
  QLineEdit* profile_ = nullptr;
  QSpinBox* gpus_ = nullptr;
  QDoubleSpinBox* global_batch_ = nullptr;  // whole sequences up to 2^40, beyond an int spin box
  QSpinBox* seq_ = nullptr;
  QDoubleSpinBox* tokens_ = nullptr;
  QComboBox* engine_ = nullptr;
  QComboBox* attention_ = nullptr;
  QComboBox* precision_ = nullptr;
  QComboBox* optimizer_ = nullptr;  // kOptimizerChoices: label shown, key as item data
  QComboBox* fp8_ = nullptr;        // none | delayed | tensorwise (kFp8RecipeNames)
  QDoubleSpinBox* headroom_ = nullptr;
  QSpinBox* cp_ = nullptr;
  QSpinBox* max_cp_ = nullptr;
  QSpinBox* ulysses_ = nullptr;
  QSpinBox* max_ulysses_ = nullptr;
  QSpinBox* dp_shard_ = nullptr;  // hybrid sharding's group size
  QComboBox* objective_ = nullptr;
  QDoubleSpinBox* price_ = nullptr;  // GPU-hour price for the cost objective (0: GPU-hours)
  QPushButton* search_ = nullptr;
  QLabel* summary_ = nullptr;
  QLabel* report_ = nullptr;
  std::map<InputField, QLabel*> errors_;
  std::map<InputField, QWidget*> fields_;
  QTimer validate_timer_;
};

}  // namespace ztune::gui
