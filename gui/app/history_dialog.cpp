#include "history_dialog.hpp"

#include <exception>
#include <utility>

#include <QDialogButtonBox>
#include <QFontDatabase>
#include <QHeaderView>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSortFilterProxyModel>
#include <QSplitter>
#include <QTabWidget>
#include <QTableView>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>

#include "ztune/gui/planner_document.hpp"
#include "ztune/gui/history_store.hpp"

namespace ztune::gui {
namespace {

QTableView* table_for(QAbstractItemModel* model, int sort_role, QObject* owner) {
  auto* proxy = new QSortFilterProxyModel(owner);
  proxy->setSourceModel(model);
  proxy->setSortRole(sort_role);
  auto* view = new QTableView;
  view->setModel(proxy);
  view->setSortingEnabled(true);
  view->sortByColumn(0, Qt::DescendingOrder);
  view->setSelectionBehavior(QAbstractItemView::SelectRows);
  view->setSelectionMode(QAbstractItemView::SingleSelection);
  view->setAlternatingRowColors(true);
  view->verticalHeader()->hide();
  // Sized to what the columns hold when the rows arrive (fit_columns); the
  // user may narrow or widen each. The last takes what is left.
  view->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  view->horizontalHeader()->setStretchLastSection(true);
  return view;
}

/// Every column as wide as what it holds (the timestamps and plans were cut
/// at the default width, issue 23), but none wider than kWidest: a cluster or
/// model file with a long name had pushed every other column off the dialog
/// (audit50gui L1); its cells elide, and the column can be widened by hand.
void fit_columns(QTableView* view) {
  constexpr int kWidest = 260;
  view->resizeColumnsToContents();
  for (int column = 0; column + 1 < view->model()->columnCount(); ++column)
    if (view->columnWidth(column) > kWidest) view->setColumnWidth(column, kWidest);
}

}  // namespace

HistoryDialog::HistoryDialog(PlannerDocument* doc, QWidget* parent) : QDialog(parent), doc_(doc) {
  setWindowTitle(QStringLiteral("History"));
  resize(1100, 520);
  auto* v = new QVBoxLayout(this);
  auto* tabs = new QTabWidget;
  search_view_ = table_for(&searches_, SearchHistoryModel::SortRole, this);
  tabs->addTab(search_view_, QStringLiteral("Searches"));
  auto* runs = new QSplitter(Qt::Vertical);
  run_view_ = table_for(&runs_, RunHistoryModel::SortRole, this);
  runs->addWidget(run_view_);
  run_detail_ = new QPlainTextEdit;
  run_detail_->setReadOnly(true);
  run_detail_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  runs->addWidget(run_detail_);
  tabs->addTab(runs, QStringLiteral("Runs"));
  auto* profiles = table_for(&profiles_, ProfileHistoryModel::SortRole, this);
  profiles->sortByColumn(ProfileHistoryModel::cluster, Qt::AscendingOrder);
  tabs->addTab(profiles, QStringLiteral("Profiles"));
  v->addWidget(tabs, 1);
  status_ = new QLabel;
  status_->setWordWrap(true);
  v->addWidget(status_);
  auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close);
  auto* open = buttons->addButton(QStringLiteral("Open search"), QDialogButtonBox::AcceptRole);
  auto* refresh = buttons->addButton(QStringLiteral("Refresh"), QDialogButtonBox::ResetRole);
  v->addWidget(buttons);
  connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
  connect(open, &QPushButton::clicked, this, &HistoryDialog::open_selected_search);
  connect(refresh, &QPushButton::clicked, this, &HistoryDialog::reload);
  connect(search_view_, &QTableView::doubleClicked, this, &HistoryDialog::open_selected_search);
  connect(run_view_->selectionModel(), &QItemSelectionModel::currentRowChanged, this, &HistoryDialog::show_selected_run);
  reload();
}

void HistoryDialog::reload() {
  if (doc_->database().isEmpty()) {
    status_->setText(QStringLiteral("No results database (set XDG_DATA_HOME or HOME)."));
    return;
  }
  try {
    HistorySnapshot h = load_history(doc_->database(), 500);
    searches_.set_searches(std::move(h.searches));
    runs_.set_runs(std::move(h.runs));
    const std::vector<std::string> notes = std::move(h.notes);
    profiles_.set_histories(std::move(h.profiles));
    QString text = QStringLiteral("%1 — %2 searches, %3 runs, %4 profile rows")
                       .arg(doc_->database())
                       .arg(searches_.rowCount())
                       .arg(runs_.rowCount())
                       .arg(profiles_.rowCount());
    for (const auto& n : notes) text += QStringLiteral("\n") + QString::fromStdString(n);
    status_->setText(text);
    for (QTableView* view : findChildren<QTableView*>()) fit_columns(view);
  } catch (const std::exception& e) {
    status_->setText(QString::fromStdString(e.what()));
  }
}

void HistoryDialog::open_selected_search() {
  const QModelIndex idx = search_view_->currentIndex();
  if (!idx.isValid()) return;
  const auto id = idx.data(SearchHistoryModel::IdRole).toLongLong();
  try {
    auto outcome = reopen_search(doc_->database(), id);
    if (!outcome) {
      status_->setText(QStringLiteral("search %1 is no longer in the database").arg(id));
      return;
    }
    doc_->set_outcome(std::move(*outcome));
    accept();
  } catch (const std::exception& e) {
    status_->setText(QString::fromStdString(e.what()));
  }
}

void HistoryDialog::show_selected_run() {
  const QModelIndex idx = run_view_->currentIndex();
  if (!idx.isValid()) return;
  try {
    const auto run = stored_run(doc_->database(), idx.data(RunHistoryModel::IdRole).toLongLong());
    run_detail_->setPlainText(run ? QString::fromStdString(run->dump(2)) : QStringLiteral("(gone)"));
  } catch (const std::exception& e) {
    run_detail_->setPlainText(QString::fromStdString(e.what()));
  }
}

}  // namespace ztune::gui
