#include "ztune/gui/worker_runner.hpp"

namespace ztune::gui {

WorkerRunner::WorkerRunner(QObject* parent) : QObject(parent), worker_(std::make_unique<PlannerWorker>()) {
  thread_.setObjectName(QStringLiteral("ztune planner worker"));
  worker_->moveToThread(&thread_);
  thread_.start();
}

WorkerRunner::~WorkerRunner() {
  pending_.reset();
  worker_->cancel();
  thread_.quit();
  thread_.wait();
}

void WorkerRunner::submit(Job job) {
  if (busy_) {
    pending_ = std::move(job);
    worker_->cancel();
    return;
  }
  dispatch(std::move(job));
}

void WorkerRunner::cancel() {
  pending_.reset();
  if (busy_) worker_->cancel();
}

void WorkerRunner::dispatch(Job job) {
  const bool was_busy = busy_;
  busy_ = true;
  worker_->rearm();
  PlannerWorker* w = worker_.get();
  // The job's own signals are queued before job_done, so the UI sees a job's
  // result before it sees the runner become idle.
  QMetaObject::invokeMethod(
      w,
      [this, w, job = std::move(job)] {
        job(*w);
        QMetaObject::invokeMethod(this, [this] { job_done(); }, Qt::QueuedConnection);
      },
      Qt::QueuedConnection);
  if (!was_busy) emit busyChanged(true);
}

void WorkerRunner::job_done() {
  if (pending_) {
    Job next = std::move(*pending_);
    pending_.reset();
    dispatch(std::move(next));  // stays busy: no busyChanged flicker
    return;
  }
  busy_ = false;
  emit busyChanged(false);
}

}  // namespace ztune::gui
