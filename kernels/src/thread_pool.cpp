#include "ztune/kernels/thread_pool.hpp"

namespace ztune::kernels {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < threads; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run(int parts, const std::function<void(int, int)>& body) {
  if (parts <= 1 || workers_.empty()) {
    for (int p = 0; p < parts; ++p) body(p, parts);
    return;
  }
  if (parts > size()) parts = size();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = &body;
    parts_ = parts;
    pending_ = parts - 1;
    ++generation_;
  }
  wake_.notify_all();
  body(0, parts);
  std::unique_lock<std::mutex> lock(mutex_);
  done_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    const std::function<void(int, int)>* job = nullptr;
    int parts = 0;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      job = job_;
      parts = parts_;
    }
    if (index < parts) {
      (*job)(index, parts);
      std::lock_guard<std::mutex> lock(mutex_);
      if (--pending_ == 0) done_.notify_one();
    }
  }
}

}  // namespace ztune::kernels
