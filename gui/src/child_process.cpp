#include "ztune/gui/child_process.hpp"

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include <QCoreApplication>
#include <QDir>
#include <QFileInfo>
#include <QStandardPaths>
#include <QTimer>

namespace ztune::gui {

QString ztune_program() {
  const QString env = qEnvironmentVariable("ZTUNE_BIN");
  if (!env.isEmpty()) return env;
  const QString here = QCoreApplication::applicationDirPath();
  // Installed side by side, or the build tree (build/<preset>/gui/ztune-planner, build/<preset>/cli/ztune).
  for (const QString& candidate : {here + QStringLiteral("/ztune"), here + QStringLiteral("/../cli/ztune")}) {
    const QFileInfo f(candidate);
    if (f.isFile() && f.isExecutable()) return QDir::cleanPath(f.absoluteFilePath());
  }
  return QStandardPaths::findExecutable(QStringLiteral("ztune"));
}

ChildProcess::ChildProcess(QObject* parent) : QObject(parent) {
  // The child gets SIGTERM when the planner dies, however it dies: the
  // destructor's kill covers only a normal exit, and a SIGTERM'd planner had
  // left `ztune run` training (and storing) with nobody watching. `ztune run`
  // passes it on to its ranks. Only async-signal-safe calls after the fork.
  const pid_t planner = ::getpid();
  process_.setChildProcessModifier([planner] {
    ::prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (::getppid() != planner) ::_exit(127);  // the planner died before the line above
  });
  connect(&process_, &QProcess::readyReadStandardOutput, this, [this] {
    const QByteArray chunk = process_.readAllStandardOutput();
    if (keep_) stdout_ += chunk;
    emit output(stdout_text_.decode(chunk));
  });
  connect(&process_, &QProcess::readyReadStandardError, this, [this] {
    const QByteArray chunk = process_.readAllStandardError();
    if (keep_) stderr_ += chunk;
    emit output(stderr_text_.decode(chunk));
  });
  connect(&process_, &QProcess::finished, this, [this](int code, QProcess::ExitStatus status) {
    emit finished(code, status == QProcess::CrashExit);
  });
  connect(&process_, &QProcess::errorOccurred, this, [this](QProcess::ProcessError e) {
    if (e == QProcess::FailedToStart) emit failedToStart(command_ + QStringLiteral(": ") + process_.errorString());
  });
}

ChildProcess::~ChildProcess() {
  if (running()) {
    process_.kill();
    process_.waitForFinished(2000);
  }
}

void ChildProcess::start(const QString& program, const QStringList& arguments) {
  stdout_.clear();
  stderr_.clear();
  stdout_text_.resetState();
  stderr_text_.resetState();
  command_ = (QStringList{program} + arguments).join(QLatin1Char(' '));
  if (program.isEmpty()) {
    emit failedToStart(QStringLiteral("the ztune program was not found (set ZTUNE_BIN or put ztune on PATH)"));
    return;
  }
  process_.start(program, arguments);
}

void ChildProcess::stop(int grace_ms) {
  if (!running()) return;
  process_.terminate();
  QTimer::singleShot(grace_ms, this, [this] {
    if (running()) process_.kill();
  });
}

}  // namespace ztune::gui
