// Clocks: the source of time and the timer service of the engines.
//
// Every engine is given a Clock and never reads the time any other way. Two clocks:
//  - VirtualClock: a discrete-event simulator. Time jumps from event to event; nothing
//    sleeps. Timers due at the same instant run in an order drawn from the clock's seed,
//    so a whole run (workload, faults, power cuts) replays exactly from its seed, and
//    different seeds explore different interleavings. Posted tasks run FIFO before time
//    advances. One thread drives it; all engines of a simulation share one VirtualClock.
//  - RealClock: monotonic wall time (CLOCK_MONOTONIC via steady_clock, ns since the
//    clock was made); timers sleep until due. One RealClock per engine thread; other
//    threads hand it work through Submit (a lock-free MPSC ring) and wake it.
//
// Thread rules: At/After/Post/Cancel and the Run* calls belong to the owning thread;
// Now() may be called anywhere; RealClock::Submit and Stop may be called from any thread.
#pragma once

#include <poll.h>
#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "vsl/core/fifo.h"
#include "vsl/core/function.h"
#include "vsl/core/random.h"
#include "vsl/core/spin.h"
#include "vsl/core/ring.h"
#include "vsl/core/time.h"

namespace vsl {

using TimerId = uint64_t;  // 0 is never a valid id

class Clock {
 public:
  virtual ~Clock() = default;
  virtual TimeNs Now() const = 0;
  virtual bool is_virtual() const = 0;

  // Runs `task` at `when` (as soon as possible if `when` <= Now()). Returns an id for Cancel.
  virtual TimerId At(TimeNs when, Task task) = 0;
  TimerId After(DurNs delay, Task task) { return At(Now() + delay, std::move(task)); }
  // Runs `task` after the current task, before any timer, in FIFO order with other posts.
  virtual void Post(Task task) = 0;
  // True when the timer was pending and is now cancelled; false if it ran or is unknown.
  virtual bool Cancel(TimerId id) = 0;
};

// The timer heap and post queue both clocks share. Not thread-safe.
class TimerQueue {
 public:
  explicit TimerQueue(uint64_t tie_seed) : tie_rng_(tie_seed) {}

  TimerId Add(TimeNs when, Task task);
  void Post(Task task) { ready_.push_back(std::move(task)); }
  bool Cancel(TimerId id);

  bool HasReady() const { return !ready_.empty(); }
  // Earliest live timer's time, or kTimeNever.
  TimeNs NextTime();
  // Pops the earliest live timer due at or before `limit` into *task; returns its time.
  bool PopDue(TimeNs limit, Task* task, TimeNs* when);
  Task PopReady() {
    Task t = std::move(ready_.front());
    ready_.pop_front();
    return t;
  }
  std::size_t size() const { return heap_.size() - cancelled_.size() + ready_.size(); }

 private:
  // Heap entries are small and trivially copied; the tasks stay put in `slots_` (a sift
  // moves entries, and moving a Task costs an indirect call).
  struct Entry {
    TimeNs when;
    uint64_t tie;  // random tie-break among equal times, from the seed
    TimerId id;
    uint32_t slot;  // its task in slots_
  };
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const {
      if (a.when != b.when) return a.when > b.when;
      if (a.tie != b.tie) return a.tie > b.tie;
      return a.id > b.id;
    }
  };
  void DropCancelledTop();

  std::vector<Entry> heap_;
  std::vector<Task> slots_;
  std::vector<uint32_t> free_slots_;
  Fifo<Task> ready_;  // no allocation per post once grown
  // Ids in heap_ that must not run. Cancel is rare (a few periodic timers), so it looks
  // for the id in the heap rather than every Add recording it in a set.
  std::unordered_set<TimerId> cancelled_;
  TimerId next_id_ = 1;
  Rng tie_rng_;
};

class VirtualClock final : public Clock {
 public:
  // `seed` decides the order of timers due at the same instant.
  explicit VirtualClock(uint64_t seed = 1, TimeNs start = 0) : now_(start), q_(seed) {}

  TimeNs Now() const override { return now_; }
  bool is_virtual() const override { return true; }
  TimerId At(TimeNs when, Task task) override { return q_.Add(when, std::move(task)); }
  void Post(Task task) override { q_.Post(std::move(task)); }
  bool Cancel(TimerId id) override { return q_.Cancel(id); }

  // Runs one posted task or the next timer (advancing time to it). False if idle.
  bool Step();
  // Runs until nothing is pending or `max_events` ran; returns events run.
  uint64_t RunUntilIdle(uint64_t max_events = UINT64_MAX);
  // Runs everything due at or before `t`, then sets the time to `t` (if later).
  void RunUntil(TimeNs t);
  void RunFor(DurNs d) { RunUntil(now_ + d); }
  // Runs until pred() is true (checked before each event) or idle; true if pred held.
  template <typename Pred>
  bool RunUntilTrue(Pred pred, uint64_t max_events = UINT64_MAX) {
    for (uint64_t n = 0; n < max_events; ++n) {
      if (pred()) return true;
      if (!Step()) return pred();
    }
    return pred();
  }

  std::size_t pending() const { return q_.size(); }
  uint64_t events_run() const { return events_run_; }

 private:
  TimeNs now_;
  TimerQueue q_;
  uint64_t events_run_ = 0;
};

class RealClock final : public Clock {
 public:
  explicit RealClock(std::size_t inbox_capacity = 1 << 14);
  ~RealClock() override;
  RealClock(const RealClock&) = delete;
  RealClock& operator=(const RealClock&) = delete;

  TimeNs Now() const override;
  bool is_virtual() const override { return false; }
  TimerId At(TimeNs when, Task task) override { return q_.Add(when, std::move(task)); }
  void Post(Task task) override { q_.Post(std::move(task)); }
  bool Cancel(TimerId id) override { return q_.Cancel(id); }

  // Any thread: queue `task` to run on the owning thread. False when the inbox is full:
  // `task` is then left untouched with the caller, who may retry it (backpressure).
  bool Submit(Task&& task);
  // Any thread: make Run() return after the task it is running.
  void Stop();

  // Owner thread: serve inbox, posts and timers until Stop(). Sleeps when idle.
  void Run();
  // Owner thread: serve until `deadline` (wall ns on this clock) or Stop().
  void RunUntil(TimeNs deadline);
  // Owner thread: run what is ready or due now without sleeping; returns tasks run (takes
  // the run token, waiting out a borrower).
  uint64_t Poll();

  // The run token. Whoever holds it is the clock's thread for that while: only the holder
  // runs tasks or touches the timer heap and the post queue. The owning thread holds it
  // while it runs tasks and lets it go while it spins or sleeps; in between, another
  // thread may borrow the idle clock (RunInline) and run a task to completion itself, so
  // a request submitted to an idle engine costs no hand-off and no wake-up.
  //
  // Any thread: when no one holds the token, takes it, runs `task` and then what it made
  // ready or due (up to a budget), hands the rest to the owning thread (waking it when it
  // sleeps past work now pending) and returns true. False, `task` untouched, when the
  // token is held (by the owner, another borrower, or this thread: a task that runs
  // inline must not recurse), when work is due within 100 us (flash operations in
  // flight: the owner is about to run), or while borrowed runs keep leaving timers to the owner
  // (then the owner, kept awake by submissions, serves better; one call in 32 probes).
  bool RunInline(Task& task);
  // Any thread: when no one holds the token, runs what is ready or due now (up to the
  // same budget) and returns true; a waiter that would otherwise spin drives its own
  // completions. No borrowing policy: it is not a request.
  bool PollInline();
  // True on the thread that holds the token now.
  bool HeldByThisThread() const;

  // A source of requests outside the inbox that the owning thread polls while it is
  // awake: an attached application's submission ring in shared memory. While the owner
  // polls it, the source's producers need wake no one (a wake-up costs tens of
  // microseconds on a VM, more than a modelled read's host share); when the owner is
  // about to sleep, or leaves Run, it arms the source, and from then on producers wake
  // the source's own server thread (its eventfd), which hands the work in as before.
  class Poller {
   public:
    virtual ~Poller() = default;
    // Token holder (the owning thread): takes what the source has and hands it to this
    // engine (posts); true when there was any. Must not sleep, nor wait for a lock its
    // own server thread holds while it calls into this clock.
    virtual bool Take() = 0;
    // Owner thread, or any thread as a hint: work is waiting (a cheap look, no taking).
    virtual bool Ready() const = 0;
    // Owner thread, about to sleep or leaving Run: from now on producers must wake the
    // source's server thread. True when work came before the arming was seen (the owner
    // then takes it instead of sleeping). The producer's publish and its look at the
    // arming, and this arming and its look at the source, are seq_cst: one side always
    // sees the other.
    virtual bool Arm() = 0;
    // Owner thread, awake again: producers may stop waking anyone; the owner polls.
    virtual void Disarm() = 0;
  };
  // Any thread. A new poller starts armed (as the source must be to begin with). After
  // RemovePoller returns, the owner never calls `p` again.
  void AddPoller(Poller* p);
  void RemovePoller(Poller* p);

  // A descriptor the owning thread reads itself: an NBD connection's socket, served by
  // its LUN's engine with no thread of its own between the socket and the engine (SPDK's
  // model: one thread polls the network and runs the FTL). The owner takes from a source
  // whenever its descriptor is readable (or it holds input already read), on every turn
  // of its loop, in its idle spin and in its sleep (ppoll on the sources and the clock's
  // own eventfd), and after every run of ready tasks lets each source send what the run
  // completed (Flush: one gather write per connection per run, not one send per reply).
  // Every call is on the owning thread with fd_mu_ held (so RemoveFdSource waits out a
  // call in progress); Take and Flush with the run token too.
  class FdSource {
   public:
    virtual ~FdSource() = default;
    virtual int fd() const = 0;
    // False while the source takes nothing (its admission full, its stream ended): its
    // descriptor is then not polled, and whoever makes it wanted again wakes the owner
    // (any Submit, or WakeFdSources).
    virtual bool Wanted() const = 0;
    // Input already read from the descriptor and not yet taken (a poll does not show it).
    virtual bool Buffered() const = 0;
    // Reads what the descriptor has without blocking and posts the requests it makes to
    // this clock; true when it took any. Must not block, nor wait for a lock a thread
    // holds while it waits for this clock.
    virtual bool Take() = 0;
    virtual void Flush() = 0;
  };
  // Any thread. False when this clock cannot serve it (nothing is lost: the caller reads
  // its descriptor itself). After RemoveFdSource returns, the owner never calls `s` again.
  bool AddFdSource(FdSource* s);
  void RemoveFdSource(FdSource* s);
  // Any thread: a source may be wanted again; the owner looks at once.
  void WakeFdSources() { WakeOwner(); }
  // True on the thread that runs this clock's loop (Run / RunUntil) now.
  bool OnOwnerThread() const { return owner_thread_.load(std::memory_order_relaxed) == pthread_self(); }

 private:
  bool DrainInbox();
  void WakeOwner();
  void WaitUntil(TimeNs deadline, uint64_t kicks_seen);
  bool TryAcquire();
  void Release();
  // Takes the token if free, runs `task` (if any) and what is ready or due up to a
  // budget, hands the rest to the owner; *left_soon (if asked): work is due within the
  // busy horizon. False when the token was held.
  bool Borrow(Task* task, bool* left_soon);
  // Runs what is ready or due now, at most `budget` tasks; returns tasks run. Holder only.
  uint64_t PollBudget(uint64_t budget);
  // Owner only (pollers_mu_ taken here): Take from every poller; true if any had work.
  // `polling`: the owner polls them now (a poller added since is disarmed).
  bool TakeFromPollers(bool polling);
  bool PollersReady();
  // Arms every poller; true when one had work already.
  bool ArmPollers();
  void DisarmPollers();
  // Owner, token held: Take from every wanted source whose descriptor is readable or that
  // holds input; true when any took. FlushFdSources: Flush every source.
  bool TakeFromFdSources();
  void FlushFdSources();
  // Owner: a source has work without waiting (readable, or input held). One poll(2).
  bool FdSourcesReady();
  // Owner: sleeps in ppoll on the wanted sources and the eventfd until `deadline`.
  void SleepOnFds(TimeNs deadline, std::unique_lock<std::mutex>& lock);
  // The wanted sources' descriptors (owner only, fd_mu_ held); false when one holds input.
  bool GatherFds(std::vector<FdSource*>* srcs);

  int64_t epoch_ns_;
  TimerQueue q_;
  MpscRing<Task> inbox_;
  std::atomic<uint64_t> submitted_{0};
  std::atomic<uint64_t> drained_{0};  // written by the token holder only
  std::atomic<bool> stop_{false};
  std::atomic<bool> sleeping_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool wake_ = false;  // guarded by mu_
  AdaptiveSpin idle_spin_;  // an idle engine polls its inbox a little before it sleeps
  std::atomic<bool> held_{false};
  std::atomic<unsigned long> holder_{0};  // pthread id of the holder, 0 when free
  // The owning thread's next wake-up (the earliest timer when it let the token go); a
  // borrower that leaves work due earlier than this kicks it.
  std::atomic<TimeNs> owner_next_{kTimeNever};
  std::atomic<uint64_t> kicks_{0};
  // The earliest pending work when the token was last let go (0: tasks ready).
  std::atomic<TimeNs> next_due_{kTimeNever};
  // Borrowed runs in a row that left work for the owner (RunInline's policy).
  std::atomic<uint32_t> kick_score_{0};
  std::atomic<uint32_t> probe_{0};
  std::mutex pollers_mu_;            // held by the owner while it calls pollers
  std::vector<Poller*> pollers_;     // guarded by pollers_mu_
  bool added_poller_ = false;        // guarded by pollers_mu_: one is still armed
  std::atomic<uint32_t> n_pollers_{0};  // a look without the lock: none, nothing to do
  std::mutex fd_mu_;                   // held by the owner while it calls sources
  std::vector<FdSource*> fd_sources_;  // guarded by fd_mu_
  std::atomic<uint32_t> n_fd_sources_{0};
  std::vector<FdSource*> fd_ready_;    // owner only: scratch
  std::vector<struct pollfd> pfds_;    // owner only: scratch (the eventfd first when asleep)
  int efd_ = -1;                       // wakes an owner asleep in ppoll (SleepOnFds)
  bool fd_sleeping_ = false;           // guarded by mu_: the owner sleeps in ppoll, not on cv_
  std::atomic<unsigned long> owner_thread_{0};  // pthread id of the thread in RunUntil
};

}  // namespace vsl
