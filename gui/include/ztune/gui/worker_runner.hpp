#pragma once
// Owns one worker thread and its PlannerWorker, and runs one job at a time on
// it. Submitting while a job runs cancels that job and runs the new one after
// it (the latest request wins: a user who changes the selection quickly gets
// the last one, not a queue). Lives in the UI thread.
//
// Example: runner.submit([in](PlannerWorker& w) { w.search(in); });
#include <functional>
#include <memory>
#include <optional>

#include <QObject>
#include <QThread>

#include "ztune/gui/planner_worker.hpp"

namespace ztune::gui {

class WorkerRunner : public QObject {
  Q_OBJECT
 public:
  using Job = std::function<void(PlannerWorker&)>;

  explicit WorkerRunner(QObject* parent = nullptr);
  ~WorkerRunner() override;  // cancels, then waits for the thread

  /// The worker, to connect its signals (they arrive queued in the UI thread).
  [[nodiscard]] PlannerWorker& worker() { return *worker_; }
  void submit(Job job);
  /// Cancels the running job and drops the pending one.
  void cancel();
  [[nodiscard]] bool busy() const { return busy_; }

 signals:
  void busyChanged(bool busy);

 private:
  void dispatch(Job job);
  void job_done();

  QThread thread_;
  std::unique_ptr<PlannerWorker> worker_;  // lives in thread_; destroyed after it stopped
  std::optional<Job> pending_;
  bool busy_ = false;
};

}  // namespace ztune::gui
