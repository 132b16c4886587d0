#pragma once
// Keeps the N best candidates seen, under a strict weak order `better(a, b)`.
// Each search worker keeps its own; merge() combines them. Offer() copies a
// candidate only when it enters the list.
#include <algorithm>
#include <cstddef>
#include <functional>
#include <vector>

#include "ztune/tuner/candidate.hpp"

namespace ztune {

class TopN {
 public:
  using Better = std::function<bool(const Candidate&, const Candidate&)>;
  TopN(std::size_t capacity, Better better) : capacity_(capacity), better_(std::move(better)) {
    // Reserve a little, not `capacity`: --top 2147483647 is a valid request for
    // "all of them", which is often far fewer.
    heap_.reserve(std::min<std::size_t>(capacity, 1024));
  }

  /// Would `c` enter the list?
  [[nodiscard]] bool admits(const Candidate& c) const {
    return capacity_ > 0 && (heap_.size() < capacity_ || better_(c, heap_.front()));
  }
  void offer(const Candidate& c) {
    if (!admits(c)) return;
    // Max-heap on "worse": the front is the worst kept.
    if (heap_.size() == capacity_) {
      std::pop_heap(heap_.begin(), heap_.end(), better_);
      heap_.back() = c;
    } else {
      heap_.push_back(c);
    }
    std::push_heap(heap_.begin(), heap_.end(), better_);
  }
  void merge(const TopN& other) {
    for (const auto& c : other.heap_) offer(c);
  }
  /// The kept candidates, best first.
  [[nodiscard]] std::vector<Candidate> sorted() const {
    auto out = heap_;
    std::sort(out.begin(), out.end(), better_);
    return out;
  }
  [[nodiscard]] std::size_t size() const { return heap_.size(); }
  [[nodiscard]] std::size_t capacity() const { return capacity_; }
  /// The worst kept candidate, the one a newcomer must beat once the list is
  /// full. Only while size() > 0.
  [[nodiscard]] const Candidate& worst() const { return heap_.front(); }

 private:
  std::size_t capacity_;
  Better better_;
  std::vector<Candidate> heap_;
};

}  // namespace ztune
