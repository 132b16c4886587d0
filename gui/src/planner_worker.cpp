#include "ztune/gui/planner_worker.hpp"

#include <algorithm>
#include <exception>

#include <nlohmann/json.hpp>

#include "ztune/vocab/input_error.hpp"
#include "ztune/simulator/graph_builder.hpp"
#include "ztune/simulator/simulate.hpp"
#include "ztune/tuner/objective.hpp"
#include "ztune/tuner/search.hpp"
#include "ztune/tuner/results_db.hpp"
#include "ztune/tuner/stored_search_options.hpp"

namespace ztune::gui {
namespace {

QString q(const std::string& s) { return QString::fromStdString(s); }

/// What the results database keeps beside the options (tuner's one writer of them).
SearchRequest request_of(const SearchInputs& in) {
  SearchRequest r;
  r.source = "ztune-planner";
  r.cluster = in.cluster.toStdString();
  r.model = in.model.toStdString();
  r.seq = in.seq;
  r.profile = in.profile.toStdString();
  return r;
}

}  // namespace

QList<int> scaling_gpu_counts(const Cluster& c) {
  QList<int> counts;
  const int total = c.total_devices();
  for (int n = std::max(1, c.node.gpus); n < total; n *= 2) counts << n;
  counts << total;
  return counts;
}

void PlannerWorker::search(const SearchInputs& inputs) {
  InputResolution res = resolve_inputs(inputs);
  if (!res.ok()) {
    emit searchFailed(QList<InputIssue>(res.issues.begin(), res.issues.end()));
    return;
  }
  SearchOutcome out;
  out.inputs = std::move(*res.inputs);
  out.asked = inputs;
  SearchOptions o = out.inputs.options;
  o.stop = &stop_;
  try {
    out.result = run_search(out.inputs.model, out.inputs.cluster, out.inputs.profile, o,
                            [this](const SearchProgress& p) {
                              emit searchProgress(p.done, p.total, static_cast<int>(p.phase));
                            });
  } catch (const InputError& e) {
    const QString m = q(e.what());
    emit searchFailed({InputIssue{field_of_message(m), m}});
    return;
  } catch (const std::exception& e) {
    emit searchFailed({InputIssue{InputField::other, QStringLiteral("search failed: ") + q(e.what())}});
    return;
  }
  if (out.result.plans.empty()) {
    // The table shows the closest plans when nothing fits: time them too (a
    // handful of analytical predictions), so a row says what it would run at.
    for (auto& c : out.result.closest)
      if (!c.timed)
        time_candidate(c, out.inputs.model, out.inputs.cluster, out.inputs.profile, out.result.objective,
                       out.result.tokens, out.result.gpu_hour_price);
  }
  const QString explaining = q(after_search_work(out.result.plans.empty() || out.result.feasible == 0));
  if (!out.result.interrupted && !stop_.load()) emit searchExplaining(explaining);
  if (!out.result.plans.empty() && out.result.feasible > 0 && !out.result.interrupted) {
    try {
      out.tight_memory = tight_memory_alternative(out.inputs.model, out.inputs.cluster, out.inputs.profile, o,
                                                  out.result.plans.front());
    } catch (const std::exception&) {  // the margin's search refused: the result stands without its note
    }
  }
  if (out.result.feasible == 0 && !out.result.interrupted) {
    // A few memory-only searches (more GPUs, relaxed rules): the same hints as the command line's.
    try {
      out.fit_hints =
          explain_infeasible(out.inputs.model, out.inputs.cluster, out.inputs.profile, o, out.result);
    } catch (const std::exception& e) {  // a hint's search refused: the result stands, without hints
      out.db_note = QStringLiteral("no fit hints: ") + q(e.what());
    }
  }
  // Cancel while the finished search was being explained: what that work
  // found so far is not shown (a margin or hint from an interrupted search
  // would be wrong), and the window says so, as `ztune search` does. The
  // margin's note had silently gone missing.
  if (!out.result.interrupted && stop_.load()) {
    out.fit_hints.clear();
    out.tight_memory.reset();
    out.cancelled_while = explaining;
  }
  out.accuracy = accuracy_for(out.inputs.cluster, to_string(out.inputs.options.space.engine));
  if (db_path_.isEmpty()) {
    emit searchFinished(out);
    return;
  }
  // The results first: storing waits up to 30 s for a lock another writer
  // holds, and had kept finished results behind "Searching…" that long.
  out.storing = true;
  emit searchFinished(out);
  qint64 id = 0;
  QString note;
  try {
    // Cancel ends a wait for another writer's lock (the window's close waits for this job).
    auto db = ResultsDb::open(db_path_.toStdString(), DbAccess::write, &stop_);
    // The database keeps the best `top` plans of a search, as `ztune search` stores them
    // (the search itself kept every plan that fits, for the table).
    SearchOptions stored = out.inputs.options;
    stored.top = std::max(inputs.top, 1);
    id = db.store_search({out.inputs.cluster, out.inputs.model, &out.inputs.profile,
                          search_options_to_json(request_of(inputs), stored), out.result,
                          static_cast<std::size_t>(stored.top)});
  } catch (const std::exception& e) {
    note = stop_.load() ? QStringLiteral("cancelled while waiting for the results database %1 (%2)")
                              .arg(db_path_, q(e.what()))
                        : q(e.what());
  }
  emit searchStored(id, note);
}

void PlannerWorker::scaling(const ResolvedInputs& inputs, const QList<int>& gpu_counts, quint64 tag) {
  for (int n : gpu_counts) {
    if (stop_.load()) {
      emit scalingFinished(true);
      return;
    }
    SearchOptions o = inputs.options;
    o.stop = &stop_;
    ScalingPoint pt;
    pt.tag = tag;
    pt.gpus = n;
    try {
      const BestOnDevices r = best_plan_on(inputs.model, inputs.cluster, inputs.profile, o, n);
      if (r.interrupted) {
        emit scalingFinished(true);
        return;
      }
      if (r.best) {
        const Candidate& best = *r.best;
        pt.feasible = true;
        pt.tokens_per_s = best.time().tokens_per_s;
        pt.mfu = best.time().mfu;
        pt.tflops_per_gpu = best.time().model_tflops_per_gpu;
        pt.plan = q(best.plan.summary());
      }
    } catch (const std::exception& e) {
      pt.plan = q(e.what());  // e.g. a batch this count cannot divide: shown as the point's note
    }
    emit scalingPoint(pt);
  }
  emit scalingFinished(false);
}

void PlannerWorker::simulate(const ResolvedInputs& inputs, const Plan& plan, quint64 tag) {
  try {
    sim::SimOptions so;
    so.memory_samples = false;
    // Cancelled (another plan selected, the window closed): a graph of millions
    // of operations had kept the closed window's process alive for seconds.
    so.stop = &stop_;
    // The simulator's own operation budget, as `ztune predict --simulate` and
    // the search build the graph: a smaller one grouped layers differently
    // and gave another time (0.2 % on 100b); the timeline merges what it cannot draw.
    const sim::SimResult r = sim::simulate(inputs.model, plan, inputs.cluster, inputs.profile, so);
    SimulationOutcome out;
    out.tag = tag;
    out.plan = plan;
    out.operations = r.graph.size();
    out.time = sim::to_time_prediction(r, predict_time(inputs.model, plan, inputs.cluster, inputs.profile));
    out.timeline = timeline_from_simulation(r);
    emit simulationFinished(out);
  } catch (const sim::SimulationStopped&) {
    emit simulationFailed(tag, QStringLiteral("the simulation was cancelled"));
  } catch (const sim::GraphTooLarge& e) {
    // Its message is the command line's (it names --simulate): said in the planner's words.
    emit simulationFailed(tag, QStringLiteral("the plan is too large to simulate: %1; its analytical estimate stands")
                                   .arg(q(e.reason())));
  } catch (const std::exception& e) {
    emit simulationFailed(tag, q(e.what()));
  }
}

}  // namespace ztune::gui
