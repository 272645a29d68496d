// Adaptive spin-then-block for waits that usually end within microseconds (an engine
// waiting for its next request, an application waiting for a completion). Sleeping on a
// futex and being woken costs tens of microseconds on a VM, more than a zero-time card's
// whole I/O; so a waiter first polls for up to `budget` ns. The budget doubles (up to
// max) each time a spin sees the event and halves (down to 0) each time it times out: a
// waiter whose events come late soon stops taking the core that others need, and starts
// spinning again once a short wait is seen (a blocking wait that ended within the
// maximum counts as short).
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace vsl {

class AdaptiveSpin {
 public:
  static constexpr uint32_t kMaxNs = 200 * 1000;

  // Polls `ready` for up to the current budget; true when it held. Any thread.
  template <typename Ready>
  bool Spin(Ready&& ready) {
    const uint32_t budget = budget_.load(std::memory_order_relaxed);
    if (budget == 0) return false;
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(budget);
    for (uint32_t i = 1;; ++i) {
      if (ready()) {
        Grow();
        return true;
      }
      Relax();
      if ((i & 63) == 0) {
        if (std::chrono::steady_clock::now() >= until) break;
        std::this_thread::yield();  // let a runnable peer have the core now and then
      }
    }
    budget_.store(budget / 2, std::memory_order_relaxed);
    return false;
  }
  // A blocking wait that followed a failed spin lasted `waited_ns`: short ones earn the
  // spin back.
  void NoteBlocked(int64_t waited_ns) {
    if (waited_ns >= 0 && waited_ns <= static_cast<int64_t>(kMaxNs)) Grow();
  }
  uint32_t budget_ns() const { return budget_.load(std::memory_order_relaxed); }

 private:
  void Grow() {
    const uint32_t b = budget_.load(std::memory_order_relaxed);
    budget_.store(b == 0 ? 1000 : (b >= kMaxNs / 2 ? kMaxNs : b * 2), std::memory_order_relaxed);
  }
  static void Relax() {
#if defined(__x86_64__)
    _mm_pause();
#endif
  }
  std::atomic<uint32_t> budget_{kMaxNs};
};

}  // namespace vsl
