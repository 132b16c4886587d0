#pragma once
// Interactive parts of `ztune search`: a progress bar on stderr (only on a
// terminal, only once a search has run for a second) and Ctrl-C handling that
// asks the search to stop and return the best plans found so far.
#include <atomic>

#include "ztune/tuner/search.hpp"

namespace ztune::cli {

/// Draws "ranking [=====     ]  45%  1,234/2,000 plans  1.3 s" on stderr, redrawn in
/// place (while the space is laid out: "enumerating [...] 12,000/1,600,000 device
/// counts, 95,000,000 plans").
class ProgressBar {
 public:
  ProgressBar();
  ~ProgressBar();  // clears the line if it drew anything
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;
  void update(const SearchProgress& p);

 private:
  bool terminal_;
  bool drawn_ = false;
};

/// While alive, the first SIGINT sets the flag (a second one kills the process).
class InterruptGuard {
 public:
  InterruptGuard();
  ~InterruptGuard();
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;
  [[nodiscard]] const std::atomic<bool>* flag() const;
};

}  // namespace ztune::cli
