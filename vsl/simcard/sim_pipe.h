// SimPipe: one pipe of the simulated card (internal to the simcard module).
// Owned by its clock's thread (the card's, or its own); see sim_card.h for the model.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include <boost/intrusive/list.hpp>

#include "vsl/core/random.h"
#include "vsl/nand/flash.h"
#include "vsl/simcard/plp_journal.h"
#include "vsl/simcard/sim_card.h"
#include "vsl/simcard/thermal.h"

namespace vsl::simcard {

namespace bi = boost::intrusive;
struct QueueTag;
struct AllTag;
using QueueHook = bi::list_base_hook<bi::tag<QueueTag>, bi::link_mode<bi::safe_link>>;
using AllHook = bi::list_base_hook<bi::tag<AllTag>, bi::link_mode<bi::safe_link>>;

// One command in flight. Lives on the pipe's list of outstanding ops from submission to
// completion and, while it waits for or holds its die, on that die's FIFO queue.
struct Op : QueueHook, AllHook {
  enum class Kind : uint8_t { kRead, kProgram, kErase };
  Kind kind = Kind::kRead;
  uint64_t serial = 0;  // changes every time the Op is reused: stale events compare it
  nand::Ppa ppa;
  uint32_t first_sector = 0, sector_count = 0;
  uint8_t* data = nullptr;  // read destination
  uint8_t* meta = nullptr;
  const uint8_t* src_data = nullptr;  // program source, valid until accepted
  const uint8_t* src_meta = nullptr;
  std::unique_ptr<uint8_t[]> slot;    // scratch for `held` when no journal record takes it
  // The controller buffer's copy of a landed program (data + spare): its PLP journal
  // record's data area when it has one (the page is built there, not copied in after),
  // else `slot`. Valid until the op completes.
  uint8_t* held = nullptr;
  bool admitted = false, data_ready = false, started = false;
  int32_t stage_slot = -1;  // a staged image (FlashPipe::Stage) for this slot; never queued
  int32_t journal = -1;     // its PlpJournal record while the controller holds it
  uint64_t qseq = 0;        // queue order (journal replay order)
  bool fence = false;       // admitted only after every earlier program (ProgramRequest::fence)
  bool parity = false;      // `slot` carries its ECC parity (bit-exact mode)
  // Controller-side copy (FlashPipe::Copy): the source reads (kRead, one per segment)
  // and the program of the destination (kProgram) point at each other while the reads
  // are outstanding; each read's data goes straight into its place in the program's
  // slot. Either side may end first (a reset, a dead die, a power cut): the other is
  // then unlinked.
  Op* copy_to = nullptr;          // a read: its program
  std::vector<Op*> copy_reads;    // the program: its reads not yet done
  bool internal = false;    // the program's data is already in the controller (no link)
  uint32_t acc = nand::kNoAccumulator;  // the accumulator it adds to, takes or peeks
  nand::AccOp acc_op = nand::AccOp::kAdd;  // a copy adds; a stage peeks
  uint16_t acc_meta_at = 0, acc_meta_len = 0, acc_crc_at = 0;  // a take or peek (ProgramRequest)
  bool acc_pending = false;  // a take or peek listed in acc_takers_ until it lands
  uint64_t acc_order = 0;    // its place among accumulator operations (its first serial:
                             // `serial` changes when a landing is voided)
  bool counted = false;      // its status is already counted (a copy failed by its read)
  bool dead_add = false;     // an add to a dead die: lands (adds its data), then times out
  bool meta_only = false;    // a take or peek with no host data: only metadata on the link
  uint32_t corrected = 0;    // copy: the source reads' corrected bits, reported at done
  nand::FlashStatus copy_failed = nand::FlashStatus::kOk;  // copy: its first failed read's status
  std::vector<uint8_t> fail_meta;  // copy: the metadata programmed if its source fails
  TimeNs submit_ns = 0, bus_start_ns = 0, array_end_ns = 0;
  // The channel (SimPipe::RequestBus): what the op asked its channel for and when; while
  // `bus_wait` the die is committed to the op (`started`) but nothing has reached it yet.
  enum class BusUse : uint8_t { kReadCmd, kReadOut, kProgram, kErase };
  BusUse bus_use = BusUse::kReadCmd;
  bool bus_wait = false;
  TimeNs bus_req_ns = 0;
  DurNs flush_cost_ns = 0, flush_xfer_ns = 0;  // what the op adds to the hold-up estimate
  uint32_t gen = 0;  // the submitting port's generation (SimPipe::kUnchecked: the pipe's own calls)
  nand::FlashCallback accepted, done;
};

using OpQueue = bi::list<Op, bi::base_hook<QueueHook>, bi::constant_time_size<true>>;
using OpList = bi::list<Op, bi::base_hook<AllHook>, bi::constant_time_size<true>>;

class SimPipe final : public nand::FlashPipe {
 public:
  SimPipe(SimCard& card, Clock& clock, uint32_t controller, uint32_t pipe_in_ctrl, uint64_t seed);
  // Mirrors what the controller accepts into `j` (PlpJournal) from now on.
  void SetJournal(PlpJournal* j) { journal_ = j; }
  ~SimPipe() override;

  const nand::PipeTopology& topology() const override { return topology_; }
  nand::PlpState plp_state() const override;
  void Read(const nand::ReadRequest& req, nand::FlashCallback done) override;
  void Program(const nand::ProgramRequest& req, nand::FlashCallback accepted,
               nand::FlashCallback done) override;
  void Erase(uint32_t die, uint32_t block, nand::FlashCallback done) override;
  void Reset(uint32_t die, nand::FlashCallback done) override;
  void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len,
              nand::FlashCallback done) override;
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len,
                         nand::FlashCallback done) override;
  uint32_t stage_slots() const override { return static_cast<uint32_t>(stage_.size()); }
  void Stage(uint32_t slot, const nand::ProgramRequest& req, nand::FlashCallback accepted,
             nand::FlashCallback done) override;
  void ClearStage(uint32_t slot) override;
  uint32_t copy_accumulators() const override { return static_cast<uint32_t>(acc_.size()); }
  void Copy(const nand::CopyRequest& req, nand::FlashCallback accepted, nand::FlashCallback done) override;
  void ClearAccumulator(uint32_t acc) override;

  // Ports (nand::FlashPipe ownership): one per host sharing this pipe, each submitting
  // with the generation of its last granted claim; the pipe's own FlashPipe calls are one
  // host's, never checked and never fenced (a single-host card, as before ownership).
  // A port must not outlive its pipe.
  std::unique_ptr<nand::FlashPipe> NewPort();
  const nand::PipeOwner& owner_state() const { return owner_; }
  static constexpr uint32_t kUnchecked = UINT32_MAX;

  const PipeStats& stats() const { return stats_; }
  bool busy() const { return !all_.empty(); }
  void Rebind(Clock& clock) {
    clock_ = &clock;
    virtual_clock_ = clock.is_virtual();
  }
  // Power cut at Now() with `budget_ns` of hold-up: see SimCard::PowerCut.
  void PowerCut(DurNs budget_ns);
  void PowerOn();
  void InjectDieFailure(uint32_t die);
  void InjectProgramFail(nand::Ppa ppa) { inject_program_fail_.insert(Key(ppa)); }
  void InjectUncorrectable(const nand::Ppa& ppa);
  void InjectEraseFail(uint32_t die, uint32_t block) {
    inject_erase_fail_.insert(Key({die, block, 0}));
  }
  uint32_t image_die(uint32_t die) const { return first_die_ + die; }
  // Counters since the card opened that go into the controller's lifetime record (read
  // from any thread).
  struct LifeCounters {
    std::atomic<uint64_t> nand_read_bytes{0}, nand_program_bytes{0}, erases{0};
    std::atomic<uint64_t> uncorrectable_reads{0}, program_fails{0}, erase_fails{0};
    // Written by the pipe's engine only: a load and a store, not a locked add, which
    // would stall until the image copies before it have drained from the store buffer
    // (on a zero-time card, several per cent of the process's CPU).
    static void Add(std::atomic<uint64_t>& c, uint64_t v) {
      c.store(c.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
    }
  };
  const LifeCounters& life() const { return life_; }
  // The heat of this pipe's NAND work (read by the card's sensors from any thread).
  HeatSource& heat() { return heat_; }

 private:
  struct Die {
    OpQueue queue;                 // FIFO; front() is running when busy
    bool busy = false;
    TimeNs busy_until = 0;
    DurNs stage_work_ns = 0;       // staged images for this die (landed or landing)
    std::deque<Op*> admit_wait;    // programs waiting for write-buffer room
    uint64_t reset_serial = 0;     // current reset in progress (stale-event guard)
  };
  struct Channel {
    TimeNs bus_free = 0;
    DurNs flush_xfer_ns = 0;       // bus time of queued programs not yet on the bus
    // Dies waiting for the bus, in request order (entries whose op's serial moved on are
    // stale and skipped); a dispatch is pending whenever this is not empty.
    std::vector<std::pair<Op*, uint64_t>> waiters;
    uint32_t last_die = 0;         // the die served last (round-robin within a class)
    uint64_t dispatch = 0;         // the pending dispatch's number (bus_dispatch_seq_)
  };

  friend class SimPipePort;
  // Ownership: a claim by `host` (granted: the generation bumps and FenceStale runs), a
  // renewal or release by the port holding generation `gen`.
  nand::ClaimReply ClaimFor(uint32_t host, bool force, DurNs lease);
  bool RenewFor(uint32_t gen, DurNs lease);
  void ReleaseFor(uint32_t gen);
  // Whether a port holding `gen` may submit now.
  bool Current(uint32_t gen) const {
    return owner_.generation == 0 || (gen == owner_.generation && owner_.host != 0);
  }
  // Ends kFenced every outstanding command of another generation (or of a released
  // pipe) that the controller has not taken on: not started on its die and, for a
  // program, not admitted into the write buffer; empties the stage slots and zeroes the
  // accumulators.
  void FenceStale();

  Op* NewOp(Op::Kind kind, nand::FlashCallback done);
  void FreeOp(Op* op);
  // Completes `op` (removes it from every list) and delivers `done` on the clock.
  void Complete(Op* op, nand::FlashStatus status, uint32_t corrected = 0);
  void Reject(nand::FlashCallback done, nand::FlashStatus status);
  // A command to a dead die (ReadId, ReadParameterPage): kDieTimeout once the
  // controller's timeout has passed, counted then.
  void TimeOutOnDeadDie(nand::FlashCallback done);
  bool ValidPpa(const nand::Ppa& ppa) const;
  void Enqueue(Op* op);
  bool TryAdmit(Op* op);
  DurNs FlushWorkAhead(const Die& d, const Op* op) const;
  DurNs StageErasesNs(const Die& d, const Op* op) const;
  void RetryAdmission();
  void TryStartDie(uint32_t die);
  // The channel's arbiter: an op asks for its die's channel (its command, or its data
  // in or out) and GrantBus runs it when the channel gives it the bus (at once when the
  // bus is free and nobody waits).
  void RequestBus(Op* op, Op::BusUse use);
  void ScheduleBusDispatch(uint32_t channel);
  void DispatchBus(uint32_t channel);
  void GrantBus(Op* op);
  void StartRead(Op* op);
  void ReadDataOut(Op* op, uint64_t serial);
  void ReadFinish(Op* op, uint64_t serial);
  void StartProgram(Op* op);
  void ProgramFinish(Op* op, uint64_t serial);
  void StartErase(Op* op);
  void EraseFinish(Op* op, uint64_t serial);
  void ReleaseBudget(Op* op);
  // A copy's source read ended (`st`): on success the program may enter the buffer, else
  // the copy ends with `st`.
  void CopyReadDone(Op* prog);
  void EnqueueCopyRead(Op* op);  // every source read of a copy is done
  // The program's data has landed in the buffer: accumulator bookkeeping.
  void AccLanded(Op* op, uint8_t* slot, bool data_unset = false);
  // Takes `bytes` of the controller's host link from now; when they have moved.
  TimeNs TakeLink(uint64_t bytes);
  // Staged images: install a landed one, retire one (done kOk), retire every image a
  // landed program of `ppa` supersedes, time out those of a dead die.
  void InstallStage(Op* op);
  void RetireStage(Op* op, nand::FlashStatus status);
  void RetireStagesFor(const nand::Ppa& ppa);
  void TimeOutStage(Op* op);
  // Effects on the image. Each returns the status the die would report.
  nand::FlashStatus ApplyProgram(Op* op);
  nand::FlashStatus ApplyErase(uint32_t die, uint32_t block);
  void ApplyTornProgram(const nand::Ppa& ppa);
  void ApplyTornErase(uint32_t die, uint32_t block);
  nand::FlashStatus DoRead(Op* op, uint32_t* corrected);
  // DoRead of a programmed or erased page with the real codec (EccMode::kBitExact).
  nand::FlashStatus ReadBitExact(Op* op, format::PageState state, const format::BlockRecord& rec,
                                 uint32_t* corrected);
  void AbortDie(uint32_t die);
  bool DieFailed(uint32_t die) const;
  // The device's time. Inside a stage of a flash operation (AtStage) it is the time the
  // stage was due: in real time the engine runs a stage a little after that (its loop's
  // lateness, about a microsecond a stage), and the device's timeline goes on from when
  // the stage was due, as the hardware's would, instead of adding each stage's lateness
  // to the operation. In virtual time stages run when due: the same time.
  TimeNs Now() const { return stage_due_ != 0 ? stage_due_ : clock_->Now(); }
  // A host command (a FlashPipe entry point) in real time sees one time throughout, as a
  // stage does: the clock is read once per command rather than at each of the model's
  // looks at it (each costs about as much as a zero-time stage on a VM), and the
  // command's timestamps agree with each other. Nested commands (a completion that
  // submits again) keep the outer one's time. In virtual time there is nothing to save.
  class CommandTime {
   public:
    explicit CommandTime(SimPipe& p) : p_(p), set_(p.stage_due_ == 0 && !p.virtual_clock_) {
      if (set_) p_.stage_due_ = p_.clock_->Now();
    }
    ~CommandTime() {
      if (set_) p_.stage_due_ = 0;
    }
    CommandTime(const CommandTime&) = delete;
    CommandTime& operator=(const CommandTime&) = delete;

   private:
    SimPipe& p_;
    const bool set_;
  };
  // Schedules the next stage of a flash operation at `due` (see Now()).
  template <typename F>
  void AtStage(TimeNs due, F&& f) {
    auto stage = [this, due, f = std::forward<F>(f)]() mutable {
      const TimeNs outer = stage_due_;
      stage_due_ = virtual_clock_ ? 0 : due;
      f();
      stage_due_ = outer;
    };
    static_assert(sizeof(stage) <= Task::kInlineBytes, "a stage's timer must not allocate");
    clock_->At(due, std::move(stage));
  }
  ControllerImage& image() { return *card_.images_[controller_]; }
  const ControllerImage& image() const { return *card_.images_[controller_]; }
  static std::tuple<uint32_t, uint32_t, uint32_t> Key(const nand::Ppa& p) {
    return {p.die, p.block, p.page};
  }
  DurNs ProgramXferNs() const;
  DurNs ProgramCostNs() const;
  DurNs EraseCostNs() const;

  SimCard& card_;
  Clock* clock_;  // this pipe's (SimCardOptions::pipe_clocks) or the card's
  bool virtual_clock_;  // clock_->is_virtual(), asked once per stage and command otherwise
  TimeNs stage_due_ = 0;  // inside an AtStage stage in real time: when it was due (Now())
  nand::PipeOwner owner_;              // the ownership registers
  uint32_t submit_gen_ = kUnchecked;   // stamped on ops by NewOp (a port sets it per call)
  const uint32_t controller_;
  const uint32_t first_die_;  // this pipe's first die in the controller image
  nand::PipeTopology topology_;
  const nand::Geometry& g_;
  const Timing& t_;
  const Reliability& rel_;
  std::vector<Die> dies_;
  std::vector<Channel> channels_;
  uint64_t bus_dispatch_seq_ = 0;  // never reset: a dispatch timer from before a cut is stale
  std::vector<Rng> die_rng_;
  // rel_'s wear terms by erase count, each computed once (std::pow per program and per
  // read was a visible share of the model's CPU): the same doubles as calling rel_.
  struct WearTerms {
    double fail = -1, rber = -1;  // -1: not computed yet
  };
  std::vector<WearTerms> wear_terms_;
  WearTerms WearAt(uint32_t pe);
  double FailProbability(uint32_t pe) { return WearAt(pe).fail; }
  double Rber(uint32_t pe, uint32_t reads) { return WearAt(pe).rber + rel_.rber_read_disturb * reads; }
  OpList all_;                         // every outstanding op
  std::vector<std::unique_ptr<Op>> pool_;  // free ops for reuse
  // A completion on its way to its callback at the next turn of the clock. The posted
  // task holds a pointer to one of these and a reference to their pool (a callback and a
  // Completion do not fit a Function's inline storage), so delivering a completion
  // allocates nothing; the pool lives as long as a task that may use it, so a pipe closed
  // with completions still posted leaves them valid (they are delivered, as before).
  struct Delivery {
    nand::FlashCallback cb;
    nand::Completion c;
  };
  struct DeliveryPool {
    std::deque<Delivery> all;    // every one made (stable addresses)
    std::vector<Delivery*> free;  // of which free for reuse
  };
  std::shared_ptr<DeliveryPool> deliveries_ = std::make_shared<DeliveryPool>();
  void Deliver(nand::FlashCallback cb, const nand::Completion& c);
  uint64_t next_serial_ = 1;
  uint64_t next_qseq_ = 1;
  PlpJournal* journal_ = nullptr;  // owned by the card; null: not journaled
  uint64_t buffer_used_bytes_ = 0;     // accepted or in-DMA programs in the write buffer
  // The latest time an admitted page is due to land in the buffer. A fenced page (a take,
  // a peek, a stage, a parity page) lands strictly after it: the clock runs equal times in
  // a random order, and without link time (null timing) a copy and the take admitted after
  // it would otherwise land in the same instant, in either order.
  TimeNs last_landing_ = 0;
  uint64_t stage_bytes_ = 0;           // of which staged images
  std::set<std::tuple<uint32_t, uint32_t, uint32_t>> inject_program_fail_, inject_erase_fail_;
  // Pages whose data codewords (not the last, with the metadata) read uncorrectable, and
  // the erase count of their block then: an erase ends it.
  std::map<std::tuple<uint32_t, uint32_t, uint32_t>, uint32_t> inject_uncorrectable_;
  std::vector<uint8_t> scratch_;       // one slot
  std::vector<uint8_t> raw_;           // one slot: a page as the array gives it (bit-exact reads)
  std::vector<Op*> stage_;             // per stage slot: the landed image, or null
  std::vector<std::vector<uint8_t>> acc_;  // copy accumulators (page data and metadata each)
  // Per accumulator: 1 while it holds zeros, whatever its bytes say (a take or a reset
  // clears it by this flag alone; the first add then copies instead of XORing).
  std::vector<uint8_t> acc_zero_;
  void ClearAccumulators() { std::fill(acc_zero_.begin(), acc_zero_.end(), uint8_t{1}); }
  // Per accumulator: the serials of takes and peeks not landed yet (an add waits for the
  // older ones: accumulator operations land in submission order).
  std::vector<std::vector<uint64_t>> acc_takers_;
  bool AddMustWait(const Op* op) const;
  // An add whose die is dead still reaches the accumulator (the controller takes the
  // page's data in before it finds the die gone), in submission order, so the row's
  // parity is what the host's would be; then its program times out.
  std::vector<Op*> dead_adds_;
  std::vector<uint64_t> dead_landing_;  // acc_order of dead adds on their way in (a fence waits)
  void LandThenTimeOut(Op* op);
  void LandDeadAdds();
  void DropTaker(Op* op);
  bool cutting_ = false;               // inside PowerCut: nothing new is started or admitted
  PipeStats stats_;
  HeatSource heat_;
  LifeCounters life_;
  // Charges `joules` of NAND work now (an impulse into this pipe's heat source).
  void Spend(double joules);
};

}  // namespace vsl::simcard
