// Per-I/O records reused instead of allocated: the two shapes the host paths need.
//
// FreeList<T>: objects handed out by raw pointer (whoever holds the pointer owns the
// object while it is out) and given back for reuse, up to `keep` of them; one given back
// beyond that is deleted. Objects still out when the list goes away are their holders' to
// free, as they were with new/delete. T provides `void Recycle()`: back to its defaults,
// keeping whatever storage it chooses to (a buffer up to some size, vectors' capacity).
// Used where a record's holder may outlive the pool or free it itself (the FTL's I/O
// contexts, the SDK's ops, vsld's NBD requests and LUN hand-offs).
//
// RecordPool<T>: records that live as long as the pool, handed out and given back; the
// pool frees every record it made when it goes away, out or not. For records referenced
// only from callbacks that may be dropped without running when their owner goes away (a
// pipe's pending completions): nothing leaks, and the pool never holds more than the most
// that were out at once. The caller sets every field it reads on each Take.
//
// Neither is thread-safe: callers that share one hold their own lock around Take and Give
// (and so around Recycle, which should be cheap). Once grown to the number of records in
// flight, neither allocates.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace vsl {

template <typename T>
class FreeList {
 public:
  explicit FreeList(std::size_t keep = 1024) : keep_(keep) {}
  FreeList(const FreeList&) = delete;
  FreeList& operator=(const FreeList&) = delete;

  T* Take() {
    if (free_.empty()) return new T();
    T* t = free_.back().release();
    free_.pop_back();
    return t;
  }
  // `t` came from Take (or new T) and nothing uses it after this.
  void Give(T* t) {
    if (free_.size() >= keep_) {
      delete t;
      return;
    }
    t->Recycle();
    free_.emplace_back(t);
  }
  std::size_t kept() const { return free_.size(); }
  std::size_t keep() const { return keep_; }

 private:
  std::size_t keep_;
  std::vector<std::unique_ptr<T>> free_;
};

template <typename T>
class RecordPool {
 public:
  RecordPool() = default;
  RecordPool(const RecordPool&) = delete;
  RecordPool& operator=(const RecordPool&) = delete;

  T* Take() {
    if (free_.empty()) return all_.emplace_back(std::make_unique<T>()).get();
    T* t = free_.back();
    free_.pop_back();
    return t;
  }
  // `t` came from this pool's Take and is not used after this until Take hands it out.
  void Give(T* t) { free_.push_back(t); }
  std::size_t made() const { return all_.size(); }
  std::size_t kept() const { return free_.size(); }

 private:
  std::vector<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace vsl
