#include "vsl/core/clock.h"

#include <thread>

#include <algorithm>
#include <chrono>

namespace vsl {

TimerId TimerQueue::Add(TimeNs when, Task task) {
  const TimerId id = next_id_++;
  uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
    slots_[slot] = std::move(task);
  } else {
    slot = static_cast<uint32_t>(slots_.size());
    slots_.push_back(std::move(task));
  }
  heap_.push_back(Entry{when, tie_rng_.Next(), id, slot});
  std::push_heap(heap_.begin(), heap_.end(), Later{});
  return id;
}

bool TimerQueue::Cancel(TimerId id) {
  if (id == 0 || id >= next_id_ || cancelled_.count(id) != 0) return false;
  for (const Entry& e : heap_) {
    if (e.id == id) {
      cancelled_.insert(id);
      return true;
    }
  }
  return false;  // it ran
}

void TimerQueue::DropCancelledTop() {
  while (!heap_.empty() && !cancelled_.empty()) {
    auto it = cancelled_.find(heap_.front().id);
    if (it == cancelled_.end()) return;
    cancelled_.erase(it);
    std::pop_heap(heap_.begin(), heap_.end(), Later{});
    slots_[heap_.back().slot].Reset();
    free_slots_.push_back(heap_.back().slot);
    heap_.pop_back();
  }
}

TimeNs TimerQueue::NextTime() {
  DropCancelledTop();
  return heap_.empty() ? kTimeNever : heap_.front().when;
}

bool TimerQueue::PopDue(TimeNs limit, Task* task, TimeNs* when) {
  DropCancelledTop();
  if (heap_.empty() || heap_.front().when > limit) return false;
  std::pop_heap(heap_.begin(), heap_.end(), Later{});
  const Entry& e = heap_.back();
  *when = e.when;
  *task = std::move(slots_[e.slot]);
  free_slots_.push_back(e.slot);
  heap_.pop_back();
  return true;
}

// ---- VirtualClock ----

bool VirtualClock::Step() {
  Task task;
  if (q_.HasReady()) {
    task = q_.PopReady();
  } else {
    TimeNs when = 0;
    if (!q_.PopDue(kTimeNever, &task, &when)) return false;
    now_ = std::max(now_, when);
  }
  ++events_run_;
  task();
  return true;
}

uint64_t VirtualClock::RunUntilIdle(uint64_t max_events) {
  uint64_t n = 0;
  while (n < max_events && Step()) ++n;
  return n;
}

void VirtualClock::RunUntil(TimeNs t) {
  for (;;) {
    if (q_.HasReady()) {
      Step();
      continue;
    }
    Task task;
    TimeNs when = 0;
    if (!q_.PopDue(t, &task, &when)) break;
    now_ = std::max(now_, when);
    ++events_run_;
    task();
  }
  now_ = std::max(now_, t);
}

// ---- RealClock ----

namespace {
int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

namespace {
constexpr DurNs kSpinNs = 60 * 1000;
}  // namespace

RealClock::RealClock(std::size_t inbox_capacity)
    : epoch_ns_(SteadyNs()), q_(0x5EED), inbox_(inbox_capacity) {}

TimeNs RealClock::Now() const { return static_cast<TimeNs>(SteadyNs() - epoch_ns_); }

bool RealClock::Submit(Task&& task) {
  if (!inbox_.TryPush(task)) return false;
  submitted_.fetch_add(1, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    std::lock_guard<std::mutex> lock(mu_);
    wake_ = true;
    cv_.notify_one();
  }
  return true;
}

void RealClock::Stop() {
  stop_.store(true, std::memory_order_seq_cst);
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = true;
  cv_.notify_one();
}

bool RealClock::DrainInbox() {
  bool any = false;
  Task t;
  while (inbox_.TryPop(t)) {
    ++drained_;
    q_.Post(std::move(t));
    any = true;
  }
  return any;
}

uint64_t RealClock::Poll() {
  uint64_t n = 0;
  DrainInbox();
  while (q_.HasReady()) {
    Task t = q_.PopReady();
    t();
    ++n;
  }
  Task task;
  TimeNs when = 0;
  const TimeNs now = Now();
  while (q_.PopDue(now, &task, &when)) {
    task();
    ++n;
    while (q_.HasReady()) {
      Task t = q_.PopReady();
      t();
      ++n;
    }
  }
  return n;
}

void RealClock::WaitUntil(TimeNs deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_.store(true, std::memory_order_seq_cst);
  // A Submit that completed before sleeping_ was set is visible in submitted_.
  if (submitted_.load(std::memory_order_seq_cst) == drained_ && !stop_.load() && !wake_) {
    if (deadline == kTimeNever) {
      cv_.wait(lock, [&] { return wake_; });
    } else {
      const TimeNs now = Now();
      if (deadline > now) {
        cv_.wait_for(lock, std::chrono::nanoseconds(deadline - now), [&] { return wake_; });
      }
    }
  }
  wake_ = false;
  sleeping_.store(false, std::memory_order_seq_cst);
}

void RealClock::RunUntil(TimeNs deadline) {
  while (!stop_.load(std::memory_order_acquire)) {
    Poll();
    if (stop_.load(std::memory_order_acquire)) break;
    const TimeNs now = Now();
    if (now >= deadline) break;
    if (q_.HasReady()) continue;
    const TimeNs next = std::min(q_.NextTime(), deadline);
    if (next <= now) continue;
    // A timer due within kSpinNs is waited for by yielding, not sleeping: waking from a
    // timed sleep costs tens of microseconds on a VM, more than the flash operations the
    // card model times. Other threads still get the core (yield), and an idle engine
    // (no timer that close) sleeps.
    if (next - now <= kSpinNs) {
      std::this_thread::yield();
      continue;
    }
    // Idle: a request usually follows within microseconds at low queue depth; poll for it
    // before paying for a sleep and a wake-up (spin.h).
    if (idle_spin_.Spin([this] {
          return submitted_.load(std::memory_order_acquire) != drained_ || stop_.load(std::memory_order_relaxed);
        })) {
      continue;
    }
    const TimeNs slept_from = Now();
    WaitUntil(next);
    idle_spin_.NoteBlocked(static_cast<int64_t>(Now() - slept_from));
  }
  stop_.store(false, std::memory_order_release);  // a Stop() ends one Run
}

void RealClock::Run() { RunUntil(kTimeNever); }

}  // namespace vsl
