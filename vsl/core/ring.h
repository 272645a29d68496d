// Bounded lock-free rings for crossing threads (submission in, completion out).
//
// SpscRing<T>: exactly one producer thread and one consumer thread.
// MpscRing<T>: any number of producer threads, exactly one consumer thread (a bounded
//   sequence-numbered array queue: each cell carries a sequence number that tells producers
//   and the consumer whose turn it is, so no producer ever waits on a lock).
// Both: capacity is rounded up to a power of two; TryPush returns false when full and
// leaves the value with the caller; TryPop returns false when empty. Neither allocates
// after construction. T must be default-constructible and movable.
#pragma once

#include <atomic>
#include <cassert>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

namespace vsl {

inline constexpr std::size_t kCacheLine = 64;

inline std::size_t RoundUpPow2(std::size_t n) {
  std::size_t c = 1;
  while (c < n) c <<= 1;
  return c;
}

template <typename T>
class SpscRing {
 public:
  explicit SpscRing(std::size_t capacity)
      : cap_(RoundUpPow2(capacity < 2 ? 2 : capacity)),
        mask_(cap_ - 1),
        slots_(std::make_unique<T[]>(cap_)) {}
  SpscRing(const SpscRing&) = delete;
  SpscRing& operator=(const SpscRing&) = delete;

  std::size_t capacity() const { return cap_; }

  // Producer thread only.
  bool TryPush(T& v) {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    if (head - cached_tail_ == cap_) {
      cached_tail_ = tail_.load(std::memory_order_acquire);
      if (head - cached_tail_ == cap_) return false;
    }
    slots_[head & mask_] = std::move(v);
    head_.store(head + 1, std::memory_order_release);
    return true;
  }
  bool TryPush(T&& v) { return TryPush(v); }

  // Consumer thread only.
  bool TryPop(T& out) {
    const std::size_t tail = tail_.load(std::memory_order_relaxed);
    if (tail == cached_head_) {
      cached_head_ = head_.load(std::memory_order_acquire);
      if (tail == cached_head_) return false;
    }
    out = std::move(slots_[tail & mask_]);
    tail_.store(tail + 1, std::memory_order_release);
    return true;
  }

  // Approximate when called concurrently.
  std::size_t SizeApprox() const {
    return head_.load(std::memory_order_acquire) - tail_.load(std::memory_order_acquire);
  }

 private:
  const std::size_t cap_;
  const std::size_t mask_;
  std::unique_ptr<T[]> slots_;
  alignas(kCacheLine) std::atomic<std::size_t> head_{0};  // written by producer
  std::size_t cached_tail_ = 0;                           // producer's view of tail_
  alignas(kCacheLine) std::atomic<std::size_t> tail_{0};  // written by consumer
  std::size_t cached_head_ = 0;                           // consumer's view of head_
};

template <typename T>
class MpscRing {
 public:
  explicit MpscRing(std::size_t capacity)
      : cap_(RoundUpPow2(capacity < 2 ? 2 : capacity)),
        mask_(cap_ - 1),
        cells_(std::make_unique<Cell[]>(cap_)) {
    for (std::size_t i = 0; i < cap_; ++i) cells_[i].seq.store(i, std::memory_order_relaxed);
  }
  MpscRing(const MpscRing&) = delete;
  MpscRing& operator=(const MpscRing&) = delete;

  std::size_t capacity() const { return cap_; }

  // Any thread.
  bool TryPush(T& v) {
    std::size_t pos = head_.load(std::memory_order_relaxed);
    for (;;) {
      Cell& c = cells_[pos & mask_];
      const std::size_t seq = c.seq.load(std::memory_order_acquire);
      const auto diff = static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(pos);
      if (diff == 0) {
        if (head_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
          c.value = std::move(v);
          c.seq.store(pos + 1, std::memory_order_release);
          return true;
        }
      } else if (diff < 0) {
        return false;  // full
      } else {
        pos = head_.load(std::memory_order_relaxed);
      }
    }
  }
  bool TryPush(T&& v) { return TryPush(v); }

  // Consumer thread only.
  bool TryPop(T& out) {
    Cell& c = cells_[tail_ & mask_];
    const std::size_t seq = c.seq.load(std::memory_order_acquire);
    if (static_cast<std::intptr_t>(seq) - static_cast<std::intptr_t>(tail_ + 1) < 0) {
      return false;  // empty (or a producer has claimed the cell but not yet filled it)
    }
    out = std::move(c.value);
    c.seq.store(tail_ + cap_, std::memory_order_release);
    ++tail_;
    return true;
  }

 private:
  struct Cell {
    std::atomic<std::size_t> seq;
    T value;
  };
  const std::size_t cap_;
  const std::size_t mask_;
  std::unique_ptr<Cell[]> cells_;
  alignas(kCacheLine) std::atomic<std::size_t> head_{0};  // producers
  alignas(kCacheLine) std::size_t tail_ = 0;              // consumer only
};

}  // namespace vsl
