// One atomic batch (Ftl::WriteAtomic) as bookkeeping (docs/ftl.md, "Atomic batches"): the
// append cursor over its operations, the member pages of the current attempt, where each
// written sector was placed, the LEBs it pins, the commit page's records, and the attempt
// rules. atomic.cc drives it (appends, the commit page, pins in the LEB table, answers).
//
// Contract: an attempt places every written sector of the batch, in operation order, in
// kAtomicData pages; its member pages are those submitted during that attempt (a page of
// an earlier attempt never counts: IsCurrent). The commit names every member page and
// carries the batch's trims, all at the commit page's seq, trims first (recovery.h
// replays them in that order). A failed attempt is voided (NewAttempt) and written again,
// at most kAttempts times in all. Pure: no I/O, no map.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "vsl/ftl/ftl.h"
#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/map.h"

namespace vsl::ftl {

class AtomicBatch {
 public:
  static constexpr uint32_t kAttempts = 4;  // a batch whose pages keep failing fails

  AtomicBatch(std::vector<AtomicOp> ops, bool fua) : ops_(std::move(ops)), fua_(fua) {}

  const std::vector<AtomicOp>& ops() const { return ops_; }
  bool fua() const { return fua_; }

  // --- append cursor ---
  struct Sector {
    uint64_t lba;
    const uint8_t* src;  // within the operation's buffer
  };
  // The next written sector to place in this attempt (trims are skipped), or nullopt when
  // every one is placed. `sector_bytes`: the format's sector size.
  std::optional<Sector> Next(uint32_t sector_bytes);
  // The sector Next returned went to `psa`: the cursor moves past it.
  void Placed(uint64_t lba, Psa psa);
  // (lba, member slot) of every sector placed in this attempt, in operation order.
  const std::vector<std::pair<uint64_t, Psa>>& placed() const { return placed_; }

  // --- member pages ---
  uint32_t attempt() const { return attempts_; }
  // A page written during attempt `a` belongs to the current attempt.
  bool IsCurrent(uint32_t a) const { return a == attempts_; }
  // A member page of the current attempt was submitted as `seq`, its slot 0 at `slot0`.
  void AddMember(uint64_t seq, Psa slot0) { members_.emplace_back(seq, slot0); }
  const std::vector<std::pair<uint64_t, Psa>>& members() const { return members_; }
  // A member page of the current attempt failed before the commit: the attempt is void.
  void Fail() { failed_ = true; }
  bool failed() const { return failed_; }

  // --- pins: LEBs holding this attempt's members stay unerased until the batch resolves
  // (until the commit maps them nothing in them is valid, and the groomer would free them)
  // True when `leb` was not pinned by this batch yet: the caller counts the pin.
  bool Pin(uint32_t leb);
  // Every LEB pinned, now unpinned by the batch: the caller releases them.
  std::vector<uint32_t> TakePins();

  // --- commit ---
  // Records the commit page needs: one per trim operation and one per member page.
  uint32_t CommitRecordCount() const;
  // The commit page's records at seq `cseq`: the trims (in operation order), then a commit
  // record per member page (lba = the member's seq, count = kCommitFlag | its slot-0 PSA).
  std::vector<format::TrimRecord> CommitRecords(uint64_t cseq) const;
  void MarkCommitted() { committed_ = true; }
  bool committed() const { return committed_; }

  // --- attempts and the end ---
  // Voids the current attempt: members, placements and the cursor are forgotten (the
  // pages stay on flash, named by no commit). Pins are the caller's to release first.
  void NewAttempt();
  // Counts the voided attempt: true while another may be made.
  bool MayRetry() { return ++attempts_ < kAttempts; }
  // True the first time only: the batch is answered once.
  bool Finish();

 private:
  std::vector<AtomicOp> ops_;
  bool fua_;
  uint32_t attempts_ = 0;
  bool failed_ = false;
  bool committed_ = false;
  bool finished_ = false;
  std::size_t op_ = 0;  // cursor: operation, and sector within it
  uint64_t in_op_ = 0;
  std::vector<std::pair<uint64_t, Psa>> members_;  // (seq, PSA of slot 0), in submit order
  std::vector<std::pair<uint64_t, Psa>> placed_;
  std::vector<uint32_t> pinned_;
};

}  // namespace vsl::ftl
