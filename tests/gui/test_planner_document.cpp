// The planner's state without its widgets: search through the document,
// selection updating the chart models, comparison, simulation of the selected
// plan, and bad inputs.
#include <catch2/catch.hpp>

#include <numeric>

#include <QAbstractItemModelTester>
#include <QColor>
#include <QSignalSpy>

#include "ztune/gui/planner_document.hpp"
#include "ztune/tuner/results_db.hpp"

using namespace ztune;
using namespace ztune::gui;

namespace {

SearchInputs small_search() {
  SearchInputs in;
  in.cluster = "dgx2";
  in.model = "gpt2-1.5b";
  in.top = 20;
  return in;
}

double column_sum(const QAbstractItemModel& m, int column, int role) {
  double s = 0;
  for (int r = 0; r < m.rowCount(); ++r) s += m.index(r, column).data(role).toDouble();
  return s;
}

}  // namespace

TEST_CASE("a search through the document fills the table and selects the best plan", "[gui][document]") {
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QAbstractItemModelTester t1(&doc.plans(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  // The tester runs its checks from modelReset before it clears its own "reset
  // in flight" flag, and those checks call fetchMore: with more plans than one
  // fetch, its rows would read as inserted inside the reset. The views fetch
  // after the reset; the lazy-fetch test exercises fetchMore under the tester.
  t1.setUseFetchMore(false);
  QAbstractItemModelTester t2(&doc.memory(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  QAbstractItemModelTester t3(&doc.time(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  QSignalSpy stored_signal(&doc, &PlannerDocument::searchStored);
  QSignalSpy selection(&doc, &PlannerDocument::selectionChanged);
  doc.start_search(small_search());
  REQUIRE(finished.wait(60000));
  REQUIRE(doc.outcome().has_value());
  // Shown before it is stored (storing may wait 30 s for another writer's
  // lock); the database's id follows.
  if (stored_signal.isEmpty()) {
    CHECK(doc.outcome()->storing);
    REQUIRE(stored_signal.wait(60000));
  }
  CHECK_FALSE(doc.outcome()->storing);
  REQUIRE(doc.plans().rowCount() > 1);
  CHECK(doc.selected_row() == 0);
  REQUIRE(doc.selected() != nullptr);
  CHECK(doc.selected()->plan.summary() == doc.outcome()->result.plans.front().plan.summary());
  CHECK(selection.size() >= 1);
  INFO("results database: " << doc.outcome()->db_note.toStdString());
  CHECK(doc.outcome()->db_id > 0);  // stored in the (test's) results database
  // The table holds every plan that fits (issue 23: it held the best 50), the
  // database the best `top` (20) as `ztune search` stores them.
  CHECK(doc.plans().total() == doc.outcome()->result.feasible);
  CHECK(doc.plans().total() > 20);
  const auto stored = ResultsDb::open(doc.database().toStdString()).search(doc.outcome()->db_id);
  REQUIRE(stored.has_value());
  CHECK(stored->at("candidates").size() == 20);
}

TEST_CASE("selecting a plan updates the memory and time chart models", "[gui][document]") {
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  doc.start_search(small_search());
  REQUIRE(finished.wait(60000));
  REQUIRE(doc.plans().rowCount() > 3);

  QSignalSpy selection(&doc, &PlannerDocument::selectionChanged);
  REQUIRE(doc.select(3));
  CHECK(selection.size() == 1);
  const Candidate* c = doc.selected();
  REQUIRE(c != nullptr);
  const auto& plans = doc.outcome()->result.plans;
  CHECK(c->plan.summary() == plans[3].plan.summary());
  // The memory chart's column is this plan's lines, and they add up to its total.
  REQUIRE(doc.memory().columnCount() == 1);
  CHECK(doc.memory().headerData(0, Qt::Horizontal).toString() == "#4");
  CHECK(column_sum(doc.memory(), 0, BreakdownModel::RawRole) ==
        Approx(plans[3].prediction.memory.gpu_total_bytes).epsilon(1e-9));
  // The time chart's column adds up to this plan's iteration time.
  REQUIRE(doc.time().columnCount() == 1);
  CHECK(column_sum(doc.time(), 0, BreakdownModel::RawRole) ==
        Approx(plans[3].prediction.time.iteration_s).epsilon(1e-9));
  // Out of range: nothing changes.
  CHECK_FALSE(doc.select(10000));
  CHECK(doc.selected()->plan.summary() == plans[3].plan.summary());

  // Sorted by memory ascending, row 0 is the smallest-memory plan.
  doc.plans().sort(PlanTableModel::gpu_memory, Qt::AscendingOrder);
  REQUIRE(doc.select(0));
  double least = plans.front().prediction.memory.gpu_total_bytes;
  for (const auto& p : plans) least = std::min(least, p.prediction.memory.gpu_total_bytes);
  CHECK(column_sum(doc.memory(), 0, BreakdownModel::RawRole) == Approx(least).epsilon(1e-9));
}

TEST_CASE("comparing plans fills one column per plan", "[gui][document]") {
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  doc.start_search(small_search());
  REQUIRE(finished.wait(60000));
  REQUIRE(doc.plans().rowCount() >= 3);
  doc.set_compared({0, 2});
  CHECK(doc.compare().columnCount() == 2);
  CHECK(doc.compare_memory().columnCount() == 2);
  CHECK(doc.compare_time().columnCount() == 2);
  CHECK(doc.compare().headerData(1, Qt::Horizontal).toString() == "#3");
  doc.set_compared({1});  // one plan is no comparison
  CHECK(doc.compare().columnCount() == 0);
}

TEST_CASE("the selected plan is simulated and its timeline drawn", "[gui][document]") {
  PlannerDocument doc;
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  QSignalSpy simulated(&doc, &PlannerDocument::simulationFinished);
  QSignalSpy sim_failed(&doc, &PlannerDocument::simulationFailed);
  doc.start_search(small_search());
  REQUIRE(finished.wait(60000));
  if (simulated.isEmpty()) REQUIRE(simulated.wait(60000));
  CHECK(sim_failed.isEmpty());
  REQUIRE(doc.simulation().has_value());
  const SimulationOutcome& s = *doc.simulation();
  CHECK(s.plan.summary() == doc.selected()->plan.summary());
  REQUIRE_FALSE(s.timeline.empty());
  CHECK(s.timeline.end_s == Approx(s.time.iteration_s).epsilon(1e-9));
  for (const auto& item : s.timeline.items) {
    CHECK(item.start_s >= -1e-12);
    CHECK(item.end_s <= s.timeline.end_s * (1 + 1e-9));
    CHECK(item.row < static_cast<int>(s.timeline.rows.size()));
  }
  // The time chart now shows the analytical and the simulated breakdowns; each sums to its iteration.
  REQUIRE(doc.time().columnCount() == 2);
  CHECK(doc.time().headerData(1, Qt::Horizontal).toString() == "Simulated");
  CHECK(column_sum(doc.time(), 1, BreakdownModel::RawRole) == Approx(s.time.iteration_s).epsilon(1e-6));
}

// A plan whose iteration has too many operations to simulate (the simulator's
// kMaxSimulatedOps): the planner says so in its own words, not with the
// command line's "--simulate" advice, and the analytical figures stay.
TEST_CASE("a plan too large to simulate is said in the planner's words", "[gui][document]") {
  PlannerDocument doc;
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  QSignalSpy simulated(&doc, &PlannerDocument::simulationFinished);
  QSignalSpy sim_failed(&doc, &PlannerDocument::simulationFailed);
  SearchInputs in = small_search();
  in.global_batch = std::int64_t{1} << 26;  // over 65,536 micro-batches a step, whatever the plan
  doc.start_search(in);
  REQUIRE(finished.wait(60000));
  REQUIRE(doc.selected() != nullptr);
  if (sim_failed.isEmpty()) REQUIRE(sim_failed.wait(120000));
  CHECK(simulated.isEmpty());
  const QString said = sim_failed.first().at(0).toString();
  INFO(said.toStdString());
  CHECK(said.startsWith(QStringLiteral("the plan is too large to simulate: ")));
  CHECK(said.endsWith(QStringLiteral("; its analytical estimate stands")));
  CHECK_FALSE(said.contains(QStringLiteral("--simulate")));
  CHECK(doc.time().columnCount() == 1);  // the analytical breakdown only
}

TEST_CASE("the scaling curve follows a finished search", "[gui][document]") {
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  QAbstractItemModelTester tester(&doc.scaling(), QAbstractItemModelTester::FailureReportingMode::Fatal);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  QSignalSpy scaling(&doc, &PlannerDocument::scalingRunning);
  doc.start_search(small_search());
  REQUIRE(finished.wait(60000));
  while (doc.scaling_running()) REQUIRE(scaling.wait(60000));
  REQUIRE(doc.scaling().rowCount() == 1);  // one DGX-2: 16 GPUs only
  CHECK(doc.scaling().index(0, ScalingModel::gpus).data().toInt() == 16);
  // The best plan at 16 GPUs is the search's best plan.
  CHECK(doc.scaling().index(0, ScalingModel::tokens_per_s).data().toDouble() ==
        Approx(doc.outcome()->result.plans.front().time().tokens_per_s));
}

TEST_CASE("bad inputs reach the document as failed, the previous search stays", "[gui][document]") {
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  QSignalSpy failed(&doc, &PlannerDocument::searchFailed);
  doc.start_search(small_search());
  REQUIRE(finished.wait(60000));
  const int rows = doc.plans().rowCount();
  SearchInputs bad = small_search();
  bad.gpus = 17;
  doc.start_search(bad);
  REQUIRE(failed.wait(60000));
  const auto issues = failed.first().first().value<QList<InputIssue>>();
  REQUIRE(issues.size() == 1);
  CHECK(issues[0].field == InputField::gpus);
  CHECK(issues[0].message.startsWith("--gpus: 17"));
  CHECK(doc.plans().rowCount() == rows);
}

TEST_CASE("cancel through the document", "[gui][document]") {
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  QSignalSpy running(&doc, &PlannerDocument::searchRunning);
  doc.start_search(SearchInputs{});
  doc.cancel_search();
  // The search either saw the cancel (interrupted) or had already finished; it always finishes.
  REQUIRE(finished.wait(60000));
  if (doc.searching()) REQUIRE(running.wait(5000));
  CHECK_FALSE(doc.searching());
}

TEST_CASE("when nothing fits, the outcome carries what would make a plan fit", "[gui][document]") {
  // 1T parameters on one V100 workstation: ~16 TB of model states (ZeRO
  // paper, 16 bytes each, DeepSpeed's engine) exceed its GPUs, host memory
  // and NVMe together.
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  SearchInputs in;
  in.cluster = "v100-workstation";
  in.model = "1t";
  in.engine = QStringLiteral("deepspeed");
  doc.start_search(in);
  REQUIRE(finished.wait(60000));
  REQUIRE(doc.outcome().has_value());
  CHECK(doc.outcome()->result.feasible == 0);
  const auto& hints = doc.outcome()->fit_hints;
  REQUIRE_FALSE(hints.empty());
  bool more_gpus = false;
  for (const auto& h : hints) more_gpus |= h.change == "more GPUs" && h.fits;
  CHECK(more_gpus);
  // The table shows the plans closest to fitting (it was empty), their memory marked as over.
  REQUIRE_FALSE(doc.outcome()->result.closest.empty());
  CHECK(doc.plans().total() == static_cast<int>(doc.outcome()->result.closest.size()));
  REQUIRE(doc.plans().rowCount() > 0);
  CHECK(doc.plans().index(0, PlanTableModel::gpu_memory).data().toString().endsWith(QStringLiteral(" ✘")));
  CHECK(doc.plans().index(0, PlanTableModel::gpu_memory).data(Qt::ForegroundRole).value<QColor>() == QColor(Qt::red));
  CHECK(doc.selected() != nullptr);
  // Timed, so a row says what the plan would run at if it fitted.
  for (const auto& c : doc.outcome()->result.closest) CHECK(c.timed);
  CHECK(doc.plans().index(0, PlanTableModel::gpu_memory).data(Qt::ToolTipRole).toString().contains("does not fit ("));
}

TEST_CASE("results go stale when an input changes, and fresh again when it comes back or a search runs",
          "[gui][document][stale]") {
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  QSignalSpy stale(&doc, &PlannerDocument::staleChanged);
  SearchInputs in = small_search();
  doc.note_inputs(in);  // nothing shown yet: nothing to go stale
  CHECK_FALSE(doc.stale());
  doc.start_search(in);
  REQUIRE(finished.wait(60000));
  doc.note_inputs(in);
  CHECK_FALSE(doc.stale());
  CHECK(stale.isEmpty());
  SearchInputs edited = in;
  edited.global_batch = 64;
  doc.note_inputs(edited);
  CHECK(doc.stale());
  REQUIRE(stale.size() == 1);
  CHECK(stale.takeFirst().at(0).toBool());
  doc.note_inputs(edited);  // no second signal for the same state
  CHECK(stale.isEmpty());
  doc.note_inputs(in);  // back to what was searched
  CHECK_FALSE(doc.stale());
  REQUIRE(stale.size() == 1);
  CHECK_FALSE(stale.takeFirst().at(0).toBool());
  doc.note_inputs(edited);
  REQUIRE(doc.stale());
  doc.start_search(edited);
  REQUIRE(finished.wait(60000));
  CHECK_FALSE(doc.stale());  // the new results answer the new inputs
  doc.note_inputs(edited);
  CHECK_FALSE(doc.stale());
  // A search reopened from history that the form cannot ask (ztune search's
  // pins): its inputs are not known, the first edit marks it. The window
  // hears of it as of a search's end (its title, status and report had kept
  // describing the previous search).
  const auto searches_seen = finished.size();
  SearchOutcome reopened = *doc.outcome();
  reopened.reopened = true;
  reopened.asked.reset();
  doc.set_outcome(reopened);
  CHECK(finished.size() == searches_seen + 1);
  CHECK_FALSE(doc.stale());
  doc.note_inputs(edited);
  CHECK(doc.stale());
  // One the form can ask answers that form (the window fills it).
  reopened.asked = edited;
  doc.set_outcome(reopened);
  doc.note_inputs(edited);
  CHECK_FALSE(doc.stale());
}

TEST_CASE("a search replaced by the next one answers its own inputs, not the next one's", "[gui][document][stale]") {
  // Ctrl+R while a search runs cancels it and queues the next: the first's
  // results arrive, then the next is refused. They had been taken for the
  // next search's (stale banner off beside a form that was never searched).
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  QSignalSpy failed(&doc, &PlannerDocument::searchFailed);
  const SearchInputs first = small_search();
  SearchInputs next = small_search();
  next.gpus = 100000;  // past the cluster: refused
  doc.start_search(first);
  doc.start_search(next);
  REQUIRE(failed.wait(60000));
  REQUIRE(finished.size() == 1);  // the first one, cancelled or not, came back first
  doc.note_inputs(next);          // the form holds the refused inputs
  CHECK(doc.stale());
  doc.note_inputs(first);         // the results answer the first search's
  CHECK_FALSE(doc.stale());
}

TEST_CASE("a search reopened from the database is stale beside any form", "[gui][document][stale]") {
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  doc.start_search(small_search());
  REQUIRE(finished.wait(60000));
  SearchOutcome reopened = *doc.outcome();
  reopened.asked.reset();  // what outcome_from_stored_search gives: the row keeps no form
  doc.set_outcome(reopened);
  doc.note_inputs(small_search());
  CHECK(doc.stale());
}

TEST_CASE("a shard group no layout's data-parallel group divides is said as ztune search says it", "[gui][document][modes]") {
  // No device count of the search splits into a data-parallel group that 3
  // ranks divide: known only once the layouts are enumerated, so, as on the
  // command line, it comes as the search's "what would make a plan fit", not
  // as a refusal of the input.
  PlannerDocument doc;
  doc.set_auto_simulate(false);
  doc.set_auto_scaling(false);
  QSignalSpy finished(&doc, &PlannerDocument::searchFinished);
  SearchInputs in;
  in.cluster = "dgx-a100-80gbx16";
  in.model = "llama-7b";
  in.engine = QStringLiteral("fsdp");
  in.dp_shard = 3;
  doc.start_search(in);
  REQUIRE(finished.wait(60000));
  REQUIRE(doc.outcome().has_value());
  CHECK(doc.outcome()->result.feasible == 0);
  bool shard = false, without = false;
  for (const auto& h : doc.outcome()->fit_hints) {
    shard |= h.change == "--dp-shard 3" && !h.fits && h.detail.starts_with("no layout of the devices searched");
    without |= h.change == "without --dp-shard" && h.fits;
  }
  CHECK(shard);
  CHECK(without);
}
