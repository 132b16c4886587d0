// History: searches stored by the worker are listed and reopen with the same
// plans in the same order; the history models pass QAbstractItemModelTester.
#include <catch2/catch.hpp>

#include <QAbstractItemModelTester>
#include <QSignalSpy>
#include <QFile>
#include <QFileInfo>
#include <QTemporaryDir>

#include "ztune/gui/history_store.hpp"
#include "ztune/gui/planner_worker.hpp"
#include "ztune/gui/profile_history_model.hpp"
#include "ztune/gui/run_history_model.hpp"
#include "ztune/gui/search_history_model.hpp"
#include "ztune/gui/stored_search.hpp"
#include "ztune/tuner/results_db.hpp"

using namespace ztune;
using namespace ztune::gui;

TEST_CASE("a stored search is listed and reopens with the same plans", "[gui][history]") {
  QTemporaryDir dir;
  const QString db_path = dir.filePath("results.db");
  PlannerWorker w;
  w.set_database(db_path);
  QSignalSpy finished(&w, &PlannerWorker::searchFinished);
  QSignalSpy stored_signal(&w, &PlannerWorker::searchStored);
  SearchInputs in;
  in.cluster = "dgx2";
  in.model = "gpt2-1.5b";
  in.top = 10;
  in.objective = "time";
  // Reopened under ztune's executor, a DeepSpeed search's plans had been
  // priced with ztune's accounting of their states (fits shown as not fitting).
  SECTION("ztune's executor") { in.engine = "ztune"; }
  SECTION("deepspeed") { in.engine = "deepspeed"; }
  w.search(in);
  REQUIRE(finished.size() == 1);
  auto original = finished.first().first().value<SearchOutcome>();
  // The results come first, then what storing them came to.
  CHECK(original.storing);
  REQUIRE(stored_signal.size() == 1);
  original.db_id = stored_signal.first().at(0).toLongLong();
  REQUIRE(original.db_id > 0);
  REQUIRE(stored_signal.first().at(1).toString().isEmpty());
  REQUIRE(original.db_note.isEmpty());

  const auto db = ResultsDb::open(db_path.toStdString());
  SearchHistoryModel searches;
  QAbstractItemModelTester t1(&searches, QAbstractItemModelTester::FailureReportingMode::Fatal);
  searches.set_searches(db.searches());
  REQUIRE(searches.rowCount() == 1);
  CHECK(searches.index(0, SearchHistoryModel::id).data(SearchHistoryModel::IdRole).toLongLong() == original.db_id);
  CHECK(searches.index(0, SearchHistoryModel::cluster).data().toString() == "dgx2");
  CHECK(searches.index(0, SearchHistoryModel::engine).data().toString() == in.engine);  // the one searched for
  CHECK(searches.index(0, SearchHistoryModel::best).data().toString() ==
        QString::fromStdString(original.result.plans.front().plan.summary()));

  const auto stored = db.search(original.db_id);
  REQUIRE(stored.has_value());
  const SearchOutcome reopened = outcome_from_stored_search(*stored);
  CHECK(reopened.inputs.cluster.name == "dgx2");
  CHECK(reopened.inputs.model.name == original.inputs.model.name);
  CHECK(reopened.inputs.options.objective == Objective::time);
  // The database keeps the search's best `top` plans; the outcome had every one that fits.
  REQUIRE(reopened.result.plans.size() == static_cast<std::size_t>(in.top));
  REQUIRE(original.result.plans.size() > reopened.result.plans.size());
  CHECK(reopened.result.feasible == original.result.feasible);
  for (std::size_t i = 0; i < reopened.result.plans.size(); ++i) {
    const auto& a = original.result.plans[i];
    const auto& b = reopened.result.plans[i];
    CHECK(b.plan.summary() == a.plan.summary());
    CHECK(b.prediction.memory.gpu_total_bytes == Approx(a.prediction.memory.gpu_total_bytes));
    CHECK(b.prediction.memory.fits() == a.prediction.memory.fits());
    CHECK(b.prediction.time.tokens_per_s == Approx(a.prediction.time.tokens_per_s));
    // The plans the search simulated (its best three, as `ztune search`
    // re-times them) show the time they were ranked by.
    CHECK(b.simulated.has_value() == (i < static_cast<std::size_t>(kSimulateTopDefault)));
    CHECK(b.simulated.has_value() == a.simulated.has_value());
    CHECK(b.time().tokens_per_s == Approx(a.time().tokens_per_s));
    CHECK(b.objective == Approx(a.objective));
  }
  CHECK(reopened.inputs.options.space.engine == original.inputs.options.space.engine);
}

TEST_CASE("run history shows predicted against measured", "[gui][history]") {
  RunHistoryModel runs;
  QAbstractItemModelTester tester(&runs, QAbstractItemModelTester::FailureReportingMode::Fatal);
  RunSummary r;
  r.id = 3;
  r.plan = "dp2×tp1×pp1 z1";
  r.status = "ok";
  r.predicted_iteration_s = 0.9;
  r.measured_iteration_s = 1.0;
  runs.set_runs({r});
  REQUIRE(runs.rowCount() == 1);
  CHECK(runs.index(0, RunHistoryModel::predicted).data().toString() == "900 ms");
  CHECK(runs.index(0, RunHistoryModel::measured).data().toString() == "1.00 s");
  // (0.9 − 1.0) / 1.0 = −10 %.
  CHECK(runs.index(0, RunHistoryModel::error).data().toString() == "-10.0 %");
  CHECK(runs.index(0, RunHistoryModel::error).data(RunHistoryModel::SortRole).toDouble() == Approx(-0.1));
  CHECK(runs.index(0, RunHistoryModel::cluster).data().toString() == "—");
}

TEST_CASE("a history row the database could not read shows its id and why, not zeros", "[gui][history]") {
  SearchHistoryModel searches;
  QAbstractItemModelTester t1(&searches, QAbstractItemModelTester::FailureReportingMode::Fatal);
  SearchSummary s;
  s.id = 7;
  s.damaged = "search 7: column \"space\": expected a whole number, got text";
  searches.set_searches({s});
  CHECK(searches.index(0, SearchHistoryModel::id).data().toLongLong() == 7);
  CHECK(searches.index(0, SearchHistoryModel::best).data().toString() ==
        "damaged row: search 7: column \"space\": expected a whole number, got text");
  // Not "0 of 0": the figures are unknown.
  CHECK(searches.index(0, SearchHistoryModel::feasible).data().toString() == "—");
  CHECK(searches.index(0, SearchHistoryModel::feasible).data(Qt::ToolTipRole).toString().startsWith("damaged row:"));

  RunHistoryModel runs;
  QAbstractItemModelTester t2(&runs, QAbstractItemModelTester::FailureReportingMode::Fatal);
  RunSummary r;
  r.id = 4;
  r.damaged = "run 4: column \"measured_iteration_s\": expected a number, got text";
  runs.set_runs({r});
  CHECK(runs.index(0, RunHistoryModel::status).data().toString() == "damaged");
  CHECK(runs.index(0, RunHistoryModel::plan).data().toString().startsWith("damaged row: run 4: column"));
  CHECK(runs.index(0, RunHistoryModel::measured).data().toString() == "—");
}

// The planner's Profiles tab: one row per profile of each cluster, the shipped
// one first, errors as percentages (rows written by hand: the model only shows
// what calibration/history computed).
TEST_CASE("the profile history model shows each cluster's profiles in order", "[gui][history]") {
  ProfileHistoryModel m;
  QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
  calibration::ProfileHistoryRow shipped;
  shipped.name = "cpu";
  shipped.runs_since = 5;
  shipped.mean_abs_error = 0.5;
  shipped.last_error = 0.7;
  calibration::ProfileHistoryRow fitted;
  fitted.id = 4;
  fitted.created = "2026-12-02T02:00:00Z";
  fitted.name = "local-cpu-calibrated";
  fitted.runs_since = 3;
  fitted.mean_abs_error = 0.05;
  fitted.last_error = 0.1;
  calibration::ProfileHistoryRow unused;
  unused.id = 5;
  unused.created = "2026-12-02T02:10:00Z";
  unused.name = "local-cpu-calibrated";
  m.set_histories({{"local-cpu", {shipped, fitted, unused}}});
  REQUIRE(m.rowCount() == 3);
  CHECK(m.index(0, ProfileHistoryModel::order).data().toString() == "shipped");
  CHECK(m.index(0, ProfileHistoryModel::stored).data().toString() == "(catalog)");
  CHECK(m.index(1, ProfileHistoryModel::order).data().toString() == "1");
  CHECK(m.index(1, ProfileHistoryModel::mean_error).data().toString() == "5.0 %");
  CHECK(m.index(1, ProfileHistoryModel::mean_error).data(ProfileHistoryModel::SortRole).toDouble() == Approx(0.05));
  CHECK(m.index(0, ProfileHistoryModel::next_error).data().toString() == "70.0 %");
  CHECK(m.index(2, ProfileHistoryModel::mean_error).data().toString() == "—");
  CHECK(m.index(2, ProfileHistoryModel::runs_since).data().toInt() == 0);
}

TEST_CASE("the history view reads the database and never creates it", "[gui][history]") {
  QTemporaryDir dir;
  const QString missing = dir.filePath("sub/results.db");
  // Nothing stored yet: an empty history with a note, and no file made.
  const HistorySnapshot h = load_history(missing, 10);
  CHECK(h.searches.empty());
  CHECK(h.runs.empty());
  REQUIRE(h.notes.size() == 1);
  CHECK_THAT(h.notes[0], Catch::Contains("is not there yet"));
  CHECK(!QFileInfo::exists(dir.filePath("sub")));
  CHECK_THROWS_WITH(stored_run(missing, 1), Catch::Contains("no such file"));
  // An empty file (`touch`) is left at 0 bytes, not given the schema.
  const QString empty = dir.filePath("empty.db");
  QFile f(empty);
  REQUIRE(f.open(QIODevice::WriteOnly));
  f.close();
  CHECK_THROWS_WITH(load_history(empty, 10), Catch::Contains("an empty file (0 bytes)"));
  CHECK(QFileInfo(empty).size() == 0);
}
