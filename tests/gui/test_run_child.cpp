// The planner's Run path end to end: the same ChildProcess the Run button uses
// starts the real `ztune run --record FILE` on this machine's CPU ranks, and the
// strict run-record reader reads what it wrote. Oracle: the run itself (losses are
// finite and one per step, the step time is positive) and the prediction made
// independently by `ztune predict`, compared by compare_run's arithmetic.
#include <catch2/catch.hpp>

#include <QCoreApplication>
#include <QProcessEnvironment>
#include <QSignalSpy>
#include <QTest>

#include <cmath>
#include <filesystem>

#include "ztune/gui/child_process.hpp"
#include "ztune/gui/run_summary.hpp"
#include "ztune/vocab/run_record.hpp"

using namespace ztune::gui;

TEST_CASE("Run: ztune run as a child process gives measured figures", "[gui][run]") {
  std::filesystem::create_directories(ZTUNE_GUI_TEST_TMP);
  const std::string record = std::string(ZTUNE_GUI_TEST_TMP) + "/run-child-record.json";
  std::filesystem::remove(record);
  ChildProcess child;
  QSignalSpy finished(&child, &ChildProcess::finished);
  QString log;
  QObject::connect(&child, &ChildProcess::output, [&log](const QString& t) { log += t; });
  child.start(QStringLiteral(ZTUNE_BIN),
              {"run", "--cluster", "local-cpu", "--model", "tiny", "--dp", "2", "--zero", "1", "--micro-batch", "2",
               "--global-batch", "8", "--steps", "3", "--no-db", "--record", QString::fromStdString(record)});
  REQUIRE(finished.wait(240000));
  INFO(log.toStdString());
  REQUIRE(finished.first().at(0).toInt() == 0);
  REQUIRE_FALSE(finished.first().at(1).toBool());
  const std::optional<MeasuredRun> run = measured_run(ztune::read_run_record(record));
  REQUIRE(run->losses.size() == 3);
  for (double l : run->losses) CHECK(std::isfinite(l));
  // A byte-level model starts near ln(256) = 5.55 nats.
  CHECK(run->losses.front() == Approx(std::log(256.0)).margin(0.3));
  REQUIRE(run->step_time_s.has_value());
  CHECK(*run->step_time_s > 0);
  REQUIRE(run->peak_memory_bytes.has_value());
  CHECK(*run->peak_memory_bytes > 1e6);
  const QString text = compare_run(*run, *run->step_time_s * 2.0);
  CHECK(text.contains(QStringLiteral("predicted")));
}

// The Run panel keeps no second copy of a run's output (keep_output(false)):
// the output still streams, and nothing accumulates behind it.
TEST_CASE("Run: a child whose output is not kept still streams it", "[gui][run]") {
  ChildProcess child;
  child.keep_output(false);
  QSignalSpy finished(&child, &ChildProcess::finished);
  QString log;
  QObject::connect(&child, &ChildProcess::output, [&log](const QString& t) { log += t; });
  child.start(QStringLiteral("/bin/sh"), {"-c", "echo streamed; echo to-stderr >&2"});
  REQUIRE(finished.wait(30000));
  CHECK(log.contains(QStringLiteral("streamed")));
  CHECK(log.contains(QStringLiteral("to-stderr")));
  CHECK(child.standard_output().isEmpty());
  CHECK(child.standard_error().isEmpty());
}

// A child killed by a signal: QProcess reports a crash whose exit code is the
// signal's number, which the Run panel names (run_ending). Oracle: kill(1)'s
// SIGKILL is 9 on Linux.
TEST_CASE("Run: a child killed by a signal is reported with the signal's number", "[gui][run]") {
  ChildProcess child;
  QSignalSpy finished(&child, &ChildProcess::finished);
  child.start(QStringLiteral("/bin/sh"), {"-c", "kill -9 $$"});
  REQUIRE(finished.wait(30000));
  CHECK(finished.first().at(1).toBool());
  CHECK(run_ending(finished.first().at(0).toInt(), finished.first().at(1).toBool()) ==
        "ztune run was killed by SIGKILL (signal 9)");
}
