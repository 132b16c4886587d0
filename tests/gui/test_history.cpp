// History: searches stored by the worker are listed and reopen with the same
// plans in the same order; the history models pass QAbstractItemModelTester.
#include <catch2/catch.hpp>

#include <functional>

#include <nlohmann/json.hpp>

#include <QAbstractItemModelTester>
#include <QProcess>
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

namespace {

// A planner worker storing its searches in a fresh database, with spies on
// the two signals a search sends (its results, then what storing them came to).
struct StoringWorker {
  QTemporaryDir dir;
  const QString db_path = dir.filePath("results.db");
  PlannerWorker w;
  QSignalSpy finished{&w, &PlannerWorker::searchFinished};
  QSignalSpy stored_signal{&w, &PlannerWorker::searchStored};
  StoringWorker() { w.set_database(db_path); }
};

}  // namespace

TEST_CASE_METHOD(StoringWorker, "a stored search is listed and reopens with the same plans", "[gui][history]") {
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
  // The form that asks it: the inputs searched, field for field (M4: the
  // window fills its form with them; it had kept describing other inputs).
  CHECK(reopened.reopened);
  REQUIRE(reopened.asked.has_value());
  CHECK(*reopened.asked == in);
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
  // The free-text cells say themselves whole on hover: History caps their width.
  CHECK(runs.index(0, RunHistoryModel::plan).data(Qt::ToolTipRole).toString() == "dp2×tp1×pp1 z1");
  CHECK_FALSE(runs.index(0, RunHistoryModel::measured).data(Qt::ToolTipRole).isValid());
  SearchHistoryModel searches;
  SearchSummary s;
  s.id = 4;
  s.cluster = "eos-dgx-h100-superpod-partition-a-with-a-very-long-descriptive-name-x32";
  s.model = "llama-70b";
  s.best = "dp8×tp8×pp2 z1 mb1×256";
  searches.set_searches({s});
  CHECK(searches.index(0, SearchHistoryModel::cluster).data(Qt::ToolTipRole).toString() ==
        QString::fromStdString(s.cluster));
  CHECK(searches.index(0, SearchHistoryModel::best).data(Qt::ToolTipRole).toString() ==
        QString::fromStdString(s.best));
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

TEST_CASE_METHOD(StoringWorker,
                 "a search pinned to a mode stores and reopens with its pins, its plans those of `ztune search`",
                 "[gui][history][modes]") {
  SearchInputs in;
  in.cluster = "dgx-a100-80gbx16";
  in.model = "llama-7b";
  in.seq = 8192;
  in.top = 5;
  QStringList flags;  // the same search on the command line
  // What every plan must have, and that the reopened search asks again.
  std::function<bool(const Plan&)> pinned;
  std::function<bool(const SpaceOptions&)> asked;
  SECTION("context parallelism") {
    in.engine = "megatron";
    in.cp = 2;
    flags = {"--engine", "megatron", "--cp", "2"};
    pinned = [](const Plan& p) { return p.cp == 2; };
    asked = [](const SpaceOptions& o) { return o.cp == 2 && !o.ulysses; };
  }
  SECTION("Ulysses, with a bound on cp") {
    in.engine = "deepspeed";
    in.ulysses = 4;
    in.max_cp = 1;
    flags = {"--engine", "deepspeed", "--ulysses", "4", "--max-cp", "1"};
    pinned = [](const Plan& p) { return p.ulysses == 4 && p.cp == 1; };
    asked = [](const SpaceOptions& o) { return o.ulysses == 4 && o.max_cp == 1 && !o.cp; };
  }
  SECTION("hybrid sharding, with a bound on Ulysses") {
    in.engine = "fsdp";
    in.dp_shard = 8;
    in.max_ulysses = 1;
    flags = {"--engine", "fsdp", "--dp-shard", "8", "--max-ulysses", "1"};
    pinned = [](const Plan& p) { return p.dp_shard == 8 && p.zero_stage == 3 && p.hybrid_sharded(); };
    asked = [](const SpaceOptions& o) { return o.dp_shard == 8 && o.max_ulysses == 1; };
  }
  w.search(in);
  REQUIRE(finished.size() == 1);
  const auto original = finished.first().first().value<SearchOutcome>();
  REQUIRE_FALSE(original.result.plans.empty());
  for (const auto& c : original.result.plans) CHECK(pinned(c.plan));
  CHECK(asked(original.inputs.options.space));

  // The command line's best plans, in its order: the planner asked what `ztune search` asks.
  QProcess cli;
  cli.start(QStringLiteral(ZTUNE_BIN), QStringList{"search", "--no-db", "--json", "--top", "5", "--cluster",
                                                   in.cluster, "--model", in.model, "--seq", "8192"} +
                                           flags);
  REQUIRE(cli.waitForFinished(120000));
  INFO(QString::fromUtf8(cli.readAllStandardError()).toStdString());
  REQUIRE(cli.exitCode() == 0);
  const auto json = nlohmann::json::parse(cli.readAllStandardOutput().toStdString());
  const auto& plans = json.at("plans");
  REQUIRE(plans.size() == 5);
  for (std::size_t i = 0; i < plans.size(); ++i)
    CHECK(plan_from_json(plans[i].at("plan"), "ztune search --json").summary() ==
          original.result.plans[i].plan.summary());

  REQUIRE(stored_signal.size() == 1);
  const auto id = stored_signal.first().at(0).toLongLong();
  const auto stored = ResultsDb::open(db_path.toStdString()).search(id);
  REQUIRE(stored.has_value());
  const SearchOutcome reopened = outcome_from_stored_search(*stored);
  CHECK(asked(reopened.inputs.options.space));
  REQUIRE(reopened.result.plans.size() == static_cast<std::size_t>(in.top));
  for (std::size_t i = 0; i < reopened.result.plans.size(); ++i) {
    CHECK(pinned(reopened.result.plans[i].plan));
    CHECK(reopened.result.plans[i].plan.summary() == original.result.plans[i].plan.summary());
  }
}

TEST_CASE("a search the form cannot ask reopens without a form", "[gui][history]") {
  // ztune search's --pp has no field: the reopened search keeps the form as
  // it is and says so (the stale banner), rather than fill it with a search
  // that would ask something else.
  QTemporaryDir dir;
  const QString db_path = dir.filePath("results.db");
  const auto run = [&](const QStringList& extra) {
    QProcess cli;
    cli.start(QStringLiteral(ZTUNE_BIN),
              QStringList{"search", "--cluster", "dgx2", "--model", "gpt2-1.5b", "--top", "3", "--no-simulate", "--db",
                          db_path} +
                  extra);
    REQUIRE(cli.waitForFinished(120000));
    INFO(QString::fromUtf8(cli.readAllStandardError()).toStdString());
    REQUIRE(cli.exitCode() == 0);
  };
  run({"--pp", "2"});
  run({});
  const auto db = ResultsDb::open(db_path.toStdString());
  const auto searches = db.searches();
  REQUIRE(searches.size() == 2);
  int with_form = 0, without = 0;
  for (const auto& row : searches) {
    const auto stored = db.search(row.id);
    REQUIRE(stored.has_value());
    const SearchOutcome reopened = outcome_from_stored_search(*stored);
    CHECK(reopened.reopened);
    if (reopened.asked) {
      ++with_form;
      CHECK(reopened.asked->cluster == "dgx2");
      CHECK(reopened.asked->model == "gpt2-1.5b");
    } else {
      ++without;
      for (const auto& c : reopened.result.plans) CHECK(c.plan.pp == 2);  // the pinned one
    }
  }
  CHECK(with_form == 1);
  CHECK(without == 1);
}
