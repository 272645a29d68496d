// Ftl::Impl: the FTL's dynamic state and the paths that share it, one file per concern
// (docs/ftl.md, "Components": append, page_life, host_path, atomic, flashback_parity,
// flashback_rebuild, groomer, lifecycle). State is grouped by the file that maintains it
// (gc, cover, ckpt, reserve); self-contained pieces are components of their own
// (LebTable, ForwardMap, PsaLayout, StripeLayout, DieHealth, the record codec, wear,
// GroomPolicy, Relocation, AtomicBatch, AppendCursor, ParityCover, RewriteBacklog,
// PooledStore, page_codec.h, recovery.h).
// Not part of the public surface.
#pragma once

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <unordered_map>
#include <vector>

#include "vsl/core/crc.h"
#include "vsl/core/fifo.h"
#include "vsl/core/log.h"
#include "vsl/ftl/ftl.h"
#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/append_cursor.h"
#include "vsl/ftl/atomic_batch.h"
#include "vsl/ftl/die_health.h"
#include "vsl/ftl/groom_policy.h"
#include "vsl/ftl/page_store.h"
#include "vsl/ftl/parity_cover.h"
#include "vsl/ftl/psa.h"
#include "vsl/ftl/relocation.h"
#include "vsl/ftl/rewrite_backlog.h"
#include "vsl/ftl/stripe.h"

namespace vsl::ftl {

inline constexpr uint32_t kMetaLebs = 2;  // blocks 0 and 1 of every die
inline constexpr uint32_t kMetaCopies = 3;  // copies of each metadata record page, on distinct dies

using nand::Completion;
using nand::FlashStatus;
namespace f = format;

// The pipe is gone for this host: power lost or a die reset (kAborted), or another host
// took the pipe over (kFenced, nand::FlashPipe::Claim). Nothing can be rewritten; the
// FTL stops (DeviceLost) and acknowledged data is the controller's or recovery's.
inline bool LostToHost(nand::FlashStatus s) {
  return s == nand::FlashStatus::kAborted || s == nand::FlashStatus::kFenced;
}

// ---------------------------------------------------------------------------------------
// Internal state.

struct Ftl::WriteCtx {
  uint32_t remaining = 1;  // +1 while the request is still being appended
  bool fua = false;
  TimeNs start = kTimeNever;  // a host Write's call time (its latency is recorded); else never
  Status status;
  Done done;
  void Recycle() { *this = WriteCtx{}; }  // FreeList
};

// An atomic batch (Ftl::WriteAtomic) on its way: its bookkeeping (atomic_batch.h), the
// caller's answer, and the write context that waits for every member page of the
// current attempt to be durable.
struct Ftl::AtomicGroup : AtomicBatch {
  using AtomicBatch::AtomicBatch;
  Done done;
  WriteCtx* members_ctx = nullptr;
};

// A page buffer's fields that hold no storage worth keeping: PageBuf::Recycle puts them
// back to their defaults by one assignment. A new field goes here unless it is a buffer
// whose storage the pool should keep (then in PageBuf, cleared by Recycle).
struct Ftl::PageBufFields {
  uint32_t leb = 0, die = 0, page = 0;
  f::PageType type = f::PageType::kData;
  uint32_t used = 0;
  uint64_t seq = 0;
  bool submitted = false, durable = false;
  // FlashBack's acknowledgement rule: a member of a parity row is durable only once a
  // parity page covering it is durable too (accepted under PLP, else on flash).
  bool covered = true;     // false while its row's parity does not yet protect it
  bool accepted = false;   // in the controller's protected buffer (PLP healthy)
  bool flash_done = false; // programmed
  bool final_parity = false;  // the row's own parity page (not a partial one elsewhere)
  // Parity pages of a row formed in the controller: its accumulator (the final page
  // takes it, a partial one peeks), and no page data is sent.
  uint32_t acc = nand::kNoAccumulator;
  bool landed = false;  // in the controller's buffer (its `accepted` fired, PLP or not)
  bool gc_queued = false;  // counted in GroomerState::queued until it lands or ends
  Leb* victim = nullptr;  // the LEB whose data this GC page relocates (holds a reference)
  // A copy page (FlashPipe::Copy): its sectors are not in `data` (`csrc`: per slot, where
  // the controller reads it from).
  bool copy = false;
  uint32_t copy_runs = 0;  // copy: runs of slots from one source page (gathered segments)
  uint32_t acc_used = nand::kNoAccumulator;  // the accumulator it was submitted with
  std::shared_ptr<AtomicGroup> group;  // kAtomicData pages: the batch it holds
  uint32_t attempt = 0;                // and which attempt of it
};

struct Ftl::PageBuf : Ftl::PageBufFields {
  std::vector<uint8_t> data, meta;
  std::vector<uint64_t> lbas;  // per slot; kNoLba for padding or killed copies
  std::vector<f::TrimRecord> trims;
  // Write requests waiting on this page: (ctx, acknowledged already).
  std::vector<WriteCtx*> waiters;
  std::vector<uint8_t> pmeta;  // parity pages: XOR of the members' leading metadata
  std::vector<Psa> csrc;       // copy pages: per slot, the source
  // Pages filled by AppendSector (data and copy pages): the CRC-32C of each slot below
  // `used`, what its sector entry will hold (for a copy, as its source's metadata gives
  // it). Empty for pages filled otherwise (SealPage computes theirs).
  std::vector<uint32_t> ccrc;
  std::vector<uint8_t> fail_meta;  // what the page holds if a source cannot be read
  // Per slot: where the sector was before this copy (kUnmapped: nowhere; kKeepMapping: do
  // not revert). Until the page is durable the LEBs of those places are pinned (not
  // erased), and if the page can never be stored the map goes back to them, so a failed
  // overwrite leaves the sector as it was, never without any copy.
  std::vector<Psa> prev;
  std::vector<uint32_t> pinned;  // LEB indices this page pins
  uint32_t store_index = 0;      // PooledStore bookkeeping
  // Back to the defaults for reuse, keeping the vectors' storage (PooledStore): `data`,
  // `meta`, `lbas` and `fail_meta` keep their size and stale contents (their users assign
  // them whole), the other vectors come back empty.
  void Recycle();
};

struct Ftl::AppendPoint {
  AppendPoint(bool groomer, uint32_t dies, uint32_t pages) : gc(groomer), pos(dies, pages) {}
  Leb* leb() const { return pos.leb(); }
  bool gc = false;
  AppendCursor pos;         // the open LEB and the next position to hand out
  PageBuf* open = nullptr;  // page being filled, not yet submitted
};

struct Ftl::Impl {
  Ftl& f;
  const PsaLayout addr;  // PSA arithmetic of this pipe
  StripeLayout stripe;   // FlashBack stripe geometry (parity on or off: the format's flag)
  AppendPoint host, gcap;
  // Every live page buffer (a released one comes back from Make with every field at its
  // default and its vectors empty, except `data`, `meta` and `lbas`, which keep their
  // size and stale contents: MakeBuf sets them).
  PooledStore<PageBuf> pages;
  // A stage slot's image (parity_cover.h, StageRows): the pipe reads it until the stage
  // is accepted; it goes back to the pool when the stage ends (its `done`).
  struct StageImage {
    std::vector<uint8_t> data, meta;
    uint32_t store_index = 0;  // PooledStore bookkeeping
    void Recycle() {}          // every use assigns what it sends
  };
  PooledStore<StageImage> stage_imgs;
  std::vector<uint8_t> zero_pmeta;  // a controller-formed stage's starting metadata XOR
  SeqWindow inflight_seqs;    // submitted, not yet done
  struct Pending {
    enum Kind { kWrite, kTrim, kAtomic, kCommit } kind;
    uint64_t lba;
    uint64_t count;
    const uint8_t* data;
    uint64_t done_sectors;
    WriteCtx* ctx;
    Done trim_done;
    std::shared_ptr<AtomicGroup> group;  // kAtomic: append it; kCommit: commit it
  };
  uint32_t atomic_inflight = 0;  // batches accepted and not yet answered
  Fifo<Pending> pending;  // host work waiting for a free LEB
  struct FlushWaiter {
    uint64_t watermark;
    Done done;
  };
  std::vector<FlushWaiter> flush_waiters;
  bool shutting_down = false;
  bool device_lost = false;  // a command came back aborted (power lost): stop everything
  bool shutdown_parity_done = false;
  bool serving = false;      // attach is done: die failures from now on ask for a checkpoint
  uint64_t open_writes = 0;  // host write requests not yet completed

  // The groomer (groomer.cc): the relocation in progress (relocation.h; which victim comes
  // next is `policy`'s), host-write pacing while it runs, and callers waiting for it.
  struct GroomerState {
    explicit GroomerState(const PsaLayout& a) : reloc(a) {}
    Relocation reloc;
    GroomPacer pacer;           // (groom_policy.h)
    std::vector<Done> waiters;  // TEST_ForceGroom and writers waiting for room
    // Pages holding relocated data that are submitted but not yet in the controller's
    // buffer (queued in the power governor or the controller's command queue). The
    // groomer reads no further while these and its reads in flight reach
    // MaxQueuedRelocation(): relocation runs at the pace its programs drain, so host
    // pages (paid for by relocated sectors) never queue behind a victim's worth of them.
    uint32_t queued = 0;
    bool gated = false;  // GroomStep stopped at that bound; a landing resumes it
    // The victim's summary (LoadVictimSummary): per page position its entry (seq | type,
    // then S() LBAs) and S() CRCs. GroomStep hands out nothing while it loads. `vnext`:
    // the summary of the LEB likely to be the next victim, read ahead while this one is
    // groomed (MaybePrefetchSummary): waiting for it behind the dies' queued programs
    // was the override runs' longest pacing stall (4-5 ms with no credit earned).
    struct VictimSummary {
      const Leb* leb = nullptr;
      uint64_t open_seq = 0;  // leb's when read: a LEB written again since is not this one
      bool counted = false;   // its reads count as the victim's (Relocation::ExtraRead)
      bool loading = false;
      bool ready = false;
      std::vector<uint64_t> grid;
      std::vector<uint32_t> crc;
      std::vector<uint8_t> raw, raw_meta;  // its pages as read (data, spares)
      uint32_t left = 0;                   // reads in flight
      bool bad = false;                    // one failed or did not check
    } vsum, vnext;
  } gc;

  static constexpr uint32_t kNoDie = StripeLayout::kNoDie;
  DieHealth dies;                       // failed dies, error bound, lost sectors, events
  // Victim choice and its state: the rebuild queue (fed by FlashBack), the rebuild/space
  // alternation, the wear check's trigger.
  GroomPolicy policy;
  HealthMode mode = HealthMode::kNormal;
  // Coverage of parity rows (parity_cover.h; driven by flashback_parity.cc): members
  // submitted but not yet covered by a durable parity page, by (leb, row), and the stage
  // slots rows own.
  ParityCover<PageBuf> cover;
  // Checkpoints while serving (lifecycle.cc): after a die failure, and periodic.
  struct CheckpointControl {
    uint32_t asked = 0;        // requests so far
    uint32_t written = 0;      // requests the last completed checkpoint answered
    bool quiesce = false;      // append points closed: no LEB opens until it is written
    bool writing = false;
    bool for_failure = false;  // a die failure asked for the pending one
    uint32_t lebs_since = 0;   // LEBs opened since the base checkpoint (periodic ones)
  } ckpt;
  bool CheckpointWanted() const { return ckpt.asked != ckpt.written; }

  explicit Impl(Ftl& ftl)
      : f(ftl),
        addr(ftl.geo_.dies_per_pipe(), ftl.geo_.pages_per_block, ftl.spp_),
        stripe(ftl.geo_, ftl.spp_),
        host(false, ftl.geo_.dies_per_pipe(), ftl.geo_.pages_per_block),
        gcap(true, ftl.geo_.dies_per_pipe(), ftl.geo_.pages_per_block),
        gc(addr),
        dies(ftl.geo_.dies_per_pipe(), ftl.opts_.die_error_limit, ftl.opts_.die_error_window_ns),
        policy(ftl.lebs_, dies, stripe),
        cover(ftl.pipe_.stage_slots()),
        rw(addr, [this](uint32_t l) { ++f.lebs_.leb(l).pins; }, [this](uint32_t l) { UnpinLeb(l); }) {}

  // Every task the FTL schedules on its clock goes through these, so the owner can tell
  // when none is left (Ftl::Quiescent) before it destroys an FTL that did not shut down.
  uint64_t scheduled = 0;
  template <typename Fn>
  void Post(Fn fn) {
    ++scheduled;
    f.clock_.Post([this, fn = std::move(fn)]() mutable {
      --scheduled;
      fn();
    });
  }
  template <typename Fn>
  void After(DurNs d, Fn fn) {
    ++scheduled;
    f.clock_.After(d, [this, fn = std::move(fn)]() mutable {
      --scheduled;
      fn();
    });
  }

  void Event(std::string e) { dies.Event(std::move(e)); }

  // --- FlashBack parity of the rows being written ---
  // Controller accumulators (FtlOptions::controller_parity): a row takes a free one at
  // its first member and gives it back when its parity page (which takes it) has landed
  // in the controller; with none free the row's parity goes from the host. Rows overlap (a
  // closed LEB's summary row and the next LEB's first rows; the groomer's stream), so
  // they are not tied to streams. One a row left without its parity page (a failed
  // parity die) is zeroed and reused once nothing that added to it is in flight.
  // The FTL uses up to kMaxRowAccs of the controller's, and none with fewer than
  // kMinRowAccs.
  static constexpr uint32_t kMinRowAccs = 4, kMaxRowAccs = 16;
  uint32_t row_accs = 0;
  enum class AccState : uint8_t { kFree, kBusy, kDirty };
  bool use_accs = false;
  bool use_copy = false;  // controller-side relocation (FtlOptions::copy_relocation)
  const Leb* nofree_victim_ = nullptr;  // CopyRelocate said it found no room for this one
  // A parity page or image taking or peeking the row's accumulator: the controller puts
  // the members' metadata XOR where FillParityMeta puts it, and seals the CRC.
  void SetAccMeta(nand::ProgramRequest& req) const;
  std::array<AccState, kMaxRowAccs> accs{};
  uint32_t TakeRowAcc();
  // A row's accumulator back: free once its parity page took it (`taken`), else dirty.
  void ReleaseRowAcc(uint32_t acc, bool taken) {
    if (acc < row_accs && accs[acc] == AccState::kBusy) accs[acc] = taken ? AccState::kFree : AccState::kDirty;
    ReuseDirtyAcc(acc);
  }
  // Pages submitted with each accumulator and not done: a dirty one (its row's parity
  // never took it) is zeroed and reused once nothing can still add to it.
  std::array<uint32_t, kMaxRowAccs> acc_users{};
  void ReuseDirtyAcc(uint32_t acc) {
    if (acc < row_accs && accs[acc] == AccState::kDirty && acc_users[acc] == 0 && !device_lost) {
      f.pipe_.ClearAccumulator(acc);
      accs[acc] = AccState::kFree;
    }
  }
  // The groomer's next copy sector will be in a row with an accumulator: its open copy
  // page's row has one (or holds the reservation), the next position is in a row that
  // has one, or a free one is reserved now for the new row the next page starts (a host
  // row could take the last free one between here and the page's Submit, and a copy
  // page that finds none there becomes padding).
  uint32_t gc_acc_reserved = nand::kNoAccumulator;
  bool CopyRowReady() {
    if (!use_copy) return false;
    const Leb* l = gcap.leb();
    if (l != nullptr && !l->par) return true;  // no parity in this format: no accumulator needed
    if (gc_acc_reserved != nand::kNoAccumulator) return true;
    if (l != nullptr && !l->par->submitted && l->par->acc < row_accs) {
      const uint32_t row = gcap.open != nullptr ? gcap.open->page : gcap.pos.row();
      if (row == l->par->row) return true;
    }
    for (uint32_t k = 0; k < row_accs; ++k) {
      if (accs[k] == AccState::kFree) {
        accs[k] = AccState::kBusy;
        gc_acc_reserved = k;
        return true;
      }
    }
    return false;
  }
  // The reservation back (the groomer stopped before it started a row with it).
  void DropCopyReservation() {
    if (gc_acc_reserved == nand::kNoAccumulator) return;
    accs[gc_acc_reserved] = AccState::kFree;
    gc_acc_reserved = nand::kNoAccumulator;
  }
  void InitAccumulators();
  void AccumulateParity(Leb& l, PageBuf* b);
  void SubmitParity(Leb& l);

  // --- the acknowledgement rule under parity ---
  // Members of a parity row are "covered" once a durable parity page includes them: the
  // row's own parity page, a partial parity page written while the row waited, or the
  // row's running parity parked in a stage slot of the controller's protected buffer.
  // Until then a member is not durable: its writes are not acknowledged, flushes and the
  // groomer's victim wait, and the host keeps its buffer. So a die that dies with the
  // page still in the controller's buffer, followed by a power cut, loses nothing that
  // was acknowledged: the page is rebuilt from the parity and the other members.
  bool UseStages() const { return cover.stage_slots() != 0 && PlpDurableOnAccept(); }

  // A durable parity page (or stage) for (leb, row) with members `mask`: those members
  // are covered. `final` (the row's own parity page, or the row can have no other): every
  // member is, and the row's stage slot is free again.
  void CoverRow(uint32_t leb, uint32_t row, uint64_t mask, bool final, bool landed = false);
  // Power is gone: pages on flash still waiting for cover will never get it. Their
  // writes fail (they may or may not survive, like any unacknowledged write).
  void FailUncovered();
  // `b` failed or was given up: it no longer waits for cover.
  void Uncover(PageBuf* b);
  // Moves a page on as far as its state allows: durable (and non-FUA writes acknowledged)
  // once covered and accepted under PLP; finished once covered and on flash.
  // Debug aid: VSL_TRACE_LBA=<lba> prints, on stderr, every page that carries that sector
  // as it is appended, submitted and acknowledged, and each mapping attach replays.
  // (UINT64_MAX: no tracing. Read once, when the program starts: no FTL exists before
  // main, so none reads it before it is set.)
  static uint64_t TraceLba() { return kTraceLba; }
  static const uint64_t kTraceLba;
  bool Traced(const PageBuf* b) const { return kTraceLba != UINT64_MAX && TracedPage(b); }
  bool TracedPage(const PageBuf* b) const;
  void Progress(PageBuf* b);

  // Stage slots: after each burst of submissions, the running parity of every open row
  // with uncovered members goes to the row's slot (one image per row per burst).
  void ScheduleStage();
  void StageRows();
  // Row `rc` needs no stage yet: only relocated data no host write waits on waits in it,
  // and the groomer is still reading its victim (flashback_parity.cc).
  bool GroomerStillFills(const ParityCover<PageBuf>::Row& rc) const;
  // The LEB takes no more pages: parity of a last, partial row, then the state goes.
  void FinishParity(Leb& l) {
    if (!l.par) return;
    if (!device_lost) SubmitParity(l);
    l.par.reset();
  }

  // Rebuilds page (leb, die, row) as the XOR of its row's parity and other members.
  using RebuildDone = Function<void(bool, std::vector<uint8_t>, std::vector<uint8_t>)>;
  void RebuildPage(uint32_t leb, uint32_t die, uint32_t row, RebuildDone done);

  // Sectors of a rebuilt page that are still current go to the groomer's append point,
  // so the next read finds them on a healthy die.
  // Calls fn(lba, psa, sector data) for each sector of data page (leb, die, page), read
  // back as `data`/`meta`, that is still current and passes its CRC; stops when fn
  // returns false.
  template <typename Fn>
  void ForEachLiveSector(uint32_t leb, uint32_t die, uint32_t page, const std::vector<uint8_t>& data,
                         const std::vector<uint8_t>& meta, Fn fn) {
    const auto* h = reinterpret_cast<const f::PageHeader*>(meta.data());
    if (h->type != static_cast<uint8_t>(f::PageType::kData) &&
        h->type != static_cast<uint8_t>(f::PageType::kAtomicData)) {
      return;
    }
    const auto* e = reinterpret_cast<const f::SectorEntry*>(meta.data() + sizeof(f::PageHeader));
    for (uint32_t s = 0; s < S(); ++s) {
      const uint64_t lba = e[s].lba;
      const Psa p = addr.Make(leb, die, page, s);
      if (lba >= f.map_.sectors() || f.map_.Get(lba) != p) continue;  // kNoLba is out of range
      const uint8_t* src = data.data() + uint64_t{s} * f.sector_bytes_;
      if (Crc32c(src, f.sector_bytes_) != e[s].crc) continue;
      if (!fn(lba, p, src)) return;
    }
  }

  void RelocateRebuilt(uint32_t leb, uint32_t die, uint32_t page, const std::vector<uint8_t>& data,
                       const std::vector<uint8_t>& meta);


  // Data pages an attach found without parity, by (leb, die, row): their live sectors are
  // read and rewritten (through the rewrite backlog, ahead of host writes, as space
  // allows); `done` once they are all durable, and so covered, again.
  void ReprotectPages(Function<void()> done);

  // `l` holds pages no parity covers: the groomer moves its data (with the rebuild's
  // priority), and the flag persists in checkpoints until then.
  void Reprotect(Leb& l) {
    l.unprotected = true;
    policy.rebuild().Add(l.index);
  }

  // An uncorrectable read, program or erase failure in block `block` of die `d`: errors
  // in too many distinct blocks within the window retire the die
  // (FtlOptions::die_error_limit). A block going bad fails every later page program in
  // it: that is one error, not one per page.
  void NoteDieError(uint32_t d, uint32_t block);

  void OnDieTimeout(uint32_t d) {
    if (d >= D()) return;
    dies.MarkSilent(d);
    if (!dies.failed(d)) DeclareDieFailed(d);
  }
  // A die stopped answering: write nothing more to it, and move every LEB's data off it
  // (the groomer reads its pages back through parity). Also called at attach for dies
  // that did not answer.
  void DeclareDieFailed(uint32_t d);
  // Dies not declared failed (so how wide a LEB formed now is, with all blocks good).
  uint32_t AliveDies() const {
    return dies.alive();
  }
  // Open LEBs formed with a die that has failed since (each joins the rebuild when it
  // closes).
  uint32_t OpenUnprotected() const {
    uint32_t n = 0;
    for (const AppendPoint* ap : {&host, &gcap}) n += ap->leb() != nullptr && ap->leb()->unprotected;
    return n;
  }
  // Capacity the surviving flash offers, against what the format promised and what is
  // mapped; and the reserve space: the spare room beyond the capacity, against what the
  // format set aside (rho * capacity). Called whenever a die or a block is lost.
  void UpdateMode();
  struct ReserveState {
    uint64_t sectors = 0, full_sectors = 0;
    double percent = 100.0;
    bool warned = false;
    uint64_t surviving = UINT64_MAX;
  } reserve;


  // --- addressing ---
  uint32_t D() const { return f.geo_.dies_per_pipe(); }
  uint32_t P() const { return f.geo_.pages_per_block; }
  uint32_t S() const { return f.spp_; }
  bool PlpDurableOnAccept() const { return f.pipe_.plp_state() == nand::PlpState::kHealthy; }

  // --- validity ---
  void SetValid(Psa p);
  void ClearValid(Psa p);
  // A stale copy still in an unsubmitted buffer would get a newer sequence number than
  // the write that replaced it; turn it into padding so replay can never resurrect it.
  void KillInOpenBuffer(AppendPoint& ap, Psa p) {
    PageBuf* b = ap.open;
    if (b && b->leb == addr.LebOf(p) && b->die == addr.DieOf(p) && b->page == addr.PageOf(p)) {
      b->lbas[addr.SlotOf(p)] = f::kNoLba;
    }
  }
  void Remap(uint64_t lba, Psa p) {
    const Psa old = f.map_.Set(lba, p);
    if (old != kUnmapped) ClearValid(old);
    if (p != kUnmapped) SetValid(p);
  }

  // --- append points ---
  // Hands out the next page position of `ap`, opening a new LEB when needed. False when no
  // LEB may be taken (host writes leave the last gc_reserve_lebs to the groomer).
  bool NextPosition(AppendPoint& ap, uint32_t* leb, uint32_t* die, uint32_t* page);
  // The reserve keeps free LEBs for the groomer to move a victim into. When the victim's
  // live sectors all fit in what the groomer's open LEB has left (one sector a position,
  // the worst case, plus room for carried trim records), it needs none of them to finish,
  // and the victim's release gives a LEB back: the host may take one reserve LEB (never
  // two) instead of stopping until the whole victim is moved. Not while FlashBack moves
  // data (failed dies, rewrites waiting): that needs room the victim does not name.
  bool HostMayTakeReserve() const {
    const Leb* v = gc.reloc.victim();
    if (!f.opts_.host_may_take_reserve || v == nullptr || gcap.leb() == nullptr ||
        f.lebs_.free_count() != f.opts_.gc_reserve_lebs ||
        f.lebs_.free_count() == 0 || dies.alive() != D() || !rw.empty() || !policy.rebuild().empty()) {
      return false;
    }
    return gcap.pos.DataPositionsLeft(stripe) >= uint64_t{v->valid} + kReserveMargin;
  }
  static constexpr uint32_t kReserveMargin = 16;
  void OpenLeb(AppendPoint& ap, Leb& l);
  void CloseLeb(AppendPoint& ap);

  // Writes the summary of a closed LEB once every other page of it is done, so a summary
  // on flash vouches for the pages it lists. If its positions are no longer usable (a
  // die failed) there is none, and a scan reads the LEB page by page.
  void MaybeWriteSummary(Leb& l);

  PageBuf* NewPage(AppendPoint& ap, f::PageType type) {
    uint32_t leb, die, page;
    if (!NextPosition(ap, &leb, &die, &page)) return nullptr;
    return MakeBuf(leb, die, page, type);
  }
  PageBuf* MakeBuf(uint32_t leb, uint32_t die, uint32_t page, f::PageType type);

  // Appends one sector to `ap`. Null when no page position could be had.
  // Returns the page the sector went into (submitted already if it filled), or null.
  // `src` null: a copy (FtlOptions::copy_relocation): the sector is at `copy_from` on
  // flash, its CRC `crc`, and the controller moves it; copy and data sectors never
  // share a page. With `src`, `crc` is the CRC-32C of its bytes when the caller has
  // verified it already (a relocated sector checked against its page's metadata, a
  // rewritten one): it goes into the page's sector entry as it is; otherwise it is
  // computed here, once.
  PageBuf* AppendSector(AppendPoint& ap, uint64_t lba, const uint8_t* src, WriteCtx* ctx,
                        Leb* src_victim, Psa prev = kUnmapped - 2, Psa copy_from = kUnmapped,
                        std::optional<uint32_t> crc = std::nullopt);

  void SubmitOpen(AppendPoint& ap);

  void Submit(PageBuf* b);

  // If the row stays part-written (no more pages for it), protect it with a partial
  // parity page (opts.partial_parity_delay_ns).
  void ScheduleRowProtection(Leb& l, uint32_t row);
  void ProtectPartialRow(AppendPoint& ap, uint32_t row, uint64_t mask);

  void Ack(WriteCtx* ctx);
  // Write contexts are reused (a heap allocation per write otherwise): taken at their
  // defaults, given back by Ack once the answer is taken.
  FreeList<WriteCtx> write_ctxs;

  // A host read (Ftl::ReadMapped): its answer waits for every piece, one flash read of a
  // run of sectors in one page each (and for re-reads of sectors that moved meanwhile).
  struct ReadCtx {
    uint32_t remaining = 1;  // +1 while pieces are still being issued
    Status status;
    Done done;
    TimeNs start = kTimeNever;  // a host Read's call time (its latency is recorded)
    void Recycle() { *this = ReadCtx{}; }
  };
  struct ReadPiece {
    ReadCtx* rc = nullptr;
    std::vector<uint8_t> meta;  // the page's metadata (its sector entries)
    uint8_t* dst = nullptr;
    uint64_t lba = 0;  // the run's first sector
    uint32_t n = 0, slot = 0;
    Psa p = 0;       // where the run's first sector is read
    Psa mapped = 0;  // where the map put it (`p` unless it waits in an open copy page)
    void Recycle() { rc = nullptr; }  // `meta` keeps its storage
  };
  FreeList<ReadCtx> read_ctxs;
  FreeList<ReadPiece> read_pieces;
  // One piece (or re-read) of `rc` is over.
  void FinishRead(ReadCtx* rc);
  // A sector that failed (or read as another) may have moved since its read was issued:
  // the groomer relocated it while the read waited (a dead die's timeout), and its old
  // LEB was erased and reused. Not a loss: if its map entry is no longer `was`, read it
  // again where it is now, into `dst`, as part of `rc` (true).
  bool RetryMovedRead(ReadCtx* rc, uint64_t sector, Psa was, uint8_t* dst);
  // A piece's flash read ended.
  void OnReadPiece(ReadPiece* pc, const Completion& c);
  // Answers `pc` from its page rebuilt through FlashBack (its read failed with `st`, or
  // its die is silent: DieHealth::silent); `pc` is given back at once.
  void RebuildPiece(ReadPiece* pc, FlashStatus st);

  // In the protected buffer: durable while PLP is healthy. Non-FUA writes are acknowledged
  // now if the page is covered (see CoverRow); FUA waits for the page to be on flash.
  void OnAccepted(PageBuf* b);

  void Pin(PageBuf* b, Psa p);
  void UnpinLeb(uint32_t l) {
    Leb& x = f.lebs_.leb(l);
    if (x.pins > 0 && --x.pins == 0 && gc.reloc.IsVictim(&x)) MaybeFinishVictim();
  }
  // The page is safe (or resolved): its previous places are no longer kept, and a later
  // failure of it keeps the mapping (a failed member stays in its row's parity).
  void Unpin(PageBuf* b) {
    std::fill(b->prev.begin(), b->prev.end(), kKeepMapping);
    // UnpinLeb may finish the victim, which may pin or unpin pages (this one too): the
    // list is taken first, and the page keeps its vector's storage for its next life.
    constexpr std::size_t kLocal = 16;
    if (b->pinned.size() <= kLocal) {
      std::array<uint32_t, kLocal> local;
      const std::size_t n = b->pinned.size();
      std::copy(b->pinned.begin(), b->pinned.end(), local.begin());
      b->pinned.clear();
      for (std::size_t i = 0; i < n; ++i) UnpinLeb(local[i]);
      return;
    }
    std::vector<uint32_t> pinned;
    pinned.swap(b->pinned);
    for (uint32_t l : pinned) UnpinLeb(l);
  }
  // Page `b` will never be stored: sectors whose newest copy it held go back to where
  // they were before it, and later copies that would go back to `b` go back there too.
  void RevertPage(PageBuf* b);
  void MarkDurable(PageBuf* b);

  void OnDone(PageBuf* b, const Completion& c);

  // A failed page: its live sectors (and trim records) go to a new page. Writes not yet
  // acknowledged follow them.
  void Rewrite(PageBuf* b);

  // Puts trim records `trims` (of a page that failed) on a new page, its writes waiting
  // there; false when no page position can be had now.
  bool RetryTrim(const std::vector<f::TrimRecord>& trims, std::vector<WriteCtx*>& waiters);
  void RunDeferredTrims();
  // `lba` was written again or trimmed after a write now being rewritten: that write's
  // acknowledgement must wait for the newer state to be durable, or a power cut could
  // leave the sector older than what was acknowledged. Adds the pages holding the newer
  // state that are not durable yet.
  void AddSupersedingHolders(uint64_t lba, PageBuf* except, std::vector<PageBuf*>& out);

  // Pages that must be written again (rewrite_backlog.h; driven by page_life.cc): failed
  // pages' live sectors that found no page, trim records whose page failed, pages an
  // attach found without parity, and callers waiting for the backlog to drain.
  using RewriteJob = RewriteBacklog<WriteCtx>::Job;
  RewriteBacklog<WriteCtx> rw;
  // Live sectors of page (leb, die, page), read back, join the rewrite backlog.
  void QueueRewrite(uint32_t leb, uint32_t die, uint32_t page, const std::vector<uint8_t>& data,
                    const std::vector<uint8_t>& meta);
  // Gives backlogged sectors their pages; false while some still find none.
  bool DrainRewrites();
  void RunBacklogWaiters();

  void FailWaiters(PageBuf* b);

  // --- host work ---
  void RunPending();

  // --- atomic batches ---
  // Records one trim page holds, and so the most records one commit may need.
  uint32_t RecordsPerPage() const {
    return static_cast<uint32_t>(f.geo_.page_data_bytes / sizeof(f::TrimRecord));
  }

  // Appends the rest of `g`'s sectors to kAtomicData pages (never shared with other
  // data). False while no page position can be had (resumed by RunPending).
  bool AppendAtomic(const std::shared_ptr<AtomicGroup>& g);
  bool AppendAtomicSector(const std::shared_ptr<AtomicGroup>& g, uint64_t lba, const uint8_t* src);
  // Every member page is durable (or one failed): commit, or try the batch again.
  void OnMembersDone(const std::shared_ptr<AtomicGroup>& g, Status s);
  // Voids this attempt (its pages stay on flash, named by no commit) and queues another,
  // unless the device is gone or the batch failed AtomicBatch::kAttempts times.
  void RetryGroup(const std::shared_ptr<AtomicGroup>& g, Status why);
  // Writes the commit page: trims first, then the members, all at the page's seq; the
  // map changes in this one step, so readers see the whole batch or none of it. Until
  // the page is durable the LEBs of the replaced copies stay pinned, so after a power
  // cut that takes the commit the old contents are all still there.
  bool CommitAtomic(const std::shared_ptr<AtomicGroup>& g);
  void ReleaseAtomicPins(AtomicGroup& g);
  void FinishGroup(const std::shared_ptr<AtomicGroup>& g, Status s);

  bool Paced() const {
    return gc.pacer.Applies(gc.reloc.victim() != nullptr, f.lebs_.free_count(), f.opts_.gc_start_free_lebs);
  }
  // Pays for one host sector under pacing (GroomPacer): false (counted in paced_waits) if
  // the host must wait for the groomer. `*paid` says whether a credit was spent: a sector
  // that then finds no room gives it back (UnpayHostSector), so a room stop costs the host
  // no credit.
  bool PayHostSector(bool* paid) {
    *paid = false;
    if (!Paced()) return true;
    if (!gc.pacer.CanSpend()) {
      ++f.stats_.paced_waits;
      return false;
    }
    gc.pacer.Spend();
    *paid = true;
    return true;
  }
  void UnpayHostSector(bool paid) {
    if (paid) gc.pacer.Refund();
  }

  bool DoTrim(uint64_t lba, uint64_t count, Done& done);

  // --- flush ---
  void CheckFlushWaiters();

  // --- groomer ---
  void MaybeGroom();

  // Space is short and the groomer found nothing it can move (every LEB full of live
  // data, or held): nothing will free room, so host writes waiting for it fail with a
  // clear error instead of waiting for ever. (Trims need a page too.)
  // Sectors waiting in the rewrite backlog (their page failed, e.g. on a die that died)
  // stay mapped where they are: a failed page reads back through its row's parity. The
  // writes waiting on them fail: their data could not be stored again under parity.
  void FailBacklog(const char* why);

  void FailStuckWrites();

  // The rebuild queue emptied: FlashBack's event, and the mode is recomputed.
  void OnRebuildDrained();

  // Sectors the groomer can still write: its open LEB's remaining positions and the free
  // LEBs (each as wide as the surviving dies make it).
  uint64_t GroomerRoom();

  // Issues relocation reads, a few pages at a time, so host I/O interleaves with grooming.
  void GroomStep();
  uint32_t MaxQueuedRelocation() const;
  void NoteQueued() {
    f.stats_.gc_queued_max = std::max(f.stats_.gc_queued_max, gc.queued + gc.reloc.reads());
  }
  // The groomer copies the victim's pages from its summary (nothing read before a copy).
  bool CopyingFromSummary() const {
    return use_copy && gc.vsum.ready && gc.vsum.leb == gc.reloc.victim() && gc.vsum.leb != nullptr;
  }
  static constexpr uint32_t kMinQueuedCopies = 2;
  // Sets the pacer's feedback (GroomPacer::SetSlack) from the room (free LEBs, what the
  // open LEBs have left, what the victim frees beyond its live data) against
  // kPacingTargetAboveReserve; once per relocated page (the room moves by at most a page
  // within it), before its sectors earn the host credit.
  void UpdatePacingSlack();
  // The pacer's target room, in LEBs above the reserve (where host writes stop for room).
  // 2.5 until victims overlapped and the pacing leaned against the host's backlog; with
  // both, room kept idle above the target cost WAF (the stock override's steady state,
  // last five rounds: 2.5 -> WAF 2.23, 235,690 IOPS, p99 3.19 ms; 2.0 -> 2.19, 241,965,
  // 3.06 ms; 1.5 -> 2.14, 247,388, 3.01 ms, a few dozen stops at the reserve a round,
  // the slowest write 7.6 ms).
  static constexpr double kPacingTargetAboveReserve = 1.5;
  // A submitted page reached the controller's buffer or ended without it: it no longer
  // counts against the groomer's bound (GroomerState::queued).
  void ReleaseQueued(PageBuf* b);

  void Relocate(Leb& v, uint32_t die, uint32_t page, const Completion& c,
                const std::vector<uint8_t>& data, const std::vector<uint8_t>& meta, bool is_trim);
  // Reads victim page (`die`, `page`) whole into host memory (rebuilding it from parity
  // if it cannot be read) and relocates its live sectors; counted as a relocation read.
  void ReadAndRelocate(Leb* v, uint32_t die, uint32_t page, bool is_trim);
  // FlashBack for the groomer: the victim's page is rebuilt from its row (its read failed
  // with `st`, or its die is silent), then moved as usual.
  void RebuildVictimPage(Leb* v, uint32_t die, uint32_t page, bool is_trim, FlashStatus st);
  void ReadPage(Leb* v, uint32_t die, uint32_t page, bool is_trim);  // (the read itself)
  // Controller-side relocation of a victim page whose sector entries `e` (S() of them:
  // from its metadata, read, or from the victim's summary) are known: its live sectors
  // go to the groomer's copy pages.
  void CopyRelocate(Leb& v, uint32_t die, uint32_t page, const format::SectorEntry* e);
  // Reads the victim's summary (format 1.6: with CRCs), when this FTL wrote it and it is
  // all on flash, into gc.vsum; GroomStep waits for it, then copies pages from it unread.
  // Takes gc.vnext instead if it holds (or is reading) this LEB's summary.
  void LoadVictimSummary(Leb& v);
  // Reads `v`'s summary into `vs` if it can be used (this FTL wrote it, it is all on
  // flash, no summary page is on a silent die). Only when vs.left == 0.
  bool ReadSummaryInto(GroomerState::VictimSummary& vs, Leb& v, bool counted);
  void VictimSummaryPageRead(const Leb* v, uint32_t j, uint32_t die, const Completion& c);
  // While grooming for space, reads ahead the summary of the LEB the policy would pick
  // next (GroomPolicy::PeekSpaceVictim) into gc.vnext.
  void MaybePrefetchSummary();
  // The current victim is done with its summary (drained or released): copies no longer
  // come from it. (Its reads have all landed: they count as the victim's.)
  void ForgetVictimSummary() {
    gc.vsum.leb = nullptr;
    gc.vsum.loading = gc.vsum.ready = false;
  }
  // Copies victim page (`die`, `page`) from gc.vsum: false (nothing done) unless every
  // live slot of it is named there and mapped to it, so its metadata must be read. The
  // caller (GroomStep) never asks for a page on a failed die.
  bool CopyFromSummary(Leb& v, uint32_t die, uint32_t page);
  // Sends sealed copy page `b` (Submit) as a gathered copy adding to `acc`.
  void SendCopy(PageBuf* b, uint32_t acc);
  // Copy sector `next` continues the run of `prev` (the next slot of the same page): one
  // gathered segment holds both.
  bool CopyRunContinues(Psa prev, Psa next) const {
    return prev < kKeepMapping && next == prev + 1 && addr.PageOf(next) == addr.PageOf(prev) &&
           addr.DieOf(next) == addr.DieOf(prev) && addr.LebOf(next) == addr.LebOf(prev);
  }
  uint32_t zero_sector_crc_ = 0;  // CRC-32C of a zeroed sector (0: not computed yet)
  uint32_t ZeroSectorCrc() {
    if (zero_sector_crc_ == 0) {
      const std::vector<uint8_t> zeros(f.sector_bytes_, 0);
      zero_sector_crc_ = Crc32c(zeros.data(), zeros.size());
    }
    return zero_sector_crc_;
  }
  // Copy page `b`'s live sectors go back to their sources in the victim (still held by
  // `b`) and are moved through host memory: a copy that failed, was never sent, or sits
  // on a die that failed before its row was protected.
  void RevertCopy(PageBuf* b);
  void CopyFailed(PageBuf* b, const Completion& c);

  uint64_t OldestDataSeqOnFlash() const;

  // Writes the trim records carried out of the victim, packed into as few pages as they
  // need. A record that finds no page holds the victim back: releasing it could let
  // the data the record hides come back after a power cut.
  void WriteCarriedTrims(Leb& v);

  // Releases the draining victims whose pages have all landed, and the current one once
  // it is read through and its pages have landed; otherwise sets the current one aside
  // to drain beside the next (Relocation::Drain).
  void MaybeFinishVictim();
  // `v` (current or draining) is freed or kept closed if nothing holds it any more (true;
  // it is no longer a victim), else pushes out what it waits for (false).
  bool TryReleaseVictim(Leb& v);

  // A command came back aborted: power is gone or the LUN's host side was cut. Nothing
  // more reaches flash, so every request still waiting (queued host writes and trims,
  // rewrite jobs, trims held by a checkpoint) is answered with an error at the next turn,
  // not left waiting for ever (a caller, e.g. an NBD client, would hang).
  void DeviceLost();

  // The owner gives the FTL up (its LUN's host side crashed): as a device loss, and
  // every write not yet durable fails now; what the controller already has still reaches
  // flash, and the next attach finds it.
  void Abandon();

  // --- checkpoints while serving: after a die failure, and periodic ---
  // Recovery after a power cut starts from the base checkpoint and reads the LEBs opened
  // since. A LEB whose stripes include a failed die cannot have a page rebuilt once a
  // second die of the same stripe fails: if that LEB were read by a scan, the sectors of
  // such a page (its header gone) would silently fall back to older copies. So once a
  // die is declared failed, a checkpoint is written: every LEB formed with the die is
  // then older than the base, its sectors are in the base's map, and a page lost to a
  // second failure reads as an I/O error, after any number of power cuts.
  // The checkpoint must describe flash exactly: the groomer finishes its victim and picks
  // no other, both append points close their LEBs (host writes wait in `pending`; reads
  // go on), every page in flight completes, and then the record is written (to the
  // metadata LEB not holding the current base). Writes stall for that long, once per
  // failure. A cut before it completes leaves the previous base in force (the window
  // docs/flashback.md describes).
  void CheckCheckpoint();
  // Shutdown writes its own checkpoint: a pending one is dropped (unless being written).
  void DropCheckpoint();

  // --- shutdown ---
  Done shutdown_done;
  void CheckShutdown();
};

}  // namespace vsl::ftl
