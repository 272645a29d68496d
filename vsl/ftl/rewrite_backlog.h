// What must be written again, as bookkeeping (docs/ftl.md, "Page life"): sectors of
// failed pages that found no page when they were rewritten (the backlog, oldest first),
// trim records whose page failed while a checkpoint held every LEB closed (deferred),
// trim records whose page failed for good (the failed-trim window), the pages an attach
// found without parity (reprotect), and callers waiting for the backlog to drain.
// page_life.cc drives it (appending the sectors, acknowledging writes); tested alone
// (tests/ftl/rewrite_backlog_test.cc).
//
// `Ctx` is a write request with a `uint32_t remaining` count of holds: the backlog takes
// one hold per (request, job) it adds a request to, and gives it back only through the
// caller (who acknowledges the request once the job is done or failed).
//
// Invariants: a job in the backlog holds one pin on the LEB of `prev` (its place to go
// back to) when `prev` is a real place, and `pinned` names that LEB; a job taken out
// (TakeFront, TakeAll) still holds its pin until Release. Pins are counted through the
// two hooks, so the LEB table (and the groomer's victim, whose erase waits for pins)
// stays the caller's.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <utility>
#include <vector>

#include "vsl/core/function.h"
#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/leb.h"
#include "vsl/ftl/map.h"
#include "vsl/ftl/psa.h"

namespace vsl::ftl {

// A slot's previous place that must not be restored (see Ftl::PageBuf::prev).
inline constexpr Psa kKeepMapping = kUnmapped - 1;

template <typename Ctx>
class RewriteBacklog {
 public:
  static constexpr uint32_t kNoPin = UINT32_MAX;
  using PinHook = std::function<void(uint32_t leb)>;

  struct Job {
    uint64_t lba = 0;
    Psa from = kUnmapped;        // the failed page's slot the map points at while it waits
    std::vector<uint8_t> data;   // the sector
    std::vector<Ctx*> waiters;   // each holds one hold until the sector has a page
    Leb* victim = nullptr;       // a groomer victim it came from (the caller's reference)
    Psa prev = kKeepMapping;     // where the sector goes back to if it never finds room
    uint32_t pinned = kNoPin;    // the LEB of `prev`, pinned while the job waits
  };
  struct DeferredTrim {
    std::vector<format::TrimRecord> trims;
    std::vector<Ctx*> waiters;
  };

  // `pin` / `unpin`: one pin more / less on a LEB (unpin may let the caller erase it).
  RewriteBacklog(const PsaLayout& addr, PinHook pin, PinHook unpin)
      : addr_(addr), pin_(std::move(pin)), unpin_(std::move(unpin)) {}

  bool empty() const { return jobs_.empty(); }
  std::size_t size() const { return jobs_.size(); }
  const std::deque<Job>& jobs() const { return jobs_; }
  Job& front() { return jobs_.front(); }

  // Queues `job`, pinning the LEB of its `prev`.
  void Add(Job job) {
    job.pinned = kNoPin;
    if (job.prev < kKeepMapping) {
      job.pinned = addr_.LebOf(job.prev);
      pin_(job.pinned);
    }
    jobs_.push_back(std::move(job));
  }

  // Pins jobs hold on LEB `leb` (a victim they pin is kept, not erased, see groomer.cc).
  uint32_t PinsOn(uint32_t leb) const {
    uint32_t n = 0;
    for (const Job& j : jobs_) n += j.pinned == leb;
    return n;
  }

  // A page never stored gives its sectors back to their earlier places: jobs that would
  // go back to `here` go back to `to` instead, and their pin moves with them.
  void Retarget(Psa here, Psa to) {
    for (Job& j : jobs_) {
      if (j.prev != here) continue;
      if (j.pinned != kNoPin) unpin_(j.pinned);
      j.pinned = kNoPin;
      j.prev = to;
      if (j.prev < kKeepMapping) {
        j.pinned = addr_.LebOf(j.prev);
        pin_(j.pinned);
      }
    }
  }

  // Requests `waiters` also wait for every job of `lba` still current (the map points at
  // its `from`, `current`): one hold each.
  void JoinJobsOf(uint64_t lba, Psa current, const std::vector<Ctx*>& waiters) {
    for (Job& j : jobs_) {
      if (j.lba != lba || current != j.from) continue;
      for (Ctx* w : waiters) {
        ++w->remaining;
        j.waiters.push_back(w);
      }
    }
  }

  // The oldest job leaves the backlog, still holding its pin (Release drops it).
  Job TakeFront() {
    Job j = std::move(jobs_.front());
    jobs_.pop_front();
    return j;
  }
  // Every job leaves, oldest first, each still holding its pin.
  std::vector<Job> TakeAll() {
    std::vector<Job> out(std::make_move_iterator(jobs_.begin()), std::make_move_iterator(jobs_.end()));
    jobs_.clear();
    return out;
  }
  void Release(Job& j) {
    if (j.pinned != kNoPin) unpin_(j.pinned);
    j.pinned = kNoPin;
  }

  // --- trim records whose page failed ---
  // Held while a checkpoint has every LEB closed, with the writes waiting on them.
  void Defer(std::vector<format::TrimRecord> trims, std::vector<Ctx*> waiters) {
    deferred_.push_back({std::move(trims), std::move(waiters)});
  }
  std::vector<DeferredTrim> TakeDeferred() {
    std::vector<DeferredTrim> out;
    out.swap(deferred_);
    return out;
  }
  std::size_t deferred() const { return deferred_.size(); }
  // `waiters` also wait for every deferred trim covering `lba` (one hold each, once per
  // trim page).
  void JoinDeferredCovering(uint64_t lba, const std::vector<Ctx*>& waiters) {
    for (DeferredTrim& t : deferred_) {
      bool hit = false;
      for (const auto& r : t.trims) hit = hit || format::TrimCovers(r, lba);
      if (!hit) continue;
      for (Ctx* w : waiters) {
        if (std::find(t.waiters.begin(), t.waiters.end(), w) != t.waiters.end()) continue;
        ++w->remaining;
        t.waiters.push_back(w);
      }
    }
  }

  // Trim records that could not be written again: until every page older than them is
  // done, a failed older write of those sectors (superseded by the trim in the map, with
  // nothing durable after it) must fail too, not be acknowledged.
  void NoteFailedTrims(const std::vector<format::TrimRecord>& trims) {
    failed_.insert(failed_.end(), trims.begin(), trims.end());
  }
  bool InFailedTrim(uint64_t lba, uint64_t after_seq) const {
    for (const auto& t : failed_) {
      if (format::TrimCovers(t, lba) && t.seq > after_seq) return true;
    }
    return false;
  }
  // A page became durable: with nothing in flight, or the oldest page in flight newer
  // than every failed record, no older write can fail any more and the window closes.
  void SettleFailedTrims(bool any_inflight, uint64_t oldest_inflight_seq) {
    if (failed_.empty()) return;
    uint64_t newest = 0;
    for (const auto& t : failed_) newest = std::max(newest, t.seq);
    if (!any_inflight || oldest_inflight_seq > newest) failed_.clear();
  }
  std::size_t failed_trims() const { return failed_.size(); }

  // --- data pages an attach found without parity: (leb, die, row) ---
  std::vector<std::array<uint32_t, 3>>& reprotect() { return reprotect_; }
  std::vector<std::array<uint32_t, 3>> TakeReprotect() {
    std::vector<std::array<uint32_t, 3>> out;
    out.swap(reprotect_);
    return out;
  }

  // --- callers waiting for the backlog to drain (or to be given up) ---
  void WhenDrained(Function<void()> fn) { waiters_.push_back(std::move(fn)); }
  bool has_drain_waiters() const { return !waiters_.empty(); }
  std::vector<Function<void()>> TakeDrainWaiters() {
    std::vector<Function<void()>> out;
    out.swap(waiters_);
    return out;
  }

 private:
  const PsaLayout& addr_;
  PinHook pin_, unpin_;
  std::deque<Job> jobs_;
  std::vector<DeferredTrim> deferred_;
  std::vector<format::TrimRecord> failed_;
  std::vector<std::array<uint32_t, 3>> reprotect_;
  std::vector<Function<void()>> waiters_;
};

}  // namespace vsl::ftl
