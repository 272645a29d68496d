// FlashBack's view of the pipe's dies: which are declared failed, the media errors that
// retire a die whose error rate crosses a bound, the sectors a second failure made
// unrecoverable, and the bounded log of FlashBack events (docs/flashback.md).
//
// Contract: a die once failed stays failed for the life of this object (an attach finds
// it again from the metadata); NoteError counts distinct blocks, not pages (a block going
// bad fails every later program in it: one error), within a sliding window. Pure
// bookkeeping: the caller acts on what it returns (declaring the die failed, moving data).
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <utility>
#include <vector>

#include "vsl/core/time.h"

namespace vsl::ftl {

class DieHealth {
 public:
  static constexpr std::size_t kMaxEvents = 64;
  static constexpr std::size_t kMaxLost = 4096;  // lost sectors listed (the rest counted)

  // `error_limit` distinct blocks with media errors within `window` retire a die (0: never).
  DieHealth(uint32_t dies, uint32_t error_limit, DurNs window);

  uint32_t dies() const { return static_cast<uint32_t>(failed_.size()); }
  bool failed(uint32_t d) const { return d < failed_.size() && failed_[d] != 0; }
  void MarkFailed(uint32_t d) { failed_[d] = 1; }
  // A die that stopped answering (a command timed out), as against one retired for its
  // error rate, which still answers and whose pages are still worth reading directly (a
  // second failure in a stripe leaves them the only copy). Silent implies failed once
  // the caller declares it.
  bool silent(uint32_t d) const { return d < silent_.size() && silent_[d] != 0; }
  void MarkSilent(uint32_t d) { silent_[d] = 1; }
  std::vector<uint32_t> failed_dies() const;
  uint32_t alive() const;

  // A media error (uncorrectable read, program or erase failure) in `block` of die `d` at
  // `now`. True when it takes the die across the bound: the caller retires it. `*count`
  // (if given) gets the errors in the window.
  bool NoteError(uint32_t d, uint32_t block, TimeNs now, std::size_t* count = nullptr);
  DurNs window() const { return window_; }

  // A sector found unrecoverable (two failures in its stripe); listed once.
  void NoteLost(uint64_t lba);
  const std::vector<uint64_t>& lost() const { return lost_; }
  uint64_t unnamed_lost_stripes = 0;  // FlashBackStatus::unnamed_lost_stripes

  // Logged (warn) and kept, newest last, at most kMaxEvents.
  void Event(std::string e);
  const std::vector<std::string>& events() const { return events_; }

 private:
  std::vector<uint8_t> failed_, silent_;
  uint32_t limit_;
  DurNs window_;
  std::vector<std::deque<std::pair<TimeNs, uint32_t>>> errors_;  // per die: (when, block)
  std::vector<uint64_t> lost_;
  std::vector<std::string> events_;
};

}  // namespace vsl::ftl
