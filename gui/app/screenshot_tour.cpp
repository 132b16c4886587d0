// --screenshot-set DIR: the planner walked through as a user would, one PNG per
// view (issue 23's screenshot set): the default search with the best plan's
// timeline, Compare of the three best plans, the stale marker after an input
// changes, the timeline of a 64-micro-batch interleaved plan (when the search
// ranked one), the History dialog, and on a CPU cluster the Run tab after a
// real `ztune run`. Each step waits for the signal that says its view is drawn,
// then for the layouts to settle. Missing views are said on stderr and the exit
// code is 0 only when every shot this cluster allows was written.
#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QFileInfo>
#include <QImageWriter>
#include <QSaveFile>
#include <QScrollArea>
#include <QScrollBar>
#include <QTabWidget>
#include <QTableView>
#include <QTimer>
#include <algorithm>
#include <cstdio>
#include <memory>
#include <utility>

#include "history_dialog.hpp"
#include "input_panel.hpp"
#include "main_window.hpp"
#include "run_panel.hpp"
#include "timeline_widget.hpp"

namespace ztune::gui {

namespace {

constexpr int kSettleMs = 600;  // charts and tables re-layout after a model reset

/// Calls `f` once, the next time `signal` of `src` fires.
template <class Sender, class Signal, class F>
void once(Sender* src, Signal signal, QObject* ctx, F f) {
  auto c = std::make_shared<QMetaObject::Connection>();
  *c = QObject::connect(src, signal, ctx, [c, f]() mutable {
    QObject::disconnect(*c);
    f();
  });
}

}  // namespace

void MainWindow::report_sideways_scroll() const {
  // A table scrolled per item counts its scroll bar in columns, a scroll area in pixels.
  auto say = [](const char* what, const QScrollBar* bar, const char* unit) {
    if (bar != nullptr && bar->maximum() > 0)
      std::fprintf(stderr, "ztune-planner: warning: %s scrolls sideways by %d %s\n", what, bar->maximum(), unit);
  };
  say("the plan table", table_->horizontalScrollBar(),
      table_->horizontalScrollMode() == QAbstractItemView::ScrollPerItem ? "columns" : "px");
  const auto* dock = findChild<QDockWidget*>(QStringLiteral("inputs"));
  const auto* inputs = dock == nullptr ? nullptr : qobject_cast<const QScrollArea*>(dock->widget());
  say("the input panel", inputs == nullptr ? nullptr : inputs->horizontalScrollBar(), "px");
}

bool MainWindow::save_picture(QWidget* w, const QString& path) {
  // The picture's format is its file's suffix (shot.jpg a JPEG), PNG without one.
  const QString suffix = QFileInfo(path).suffix().toLower();
  const QByteArray format = suffix.isEmpty() ? QByteArray("png") : suffix.toLatin1();
  QString why;
  if (!QImageWriter::supportedImageFormats().contains(format)) {
    why = QStringLiteral(".%1 is not an image format this Qt writes (expected .png, .jpg or no suffix)").arg(suffix);
  } else if (const QString dir = QFileInfo(path).absolutePath(); !QDir().mkpath(dir)) {
    why = QStringLiteral("cannot create the directory ") + dir;
  } else {
    QSaveFile file(path);
    if (!file.open(QIODevice::WriteOnly)) why = file.errorString();
    else if (!w->grab().save(&file, format.constData()))
      why = QStringLiteral("the picture was not written in full (is the disk full?)");
    else if (!file.commit()) why = file.errorString();
  }
  if (why.isEmpty()) return true;
  std::fprintf(stderr, "ztune-planner: cannot write %s: %s; any earlier picture there is kept\n", qPrintable(path),
               qPrintable(why));
  return false;
}

void MainWindow::screenshot_tour(const QString& dir, int timeout_ms) {
  // Every picture goes into DIR: one that cannot be made or written to ends
  // the tour before its search (and the real training of its last step).
  if (!QDir().mkpath(dir) || !QFileInfo(dir).isDir() || !QFileInfo(dir).isWritable()) {
    std::fprintf(stderr, "ztune-planner: cannot write the pictures into %s: not a writable directory\n",
                 qPrintable(dir));
    QTimer::singleShot(0, this, [] { QApplication::exit(2); });
    return;
  }
  auto failed = std::make_shared<int>(0);
  auto save = [dir, failed](QWidget* w, const QString& name) {
    const QString path = QDir(dir).filePath(name);
    if (!save_picture(w, path)) {
      ++*failed;
    } else {
      std::fprintf(stderr, "ztune-planner: wrote %s\n", qPrintable(path));
    }
  };
  auto finish = [failed] { QApplication::exit(*failed == 0 ? 0 : 2); };
  auto settle = [this](auto f) { QTimer::singleShot(kSettleMs, this, f); };

  // 6. Run (CPU clusters only: this machine trains the plan for real).
  auto run_step = [this, save, settle, finish] {
    if (doc_.outcome()->inputs.cluster.device_kind != DeviceKind::cpu) {
      std::fprintf(stderr, "ztune-planner: run.png skipped: a GPU cluster's plan does not train here "
                           "(run the tour with --cluster local-cpu --model tiny for it)\n");
      finish();
      return;
    }
    if (!doc_.select(0)) {
      finish();
      return;
    }
    tabs_->setCurrentWidget(run_);
    once(run_, &RunPanel::message, this, [save, settle, finish, this] {
      settle([save, finish, this] {
        save(this, QStringLiteral("run.png"));
        finish();
      });
    });
    run_->run_selected();
  };
  // 5. History.
  auto history_step = [this, save, settle, run_step] {
    auto* dialog = new HistoryDialog(&doc_, this);
    dialog->setAttribute(Qt::WA_DeleteOnClose);
    dialog->resize(1200, 700);
    dialog->show();
    settle([dialog, save, run_step] {
      save(dialog, QStringLiteral("history.png"));
      dialog->close();
      run_step();
    });
  };
  // 4. The timeline of an interleaved plan with 64 micro-batches (issue 23's
  // picture), the best ranked one; failing that, the best with more.
  auto timeline_step = [this, save, settle, history_step] {
    const auto& plans = doc_.outcome()->result.plans;
    int index = -1;
    for (const bool exact : {true, false})
      for (std::size_t i = 0; i < plans.size() && index < 0; ++i) {
        const Plan& p = plans[i].plan;
        if (p.schedule == Schedule::interleaved && (exact ? p.grad_accum == 64 : p.grad_accum > 64))
          index = static_cast<int>(i);
      }
    // The plan's row in the table, fetched first: the table shows its rows a
    // page at a time, and a plan ranked deep in a large search is not yet one.
    const int row = index < 0 ? -1 : doc_.plans().row_of(index);
    if (row >= 0) doc_.plans().fetch_to(row);
    if (row < 0 || doc_.plans().candidate(row) == nullptr) {
      std::fprintf(stderr, "ztune-planner: timeline-interleaved.png skipped: no interleaved plan with 64 or more "
                           "micro-batches among the ranked plans\n");
      history_step();
      return;
    }
    // Whichever comes first: the simulation, or its failure (the plan is then
    // shown without a timeline, and the tour goes on without the picture).
    auto moved_on = std::make_shared<bool>(false);
    once(&doc_, &PlannerDocument::simulationFinished, this, [this, save, settle, history_step, moved_on] {
      if (std::exchange(*moved_on, true)) return;
      tabs_->setCurrentWidget(timeline_);
      settle([this, save, history_step] {
        save(this, QStringLiteral("timeline-interleaved.png"));
        history_step();
      });
    });
    once(&doc_, &PlannerDocument::simulationFailed, this, [history_step, moved_on] {
      if (std::exchange(*moved_on, true)) return;
      std::fprintf(stderr, "ztune-planner: timeline-interleaved.png skipped: the plan's simulation failed\n");
      history_step();
    });
    doc_.select(row);
  };
  // 3. An input changed: the results stay, greyed, with the banner; then the
  //    inputs go back (the results are current again).
  auto stale_step = [this, save, settle, timeline_step] {
    const SearchInputs searched = inputs_->inputs();
    SearchInputs changed = searched;
    changed.global_batch = 2 * std::max<std::int64_t>(1, doc_.outcome()->result.plans.empty()
                                                             ? 1
                                                             : doc_.outcome()->result.plans.front().plan.global_batch);
    inputs_->set_inputs(changed);
    doc_.note_inputs(inputs_->inputs());
    settle([this, save, searched, timeline_step] {
      save(this, QStringLiteral("stale.png"));
      inputs_->set_inputs(searched);
      doc_.note_inputs(inputs_->inputs());
      timeline_step();
    });
  };
  // 2. Compare the three best plans.
  auto compare_step = [this, save, settle, stale_step] {
    doc_.set_compared({0, 1, 2});
    tabs_->setCurrentIndex(1);
    settle([this, save, stale_step] {
      save(this, QStringLiteral("compare.png"));
      stale_step();
    });
  };
  // 1. The search, its best plan simulated and the scaling curve drawn.
  auto started = std::make_shared<bool>(false);
  // The best plan's simulation failed (more micro-batches than the simulator
  // takes, say): the picture shows the plan without it rather than waiting
  // for the tour's timeout.
  auto simulation_failed = std::make_shared<bool>(false);
  auto ready = [this, save, settle, compare_step, started, finish, simulation_failed] {
    if (*started || !results_settled(*simulation_failed)) return;
    *started = true;
    if (const QString& note = doc_.outcome()->db_note; !note.isEmpty())
      std::fprintf(stderr, "ztune-planner: warning: not stored: %s\n", qPrintable(note));
    settle([this, save, compare_step, finish] {
      save(this, QStringLiteral("search.png"));
      if (doc_.outcome()->result.plans.size() < 2) {
        std::fprintf(stderr, "ztune-planner: fewer than two plans fit: the tour stops after search.png\n");
        finish();
        return;
      }
      compare_step();
    });
  };
  on_results_change(ready);
  connect(&doc_, &PlannerDocument::simulationFailed, this, [ready, simulation_failed, started](const QString& why) {
    if (*started) return;  // a later step's simulation: that step handles it
    std::fprintf(stderr, "ztune-planner: the best plan's simulation failed: %s\n", qPrintable(why));
    *simulation_failed = true;
    ready();
  });
  connect(&doc_, &PlannerDocument::searchFailed, this, [](const QList<InputIssue>& issues) {
    for (const auto& issue : issues) std::fprintf(stderr, "ztune-planner: error: %s\n", qPrintable(issue.message));
    QApplication::exit(1);
  });
  QTimer::singleShot(timeout_ms, this, [] {
    std::fprintf(stderr, "ztune-planner: the screenshot tour timed out\n");
    QApplication::exit(3);
  });
  start_search();
}

}  // namespace ztune::gui
