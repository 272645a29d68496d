// Internal to the SDK: the vsl_dev behind the C API, and the in-process opener with the
// options tests need (a virtual clock, access to the simulated card for power cuts).
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sdk/src/backend.h"
#include "vsl/core/clock.h"
#include "vsl/core/fifo.h"
#include "vsl/core/free_list.h"
#include "vsl/vsl.h"
#include "vsl/core/spin.h"

namespace vsl::card {
class Card;
}

struct vsl_dev {
  static constexpr uint64_t kMagic = 0x5645444C53564F31ULL;  // "1OVSLDEV"
  std::atomic<uint64_t> magic{kMagic};
  std::unique_ptr<vsl::sdk::Backend> backend;
  vsl_caps caps{};
  std::mutex mu;
  std::condition_variable cv;
  struct Completed {
    vsl_done_fn fn;
    void* arg;
    int result;
  };
  vsl::Fifo<Completed> completed;  // guarded by mu
  vsl::FreeList<vsl::sdk::Op> free_ops;  // guarded by mu: NewOp's free list
  std::atomic<uint64_t> completed_count{0};  // completed.size(), readable without mu (spinning)
  std::atomic<uint32_t> inflight{0};  // submitted asynchronously, callback not yet run
  vsl::AdaptiveSpin spin;  // waiters poll for completions a little before they sleep
};

namespace vsl::sdk {

struct InProcessOptions {
  // Set: the card runs on this clock in the caller's thread (deterministic tests; waits
  // run the clock). Null: engine threads on a real clock.
  VirtualClock* clock = nullptr;
  uint64_t seed = 1;
  bool zero_time = false;  // VSL_TIMING_NONE
  // Out: the card, for tests that cut its power (valid until vsl_close).
  card::Card** card_out = nullptr;
};

// vsl_open_card with options. Same contract.
int OpenInProcess(const std::string& card_dir, uint32_t lun, const InProcessOptions& o, vsl_dev** out);
// Wraps a backend in a new vsl_dev (used by both openers).
vsl_dev* NewDevice(std::unique_ptr<Backend> backend);
// Status of a handle: nullptr or closed handles are -EINVAL.
bool ValidDevice(const vsl_dev* dev);
// Runs `op` synchronously on `dev` (returns op->result).
int64_t RunSync(vsl_dev* dev, Op* op);
// Records why an open or attach failed, for vsl_last_error (this thread); returns err.
int SetLastError(int err, const std::string& why);

}  // namespace vsl::sdk
