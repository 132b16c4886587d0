#include "run_panel.hpp"

#include <QFile>
#include <QFontDatabase>
#include <QHBoxLayout>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QVBoxLayout>
#include <nlohmann/json.hpp>

#include "ztune/gui/planner_document.hpp"
#include "ztune/gui/run_summary.hpp"
#include "ztune/vocab/input_error.hpp"
#include "ztune/vocab/run_record.hpp"

namespace ztune::gui {

RunPanel::RunPanel(PlannerDocument* doc, QWidget* parent) : QWidget(parent), doc_(doc) {
  auto* v = new QVBoxLayout(this);
  v->setContentsMargins(0, 0, 0, 0);
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(QStringLiteral("Steps")));
  steps_ = new QSpinBox;
  steps_->setRange(1, 100000);
  steps_->setValue(10);
  bar->addWidget(steps_);
  run_ = new QPushButton(QStringLiteral("Run selected plan"));
  run_->setToolTip(QStringLiteral("ztune run plan.json (Ctrl+Shift+R)"));
  stop_ = new QPushButton(QStringLiteral("Stop"));
  stop_->setEnabled(false);
  bar->addWidget(run_);
  bar->addWidget(stop_);
  result_ = new QLabel;
  result_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  bar->addWidget(result_, 1);
  v->addLayout(bar);
  log_ = new QPlainTextEdit;
  log_->setReadOnly(true);
  log_->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  log_->setPlaceholderText(QStringLiteral("The log of `ztune run` appears here."));
  log_->setMaximumBlockCount(20000);
  v->addWidget(log_, 1);
  child_.keep_output(false);  // the log above is the run's bounded copy; the verdict reads the run record

  // A new search's results replace the plans the log and the verdict are
  // about: they go with them (the run itself is kept in History). A run still
  // going says whose plan it trains.
  connect(doc_, &PlannerDocument::searchFinished, this, [this] {
    if (child_.running()) {
      result_->setText(QStringLiteral("running a plan of the previous search…"));
      return;
    }
    log_->clear();
    result_->clear();
  });
  connect(run_, &QPushButton::clicked, this, &RunPanel::run_selected);
  connect(stop_, &QPushButton::clicked, this, &RunPanel::stop);
  connect(&child_, &ChildProcess::output, this, [this](const QString& text) {
    // A line is broken every kLogLineChars characters: QPlainTextEdit lays a
    // block out again on every insertion, so one endless line (a child that
    // never prints a newline) froze the window, seconds per 300 k characters.
    QString wrapped;
    wrapped.reserve(text.size() + text.size() / kLogLineChars + 1);
    for (const QChar ch : text) {
      if (ch == QLatin1Char('\n')) {
        log_line_chars_ = 0;
      } else if (++log_line_chars_ > kLogLineChars) {
        wrapped += QLatin1Char('\n');
        log_line_chars_ = 1;
      }
      wrapped += ch;
    }
    log_->moveCursor(QTextCursor::End);
    log_->insertPlainText(wrapped);
    log_->moveCursor(QTextCursor::End);
  });
  connect(&child_, &ChildProcess::failedToStart, this, [this](const QString& m) {
    log_->appendPlainText(m);
    result_->setText(QStringLiteral("could not start ztune"));
    run_->setEnabled(true);
    stop_->setEnabled(false);
    emit message(result_->text());
  });
  connect(&child_, &ChildProcess::finished, this, [this](int code, bool crashed) {
    run_->setEnabled(true);
    stop_->setEnabled(false);
    if (crashed || code != 0) {
      result_->setText(run_ending(code, crashed));
      emit message(result_->text());  // every run ends with its verdict on the status line
      return;
    }
    try {
      result_->setText(compare_run(measured_run(read_run_record(record_path_.toStdString())), predicted_step_s_));
    } catch (const InputError& e) {
      result_->setText(QStringLiteral("the run record was refused: ") + QString::fromStdString(e.what()));
    }
    emit message(result_->text());
  });
}

void RunPanel::run_selected() {
  // Every way a run ends, started or not, says so on the status line
  // (message): the screenshot tour waits for it.
  auto refuse = [this](const QString& why) {
    result_->setText(why);
    emit message(why);
  };
  const Candidate* c = doc_->selected();
  if (c == nullptr || !doc_->outcome()) {
    refuse(QStringLiteral("select a plan first"));
    return;
  }
  if (child_.running()) return;
  // The plan file carries the model and cluster, so `ztune run` needs nothing else.
  const auto& in = doc_->outcome()->inputs;
  if (!scratch_.isValid()) {
    refuse(QStringLiteral("cannot create a temporary directory for the run: ") + scratch_.errorString());
    return;
  }
  plan_path_ = scratch_.filePath(QStringLiteral("plan.json"));
  record_path_ = scratch_.filePath(QStringLiteral("record.json"));
  QFile::remove(record_path_);  // a record left from an earlier run must not be read as this one's
  QFile f(plan_path_);
  if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate)) {
    refuse(plan_path_ + QStringLiteral(": cannot write: ") + f.errorString());
    return;
  }
  // ztune's executor runs it, whatever engine the search priced.
  f.write(QByteArray::fromStdString(plan_file_to_json(PlanFile{c->plan, in.model, in.cluster, std::nullopt, false}).dump(2)));
  f.close();
  predicted_step_s_ = c->time().iteration_s;
  log_->clear();
  log_line_chars_ = 0;
  result_->setText(QStringLiteral("running…"));
  run_->setEnabled(false);
  stop_->setEnabled(true);
  // Stored where the planner's searches are (--db), so History lists it beside them.
  // No database (none named, no home to put one in): the run is not stored,
  // as `ztune run --no-db` says, rather than refused for `--db ""`.
  QStringList args{QStringLiteral("run"),      plan_path_,  QStringLiteral("--steps"), QString::number(steps_->value()),
                   QStringLiteral("--record"), record_path_};
  if (doc_->database().isEmpty()) args << QStringLiteral("--no-db");
  else args << QStringLiteral("--db") << doc_->database();
  // On a line of its own: the child's first output starts the next one.
  log_->appendPlainText(QStringLiteral("$ ") + ztune_program() + QLatin1Char(' ') + args.join(QLatin1Char(' ')) +
                        QLatin1Char('\n'));
  child_.start(ztune_program(), args);
}

void RunPanel::stop() { child_.stop(); }

}  // namespace ztune::gui
