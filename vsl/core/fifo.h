// Fifo<T>: a single-threaded double-ended queue in one power-of-two ring that grows by
// doubling and never shrinks, so once it has grown to its working depth, pushes and pops
// allocate nothing. std::deque allocates and frees a block every few hundred bytes of
// traffic, which put a heap allocation on the per-I/O paths (the clock's post queue, the
// FTL's pending host work).
//
// Contract: T is default-constructible and movable. A popped element's place is assigned
// T{} at once, so what it owned (a task's captures) is released when it leaves, as with
// std::deque. References to elements stay valid until the next push (which may grow the
// ring) or until that element is popped.
#pragma once

#include <cassert>
#include <cstddef>
#include <memory>
#include <utility>

namespace vsl {

template <typename T>
class Fifo {
 public:
  Fifo() = default;
  Fifo(const Fifo&) = delete;
  Fifo& operator=(const Fifo&) = delete;
  // A moved-from Fifo is empty.
  Fifo(Fifo&& o) noexcept { *this = std::move(o); }
  Fifo& operator=(Fifo&& o) noexcept {
    if (this != &o) {
      buf_ = std::move(o.buf_);
      cap_ = std::exchange(o.cap_, 0);
      head_ = std::exchange(o.head_, 0);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return cap_; }

  void push_back(T v) {
    if (size_ == cap_) Grow();
    buf_[(head_ + size_) & (cap_ - 1)] = std::move(v);
    ++size_;
  }
  void push_front(T v) {
    if (size_ == cap_) Grow();
    head_ = (head_ + cap_ - 1) & (cap_ - 1);
    buf_[head_] = std::move(v);
    ++size_;
  }
  T& front() {
    assert(size_ > 0);
    return buf_[head_];
  }
  T& back() {
    assert(size_ > 0);
    return buf_[(head_ + size_ - 1) & (cap_ - 1)];
  }
  void pop_front() {
    assert(size_ > 0);
    buf_[head_] = T{};
    head_ = (head_ + 1) & (cap_ - 1);
    --size_;
  }
  // The i-th element from the front.
  T& operator[](std::size_t i) {
    assert(i < size_);
    return buf_[(head_ + i) & (cap_ - 1)];
  }
  const T& operator[](std::size_t i) const {
    assert(i < size_);
    return buf_[(head_ + i) & (cap_ - 1)];
  }

 private:
  void Grow() {
    const std::size_t cap = cap_ == 0 ? 16 : cap_ * 2;
    auto buf = std::make_unique<T[]>(cap);
    for (std::size_t i = 0; i < size_; ++i) buf[i] = std::move(buf_[(head_ + i) & (cap_ - 1)]);
    buf_ = std::move(buf);
    cap_ = cap;
    head_ = 0;
  }

  std::unique_ptr<T[]> buf_;
  std::size_t cap_ = 0, head_ = 0, size_ = 0;
};

}  // namespace vsl
