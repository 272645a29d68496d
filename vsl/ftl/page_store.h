// The writer's buffer bookkeeping (append.cc, page_life.cc): every live page buffer, with
// released ones kept for reuse so the write path allocates nothing per page once warm
// (PooledStore), and the sequence numbers of pages submitted and not yet done
// (SeqWindow). Pure containers, tested alone (tests/ftl/page_store_test.cc).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "vsl/core/fifo.h"
#include "vsl/core/free_list.h"

namespace vsl::ftl {

// Live objects of type T, released in O(1) in any order, and up to kKeep released ones
// kept for reuse. T provides `uint32_t store_index` (the store's, untouched by others) and
// `void Recycle()`, which puts it back to its defaults keeping whatever storage it chooses
// to (a page buffer keeps its vectors' capacity). Make hands out a recycled object before
// allocating a new one.
template <typename T>
class PooledStore {
 public:
  static constexpr std::size_t kKeep = 1024;  // released objects kept at most

  T* Make() {
    std::unique_ptr<T> p;
    if (!free_.empty()) {
      p = std::move(free_.back());
      free_.pop_back();
    } else {
      p = std::make_unique<T>();
    }
    T* b = p.get();
    b->store_index = static_cast<uint32_t>(live_.size());
    live_.push_back(std::move(p));
    return b;
  }
  // `b` is gone: nothing may use it after this (it will be handed out again).
  void Release(T* b) {
    const uint32_t i = b->store_index;
    std::unique_ptr<T> p = std::move(live_[i]);
    if (i + 1 != live_.size()) {
      live_[i] = std::move(live_.back());
      live_[i]->store_index = i;
    }
    live_.pop_back();
    if (free_.size() >= kKeep) return;
    b->Recycle();
    free_.push_back(std::move(p));
  }
  bool empty() const { return live_.empty(); }
  std::size_t size() const { return live_.size(); }
  std::size_t kept() const { return free_.size(); }
  // Every live object, in no particular order.
  const std::vector<std::unique_ptr<T>>& live() const { return live_; }

 private:
  std::vector<std::unique_ptr<T>> live_, free_;
};

// Sequence numbers of the pages submitted and not yet done, oldest first. Pages are
// submitted in sequence order, so this is a window of ascending numbers with holes:
// inserts go at the back (an out-of-order one is placed, a duplicate ignored), and done
// ones leave once everything before them has.
class SeqWindow {
 public:
  void Insert(uint64_t seq) {
    if (q_.empty() || q_[q_.size() - 1].first < seq) {
      q_.push_back({seq, false});
      return;
    }
    const std::size_t i = LowerBound(seq);
    if (i < q_.size() && q_[i].first == seq) return;
    q_.push_back({seq, false});
    for (std::size_t j = q_.size() - 1; j > i; --j) std::swap(q_[j], q_[j - 1]);
  }
  // `seq` is done. No-op for a number not in the window.
  void Erase(uint64_t seq) {
    const std::size_t i = LowerBound(seq);
    if (i == q_.size() || q_[i].first != seq) return;
    q_[i].second = true;
    while (!q_.empty() && q_.front().second) q_.pop_front();
  }
  bool empty() const { return q_.empty(); }
  // The oldest number not done. Only when !empty().
  uint64_t oldest() const { return q_[0].first; }

 private:
  // The first place whose number is not below `seq` (size() if none).
  std::size_t LowerBound(uint64_t seq) const {
    std::size_t lo = 0, hi = q_.size();
    while (lo < hi) {
      const std::size_t mid = lo + (hi - lo) / 2;
      if (q_[mid].first < seq) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }
  // (seq, done), ascending; a ring that allocates nothing once grown to the window's depth.
  Fifo<std::pair<uint64_t, bool>> q_;
};

}  // namespace vsl::ftl
