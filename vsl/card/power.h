// The power and thermal governor of a card (docs/power.md).
//
// A card may draw from its slot only what the slot is rated for: 24.75 W by default (the
// reference driver's threshold for an x8 slot's 25 W), or, with power override set for
// that card's serial, the override (an external cable or a slot rated higher). The
// budget is the card's, shared by its controllers and all their pipes.
//
// PowerGovernor holds that budget as a token bucket of NAND energy: the static power of
// the controllers is set aside and the rest refills the bucket. Every NAND operation a
// pipe submits is charged its modelled energy (the card's power table, the same numbers
// the card model charges) before it reaches the controller; an operation that finds too
// little waits in its pipe's GovernedPipe. The refill rate leaves room for the work
// already queued on the dies when the bucket is sampled (an operation's energy is spent
// when its die starts it, up to kQueueLagNs after admission), so the average over any
// window of `window_ns` stays at or under the limit.
//
// Reads are favoured: programs and erases may not take the bucket below a read reserve,
// and a pipe's waiting reads go before its waiting writes (except behind a write to the
// same block: a die executes in submission order, and a read of a page whose program is
// held must not overtake it). Writes alone are further capped when
// the card runs hot (thermal throttle, from throttle_c on) or a LUN's reserve space runs
// low (reduced-write): those caps are fractions of the card's full-speed write power.
//
// Threads: GovernedPipe runs on its pipe's engine; PowerGovernor is shared by all the
// card's engines (a mutex) and by status readers.
#pragma once

#include <cstdint>
#include <atomic>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <string_view>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/status.h"
#include "vsl/nand/flash.h"
#include "vsl/nand/card_model.h"
#include "vsl/nand/geometry.h"

namespace vsl::card {

inline constexpr double kSlotLimitW = 24.75;   // default PCIe power-limit threshold
inline constexpr double kSlotCapabilityW = 25;  // an x8 slot's rating, unless declared

struct PowerPolicy {
  double slot_limit_w = kSlotLimitW;
  // Power override for this card: 0 off; otherwise the card's limit in watts.
  double override_w = 0;
  // What the operator declares the slot (with any external cable) can supply. An
  // override above it is refused.
  double slot_capability_w = kSlotCapabilityW;
  DurNs window_ns = 100 * kMs;  // the averaging window the limit holds over
  double throttle_c = 78;       // writes throttle from here
  double shutdown_c = 85;       // safe shutdown
  double resume_c = 70;         // back online once every controller is this cool
  DurNs sample_ns = 10 * kMs;   // thermal monitor period while the card is busy or warm
  // Reduced-write health mode: write power capped to this share of full speed.
  double reduced_write_share = 0.25;
  double limit_w() const { return override_w > 0 ? override_w : slot_limit_w; }
};

// Why a policy is refused (override above the declared slot capability, a limit that
// leaves no power for NAND work after the static draw, nonsense numbers), or OK.
Status CheckPowerPolicy(const PowerPolicy& p, double static_w);

enum class ThermalState : uint8_t { kNormal, kThrottling, kShutdown };
std::string_view ThermalStateName(ThermalState s);

struct GovernorStats {
  uint64_t reads = 0, writes = 0;            // operations charged
  uint64_t read_waits = 0, write_waits = 0;  // of which had to wait
  double read_j = 0, write_j = 0;            // energy charged
  DurNs write_wait_ns = 0;                   // total time writes waited
};

class PowerGovernor {
 public:
  // `model`: the card's power table; `controllers` and `dies` (all pipes) its shape.
  // `unmetered`: a zero-time card (a benchmarking mode, docs/bench.md), which Card::Open
  // asks for from the backend, not a policy an operator sets: every operation is charged
  // (the stats still count its energy) and none is held, by the limit or by a write
  // share. A limit is a rate in card time and a zero-time card spends no NAND time:
  // holding its operations to the rate would make the power budget, not the host path,
  // what its benchmarks measure.
  PowerGovernor(const model::Power& model, const nand::Geometry& g, const model::Timing& t,
                const PowerPolicy& policy, bool unmetered = false);

  // Energy the card spends on each operation (the card model's own accounting).
  // A read of `sectors` codewords (and the metadata if `meta`); `data` false: the
  // codewords are checked in the controller but not sent (a metadata-only read).
  double ReadJ(uint32_t sectors, bool meta, bool data = true) const;
  // A program; `data` false: one whose page data is formed in the controller (a take or
  // peek of an accumulator with no host data), so only its metadata crosses the link.
  double ProgramJ(bool data = true) const;
  // A controller-side copy: the source reads (one per gathered segment) and the
  // destination program inside the controller (on the channel, nothing on the host link).
  double CopyJ(const nand::CopyRequest& req) const;
  uint32_t meta_bytes() const { return geo_.meta_bytes_per_page(); }
  uint32_t codewords_per_page() const { return geo_.codewords_per_page(); }
  double EraseJ() const;

  // Takes `joules` for an operation at `now` if the bucket has them (writes: above the
  // read reserve and within the write cap); true when taken.
  bool TryTake(TimeNs now, double joules, bool write);
  // How long until a later TryTake of `joules` could succeed (at least 1 us).
  DurNs WaitHint(TimeNs now, double joules, bool write) const;

  // Writes held across the card's pipes are admitted oldest first. Each GovernedPipe
  // posts the held write at the head of its queue (its ticket, from NextTicket when it
  // was held, and its energy); a write takes energy only if no other pipe's posted head
  // is older. Without this the refill went to whichever pipe's timer fired first: a
  // pipe whose head needs more energy (an erase: 150 uJ against a program's 23) was
  // passed over by the others' programs until their queues ran dry, and everything
  // behind it waited tens of milliseconds.
  uint64_t NextTicket() { return ticket_.fetch_add(1, std::memory_order_relaxed) + 1; }
  // `who`'s head: `ticket` (0: it holds no write waiting for energy).
  // `eligible` false: it is held by its own cap (reduced-write), not by the card's
  // bucket, and does not keep the others waiting.
  void PostWriteHead(const void* who, uint64_t ticket, double joules, bool eligible);
  // TryTake for a write of `who` with `ticket` (UINT64_MAX: a write not held yet, newer
  // than every held one): false also when an older eligible head of another pipe waits.
  bool TryTakeWrite(const void* who, uint64_t ticket, TimeNs now, double joules);
  // WaitHint for such a write: enough energy for the older heads and this one.
  DurNs WriteWaitHint(const void* who, uint64_t ticket, TimeNs now, double joules) const;
  void NoteWait(bool write, DurNs waited);

  // Policy (limit, override) and the caps set by the thermal monitor.
  PowerPolicy policy() const;
  bool unmetered() const { return unmetered_; }
  Status SetPolicy(const PowerPolicy& p);
  void SetWriteShare(double share);  // thermal throttle: 1 = none
  // A shared card (CardOptions::sharing): the part of the card's NAND budget (the limit
  // less static power) this host may spend, its held pipes over all; 1: all of it. So
  // hosts that each govern their own pipes stay within the card's limit together.
  void SetBudgetShare(double share);
  double budget_share() const;
  double write_share() const;
  double static_w() const { return static_w_; }
  double full_write_w() const { return full_write_w_; }
  // Token-bucket figures the limit turns into (for status and tests).
  double refill_w() const;
  double burst_j() const;
  GovernorStats stats() const;

  // `wake` runs (outside the governor's lock, on the admitting engine's thread) when an
  // operation is admitted and no activity was noted since the last TakeActivity.
  void SetWake(std::function<void()> wake) { wake_ = std::move(wake); }
  bool TakeActivity() { return activity_.exchange(false); }
  // Operations waiting in the card's GovernedPipes (any thread).
  void NoteHeld(int64_t d) { held_.fetch_add(d, std::memory_order_relaxed); }
  int64_t held() const { return held_.load(std::memory_order_relaxed); }

  // Time from admission to the energy being spent, allowed for in the refill rate.
  static constexpr DurNs kQueueLagNs = 6 * kMs;

 private:
  void Configure();  // rate and burst from the policy (mu_ held)
  void Refill(TimeNs now) const;

  const model::Power model_;
  const nand::Geometry geo_;
  const double static_w_;      // all controllers
  const double full_write_w_;  // every die programming back to back
  const bool unmetered_;       // for the governor's life (a zero-time card)
  mutable std::mutex mu_;
  PowerPolicy policy_;
  double rate_w_ = 0, burst_j_ = 0, reserve_j_ = 0;
  mutable double tokens_ = 0, write_tokens_ = 0;
  mutable TimeNs at_ = 0;
  mutable bool started_ = false;
  double budget_share_ = 1.0;
  double write_share_ = 1.0;
  GovernorStats stats_;
  struct WriteHead {
    const void* who;
    uint64_t ticket;
    double joules;
    bool eligible;
  };
  std::vector<WriteHead> heads_;  // one per pipe with a held write (mu_)
  std::atomic<uint64_t> ticket_{0};
  bool TakeLocked(double joules, bool write);  // mu_ held, refilled
  double OlderHeadsJ(const void* who, uint64_t ticket, bool* any) const;  // mu_ held
  std::atomic<bool> activity_{false};
  std::atomic<int64_t> held_{0};
  std::function<void()> wake_;
  void NoteActivity() {
    if (!activity_.load(std::memory_order_relaxed) && !activity_.exchange(true) && wake_) wake_();
  }
};

// One pipe behind the governor: a FlashPipe wrapper that charges each command and holds
// it while the budget is short. Commands keep FlashPipe's ordering per die.
class GovernedPipe final : public nand::FlashPipe {
 public:
  GovernedPipe(nand::FlashPipe& inner, PowerGovernor& gov, Clock& clock);
  ~GovernedPipe() override;
  // Moves the pipe onto another engine's clock (nothing may be held).
  void Rebind(Clock& clock) { clock_ = &clock; }
  Clock* clock() const { return clock_; }
  // Reduced-write cap for this pipe's writes (share of its part of full write power);
  // 1 = none. Engine thread.
  void SetWriteShare(double share) { write_share_ = share; }
  double write_share() const { return write_share_; }

  const nand::PipeTopology& topology() const override { return inner_.topology(); }
  nand::PlpState plp_state() const override { return inner_.plp_state(); }
  void Read(const nand::ReadRequest& req, nand::FlashCallback done) override;
  void Program(const nand::ProgramRequest& req, nand::FlashCallback accepted,
               nand::FlashCallback done) override;
  void Erase(uint32_t die, uint32_t block, nand::FlashCallback done) override;
  void Reset(uint32_t die, nand::FlashCallback done) override;
  void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len,
              nand::FlashCallback done) override {
    inner_.ReadId(die, address, out, len, std::move(done));
  }
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len,
                         nand::FlashCallback done) override {
    inner_.ReadParameterPage(die, out, len, std::move(done));
  }
  uint32_t stage_slots() const override { return inner_.stage_slots(); }
  void Stage(uint32_t slot, const nand::ProgramRequest& req, nand::FlashCallback accepted,
             nand::FlashCallback done) override;
  void ClearStage(uint32_t slot) override;
  uint32_t copy_accumulators() const override { return inner_.copy_accumulators(); }
  void ClearAccumulator(uint32_t acc) override { inner_.ClearAccumulator(acc); }
  // A copy is charged and held as a write of its destination (in order with the other
  // writes); a reset of either of its dies aborts it while it is held.
  void Copy(const nand::CopyRequest& req, nand::FlashCallback accepted, nand::FlashCallback done) override;

 private:
  struct Held {
    enum Kind : uint8_t { kRead, kProgram, kErase, kStage, kCopy } kind;
    uint32_t die = 0;
    double joules = 0;
    nand::ReadRequest read;
    nand::ProgramRequest program;
    nand::CopyRequest copy;
    std::vector<uint8_t> meta, fail_meta;  // a held copy's metadata (copied at submission)
    uint32_t block = 0, slot = 0;
    nand::FlashCallback accepted, done;
    TimeNs since = 0;
    uint64_t ticket = 0;  // PowerGovernor::NextTicket: its place among all pipes' writes
  };
  // Posts writes_.front() (or nothing) as this pipe's head to the governor.
  void PostHead(bool eligible = true);
  void Issue(Held& h);
  // A write (program, copy, erase) goes to the controller now: nothing held before it and
  // the budget has `joules` (taken). Else it is held, in order, until Pump lets it go.
  bool WriteGoesNow(TimeNs now, double joules);
  void HoldWrite(Held h);
  void Pump();
  void Arm(DurNs delay);
  // A read waits only behind a held write to its own block (a die runs its commands in
  // order; a read of a page whose program is still held here must not overtake it).
  static uint64_t BlockKey(uint32_t die, uint32_t block) { return (uint64_t{die} << 32) | block; }
  bool BlockHasHeldWrite(uint32_t die, uint32_t block) const;
  void HoldBlock(uint32_t die, uint32_t block, int d);

  nand::FlashPipe& inner_;
  PowerGovernor& gov_;
  Clock* clock_;
  std::deque<Held> reads_, writes_;
  const uint32_t dies_;
  std::unordered_map<uint64_t, uint32_t> held_blocks_;  // held writes per (die, block)
  TimerId timer_ = 0;
  // Reduced-write: this pipe's own write bucket (only while write_share_ < 1).
  double write_share_ = 1.0;
  double pipe_tokens_ = 0;
  TimeNs pipe_at_ = 0;
  bool PipeWriteAllows(double joules);
};

}  // namespace vsl::card
