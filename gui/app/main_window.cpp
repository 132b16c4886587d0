#include "main_window.hpp"

#include <cstdio>

#include <QAction>
#include <QApplication>
#include <QCheckBox>
#include <QCloseEvent>
#include <QComboBox>
#include <QDockWidget>
#include <QFile>
#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QResizeEvent>
#include <QScrollArea>
#include <QScrollBar>
#include <QSettings>
#include <QSplitter>
#include <QStatusBar>
#include <QStringList>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <QToolBar>
#include <QToolButton>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>

#include "compare_panel.hpp"
#include "history_dialog.hpp"
#include "input_panel.hpp"
#include "memory_chart.hpp"
#include "run_panel.hpp"
#include "scaling_chart.hpp"
#include "time_chart.hpp"
#include "timeline_widget.hpp"
#include "ztune/gui/labels.hpp"
#include "ztune/gui/units.hpp"
#include "ztune/vocab/durable_file.hpp"
#include "ztune/vocab/text.hpp"
#include "ztune/tuner/explain.hpp"

namespace ztune::gui {
namespace {

// The selected plan as a plan file, with the engine it was searched for
// (predict --plan prices it as that engine runs it).
PlanFile plan_file_of(const Candidate& c, const ResolvedInputs& in) {
  return PlanFile{c.plan, in.model, in.cluster, to_string(in.options.space.engine), false};
}

QSettings settings() { return QSettings(QStringLiteral("ztune"), QStringLiteral("ztune-planner")); }

const QString kStaleText = QStringLiteral(
    "These results are for the inputs of the last search, not the ones as they are now: press Search "
    "(Ctrl+R) to rank plans for them.");

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  setWindowTitle(QStringLiteral("ztune planner"));
  setObjectName(QStringLiteral("ztune-planner"));

  // Inputs, docked left.
  inputs_ = new InputPanel;
  auto* dock = new QDockWidget(QStringLiteral("Inputs"));
  dock->setObjectName(QStringLiteral("inputs"));
  dock->setFeatures(QDockWidget::DockWidgetMovable | QDockWidget::DockWidgetFloatable);
  auto* scroll = new QScrollArea;
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  scroll->setWidget(inputs_);
  scroll->setMinimumWidth(270);
  dock->setWidget(scroll);
  addDockWidget(Qt::LeftDockWidgetArea, dock);
  connect(inputs_, &InputPanel::searchRequested, this, &MainWindow::start_search);
  connect(inputs_, &InputPanel::inputsEdited, this, [this] { doc_.note_inputs(inputs_->inputs()); });

  // Plans: filters above the table.
  auto* plans = new QWidget;
  auto* pv = new QVBoxLayout(plans);
  pv->setContentsMargins(0, 0, 0, 0);
  auto* filters = new QHBoxLayout;
  filters->addWidget(new QLabel(QStringLiteral("Ranked plans")));
  filters->addSpacing(16);
  zero_filter_ = new QComboBox;
  zero_filter_->addItems({QStringLiteral("any ZeRO stage"), QStringLiteral("ZeRO-0 only"), QStringLiteral("ZeRO-1 only"),
                          QStringLiteral("ZeRO-2 only"), QStringLiteral("ZeRO-3 only")});
  filters->addWidget(zero_filter_);
  no_offload_ = new QCheckBox(QStringLiteral("without offload"));
  filters->addWidget(no_offload_);
  filters->addStretch(1);
  plan_count_ = new QLabel;
  filters->addWidget(plan_count_);
  pv->addLayout(filters);
  // Results that no longer answer the inputs say so (issue 23: they stayed, unmarked).
  stale_ = new QLabel(kStaleText);
  stale_->setWordWrap(true);
  stale_->setStyleSheet(QStringLiteral("background: #fff3cd; color: #664d03; padding: 4px;"));
  stale_->setVisible(false);
  pv->addWidget(stale_);
  // The columns hidden to fit a narrow window, named (fit_plan_columns). Its
  // own line, wrapped: beside the plan count its width had resized the table,
  // which refitted the columns, which changed the text, for ever.
  hidden_columns_ = new QLabel;
  hidden_columns_->setWordWrap(true);
  hidden_columns_->setVisible(false);
  pv->addWidget(hidden_columns_);
  table_ = new QTableView;
  table_->setModel(&doc_.plans());
  resize_columns_ = new QTimer(this);
  resize_columns_->setSingleShot(true);
  resize_columns_->setInterval(100);
  connect(resize_columns_, &QTimer::timeout, this, &MainWindow::size_plan_columns);
  table_->installEventFilter(this);
  table_->setSortingEnabled(true);
  table_->sortByColumn(PlanTableModel::rank, Qt::AscendingOrder);
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setSelectionMode(QAbstractItemView::ExtendedSelection);
  table_->setAlternatingRowColors(true);
  table_->verticalHeader()->hide();
  table_->verticalHeader()->setDefaultSectionSize(22);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
  table_->setWordWrap(false);
  pv->addWidget(table_, 1);
  connect(zero_filter_, &QComboBox::currentIndexChanged, this, [this](int i) {
    doc_.plans().set_zero_stage(i == 0 ? std::nullopt : std::optional<int>(i - 1));
    update_plan_count();
  });
  connect(no_offload_, &QCheckBox::toggled, this, [this](bool on) {
    doc_.plans().set_hide_offload(on);
    update_plan_count();
  });
  connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
          [this](const QModelIndex& current) {
            if (!restoring_selection_ && current.isValid() && current.row() != doc_.selected_row())
              doc_.select(current.row());
          });

  // The selected plan's charts.
  charts_ = new QSplitter(Qt::Horizontal);
  // The breakdowns' legends beside them where each name fits whole, else
  // wrapped under them (a 1280 px window gives each about 270 px).
  charts_->addWidget(chart_with_legend(new MemoryChart(&doc_.memory(), QStringLiteral("GPU memory of the selected plan")),
                                       LegendPlace::beside_if_room, QStringLiteral("chartLegend")));
  charts_->addWidget(chart_with_legend(new TimeChart(&doc_.time(), QStringLiteral("Iteration time")),
                                       LegendPlace::beside_if_room, QStringLiteral("chartLegend")));
  charts_->addWidget(new ScalingChart(&doc_.scaling()));
  charts_->setStretchFactor(0, 4);
  charts_->setStretchFactor(1, 5);
  charts_->setStretchFactor(2, 4);
  charts_->setSizes({400, 500, 380});

  // Tabs: timeline, compare, run.
  tabs_ = new QTabWidget;
  timeline_ = new TimelineWidget;
  tabs_->addTab(timeline_, QStringLiteral("Timeline"));
  tabs_->addTab(new ComparePanel(&doc_), QStringLiteral("Compare"));
  run_ = new RunPanel(&doc_);
  tabs_->addTab(run_, QStringLiteral("Run"));
  connect(run_, &RunPanel::message, this, [this](const QString& m) { status_->setText(m); });

  vertical_ = new QSplitter(Qt::Vertical);
  vertical_->addWidget(plans);
  vertical_->addWidget(charts_);
  vertical_->addWidget(tabs_);
  vertical_->setStretchFactor(0, 3);
  vertical_->setStretchFactor(1, 4);
  vertical_->setStretchFactor(2, 2);
  vertical_->setSizes({330, 370, 230});
  setCentralWidget(vertical_);

  // Status bar: message, progress, cancel.
  status_ = new QLabel(QStringLiteral("Ready: press Search (Ctrl+R) to search the plan space."));
  statusBar()->addWidget(status_, 1);
  progress_ = new QProgressBar;
  progress_->setMaximumWidth(260);
  progress_->setVisible(false);
  progress_->setFormat(QStringLiteral("%p% of the plan space"));
  statusBar()->addPermanentWidget(progress_);
  cancel_ = new QToolButton;
  cancel_->setText(QStringLiteral("Cancel"));
  cancel_->setToolTip(QStringLiteral("Stop the search and keep the best plans so far (Esc)"));
  cancel_->setVisible(false);
  statusBar()->addPermanentWidget(cancel_);
  connect(cancel_, &QToolButton::clicked, &doc_, &PlannerDocument::cancel_search);

  connect(&doc_, &PlannerDocument::searchRunning, this, [this](bool running) {
    progress_->setVisible(running);
    cancel_->setVisible(running);
    inputs_->search_button()->setEnabled(!running);
    if (running) {
      progress_->setRange(0, 0);
      progress_->setFormat(QStringLiteral("%p% of the plan space"));
      status_->setText(QStringLiteral("Searching…"));
    }
  });
  connect(&doc_, &PlannerDocument::searchProgress, this, [this](qint64 done, qint64 total, int phase) {
    if (total <= 0) return;
    // Each phase counts something else: say which (the simulate pass's 1 of 3
    // plans had read "33% of the plan space").
    if (phase == static_cast<int>(SearchPhase::simulate)) {
      progress_->setFormat(QStringLiteral("simulating %1 of %2 best plans").arg(done).arg(total));
    } else if (phase == static_cast<int>(SearchPhase::enumerate)) {
      progress_->setFormat(QStringLiteral("laying out the space: %p%"));
    } else {
      progress_->setFormat(QStringLiteral("%p% of the plan space"));
    }
    progress_->setRange(0, 1000);
    progress_->setValue(static_cast<int>(1000.0 * static_cast<double>(done) / static_cast<double>(total)));
  });
  connect(&doc_, &PlannerDocument::searchExplaining, this, [this](const QString& what) {
    progress_->setRange(0, 0);  // no count: busy
    status_->setText(QStringLiteral("Searched; %1… (Esc stops it; the search stands)").arg(what));
  });
  connect(&doc_, &PlannerDocument::searchFinished, this, &MainWindow::on_search_finished);
  // The status line's "storing…" becomes what storing came to, unless
  // another message has replaced it since.
  connect(&doc_, &PlannerDocument::searchStored, this, [this] {
    const SearchOutcome& out = *doc_.outcome();
    if (status_->text() == search_status(out, true)) status_->setText(search_status(out, false));
  });
  connect(&doc_, &PlannerDocument::searchFailed, this, [this](const QList<InputIssue>& issues) {
    inputs_->show_issues(issues);
    status_->setText(QStringLiteral("Not searched: %1").arg(issues.isEmpty() ? QString() : issues.front().message));
  });
  connect(&doc_, &PlannerDocument::selectionChanged, this, &MainWindow::on_selection_changed);
  // A sort or a filter reorders every plan: the selected one keeps its highlight.
  connect(&doc_.plans(), &QAbstractItemModel::modelReset, this, &MainWindow::on_selection_changed);
  connect(&doc_, &PlannerDocument::staleChanged, this, [this](bool stale) {
    // A search reopened from History keeps no form: the form shows other inputs.
    const bool reopened = doc_.outcome() && doc_.outcome()->reopened && !doc_.outcome()->asked;
    stale_->setText(reopened ? QStringLiteral("These results are a search reopened from History (%1 on %2), with "
                                              "settings the form cannot show (ztune search's pins); the form shows "
                                              "other inputs: Search (Ctrl+R) ranks plans for the form's.")
                                   .arg(QString::fromStdString(doc_.outcome()->inputs.model.name),
                                        QString::fromStdString(doc_.outcome()->inputs.cluster.name))
                             : kStaleText);
    stale_->setVisible(stale);
    table_->setStyleSheet(stale ? QStringLiteral("QTableView { color: gray; }") : QString());
  });
  connect(&doc_, &PlannerDocument::simulationStarted, this,
          [this] { timeline_->set_message(QStringLiteral("Simulating one iteration of the selected plan…")); });
  connect(&doc_, &PlannerDocument::simulationFinished, this, [this] {
    const auto& s = *doc_.simulation();
    timeline_->set_timeline(s.timeline, QStringLiteral("%1 — simulated iteration %2, %3 operations; % = busy")
                                            .arg(QString::fromStdString(s.plan.summary()),
                                                 format_duration(s.time.iteration_s))
                                            .arg(s.operations));
  });
  connect(&doc_, &PlannerDocument::simulationFailed, this,
          [this](const QString& m) { timeline_->set_message(QStringLiteral("Simulation failed: ") + m); });
  connect(&doc_, &PlannerDocument::compareChanged, this, [this] {
    if (doc_.compare().columnCount() >= 2) tabs_->setCurrentIndex(1);
  });

  build_actions();
  resize(1600, 1000);
}

MainWindow::~MainWindow() = default;

void MainWindow::build_actions() {
  auto* tools = addToolBar(QStringLiteral("Main"));
  tools->setObjectName(QStringLiteral("main toolbar"));
  tools->setMovable(false);
  tools->setToolButtonStyle(Qt::ToolButtonTextOnly);
  auto action = [this](const QString& text, const QKeySequence& key, auto slot) {
    auto* a = new QAction(text, this);
    a->setShortcut(key);
    a->setToolTip(QStringLiteral("%1 (%2)").arg(QString(text).remove(QLatin1Char('&')), key.toString(QKeySequence::NativeText)));
    connect(a, &QAction::triggered, this, slot);
    return a;
  };
  auto* search = action(QStringLiteral("&Search"), QKeySequence(Qt::CTRL | Qt::Key_R), [this] { start_search(); });
  auto* cancel = action(QStringLiteral("&Cancel"), QKeySequence(Qt::Key_Escape), [this] { doc_.cancel_search(); });
  auto* compare = action(QStringLiteral("Com&pare"), QKeySequence(Qt::CTRL | Qt::Key_D), [this] { compare_selected(); });
  auto* history = action(QStringLiteral("&History"), QKeySequence(Qt::CTRL | Qt::Key_H), [this] { show_history(); });
  auto* run = action(QStringLiteral("&Run"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_R), [this] {
    tabs_->setCurrentWidget(run_);
    run_->run_selected();
  });
  auto* save = action(QStringLiteral("Export plan &JSON…"), QKeySequence(Qt::CTRL | Qt::Key_S), [this] { export_plan_json(); });
  auto* ds = action(QStringLiteral("Export &DeepSpeed config…"), QKeySequence(Qt::CTRL | Qt::Key_E),
                    [this] { export_with_ztune(QStringLiteral("deepspeed")); });
  auto* mg = action(QStringLiteral("Export &Megatron arguments…"), QKeySequence(Qt::CTRL | Qt::SHIFT | Qt::Key_E),
                    [this] { export_with_ztune(QStringLiteral("megatron")); });
  auto* tt = action(QStringLiteral("Export &torchtitan config…"), QKeySequence(Qt::CTRL | Qt::ALT | Qt::Key_E),
                    [this] { export_with_ztune(QStringLiteral("torchtitan")); });
  auto* quit = action(QStringLiteral("&Quit"), QKeySequence::Quit, [this] { close(); });
  auto* zoom_in = action(QStringLiteral("Timeline zoom &in"), QKeySequence(Qt::CTRL | Qt::Key_Plus), [this] { timeline_->zoom(1.5); });
  auto* zoom_out = action(QStringLiteral("Timeline zoom &out"), QKeySequence(Qt::CTRL | Qt::Key_Minus),
                          [this] { timeline_->zoom(1 / 1.5); });
  auto* zoom_all = action(QStringLiteral("Whole &iteration"), QKeySequence(Qt::CTRL | Qt::Key_0), [this] { timeline_->reset_zoom(); });

  auto* file = menuBar()->addMenu(QStringLiteral("&File"));
  file->addActions({save, ds, mg, tt});
  file->addSeparator();
  file->addAction(quit);
  auto* plan = menuBar()->addMenu(QStringLiteral("&Plan"));
  plan->addActions({search, cancel, compare, run, history});
  auto* view = menuBar()->addMenu(QStringLiteral("&View"));
  view->addActions({zoom_in, zoom_out, zoom_all});

  tools->addActions({search, cancel});
  tools->addSeparator();
  tools->addActions({compare, run, history});
  tools->addSeparator();
  tools->addActions({save, ds, mg, tt});
}

void MainWindow::start_search() {
  inputs_->clear_issues();
  doc_.start_search(inputs_->inputs());
}

QString MainWindow::search_status(const SearchOutcome& out, bool storing) {
  const auto& r = out.result;
  QString msg = QStringLiteral("%1 plans, %2 fit, searched in %3")
                    .arg(format_count(static_cast<double>(r.space)), format_count(static_cast<double>(r.feasible)),
                         format_duration(r.elapsed_s));
  if (!r.ranked_whole_space()) msg += QStringLiteral(" (cancelled: best so far)");
  else if (r.interrupted) msg += QStringLiteral(" (cancelled while simulating the best plans: the ranking is whole)");
  if (!out.cancelled_while.isEmpty()) msg += QStringLiteral(" (cancelled while %1: not shown)").arg(out.cancelled_while);
  if (r.plans.empty()) {
    msg = QStringLiteral("No plan fits. ");
    if (!r.closest.empty()) msg += QStringLiteral("Closest: ") + QString::fromStdString(describe_memory(r.closest.front().prediction.memory));
  }
  if (storing) msg += QStringLiteral(" · storing in the results database…");
  else if (!out.db_note.isEmpty()) msg += QStringLiteral(" · not stored: ") + out.db_note;
  return msg;
}

void MainWindow::on_search_finished() {
  const auto& out = *doc_.outcome();
  const auto& r = out.result;
  setWindowTitle(QStringLiteral("ztune planner — %1 on %2")
                     .arg(QString::fromStdString(out.inputs.model.name), QString::fromStdString(out.inputs.cluster.name)));
  status_->setText(search_status(out, out.storing));
  // A search reopened from History that the form can ask fills the form
  // (audit50gui M4: it had kept describing other inputs). The form may also
  // have changed while a search ran (one replaced by Ctrl+R answers its own).
  if (out.reopened && out.asked) inputs_->set_inputs(*out.asked);
  doc_.note_inputs(inputs_->inputs());

  // The search's own account: the space, what each pass kept, why plans left.
  QString report = QStringLiteral("<b>Last search</b><table cellspacing=2>");
  auto row = [&report](const QString& k, const QString& v) {
    report += QStringLiteral("<tr><td>%1</td><td align=right>%2</td></tr>").arg(k, v);
  };
  row(QStringLiteral("plans in the space"), format_count(static_cast<double>(r.space)));
  row(QStringLiteral("valid layouts reached"), format_count(static_cast<double>(r.evaluated)));
  row(QStringLiteral("fit in memory"), format_count(static_cast<double>(r.feasible)));
  row(QStringLiteral("time (%1 threads)").arg(r.threads), format_duration(r.elapsed_s));
  for (const auto& [reason, n] : r.pruned.named())
    row(QStringLiteral("&nbsp;&nbsp;pruned: ") + QString::fromStdString(reason).replace(QLatin1Char('_'), QLatin1Char(' ')),
        format_count(static_cast<double>(n)));
  for (const auto& pass : r.passes)
    if (!pass.note.empty()) row(QStringLiteral("%1 pass").arg(QString::fromStdString(pass.name)), QString::fromStdString(pass.note));
  report += QStringLiteral("</table>");
  if (!out.fit_hints.empty()) {
    report += QStringLiteral("<b>What would make a plan fit</b><ul style=\"margin-left: -20px\">");
    for (const auto& h : out.fit_hints)
      report += QStringLiteral("<li>%1 <b>%2</b>: %3</li>")
                    .arg(h.fits ? QStringLiteral("✔") : QStringLiteral("✘"),
                         QString::fromStdString(h.change).toHtmlEscaped(),
                         QString::fromStdString(h.detail).toHtmlEscaped());
    report += QStringLiteral("</ul>");
  }
  if (!out.cancelled_while.isEmpty())
    report += QStringLiteral("<p>Cancelled after the search, while %1: that is not shown; the search itself is "
                             "complete.</p>")
                  .arg(out.cancelled_while.toHtmlEscaped());
  if (out.tight_memory)
    report += QStringLiteral("<p><b>Memory margin</b>: %1.</p>")
                  .arg(QString::fromStdString(describe_tight_memory(
                                                  *out.tight_memory,
                                                  "a memory headroom of " +
                                                      formatted("%g", out.tight_memory->headroom_pct) + " %"))
                           .toHtmlEscaped());
  // The error of the same cost model against published runs on this GPU (ztune validate).
  const Accuracy& acc = out.accuracy;  // computed with the search, on the worker thread
  // The cross-validated band first: it is the figure a plan never fitted on
  // gets (the sources' own errors below are in-sample where the profile was
  // fitted on them, as the CLI's accuracy line says).
  if (!r.plans.empty()) {
    const auto& best = r.plans.front().time();
    const double widening = band_widening(acc, out.inputs.model, r.plans.front().plan);
    if (const std::string band = error_band_line(acc, best.iteration_s, best.tokens_per_s, widening); !band.empty())
      report += QStringLiteral("<p><b>Best plan's</b> %1</p>").arg(QString::fromStdString(band).toHtmlEscaped());
  }
  // Where the cell's band has missed a source left out (as the CLI's accuracy line says).
  if (const std::string missed = band_misses_list(acc); !missed.empty())
    report += QStringLiteral("<p>Left out, the band held under half the runs of %1, of the sources it was "
                             "measured on.</p>")
                  .arg(QString::fromStdString(missed).toHtmlEscaped());
  if (!acc.sources.empty()) {
    report += QStringLiteral("<b>Accuracy on %1</b> (published runs; in-sample where the default profile was "
                             "fitted on them)<table cellspacing=2>")
                  .arg(QString::fromStdString(acc.family).toHtmlEscaped());
    for (const auto& s : acc.sources)
      row(QString::fromStdString(s.name),
          QStringLiteral("%1 MAPE, %2 runs").arg(format_percent(s.mape / 100.0), format_count(s.cases)));
    report += QStringLiteral("</table>");
  } else {
    report += QStringLiteral("<p><b>Accuracy</b>: %1</p>")
                  .arg(QString::fromStdString(acc.problem.empty()
                                                  ? "no published training time measured on " + acc.family +
                                                        " is in data/validation: these times are not checked "
                                                        "against a real run"
                                                  : acc.problem)
                           .toHtmlEscaped());
  }
  // Where the best plan lies beyond the runs those figures were measured on.
  if (!r.plans.empty())
    if (const std::string beyond =
            extrapolation_line(acc, out.inputs.model, r.plans.front().plan);
        !beyond.empty())
      report += QStringLiteral("<p><b>Best plan</b> %1</p>").arg(QString::fromStdString(beyond).toHtmlEscaped());
  inputs_->set_search_report(report);
  size_plan_columns();
  update_plan_count();
  on_selection_changed();
}

void MainWindow::size_plan_columns() {
  // Every column back first: a wider window shows the ones a narrower one hid.
  for (int column = 0; column < PlanTableModel::column_count; ++column) table_->setColumnHidden(column, false);
  table_->resizeColumnsToContents();
  // The two free-text columns are capped (elided; a row's tooltip is its whole
  // plan) so that all sixteen columns fit a 1600 px window (issue 23).
  for (const auto& [column, most] : {std::pair{PlanTableModel::layout, 170}, std::pair{PlanTableModel::offload, 120}})
    if (table_->columnWidth(column) > most) table_->setColumnWidth(column, most);
  fit_plan_columns();
}

bool MainWindow::eventFilter(QObject* watched, QEvent* event) {
  // Once the resizing settles (a drag sends many): sizing reads every visible row.
  // Only a new width refits: the table's height changes with the lines above it.
  if (watched == table_ && event->type() == QEvent::Resize && doc_.outcome()) {
    const auto* resize = static_cast<const QResizeEvent*>(event);
    if (resize->size().width() != resize->oldSize().width()) resize_columns_->start();
  }
  return QMainWindow::eventFilter(watched, event);
}

void MainWindow::fit_plan_columns() {
  // Where the columns are still wider than the table (block recomputation's
  // "full:block120", "interleaved 1F1B" beside a long layout), the free-text
  // ones give way, elided down to a floor (the layout last), so that the last column, the
  // iteration time, stays in view; the row's tooltip has the whole plan.
  const int last = PlanTableModel::column_count - 1;
  // The last section stretches to the table's edge: its own width is measured unstretched.
  table_->horizontalHeader()->setStretchLastSection(false);
  table_->resizeColumnToContents(last);
  int total = 0;
  for (int column = 0; column <= last; ++column) total += table_->columnWidth(column);
  table_->horizontalHeader()->setStretchLastSection(true);
  // The width inside the table's frame, less a vertical scroll bar whether
  // or not the rows need one yet: not the viewport's, which the scroll bars
  // this fitting shows or hides change (and whose resizing refits: hiding a
  // column had resized it back and forth for ever).
  const QScrollBar* bar = table_->verticalScrollBar();
  const QHeaderView* rows = table_->verticalHeader();
  const int room = table_->width() - 2 * table_->frameWidth() - (rows->isVisible() ? rows->width() : 0) -
                   bar->sizeHint().width();
  int excess = total - room;
  for (const auto& [column, least] :
       {std::pair{PlanTableModel::recompute, 80}, std::pair{PlanTableModel::schedule, 64},
        std::pair{PlanTableModel::offload, 64}, std::pair{PlanTableModel::layout, 120}}) {
    if (excess <= 0) break;
    const int cut = std::min(excess, table_->columnWidth(column) - least);
    if (cut <= 0) continue;
    table_->setColumnWidth(column, table_->columnWidth(column) - cut);
    excess -= cut;
  }
  // Still too wide (16 columns in a 1280 px window): the columns that repeat
  // what another one says, or say what most plans share, are hidden until the
  // rest fits, so that throughput, MFU and the iteration time stay in view
  // (audit50gui M7). The line above the table names them; a wider window
  // brings them back (size_plan_columns shows every column first).
  QStringList hidden;
  for (const int column : {PlanTableModel::precision, PlanTableModel::tflops, PlanTableModel::attention,
                           PlanTableModel::days, PlanTableModel::schedule, PlanTableModel::gpus}) {
    if (excess <= 0) break;
    excess -= table_->columnWidth(column);
    table_->setColumnHidden(column, true);
    hidden << doc_.plans().headerData(column, Qt::Horizontal, Qt::DisplayRole).toString();
  }
  hidden_columns_->setText(
      QStringLiteral("Columns hidden to fit the window: %1 (a wider window shows them; a row's tooltip has its "
                     "whole plan).")
          .arg(hidden.join(QStringLiteral(", "))));
  hidden_columns_->setVisible(!hidden.isEmpty());
}

void MainWindow::on_selection_changed() {
  const int row = doc_.selected_row();
  if (row < 0) return;
  doc_.plans().fetch_to(row);  // a plan sorted far down: fetch the rows up to it
  restoring_selection_ = true;
  table_->selectRow(row);
  table_->setCurrentIndex(doc_.plans().index(row, 0));
  restoring_selection_ = false;
}

void MainWindow::update_plan_count() {
  const bool none_fit = doc_.outcome() && doc_.outcome()->result.plans.empty();
  // Nothing the memory prune saw (every layout refused by a rule): no closest list to speak of.
  const QString none_text = doc_.plans().total() > 0
                                ? QStringLiteral("no plan fits: the %1 closest to fitting").arg(doc_.plans().total())
                                : QStringLiteral("no plan: every layout was refused by a rule (Last search says which)");
  plan_count_->setText(none_fit ? none_text
                                : plan_count_text(doc_.plans().matching(), doc_.plans().total(),
                                                  doc_.outcome() ? doc_.outcome()->result.feasible : 0,
                                                  // Cancelled while simulating the best: the ranking is whole.
                                                  doc_.outcome() && !doc_.outcome()->result.ranked_whole_space()));
}

void MainWindow::compare_selected() {
  QList<int> rows;
  for (const QModelIndex& idx : table_->selectionModel()->selectedRows()) rows << idx.row();
  std::sort(rows.begin(), rows.end());
  if (rows.size() < 2) {
    status_->setText(QStringLiteral("Select two or more plans to compare (Ctrl+click)."));
    return;
  }
  doc_.set_compared(rows);
}

void MainWindow::show_history() {
  HistoryDialog dialog(&doc_, this);
  dialog.exec();
}

bool MainWindow::write_or_warn(const QString& path, std::string_view text) {
  // Through DurableFile, as `ztune search --out` and `export --out` write: a
  // failed write (a full disk, /dev/full) is said, and never leaves half a file.
  const auto why = write_file_durably(path.toStdString(), text);
  if (why) QMessageBox::warning(this, QStringLiteral("Export"), path + QStringLiteral(": ") + QString::fromStdString(*why));
  return !why;
}

void MainWindow::export_plan_json() {
  const Candidate* c = doc_.selected();
  if (c == nullptr) return;
  const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Export plan"), QStringLiteral("plan.json"),
                                                    QStringLiteral("JSON (*.json)"));
  if (path.isEmpty()) return;
  const auto& in = doc_.outcome()->inputs;
  if (!write_or_warn(path, plan_file_to_json(plan_file_of(*c, in)).dump(2) + "\n")) return;
  status_->setText(QStringLiteral("Plan written to ") + path);
}

void MainWindow::export_with_ztune(const QString& format) {
  const Candidate* c = doc_.selected();
  if (c == nullptr) return;
  if (exporter_.running()) {
    // One export at a time: a previous one still running (hung on a full
    // disk, say) is said, and can be stopped, instead of a click doing nothing.
    const auto answer = QMessageBox::question(
        this, QStringLiteral("Export"),
        QStringLiteral("The previous export is still running:\n\n%1\n\nStop it?").arg(exporter_.command_line()));
    if (answer == QMessageBox::Yes) exporter_.stop();
    return;
  }
  // `ztune export` is the one exporter; the planner hands it the plan file.
  if (!scratch_.isValid()) {
    QMessageBox::warning(this, QStringLiteral("Export"),
                         QStringLiteral("cannot create a temporary directory: ") + scratch_.errorString());
    return;
  }
  const QString plan_path = scratch_.filePath(QStringLiteral("export-plan.json"));
  QFile f(plan_path);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
    QMessageBox::warning(this, QStringLiteral("Export"), plan_path + QStringLiteral(": cannot write: ") + f.errorString());
    return;
  }
  const auto& in = doc_.outcome()->inputs;
  const QByteArray plan = QByteArray::fromStdString(plan_file_to_json(plan_file_of(*c, in)).dump(2));
  if (f.write(plan) != plan.size() || !f.flush()) {
    QMessageBox::warning(this, QStringLiteral("Export"), plan_path + QStringLiteral(": cannot write: ") + f.errorString());
    return;
  }
  f.close();
  auto log = std::make_shared<QString>();
  exporter_.disconnect(this);
  connect(&exporter_, &ChildProcess::output, this, [log](const QString& t) { *log += t; });
  connect(&exporter_, &ChildProcess::failedToStart, this, [this, format](const QString& m) {
    status_->setText(QStringLiteral("%1 export not written: ztune did not start").arg(format));
    QMessageBox::warning(this, QStringLiteral("Export"), m);
  });
  connect(&exporter_, &ChildProcess::finished, this, [this, format, log](int code, bool crashed) {
    if (crashed || code != 0) {
      // The status line had kept the previous export's success (audit50gui L4).
      status_->setText(QStringLiteral("%1 export not written: the engine cannot run this plan, or ztune failed "
                                      "(the message says which)")
                           .arg(format));
      QMessageBox::warning(this, QStringLiteral("Export"),
                           QStringLiteral("%1 failed:\n\n%2").arg(exporter_.command_line(), log->trimmed()));
      return;
    }
    const QString suggested = format == QLatin1String("deepspeed")    ? QStringLiteral("ds_config.json")
                              : format == QLatin1String("torchtitan") ? QStringLiteral("job.toml")
                                                                      : QStringLiteral("megatron_args.txt");
    const QString path = QFileDialog::getSaveFileName(this, QStringLiteral("Save %1 export").arg(format), suggested);
    if (path.isEmpty()) return;
    const QByteArray& text = exporter_.standard_output();
    if (!write_or_warn(path, std::string_view(text.constData(), static_cast<std::size_t>(text.size())))) return;
    status_->setText(QStringLiteral("%1 export written to %2").arg(format, path));
    // What `ztune export` says beside the file (a plan over the GPU's memory,
    // the launch command, the engine's set-up steps) is the user's to read:
    // it had been dropped unless the export failed.
    const QString said = QString::fromUtf8(exporter_.standard_error()).trimmed();
    if (!said.isEmpty())
      QMessageBox::information(this, QStringLiteral("Export"),
                               QStringLiteral("%1 export written to %2.\n\n%3").arg(format, path, said));
  });
  exporter_.start(ztune_program(), {QStringLiteral("export"), QStringLiteral("--format"), format, plan_path});
}

void MainWindow::restore_settings() {
  save_settings_ = true;
  auto s = settings();
  restoreGeometry(s.value(QStringLiteral("geometry")).toByteArray());
  restoreState(s.value(QStringLiteral("state")).toByteArray());
  vertical_->restoreState(s.value(QStringLiteral("vertical")).toByteArray());
  charts_->restoreState(s.value(QStringLiteral("charts")).toByteArray());
  if (s.contains(QStringLiteral("inputs/cluster"))) {
    SearchInputs in;
    in.cluster = s.value(QStringLiteral("inputs/cluster")).toString();
    in.model = s.value(QStringLiteral("inputs/model")).toString();
    in.profile = s.value(QStringLiteral("inputs/profile")).toString();
    in.gpus = s.value(QStringLiteral("inputs/gpus")).toInt();
    in.global_batch = s.value(QStringLiteral("inputs/global_batch")).toLongLong();
    in.seq = s.value(QStringLiteral("inputs/seq")).toInt();
    in.tokens = s.value(QStringLiteral("inputs/tokens")).toDouble();
    in.engine = s.value(QStringLiteral("inputs/engine"), in.engine).toString();
    in.attention = s.value(QStringLiteral("inputs/attention"), in.attention).toString();
    in.precision = s.value(QStringLiteral("inputs/precision"), in.precision).toString();
    in.optimizer = s.value(QStringLiteral("inputs/optimizer"), in.optimizer).toString();
    in.fp8 = s.value(QStringLiteral("inputs/fp8"), in.fp8).toString();
    in.cp = s.value(QStringLiteral("inputs/cp"), 0).toInt();
    in.max_cp = s.value(QStringLiteral("inputs/max_cp"), 0).toInt();
    in.ulysses = s.value(QStringLiteral("inputs/ulysses"), 0).toInt();
    in.max_ulysses = s.value(QStringLiteral("inputs/max_ulysses"), 0).toInt();
    in.dp_shard = s.value(QStringLiteral("inputs/dp_shard"), 0).toInt();
    in.memory_headroom_pct = s.value(QStringLiteral("inputs/memory_headroom_pct"), 0.0).toDouble();
    in.objective = s.value(QStringLiteral("inputs/objective"), in.objective).toString();
    in.gpu_hour_price = s.value(QStringLiteral("inputs/gpu_hour_price"), 0.0).toDouble();
    inputs_->set_inputs(in);
  }
}

void MainWindow::closeEvent(QCloseEvent* event) {
  if (save_settings_) {
    auto s = settings();
    s.setValue(QStringLiteral("geometry"), saveGeometry());
    s.setValue(QStringLiteral("state"), saveState());
    s.setValue(QStringLiteral("vertical"), vertical_->saveState());
    s.setValue(QStringLiteral("charts"), charts_->saveState());
    const SearchInputs in = inputs_->inputs();
    s.setValue(QStringLiteral("inputs/cluster"), in.cluster);
    s.setValue(QStringLiteral("inputs/model"), in.model);
    s.setValue(QStringLiteral("inputs/profile"), in.profile);
    s.setValue(QStringLiteral("inputs/gpus"), in.gpus);
    s.setValue(QStringLiteral("inputs/global_batch"), static_cast<qlonglong>(in.global_batch));
    s.setValue(QStringLiteral("inputs/seq"), in.seq);
    s.setValue(QStringLiteral("inputs/tokens"), in.tokens);
    s.setValue(QStringLiteral("inputs/engine"), in.engine);
    s.setValue(QStringLiteral("inputs/attention"), in.attention);
    s.setValue(QStringLiteral("inputs/precision"), in.precision);
    s.setValue(QStringLiteral("inputs/optimizer"), in.optimizer);
    s.setValue(QStringLiteral("inputs/fp8"), in.fp8);
    s.setValue(QStringLiteral("inputs/cp"), in.cp);
    s.setValue(QStringLiteral("inputs/max_cp"), in.max_cp);
    s.setValue(QStringLiteral("inputs/ulysses"), in.ulysses);
    s.setValue(QStringLiteral("inputs/max_ulysses"), in.max_ulysses);
    s.setValue(QStringLiteral("inputs/dp_shard"), in.dp_shard);
    s.setValue(QStringLiteral("inputs/memory_headroom_pct"), in.memory_headroom_pct);
    s.setValue(QStringLiteral("inputs/objective"), in.objective);
    s.setValue(QStringLiteral("inputs/gpu_hour_price"), in.gpu_hour_price);
  }
  event->accept();
}

bool MainWindow::results_settled(bool simulation_failed) const {
  if (!doc_.outcome() || doc_.outcome()->storing || doc_.searching() || doc_.scaling_running()) return false;
  return doc_.selected() == nullptr || doc_.simulation() || simulation_failed;  // else its timeline is still coming
}

void MainWindow::on_results_change(const std::function<void()>& f) {
  for (auto signal : {&PlannerDocument::searchFinished, &PlannerDocument::searchStored,
                      &PlannerDocument::simulationFinished})
    connect(&doc_, signal, this, f);
  for (auto signal : {&PlannerDocument::searchRunning, &PlannerDocument::scalingRunning}) connect(&doc_, signal, this, f);
}

void MainWindow::screenshot_when_ready(const QString& file, int timeout_ms) {
  auto done = std::make_shared<bool>(false);
  auto save = [this, file, done](int code) {
    if (*done) return;
    *done = true;
    // Let layouts and charts settle before grabbing.
    QTimer::singleShot(400, this, [this, file, code] {
      report_sideways_scroll();  // said, not failed: the picture is still worth writing
      QApplication::exit(save_picture(this, file) ? code : 2);
    });
  };
  auto ready = [this, save] {
    if (!results_settled(false)) return;
    const SearchOutcome& out = *doc_.outcome();
    if (!out.db_note.isEmpty()) std::fprintf(stderr, "ztune-planner: warning: not stored: %s\n", qPrintable(out.db_note));
    if (out.result.plans.empty()) std::fprintf(stderr, "ztune-planner: no plan fits\n");
    save(out.result.plans.empty() ? 1 : 0);
  };
  on_results_change(ready);
  connect(&doc_, &PlannerDocument::simulationFailed, this, [save] { save(0); });
  // A screenshot run is headless: a refused input is said on stderr too, as
  // `ztune` says it, not only inside the picture.
  connect(&doc_, &PlannerDocument::searchFailed, this, [save](const QList<InputIssue>& issues) {
    for (const auto& issue : issues) std::fprintf(stderr, "ztune-planner: error: %s\n", qPrintable(issue.message));
    save(1);
  });
  QTimer::singleShot(timeout_ms, this, [save] {
    std::fprintf(stderr, "ztune-planner: the screenshot timed out\n");
    save(3);
  });
  start_search();
}

}  // namespace ztune::gui
