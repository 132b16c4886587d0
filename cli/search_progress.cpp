#include "search_progress.hpp"

#include <csignal>
#include <cstdio>
#include <string>

#include <unistd.h>

#include "ztune/vocab/text.hpp"

namespace ztune::cli {

namespace {

// The one place a signal handler needs state: a lock-free atomic, set by the
// SIGINT handler and read by the search workers.
std::atomic<bool>& interrupted() {
  static std::atomic<bool> flag{false};
  return flag;
}

extern "C" void on_sigint(int /*sig*/) {
  interrupted().store(true);
  std::signal(SIGINT, SIG_DFL);  // a second Ctrl-C ends the process at once
}

}  // namespace

ProgressBar::ProgressBar() : terminal_(isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() {
  if (drawn_) std::fputs("\r\033[K", stderr);
}

void ProgressBar::update(const SearchProgress& p) {
  if (!terminal_ || p.elapsed_s < 1.0 || p.total <= 0) return;
  const double f = static_cast<double>(p.done) / static_cast<double>(p.total);
  constexpr int kWidth = 30;
  const int filled = static_cast<int>(f * kWidth);
  std::string bar(static_cast<std::size_t>(filled), '=');
  bar.resize(kWidth, ' ');
  if (p.phase == SearchPhase::enumerate) {
    std::fprintf(stderr, "\r\033[Kenumerating [%s] %3.0f%%  %s/%s device counts, %s plans  %.1f s  (Ctrl-C: stop)",
                 bar.c_str(), 100 * f, grouped(static_cast<double>(p.done)).c_str(),
                 grouped(static_cast<double>(p.total)).c_str(), grouped(static_cast<double>(p.plans)).c_str(),
                 p.elapsed_s);
  } else if (p.phase == SearchPhase::simulate) {
    std::fprintf(stderr,
                 "\r\033[Ksimulating [%s] %3.0f%%  %s/%s plans  %.1f s  (Ctrl-C: stop; the rest keep their analytical "
                 "times)",
                 bar.c_str(), 100 * f, grouped(static_cast<double>(p.done)).c_str(),
                 grouped(static_cast<double>(p.total)).c_str(), p.elapsed_s);
  } else {
    std::fprintf(stderr, "\r\033[Kranking [%s] %3.0f%%  %s/%s plans  %.1f s  (Ctrl-C: stop with the best so far)",
                 bar.c_str(), 100 * f, grouped(static_cast<double>(p.done)).c_str(),
                 grouped(static_cast<double>(p.total)).c_str(), p.elapsed_s);
  }
  std::fflush(stderr);
  drawn_ = true;
}

InterruptGuard::InterruptGuard() {
  interrupted().store(false);
  std::signal(SIGINT, on_sigint);
}

InterruptGuard::~InterruptGuard() { std::signal(SIGINT, SIG_DFL); }

const std::atomic<bool>* InterruptGuard::flag() const { return &interrupted(); }

}  // namespace ztune::cli
