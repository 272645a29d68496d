// The groomer's policy (docs/ftl.md, "Groomer and wear"): which LEB it takes next, and how
// host writes are paced while it runs. The relocation itself (reads, appends, the
// victim's release) stays in groomer.cc; this component decides, owns the decision's
// state (the rebuild queue, the rebuild/space alternation, the wear check's trigger, the
// pacing credits) and touches the LEB table only through its public interface.
//
// Victim order:
//   1. rebuild: a LEB holding rows that could not survive another die failure (formed
//      with a die that has failed since, or cut while open without parity). While space
//      is short, rebuild and space victims alternate, so host writes are not starved
//      while nearly-full rebuild victims free little.
//   2. space (free LEBs at or below gc_start_free_lebs, or a caller waiting for room):
//      the LebTable's victim policy, among LEBs that free more than they refill when
//      nobody waits (on a pipe over-full after die failures a victim gaining nothing
//      would only churn).
//   3. wear: static wear levelling (wear.h), looked for only after an erase count changed.
//
// Not thread-safe: owned by the pipe's engine, like the rest of the FTL.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "vsl/ftl/die_health.h"
#include "vsl/ftl/leb.h"
#include "vsl/ftl/stripe.h"

namespace vsl::ftl {

// LEBs whose data must be moved for FlashBack's sake, in the order they joined.
class RebuildQueue {
 public:
  // Adds LEB `index` unless it is queued already.
  void Add(uint32_t index);
  std::size_t size() const { return q_.size(); }
  bool empty() const { return q_.empty(); }
  const std::vector<uint32_t>& lebs() const { return q_; }

  // The next queued LEB that can be groomed now: closed, nothing in flight, not held,
  // not pinned by an atomic batch, and its live data fits the groomer's `room` (a victim
  // that runs out of room half-way is held with its data, and takes the room with it).
  // It moves to the back of the queue and stays until it is empty of such data.
  // LEBs that are done (free, or no longer unprotected, or with nothing live or pinned
  // left) leave the queue on the way; one left with no live data is protected again.
  // `drained` runs when the queue becomes empty during this call.
  Leb* Next(LebTable& lebs, uint64_t room, const std::function<void()>& drained);

 private:
  std::vector<uint32_t> q_;
};

// Host-write pacing while the groomer runs with few free LEBs: each relocated sector
// earns the host credits for that many host sectors, so host writes interleave with
// grooming at a fine grain instead of stalling until a whole LEB is free.
//
// What a sector earns is a rate, not the current victim's own ratio: the ratio
// (sectors freed per sector moved) averaged over recent victims, weighted by what they
// moved, times a feedback on the free room (pblk's rate limiter does the like with its
// free blocks). A victim's own ratio swings several-fold between victims (one 80% valid,
// the next 50%); paying the host that ratio made each pipe's host rate swing with it, and
// with the volume's requests spread over the LUNs the slow pipe's queue, and its
// latency, grew with each swing. With the average the free room absorbs the swings, and
// the feedback holds the room near a target above the reserve: the host earns less as
// the room falls towards the reserve (where it would stop for room: a stall of a whole
// victim) and more above the target.
class GroomPacer {
 public:
  // A new victim with `valid` live sectors of `capacity`; banked credits are capped at
  // `cap` (a burst of host writes no larger than a few pages).
  void Start(uint32_t valid, uint32_t capacity, double cap);
  // The free room's distance from its target, in LEBs (negative below it): sets the
  // feedback factor, 1 at the target, clamped to [kMinFeedback, kMaxFeedback].
  void SetSlack(double lebs);
  void Earn() { credits_ += rate(); }
  // Host sectors waiting to be appended now, at each relocated sector: above their recent
  // average (an exponential average over about 4,096 relocated sectors, from the first
  // sample) the host's rate rises, below it falls, by (now + kBacklogFloor) / (average +
  // kBacklogFloor) within [kMinBacklogFactor, kMaxBacklogFactor], and never above 1 while
  // the room is below its target (feedback() < 1).
  //
  // Why: a volume over several LUNs sends each I/O to one of them at random, and with
  // every pipe's dies saturated each pipe's rate is fixed, so the split of the host's
  // outstanding I/O between the pipes is a random walk: the pipe that has drawn the most
  // holds its writes longest (the override runs' p99 of 4.2-4.6 ms, four times their
  // mean). Paying a long queue more of the dies' time, and a short one less, out of the
  // slack the room feedback already keeps, makes each pipe's rate lean against its own
  // backlog. Measured (card_perf_bench --steady --power-override 55, stock, rounds 2-3,
  // victims overlapping either way): p99 4.67/4.61 ms -> 3.23/3.35 ms, the first round's
  // slowest write 20.8 -> 6.4 ms, the same throughput within 1% (and within 5% more once
  // the room target came down, ftl_impl.h).
  void SetBacklog(double sectors);
  double backlog_factor() const { return backlog_factor_; }
  bool CanSpend() const { return credits_ >= 1; }
  void Spend() { credits_ -= 1; }
  // A sector that was paid for and then found no room.
  void Refund() { credits_ += 1; }
  // The current victim's own ratio (sectors it frees per sector moved).
  double ratio() const { return ratio_; }
  // The ratio averaged over recent victims (the current one included).
  double average() const { return den_ > 0 ? num_ / den_ : ratio_; }
  double feedback() const { return feedback_; }
  // Host sectors one relocated sector pays for now.
  double rate() const { return average() * feedback_ * backlog_factor_; }
  double credits() const { return credits_; }
  // Pacing applies while a victim is being groomed, moving it frees room (ratio > 0),
  // and free LEBs are at or below the groomer's start level.
  bool Applies(bool grooming, uint32_t free_lebs, uint32_t start_free_lebs) const {
    return grooming && ratio_ > 0 && free_lebs <= start_free_lebs;
  }

  // Each earlier victim's weight in the average shrinks by this per victim.
  static constexpr double kDecay = 0.75;
  // Feedback: 1 + kGain * slack above the target, 1 + kGainBelow * slack below it, within
  // these bounds. Below, it falls faster: a room that reaches the reserve stops the host
  // for a whole victim (measured: the override runs' slowest writes, 16-22 ms, were such
  // stops while the average was still settling after the fill; with the steeper side
  // 7-8 ms, for 0.5-0.7% less throughput).
  static constexpr double kGain = 0.25, kGainBelow = 0.4, kMinFeedback = 0.2, kMaxFeedback = 2.0;
  static constexpr double kBacklogAlpha = 1.0 / 4096, kBacklogFloor = 4.0, kMinBacklogFactor = 0.25,
                          kMaxBacklogFactor = 2.0;

 private:
  double credits_ = 0;
  double ratio_ = 0;
  double num_ = 0, den_ = 0;  // decayed sums of sectors freed and moved
  double feedback_ = 1.0;
  double backlog_avg_ = -1;  // (-1: no sample yet)
  double backlog_factor_ = 1.0;
};

class GroomPolicy {
 public:
  enum class Kind : uint8_t { kNone, kRebuild, kSpace, kWear };
  struct Choice {
    Leb* victim = nullptr;
    Kind kind = Kind::kNone;
  };
  struct Inputs {
    bool need = false;        // free LEBs at or below the groomer's start level
    bool waiting = false;     // somebody waits for room (TEST_ForceGroom, writers)
    uint64_t room = 0;        // sectors the groomer can still write (see RebuildQueue::Next)
    uint64_t now_seq = 0;     // ages LEBs for cost-benefit
    VictimPolicy victim_policy = VictimPolicy::kGreedy;
    uint32_t first_data_leb = 2;
    uint32_t wl_max_spread = 0;
    uint32_t sectors_per_page = 1;
  };

  GroomPolicy(LebTable& lebs, const DieHealth& dies, const StripeLayout& stripe)
      : lebs_(lebs), dies_(dies), stripe_(stripe) {}

  // The next victim and why, or none (then nothing the groomer may take would help).
  // `drained`: see RebuildQueue::Next.
  Choice Choose(const Inputs& in, const std::function<void()>& drained);

  // Whether a space victim `c` frees more room than its live data (and, with failed
  // dies, its trim records) takes again once formed without failed dies or bad blocks.
  bool Gains(const Leb& c, uint32_t sectors_per_page) const;
  // The space victim Choose would pick now for `in` (need set, nobody waiting), without
  // Choose's side effects: for reading its summary ahead. Null if none.
  Leb* PeekSpaceVictim(const Inputs& in) const;

  // An erase count changed (a LEB was opened): the next idle Choose looks for wear work.
  void NoteErase() { wear_check_due_ = true; }

  RebuildQueue& rebuild() { return rebuild_; }
  const RebuildQueue& rebuild() const { return rebuild_; }

 private:
  LebTable& lebs_;
  const DieHealth& dies_;
  const StripeLayout& stripe_;
  RebuildQueue rebuild_;
  bool rebuild_turn_ = false;   // alternates rebuild and space victims while space is short
  bool wear_check_due_ = true;  // an erase count changed since the last wear check
};

}  // namespace vsl::ftl
