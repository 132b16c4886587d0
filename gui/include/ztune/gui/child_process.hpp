#pragma once
// A `ztune` child process (run, export) whose output is streamed as it comes:
// the planner never reimplements what the command line does, it runs it.
//
// Example: p.start(ztune_program(), {"export", "--format", "deepspeed", "plan.json"});
#include <QByteArray>
#include <QObject>
#include <QProcess>
#include <QStringDecoder>
#include <QStringList>

namespace ztune::gui {

/// The `ztune` program: $ZTUNE_BIN, else `ztune` beside this program or in the
/// build tree's cli/ folder, else `ztune` on PATH ("" when none is found).
QString ztune_program();

class ChildProcess : public QObject {
  Q_OBJECT
 public:
  explicit ChildProcess(QObject* parent = nullptr);
  ~ChildProcess() override;  // kills a child still running

  void start(const QString& program, const QStringList& arguments);
  /// Asks the child to terminate (SIGTERM), then kills it after `grace_ms`.
  void stop(int grace_ms = 3000);
  [[nodiscard]] bool running() const { return process_.state() != QProcess::NotRunning; }
  /// Whether standard_output() and standard_error() keep what the child
  /// writes (the default). A training run streams its log for as long as it
  /// trains: its panel shows a bounded log and keeps no second, unbounded copy.
  void keep_output(bool keep) { keep_ = keep; }
  /// Everything the child wrote to stdout, and to stderr, so far (nothing when not kept).
  [[nodiscard]] const QByteArray& standard_output() const { return stdout_; }
  [[nodiscard]] const QByteArray& standard_error() const { return stderr_; }
  [[nodiscard]] QString command_line() const { return command_; }

 signals:
  void output(const QString& text);  // stdout and stderr chunks, in arrival order
  void finished(int exit_code, bool crashed);
  void failedToStart(const QString& message);

 private:
  QProcess process_;
  bool keep_ = true;
  QByteArray stdout_;
  QByteArray stderr_;
  // One decoder per stream, stateful: a UTF-8 character split across two
  // reads (×, µ in ztune run's lines) had come out as two replacement marks.
  QStringDecoder stdout_text_{QStringDecoder::Utf8};
  QStringDecoder stderr_text_{QStringDecoder::Utf8};
  QString command_;
};

}  // namespace ztune::gui
