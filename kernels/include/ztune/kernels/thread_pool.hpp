#pragma once
// A fixed pool of worker threads for data-parallel loops (the multithreaded GEMM,
// the host Adam). Owned by whoever runs kernels (the CPU backend); no globals.
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace ztune::kernels {

class ThreadPool {
 public:
  /// `threads` >= 1 workers in total, including the calling thread.
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  [[nodiscard]] int size() const { return static_cast<int>(workers_.size()) + 1; }
  /// Calls body(part, parts) for part in [0, parts) across the pool, parts <= size();
  /// returns when all are done. The calling thread runs part 0.
  void run(int parts, const std::function<void(int, int)>& body);

 private:
  void worker_loop(int index);
  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  const std::function<void(int, int)>* job_ = nullptr;
  int parts_ = 0;
  int pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

/// [begin, end) of `part` of `parts` equal slices of n (the last ones one shorter).
inline std::pair<std::int64_t, std::int64_t> split_range(std::int64_t n, int part, int parts) {
  const std::int64_t base = n / parts, extra = n % parts;
  const std::int64_t begin = part * base + (part < extra ? part : extra);
  return {begin, begin + base + (part < extra ? 1 : 0)};
}

}  // namespace ztune::kernels
