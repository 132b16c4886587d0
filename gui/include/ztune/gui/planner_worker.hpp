#pragma once
// The worker QObject that runs the tuner and the simulator off the UI thread
// (STYLE.md #18, hotspot's PerfParser): each job reports progress and ends with
// exactly one of its finished/failed signals carrying value types. cancel() may
// be called from any thread; a cancelled search still finishes, with the best
// plans found so far and result.interrupted set.
#include <atomic>

#include <QList>
#include <QObject>

#include "ztune/gui/search_inputs.hpp"
#include "ztune/gui/search_outcome.hpp"

namespace ztune::gui {

class PlannerWorker : public QObject {
  Q_OBJECT
 public:
  explicit PlannerWorker(QObject* parent = nullptr) : QObject(parent) {}

  /// Thread-safe: stops the running search or scaling job at its next check.
  void cancel() { stop_.store(true); }
  /// Clears a cancel; called before a job is queued.
  void rearm() { stop_.store(false); }

  /// Where searches are stored ("" = do not store). Set before the first job.
  void set_database(const QString& path) { db_path_ = path; }

  /// Resolves `inputs`, searches, stores the search in the results database.
  void search(const ztune::gui::SearchInputs& inputs);
  /// The best plan at each GPU count (one search per count, memory-pruned and ranked).
  void scaling(const ztune::gui::ResolvedInputs& inputs, const QList<int>& gpu_counts, quint64 tag);
  /// Simulates one iteration of `plan`.
  void simulate(const ztune::gui::ResolvedInputs& inputs, const ztune::Plan& plan, quint64 tag);

 signals:
  /// `phase` is a SearchPhase: what done and total count (the space's plans,
  /// device counts laid out, or the best plans simulated).
  void searchProgress(qint64 done, qint64 total, int phase);
  /// The search has finished and is being explained (after_search_work's words).
  void searchExplaining(const QString& what);
  void searchFinished(const ztune::gui::SearchOutcome& outcome);
  /// After a searchFinished whose outcome is `storing`: its id in the results
  /// database (0 when not stored) and why not.
  void searchStored(qint64 db_id, const QString& note);
  void searchFailed(const QList<ztune::gui::InputIssue>& issues);
  void scalingPoint(const ztune::gui::ScalingPoint& point);
  void scalingFinished(bool interrupted);
  void simulationFinished(const ztune::gui::SimulationOutcome& outcome);
  void simulationFailed(quint64 tag, const QString& message);

 private:
  std::atomic<bool> stop_{false};
  QString db_path_;
};

/// GPU counts for the scaling chart: the node's GPU count doubled up to the cluster (and the cluster itself).
QList<int> scaling_gpu_counts(const Cluster& c);

}  // namespace ztune::gui
