#include "ztune/gui/planner_document.hpp"

#include <exception>

#include "ztune/tuner/results_db.hpp"

namespace ztune::gui {
namespace {

QString rank_label(int source_row) { return QStringLiteral("#%1").arg(source_row + 1); }

}  // namespace

PlannerDocument::PlannerDocument(QObject* parent) : QObject(parent) {
  try {
    db_path_ = QString::fromStdString(default_db_path());
  } catch (const std::exception&) {
    db_path_.clear();  // neither XDG_DATA_HOME nor HOME: searches are not stored
  }

  PlannerWorker* search = &search_runner_.worker();
  connect(search, &PlannerWorker::searchProgress, this, &PlannerDocument::searchProgress);
  connect(search, &PlannerWorker::searchExplaining, this, &PlannerDocument::searchExplaining);
  connect(search, &PlannerWorker::searchFinished, this, &PlannerDocument::on_search_finished);
  connect(search, &PlannerWorker::searchFailed, this, &PlannerDocument::searchFailed);
  connect(search, &PlannerWorker::searchStored, this, [this](qint64 id, const QString& note) {
    // The outcome shown may since have been replaced (a search reopened from History).
    if (!outcome_ || !outcome_->storing) return;
    outcome_->storing = false;
    outcome_->db_id = id;
    if (!note.isEmpty()) outcome_->db_note = note;
    emit searchStored();
  });
  connect(&search_runner_, &WorkerRunner::busyChanged, this, &PlannerDocument::searchRunning);

  PlannerWorker* scaling = &scaling_runner_.worker();
  connect(scaling, &PlannerWorker::scalingPoint, this, [this](const ScalingPoint& p) {
    if (p.tag == scaling_tag_) scaling_.add_point(p);
  });
  connect(&scaling_runner_, &WorkerRunner::busyChanged, this, &PlannerDocument::scalingRunning);

  PlannerWorker* sim = &simulation_runner_.worker();
  connect(sim, &PlannerWorker::simulationFinished, this, &PlannerDocument::on_simulated);
  connect(sim, &PlannerWorker::simulationFailed, this, [this](quint64 tag, const QString& message) {
    if (tag == simulation_tag_) emit simulationFailed(message);
  });
}

PlannerDocument::~PlannerDocument() {
  search_runner_.cancel();
  scaling_runner_.cancel();
  simulation_runner_.cancel();
}

void PlannerDocument::set_database(const QString& path) { db_path_ = path; }

void PlannerDocument::start_search(const SearchInputs& inputs) {
  search_runner_.submit([inputs, db = db_path_](PlannerWorker& w) {
    w.set_database(db);
    w.search(inputs);
  });
}

void PlannerDocument::cancel_search() { search_runner_.cancel(); }

void PlannerDocument::on_search_finished(const SearchOutcome& outcome) {
  show_outcome(outcome);
  searched_ = outcome.asked;  // show_outcome forgot them: these results are the search's
  emit searchFinished();
}

void PlannerDocument::set_outcome(SearchOutcome outcome) {
  std::optional<SearchInputs> asked = outcome.asked;
  show_outcome(std::move(outcome));
  searched_ = std::move(asked);  // a reopened search the form can ask: fresh once the form holds it
  // The window's title, status and search report follow, as for a search of
  // its own (a reopened search had left them describing the previous one).
  emit searchFinished();
}

void PlannerDocument::note_inputs(const SearchInputs& now) {
  const bool stale = outcome_.has_value() && (!searched_ || !(*searched_ == now));
  if (stale == stale_) return;
  stale_ = stale;
  emit staleChanged(stale_);
}

void PlannerDocument::show_outcome(SearchOutcome outcome) {
  cancel_scaling();
  outcome_ = std::move(outcome);
  searched_.reset();  // a reopened search's inputs are not known here; on_search_finished sets a search's
  if (stale_) {
    stale_ = false;
    emit staleChanged(false);
  }
  selected_.reset();
  simulation_.reset();
  ++simulation_tag_;  // a simulation of the previous search's plan is stale
  // Nothing fits: the table shows the plans closest to fitting (their memory
  // marked as over), so there is something to select, compare and read.
  const auto& r = outcome_->result;
  plans_.set_plans(r.plans.empty() ? r.closest : r.plans, r.tokens, r.objective, r.gpu_hour_price,
                   outcome_->inputs.model.layers);
  set_compared({});
  scaling_.clear();
  if (!select(0)) {
    memory_.clear();
    time_.clear();
    emit selectionChanged();
  }
  if (auto_scaling_) start_scaling();
}

bool PlannerDocument::select(int row) {
  const int source = plans_.plan_index(row);
  const Candidate* c = plans_.candidate(row);
  if (c == nullptr) return false;
  selected_ = source;
  simulation_.reset();
  ++simulation_tag_;
  memory_.set_memory({rank_label(source)}, {c->prediction.memory});
  show_selected_time();
  emit selectionChanged();
  if (auto_simulate_ && outcome_) {
    emit simulationStarted();
    simulation_runner_.submit([inputs = outcome_->inputs, plan = c->plan, tag = simulation_tag_](PlannerWorker& w) {
      w.simulate(inputs, plan, tag);
    });
  }
  return true;
}

const Candidate* PlannerDocument::selected() const { return selected_ ? plans_.candidate(*selected_) : nullptr; }

int PlannerDocument::selected_row() const {
  return selected_ ? plans_.row_of(*selected_) : -1;
}

void PlannerDocument::show_selected_time() {
  const Candidate* c = selected();
  if (c == nullptr) {
    time_.clear();
    return;
  }
  // The analytical estimate ranks the space; the simulator re-times the selected plan.
  QStringList labels{QStringLiteral("Analytical")};
  std::vector<TimePrediction> times{c->prediction.time};
  if (simulation_) {
    labels << QStringLiteral("Simulated");
    times.push_back(simulation_->time);
  }
  time_.set_times(labels, times);
}

void PlannerDocument::on_simulated(const SimulationOutcome& outcome) {
  if (outcome.tag != simulation_tag_) return;  // answers an earlier selection
  simulation_ = outcome;
  show_selected_time();
  emit simulationFinished();
}

void PlannerDocument::set_compared(const QList<int>& rows) {
  QStringList labels;
  std::vector<Candidate> plans;
  for (int row : rows) {
    const Candidate* c = plans_.candidate(row);
    if (c == nullptr) continue;
    labels << rank_label(plans_.plan_index(row));
    plans.push_back(*c);
  }
  if (plans.size() < 2) {
    labels.clear();
    plans.clear();
  }
  std::vector<MemoryPrediction> mem;
  std::vector<TimePrediction> times;
  for (const auto& c : plans) {
    mem.push_back(c.prediction.memory);
    times.push_back(c.time());
  }
  compare_memory_.set_memory(labels, mem);
  compare_time_.set_times(labels, times);
  compare_.set_plans(labels, std::move(plans), outcome_ ? outcome_->result.tokens : 0.0,
                     outcome_ ? outcome_->inputs.model.layers : 0);
  emit compareChanged();
}

void PlannerDocument::start_scaling() {
  if (!outcome_) return;
  scaling_.clear();
  scaling_runner_.submit([inputs = outcome_->inputs, counts = scaling_gpu_counts(outcome_->inputs.cluster),
                          tag = ++scaling_tag_](PlannerWorker& w) { w.scaling(inputs, counts, tag); });
}

void PlannerDocument::cancel_scaling() {
  ++scaling_tag_;  // points still in flight belong to the cancelled curve
  scaling_runner_.cancel();
}

}  // namespace ztune::gui
