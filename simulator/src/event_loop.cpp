#include "ztune/simulator/event_loop.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <stdexcept>
#include <string>

#include "ztune/vocab/input_error.hpp"

namespace ztune::sim {
namespace {

constexpr std::uint32_t kSharedBit = 0x80000000u;

struct Event {  // 16 bytes: the heap is the event loop's hottest data
  double t = 0;
  std::uint32_t key = 0;  // op id (completion on a serial resource) or resource id (shared check)
  std::uint32_t tag = 0;  // 0: serial completion; kSharedBit | version: shared check (stale if the version moved)
  [[nodiscard]] bool shared() const { return tag != 0; }
  [[nodiscard]] std::uint32_t version() const { return tag & ~kSharedBit; }
};
// Min-heap order: time, then serial completions before shared checks, then key.
struct Later {
  bool operator()(const Event& a, const Event& b) const {
    if (a.t != b.t) return a.t > b.t;
    if (a.shared() != b.shared()) return a.shared();
    return a.key > b.key;
  }
};

struct Pending {  // an operation waiting on a serial resource
  double ready = 0;
  std::uint32_t op = 0;
};
struct EarlierReady {
  bool operator()(const Pending& a, const Pending& b) const {
    if (a.ready != b.ready) return a.ready > b.ready;
    return a.op > b.op;
  }
};

struct Sharing {  // an operation on a shared link: finishes when the virtual clock reaches `finish`
  double finish = 0;
  std::uint32_t op = 0;
};
struct EarlierFinish {
  bool operator()(const Sharing& a, const Sharing& b) const {
    if (a.finish != b.finish) return a.finish > b.finish;
    return a.op > b.op;
  }
};

struct ResourceState {
  bool shared = false;
  // serial
  bool busy = false;
  std::vector<Pending> queue;
  // shared (processor sharing): virtual time V advances at 1/active per second
  double virtual_time = 0;
  double last_t = 0;
  std::vector<Sharing> active;
  std::uint32_t version = 0;
  double busy_since = 0;
  double busy_total = 0;
  bool touched = false;
};

class Engine {
 public:
  Engine(const OpGraph& g, const std::atomic<bool>* stop) : g_(g), stop_(stop), n_(g.size()) {
    build_csr();
    resources_.resize(g.resources.size());
    for (std::size_t r = 0; r < resources_.size(); ++r) resources_[r].shared = shares_bandwidth(g.resources[r].kind);
    timeline_.start_s.assign(n_, 0.0);
    timeline_.end_s.assign(n_, 0.0);
    timeline_.resource_busy_s.assign(resources_.size(), 0.0);
    events_.reserve(resources_.size() * 2 + 64);
  }

  Timeline run() {
    for (std::size_t v = 0; v < n_; ++v)
      if (waiting_[v] == 0) make_ready(static_cast<std::uint32_t>(v), 0.0);
    dispatch(0.0);
    while (!events_.empty()) {
      const double t = events_.front().t;
      while (!events_.empty() && events_.front().t == t) {
        if (++events_seen_ % kStopCheckEvery == 0) throw_if_stopped(stop_);
        std::pop_heap(events_.begin(), events_.end(), Later{});
        const Event ev = events_.back();
        events_.pop_back();
        if (ev.shared()) {
          shared_check(ev, t);
        } else {
          ResourceState& r = resources_[static_cast<std::size_t>(g_.ops[ev.key].resource)];
          r.busy = false;
          touch(static_cast<std::size_t>(g_.ops[ev.key].resource));
          complete(ev.key, t);
        }
      }
      dispatch(t);
    }
    if (done_ != n_) throw std::logic_error("simulator: the operation graph has a cycle");
    for (std::size_t r = 0; r < resources_.size(); ++r) timeline_.resource_busy_s[r] = resources_[r].busy_total;
    return std::move(timeline_);
  }

 private:
  const OpGraph& g_;
  const std::atomic<bool>* stop_ = nullptr;  // run_event_loop's
  std::size_t events_seen_ = 0;
  std::size_t n_;
  std::vector<std::uint32_t> offsets_;  // CSR successors
  std::vector<std::uint32_t> targets_;
  std::vector<std::uint32_t> waiting_;  // unfinished inputs per op
  std::vector<ResourceState> resources_;
  std::vector<std::size_t> touched_;
  std::vector<Event> events_;
  Timeline timeline_;
  std::size_t done_ = 0;

  void build_csr() {
    // The DAG is already compressed sparse row; copy its targets into 32-bit
    // arrays the event loop walks, and count each op's inputs.
    const OpDag& dag = g_.dag();
    offsets_.assign(n_ + 1, 0);
    waiting_.assign(n_, 0);
    targets_.reserve(boost::num_edges(dag));
    for (std::size_t v = 0; v < n_; ++v) {
      for (auto [b, e] = boost::out_edges(static_cast<std::uint32_t>(v), dag); b != e; ++b) {
        const auto t = static_cast<std::uint32_t>(boost::target(*b, dag));
        targets_.push_back(t);
        ++waiting_[t];
      }
      offsets_[v + 1] = static_cast<std::uint32_t>(targets_.size());
    }
  }

  void push(const Event& e) {
    events_.push_back(e);
    std::push_heap(events_.begin(), events_.end(), Later{});
  }

  void touch(std::size_t r) {
    if (resources_[r].touched) return;
    resources_[r].touched = true;
    touched_.push_back(r);
  }

  static void advance(ResourceState& r, double t) {
    if (!r.active.empty()) r.virtual_time += (t - r.last_t) / static_cast<double>(r.active.size());
    r.last_t = t;
  }

  void make_ready(std::uint32_t op, double t) {
    const auto ri = static_cast<std::size_t>(g_.ops[op].resource);
    ResourceState& r = resources_[ri];
    if (r.shared) {
      advance(r, t);
      if (r.active.empty()) {
        r.virtual_time = 0;
        r.busy_since = t;
      }
      r.active.push_back({r.virtual_time + g_.ops[op].duration_s, op});
      std::push_heap(r.active.begin(), r.active.end(), EarlierFinish{});
      timeline_.start_s[op] = t;
    } else {
      r.queue.push_back({t, op});
      std::push_heap(r.queue.begin(), r.queue.end(), EarlierReady{});
    }
    touch(ri);
  }

  void complete(std::uint32_t op, double t) {
    timeline_.end_s[op] = t;
    timeline_.iteration_s = std::max(timeline_.iteration_s, t);
    ++done_;
    for (std::uint32_t i = offsets_[op]; i < offsets_[op + 1]; ++i) {
      const std::uint32_t next = targets_[i];
      if (--waiting_[next] == 0) make_ready(next, t);
    }
  }

  void shared_check(const Event& ev, double t) {
    ResourceState& r = resources_[ev.key];
    if (ev.version() != (r.version & ~kSharedBit)) return;
    advance(r, t);
    // The event was scheduled for the front transfer's finish and nothing on
    // the link changed since (same version): it finishes now. Snap the virtual
    // time to it, as rounding can leave it a hair short; at large absolute
    // times that hair can be below the resolution of t, and the event would
    // otherwise be rescheduled at the same t forever.
    if (!r.active.empty()) r.virtual_time = std::max(r.virtual_time, r.active.front().finish);
    // Finish every transfer whose virtual finish time has been reached
    // (tolerance for the rounding of the rescheduled event time).
    const double tol = 1e-12 + 1e-9 * r.virtual_time;
    while (!r.active.empty() && r.active.front().finish <= r.virtual_time + tol) {
      std::pop_heap(r.active.begin(), r.active.end(), EarlierFinish{});
      const std::uint32_t op = r.active.back().op;
      r.active.pop_back();
      if (r.active.empty()) r.busy_total += t - r.busy_since;
      complete(op, t);
    }
    touch(ev.key);
  }

  void dispatch(double t) {
    for (const std::size_t ri : touched_) {
      ResourceState& r = resources_[ri];
      r.touched = false;
      if (r.shared) {
        ++r.version;
        if (r.active.empty()) continue;
        const double remaining = std::max(0.0, r.active.front().finish - r.virtual_time);
        push({r.last_t + remaining * static_cast<double>(r.active.size()), static_cast<std::uint32_t>(ri),
              kSharedBit | (r.version & ~kSharedBit)});
      } else if (!r.busy && !r.queue.empty()) {
        std::pop_heap(r.queue.begin(), r.queue.end(), EarlierReady{});
        const std::uint32_t op = r.queue.back().op;
        r.queue.pop_back();
        r.busy = true;
        const double d = g_.ops[op].duration_s;
        r.busy_total += d;
        timeline_.start_s[op] = t;
        push({t + d, op, 0});
      }
    }
    touched_.clear();
  }
};

}  // namespace

Timeline run_event_loop(const OpGraph& g, const std::atomic<bool>* stop) {
  if (!g.finalized()) throw std::logic_error("simulator: run_event_loop needs a finalized graph (finalize_graph)");
  // Every time the event loop reaches is at most the sum of all durations (an
  // operation waits only for others to finish), so when that sum is finite the
  // clock is too. An infinite or NaN duration (a bandwidth, peak or efficiency
  // of 5e-324 in a cluster or profile file) would otherwise loop forever on
  // events at t = inf.
  double total = 0;
  for (const Op& op : g.ops) {
    if (!std::isfinite(op.duration_s) || op.duration_s < 0) {
      char d[32];
      std::snprintf(d, sizeof d, "%g", op.duration_s);
      throw InputError("simulator: operation \"" + op_name(op) + "\" takes " + d +
                       " s: a bandwidth, peak or efficiency in the cluster or profile is too small (or not a number) "
                       "for a finite time");
    }
    total += op.duration_s;
  }
  if (!std::isfinite(total))
    throw InputError("simulator: the operations' durations add up to more than a double holds: a bandwidth, peak or "
                     "efficiency in the cluster or profile is too small for a finite time");
  Engine e(g, stop);
  return e.run();
}

}  // namespace ztune::sim
