// Adaptive spin-then-block for waits that usually end within microseconds (an engine
// waiting for its next request, an application waiting for a completion). Sleeping on a
// futex and being woken costs tens of microseconds on a VM, more than a zero-time card's
// whole I/O; so a waiter first polls for up to `budget` ns. The budget doubles (up to
// max) each time a spin sees the event and halves (down to 0) each time it times out: a
// waiter whose events come late soon stops taking the core that others need. A wait that
// ended within the maximum after all (the spin that timed out plus the blocking wait
// after it) sets the budget to cover that whole wait with a quarter to spare: without
// that, a budget halved once by a long wait would settle just under the usual wait (each
// miss halves it, each short block only doubles it back) and every wait would pay both
// the spin and the wake-up.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <algorithm>
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

  // Polls `ready` for up to the current budget, and at most `cap_ns` (the caller has
  // other work due then); true when it held. A spin cut short by the cap is no miss: the
  // budget stays. Any thread.
  template <typename Ready>
  bool Spin(Ready&& ready, uint64_t cap_ns = UINT64_MAX) {
    const uint32_t budget = budget_.load(std::memory_order_relaxed);
    if (budget == 0 || cap_ns == 0) return false;
    const bool capped = cap_ns < budget;
    const auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(capped ? cap_ns : budget);
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
    if (!capped) {
      budget_.store(budget / 2, std::memory_order_relaxed);
      spun_ns_.store(budget, std::memory_order_relaxed);
    }
    return false;
  }
  // A blocking wait that followed a failed spin (or no spin) lasted `waited_ns` until the
  // event: a whole wait within the maximum earns a budget that covers it. Negative: the
  // wait ended for another reason (it tells nothing).
  void NoteBlocked(int64_t waited_ns) {
    const uint64_t spun = spun_ns_.exchange(0, std::memory_order_relaxed);
    if (waited_ns < 0) return;
    const uint64_t total = spun + static_cast<uint64_t>(waited_ns);
    if (total > kMaxNs) return;
    const uint64_t b = budget_.load(std::memory_order_relaxed);
    const uint64_t want = std::max<uint64_t>({b * 2, 1000, total + total / 4});
    budget_.store(static_cast<uint32_t>(std::min<uint64_t>(want, kMaxNs)), std::memory_order_relaxed);
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
  std::atomic<uint32_t> spun_ns_{0};  // what the last failed spin spent, for NoteBlocked
};

}  // namespace vsl
