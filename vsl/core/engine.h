// Engine: the single-threaded, run-to-completion reactor that serves one pipe.
//
// An engine owns its pipe's state outright: only tasks running on the engine touch it, so
// the hot path takes no locks. Each task runs to completion; work that must wait (a flash
// completion, a timer) is a new task. Time comes only from the engine's Clock, so the same
// code runs deterministically on a VirtualClock and in wall time on a RealClock.
//
// Thread rules: At/After/Post/Cancel only from the engine's thread: its own, or one that
// borrowed it for RunHere (checked in debug builds once the engine is bound, see
// BindToCurrentThread). Submit, Send and RunHere may be called from any thread when the
// clock is a RealClock; on a VirtualClock everything is one thread and they are Post.
#pragma once

#include <string>
#include <thread>

#include "vsl/core/clock.h"

namespace vsl {

class Engine {
 public:
  Engine(std::string name, Clock& clock) : name_(std::move(name)), clock_(clock) {}
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const std::string& name() const { return name_; }
  Clock& clock() { return clock_; }
  TimeNs Now() const { return clock_.Now(); }

  TimerId At(TimeNs when, Task task) {
    AssertOnEngineThread();
    return clock_.At(when, std::move(task));
  }
  TimerId After(DurNs delay, Task task) {
    AssertOnEngineThread();
    return clock_.After(delay, std::move(task));
  }
  void Post(Task task) {
    AssertOnEngineThread();
    clock_.Post(std::move(task));
  }
  bool Cancel(TimerId id) {
    AssertOnEngineThread();
    return clock_.Cancel(id);
  }
  // Any thread (RealClock). False when the engine's inbox is full: `task` is left with the
  // caller, who must retry.
  bool Submit(Task&& task) {
    if (clock_.is_virtual()) {
      clock_.Post(std::move(task));
      return true;
    }
    return static_cast<RealClock&>(clock_).Submit(std::move(task));
  }

  // Any thread: runs `task` on the engine. From the engine's own thread it is posted (a
  // full inbox must not be waited for by the only thread that drains it); from another
  // thread it is submitted, yielding while the inbox is full.
  void Send(Task task) {
    if (clock_.is_virtual() || OnEngineThread()) {
      clock_.Post(std::move(task));
      return;
    }
    auto& rc = static_cast<RealClock&>(clock_);
    while (!rc.Submit(std::move(task))) std::this_thread::yield();
  }

  // Any thread: like Send, but when the engine is idle (its thread spinning or asleep, no
  // one else borrowing it) runs `task` on the calling thread at once, with what it makes
  // ready (RealClock::RunInline): the request path's fast way in, with no hand-off. The
  // caller must expect completions to run inline, before RunHere returns, on its own
  // thread, and must hold no lock a completion takes.
  void RunHere(Task task) {
    if (!clock_.is_virtual() && !OnEngineThread() && static_cast<RealClock&>(clock_).RunInline(task)) return;
    Send(std::move(task));
  }

  // Any thread: when the engine is idle, runs what is ready or due on it now on the
  // calling thread (a waiter that would otherwise spin drives its own completions);
  // false when the engine is busy or runs on a virtual clock.
  bool PollHere() {
    if (clock_.is_virtual() || OnEngineThread()) return false;
    return static_cast<RealClock&>(clock_).PollInline();
  }

  // Any thread: a source the engine's thread polls while awake (RealClock::Poller); false
  // (nothing registered) on a virtual clock, whose source keeps waking its own thread.
  bool AddPoller(RealClock::Poller* p) {
    if (clock_.is_virtual()) return false;
    static_cast<RealClock&>(clock_).AddPoller(p);
    return true;
  }
  void RemovePoller(RealClock::Poller* p) {
    if (!clock_.is_virtual()) static_cast<RealClock&>(clock_).RemovePoller(p);
  }

  // Declares the calling thread the engine's thread (done by whoever runs the engine).
  void BindToCurrentThread() { owner_ = std::this_thread::get_id(); }
  void AssertOnEngineThread() const {
#ifndef NDEBUG
    if (owner_ != std::thread::id() && !OnEngineThread()) OnWrongThread();
#endif
  }
  // True on the thread running the engine's tasks now: the one that holds a RealClock's
  // run token (its own or a borrower), or the bound thread of a virtual-clock engine.
  bool OnEngineThread() const {
    if (!clock_.is_virtual()) return static_cast<const RealClock&>(clock_).HeldByThisThread();
    return owner_ == std::this_thread::get_id();
  }

 private:
  [[noreturn]] void OnWrongThread() const;

  const std::string name_;  // constant after construction
  Clock& clock_;
  std::thread::id owner_;
};

// Runs an engine on its own thread with its own RealClock until destroyed.
class EngineThread {
 public:
  explicit EngineThread(std::string name);
  ~EngineThread();
  EngineThread(const EngineThread&) = delete;
  EngineThread& operator=(const EngineThread&) = delete;

  Engine& engine() { return engine_; }
  // Runs `task` on the engine thread and waits for it. Not from the engine thread.
  void RunSync(Task task);

 private:
  RealClock clock_;
  Engine engine_;
  std::thread thread_;
};

}  // namespace vsl
