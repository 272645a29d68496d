// Internal to the SDK: what a vsl_dev runs its requests on. Two backends: in-process (the
// card's engines in this process) and attached (vsld through shared-memory rings).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "vsl/core/function.h"
#include "vsl/vsl.h"

namespace vsl::sdk {

// One request. The backend fills `result` (0 or -errno; kExists: the count) and, for
// kRuns and kUsage, the outputs, then calls the completion it was given.
struct Op {
  enum Kind : uint8_t { kRead, kWrite, kTrim, kFlush, kAtomic, kExists, kRuns, kUsage };
  Kind kind = kRead;
  uint64_t lba = 0;
  uint64_t count = 0;
  void* buf = nullptr;  // kRead: destination; kWrite: source
  uint32_t flags = 0;   // VSL_FUA
  std::vector<vsl_vec> vecs;  // kAtomic
  uint32_t max_runs = 0;      // kRuns
  // Outputs.
  int64_t result = 0;
  std::vector<vsl_range> runs;
  uint64_t next = 0;
  vsl_usage usage{};
  // Where the op is being run, its completion (ExecuteOnLun calls it exactly once): held
  // here so the callbacks handed down capture only the op and fit Function's inline
  // storage (no allocation per request).
  Function<void()> done;

  // For reuse from a free list: back to a fresh op, keeping the vectors' storage.
  void Recycle() {
    kind = kRead;
    lba = count = 0;
    buf = nullptr;
    flags = 0;
    vecs.clear();
    max_runs = 0;
    result = 0;
    runs.clear();
    next = 0;
    usage = vsl_usage{};
    done.Reset();
  }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const vsl_caps& caps() const = 0;
  // Runs `op`; `done` is called exactly once, from any thread (never inside Run for the
  // attached backend; possibly inside it for errors found before submission elsewhere).
  virtual void Run(Op* op, Function<void()> done) = 0;
  // Blocks the calling thread until `ready()` holds, given that completions notify `cv`
  // style waiters through `wake`. A backend on a virtual clock runs the clock instead.
  virtual void WaitUntil(const std::function<bool()>& ready, const std::function<void()>& block) {
    while (!ready()) block();
  }
  // Any thread, never blocks: delivers completions that have already arrived (their
  // `done` runs on the caller). Waiters call it while they spin, so an application
  // waiting for an attached device takes its completions off the ring itself instead of
  // waiting for the backend's completion thread to be woken. A no-op where completions
  // are delivered by the engine directly.
  virtual void Poll() {}
  // Bracket a waiter's spin (calls of Poll): between them the backend may rely on the
  // waiter to take completions, and after SpinEnd it must deliver them itself again.
  virtual void SpinBegin() {}
  virtual void SpinEnd() {}
  virtual void* BufAlloc(size_t bytes);
  virtual void BufFree(void* p);
  // Stops the backend after every op has completed (clean detach in-process).
  virtual int Close() = 0;
};

}  // namespace vsl::sdk
