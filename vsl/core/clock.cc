#include "vsl/core/clock.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <ctime>

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
// RunInline borrows only an engine with nothing due sooner than this, and counts against
// borrowing only work left due this soon (a request's own flash operations; a zero-time
// card's partial-parity timer, 200 us out, is not one).
constexpr DurNs kBusyHorizonNs = 100 * 1000;
// Borrowed request runs in a row that left work due that soon before RunInline stops
// borrowing, and one call in kProbe borrows anyway to see whether that changed.
constexpr uint32_t kKickLimit = 8, kProbe = 32;
// The owner's sleep ended on a fd source's descriptor: cleared by RunUntil before each
// sleep, set by SleepOnFds, read by RunUntil right after, all on the owning thread (so
// the spin learns from a socket's wait without a second poll).
thread_local bool woke_on_fd_ = false;
}  // namespace

RealClock::RealClock(std::size_t inbox_capacity)
    : epoch_ns_(SteadyNs()), q_(0x5EED), inbox_(inbox_capacity) {}

RealClock::~RealClock() {
  if (efd_ >= 0) ::close(efd_);
}

TimeNs RealClock::Now() const { return static_cast<TimeNs>(SteadyNs() - epoch_ns_); }

bool RealClock::Submit(Task&& task) {
  if (!inbox_.TryPush(task)) return false;
  submitted_.fetch_add(1, std::memory_order_seq_cst);
  // While a borrower holds the token it looks at the inbox after letting the token go
  // (RunInline) and wakes the owner then, once for all that came meanwhile: requests
  // that lost the race for the token cost no wake-up each. Dekker with RunInline:
  // submitted_ before held_ here, held_ before submitted_ there.
  if (sleeping_.load(std::memory_order_seq_cst) && !held_.load(std::memory_order_seq_cst)) WakeOwner();
  return true;
}

void RealClock::WakeOwner() {
  std::lock_guard<std::mutex> lock(mu_);
  wake_ = true;
  if (fd_sleeping_) {
    const uint64_t one = 1;
    (void)!::write(efd_, &one, sizeof one);
  } else {
    cv_.notify_one();
  }
}

void RealClock::Stop() {
  stop_.store(true, std::memory_order_seq_cst);
  WakeOwner();
}

bool RealClock::TryAcquire() {
  bool expected = false;
  if (!held_.compare_exchange_strong(expected, true, std::memory_order_acquire, std::memory_order_relaxed)) {
    return false;
  }
  holder_.store(static_cast<unsigned long>(pthread_self()), std::memory_order_relaxed);
  return true;
}

void RealClock::Release() {
  holder_.store(0, std::memory_order_relaxed);
  held_.store(false, std::memory_order_seq_cst);
}

bool RealClock::HeldByThisThread() const {
  return held_.load(std::memory_order_acquire) &&
         holder_.load(std::memory_order_relaxed) == static_cast<unsigned long>(pthread_self());
}

bool RealClock::DrainInbox() {
  bool any = false;
  Task t;
  uint64_t n = 0;
  while (inbox_.TryPop(t)) {
    ++n;
    q_.Post(std::move(t));
    any = true;
  }
  if (n != 0) drained_.store(drained_.load(std::memory_order_relaxed) + n, std::memory_order_seq_cst);
  return any;
}

uint64_t RealClock::PollBudget(uint64_t budget) {
  uint64_t n = 0;
  DrainInbox();
  Task task;
  TimeNs when = 0;
  // A zero-time card's stages are timers due "now", each set by the one before, and the
  // whole chain is due: the time is read again whenever the next timer is later than the
  // last reading (a timer due by then is due now; reading the clock on a VM costs about
  // as much as running a stage).
  TimeNs now = Now();
  for (;;) {
    while (n < budget && q_.HasReady()) {
      Task t = q_.PopReady();
      t();
      ++n;
    }
    if (n >= budget) break;
    const TimeNs next = q_.NextTime();
    if (next == kTimeNever) break;
    if (next > now) now = Now();
    if (!q_.PopDue(now, &task, &when)) break;
    task();
    ++n;
  }
  return n;
}

uint64_t RealClock::Poll() {
  while (!TryAcquire()) std::this_thread::yield();
  const uint64_t n = PollBudget(UINT64_MAX);
  Release();
  return n;
}

bool RealClock::RunInline(Task& task) {
  // Borrowing pays when the request completes inline (a zero-time card). When borrowed
  // runs keep leaving timers for the owner (a modelled card: every request waits for its
  // flash time), the owner would have to be woken for each; then requests go to the
  // owner instead, which stays awake for them, and one borrow in kProbe re-checks.
  if (kick_score_.load(std::memory_order_relaxed) >= kKickLimit &&
      probe_.fetch_add(1, std::memory_order_relaxed) % kProbe != 0) {
    return false;
  }
  // An engine with flash operations in flight (a timer due soon) is not idle: its owner
  // is about to run them and a borrower would only contend for the token with it.
  const TimeNs due = next_due_.load(std::memory_order_acquire);
  if (due != kTimeNever && due < Now() + kBusyHorizonNs) return false;
  bool soon = false;
  if (!Borrow(&task, &soon)) return false;
  // Only work a request's run left due soon counts against borrowing.
  const uint32_t k = kick_score_.load(std::memory_order_relaxed);
  kick_score_.store(soon ? std::min(k + 1, 2 * kKickLimit) : 0, std::memory_order_relaxed);
  return true;
}

bool RealClock::PollInline() { return Borrow(nullptr, nullptr); }

bool RealClock::Borrow(Task* task, bool* left_soon) {
  if (!TryAcquire()) return false;
  if (task != nullptr) (*task)();
  // What the task started (a zero-time card's completions, the FTL's next steps) runs
  // here too, up to a budget: the borrower came for one request, not for the engine's
  // background work, which its owning thread picks up.
  constexpr uint64_t kBudget = 64;
  PollBudget(kBudget);
  const bool ready = q_.HasReady();
  const TimeNs next = q_.NextTime();
  next_due_.store(ready ? 0 : next, std::memory_order_release);
  Release();
  // The owner sleeps (or spins) until owner_next_ or a submission; work left earlier than
  // that, or submitted while the token was held (Submit left the wake to us), must kick
  // it. Dekker with WaitUntil: kicks_ before sleeping_ here, sleeping_ before kicks_
  // there, so either the owner sees the kick or this sees it asleep.
  const bool submitted = submitted_.load(std::memory_order_seq_cst) != drained_.load(std::memory_order_seq_cst);
  if (ready || submitted || next < owner_next_.load(std::memory_order_seq_cst)) {
    kicks_.fetch_add(1, std::memory_order_seq_cst);
    if (sleeping_.load(std::memory_order_seq_cst)) WakeOwner();
  }
  if (left_soon != nullptr) *left_soon = ready || (next != kTimeNever && next < Now() + kBusyHorizonNs);
  return true;
}

void RealClock::WaitUntil(TimeNs deadline, uint64_t kicks_seen) {
  std::unique_lock<std::mutex> lock(mu_);
  sleeping_.store(true, std::memory_order_seq_cst);
  // A Submit that completed before sleeping_ was set is visible in submitted_, a
  // borrower's kick in kicks_.
  if (submitted_.load(std::memory_order_seq_cst) == drained_.load(std::memory_order_seq_cst) &&
      kicks_.load(std::memory_order_seq_cst) == kicks_seen && !stop_.load() && !wake_) {
    if (n_fd_sources_.load(std::memory_order_acquire) != 0) {
      SleepOnFds(deadline, lock);
    } else if (deadline == kTimeNever) {
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

void RealClock::SleepOnFds(TimeNs deadline, std::unique_lock<std::mutex>& lock) {
  fd_sleeping_ = true;
  lock.unlock();
  bool held_input = false;
  {
    std::lock_guard<std::mutex> l(fd_mu_);
    held_input = !GatherFds(nullptr);
  }
  // pfds_[0] is the eventfd: a wake after fd_sleeping_ was set writes it, so nothing
  // between the unlock and ppoll is missed. A source removed meanwhile (its descriptor
  // closed or reused) at worst wakes this thread once for nothing.
  pfds_.insert(pfds_.begin(), pollfd{efd_, POLLIN, 0});
  if (!held_input) {
    timespec ts{};
    const timespec* tp = nullptr;
    if (deadline != kTimeNever) {
      // Unsigned time: a deadline passed since the owner looked (it was preempted) is a
      // zero timeout, not one some centuries long.
      const TimeNs now = Now();
      const TimeNs left = deadline > now ? deadline - now : 0;
      ts.tv_sec = static_cast<time_t>(left / 1000000000);
      ts.tv_nsec = static_cast<long>(left % 1000000000);
      tp = &ts;
    }
    ::ppoll(pfds_.data(), pfds_.size(), tp, nullptr);
    for (std::size_t i = 1; i < pfds_.size(); ++i) woke_on_fd_ |= pfds_[i].revents != 0;
  }
  if ((pfds_[0].revents & POLLIN) != 0) {
    uint64_t v;
    (void)!::read(efd_, &v, sizeof v);
  }
  lock.lock();
  fd_sleeping_ = false;
}

bool RealClock::GatherFds(std::vector<FdSource*>* srcs) {
  pfds_.clear();
  if (srcs != nullptr) srcs->clear();
  bool none_held = true;
  for (FdSource* s : fd_sources_) {
    if (!s->Wanted()) continue;
    if (s->Buffered()) none_held = false;
    pfds_.push_back(pollfd{s->fd(), POLLIN, 0});
    if (srcs != nullptr) srcs->push_back(s);
  }
  return none_held;
}

bool RealClock::AddFdSource(FdSource* s) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (efd_ < 0) efd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (efd_ < 0) return false;
  }
  std::lock_guard<std::mutex> l(fd_mu_);
  fd_sources_.push_back(s);
  n_fd_sources_.store(static_cast<uint32_t>(fd_sources_.size()), std::memory_order_release);
  WakeOwner();  // an owner asleep on the condition variable sleeps on the sources from now
  return true;
}

void RealClock::RemoveFdSource(FdSource* s) {
  std::lock_guard<std::mutex> l(fd_mu_);
  fd_sources_.erase(std::remove(fd_sources_.begin(), fd_sources_.end(), s), fd_sources_.end());
  n_fd_sources_.store(static_cast<uint32_t>(fd_sources_.size()), std::memory_order_release);
}

bool RealClock::TakeFromFdSources() {
  if (n_fd_sources_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> l(fd_mu_);
  GatherFds(&fd_ready_);
  if (fd_ready_.empty()) return false;
  int n;
  do {
    n = ::poll(pfds_.data(), pfds_.size(), 0);
  } while (n < 0 && errno == EINTR);
  bool any = false;
  for (std::size_t i = 0; i < fd_ready_.size(); ++i) {
    if (pfds_[i].revents != 0 || fd_ready_[i]->Buffered()) any |= fd_ready_[i]->Take();
  }
  return any;
}

void RealClock::FlushFdSources() {
  if (n_fd_sources_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> l(fd_mu_);
  for (FdSource* s : fd_sources_) s->Flush();
}

bool RealClock::FdSourcesReady() {
  if (n_fd_sources_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> l(fd_mu_);
  if (!GatherFds(nullptr)) return true;
  if (pfds_.empty()) return false;
  return ::poll(pfds_.data(), pfds_.size(), 0) > 0;
}

void RealClock::AddPoller(Poller* p) {
  std::lock_guard<std::mutex> l(pollers_mu_);
  pollers_.push_back(p);
  added_poller_ = true;
  n_pollers_.store(static_cast<uint32_t>(pollers_.size()), std::memory_order_release);
}

void RealClock::RemovePoller(Poller* p) {
  std::lock_guard<std::mutex> l(pollers_mu_);
  pollers_.erase(std::remove(pollers_.begin(), pollers_.end(), p), pollers_.end());
  n_pollers_.store(static_cast<uint32_t>(pollers_.size()), std::memory_order_release);
}

bool RealClock::TakeFromPollers(bool polling) {
  if (n_pollers_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> l(pollers_mu_);
  if (polling && added_poller_) {
    for (Poller* p : pollers_) p->Disarm();  // one added since: this thread polls it now
    added_poller_ = false;
  }
  bool any = false;
  for (Poller* p : pollers_) any |= p->Take();
  return any;
}

bool RealClock::PollersReady() {
  if (n_pollers_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> l(pollers_mu_);
  for (Poller* p : pollers_) {
    if (p->Ready()) return true;
  }
  return false;
}

bool RealClock::ArmPollers() {
  if (n_pollers_.load(std::memory_order_acquire) == 0) return false;
  std::lock_guard<std::mutex> l(pollers_mu_);
  bool any = false;
  for (Poller* p : pollers_) any |= p->Arm();
  return any;
}

void RealClock::DisarmPollers() {
  if (n_pollers_.load(std::memory_order_acquire) == 0) return;
  std::lock_guard<std::mutex> l(pollers_mu_);
  for (Poller* p : pollers_) p->Disarm();
  added_poller_ = false;
}

void RealClock::RunUntil(TimeNs deadline) {
  // The pollers (attached rings) are this thread's to poll only while requests go to it
  // anyway (RunInline's policy says borrowing does not pay: a modelled card, whose
  // requests wait for flash time this thread keeps). Otherwise, and whenever this thread
  // sleeps or leaves, they stay armed: producers wake their own threads, which borrow
  // the idle engine (a zero-time card's requests complete inline, on threads of their
  // own, rather than queueing behind this one).
  bool armed = true;  // as pollers start
  owner_thread_.store(static_cast<unsigned long>(pthread_self()), std::memory_order_relaxed);
  while (!stop_.load(std::memory_order_acquire)) {
    // A borrower holds the token only for one request's run: wait it out.
    while (!TryAcquire()) std::this_thread::yield();
    const uint64_t kicks_seen = kicks_.load(std::memory_order_seq_cst);
    const bool poll = kick_score_.load(std::memory_order_relaxed) >= kKickLimit;
    if (poll == armed) {
      if (poll) {
        DisarmPollers();
      } else {
        ArmPollers();  // what came before the arming was seen is taken here
        TakeFromPollers(false);
      }
      armed = !poll;
    }
    if (poll) TakeFromPollers(true);
    TakeFromFdSources();
    PollBudget(UINT64_MAX);
    FlushFdSources();
    const TimeNs now = Now();
    const bool ready = q_.HasReady();
    const TimeNs next = std::min(q_.NextTime(), deadline);
    owner_next_.store(ready ? now : next, std::memory_order_seq_cst);
    next_due_.store(ready ? 0 : q_.NextTime(), std::memory_order_release);
    Release();
    if (stop_.load(std::memory_order_acquire)) break;
    if (now >= deadline) break;
    if (ready) continue;
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
    // Only submissions (and, while this thread polls them, the pollers' requests) end the
    // spin (and earn it back): work a borrower left is taken
    // at the latest when the spin ends (WaitUntil sees the kick), and an engine whose
    // requests are all run inline by borrowers must not keep a core spinning for them.
    // The spin ends where yielding for the next timer begins.
    if (idle_spin_.Spin(
            [this, armed] {
              return submitted_.load(std::memory_order_acquire) != drained_.load(std::memory_order_acquire) ||
                     stop_.load(std::memory_order_relaxed) || (!armed && PollersReady()) || FdSourcesReady();
            },
            next == kTimeNever ? UINT64_MAX : static_cast<uint64_t>(next - now - kSpinNs))) {
      continue;
    }
    // Producers wake the pollers' own threads while this one sleeps; work that came
    // before they could see that is taken now instead.
    if (!armed) {
      armed = true;
      if (ArmPollers()) continue;
    }
    const TimeNs slept_from = Now();
    woke_on_fd_ = false;
    WaitUntil(next, kicks_seen);
    // Only a submission's (or a socket's) wait teaches the spin (a timer's end, or a
    // borrower's kick, says nothing of when requests come).
    const bool submitted =
        submitted_.load(std::memory_order_acquire) != drained_.load(std::memory_order_acquire) || woke_on_fd_;
    idle_spin_.NoteBlocked(submitted ? static_cast<int64_t>(Now() - slept_from) : -1);
  }
  if (!armed) ArmPollers();  // no one polls now
  owner_thread_.store(0, std::memory_order_relaxed);
  stop_.store(false, std::memory_order_release);  // a Stop() ends one Run
}

void RealClock::Run() { RunUntil(kTimeNever); }

}  // namespace vsl
