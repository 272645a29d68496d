// Internal state of the FTL, shared by ftl.cc (I/O paths, groomer) and ftl_attach.cc
// (format, metadata records, recovery). Not part of the public surface.
#pragma once

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <set>
#include <unordered_map>
#include <vector>

#include "vsl/core/crc.h"
#include "vsl/core/log.h"
#include "vsl/ftl/ftl.h"
#include "vsl/ftl/ftl_format.h"

namespace vsl::ftl {

inline constexpr uint32_t kMetaLebs = 2;  // blocks 0 and 1 of every die
inline constexpr uint32_t kMetaCopies = 3;  // copies of each metadata record page, on distinct dies

using nand::Completion;
using nand::FlashStatus;
namespace f = format;

// ---------------------------------------------------------------------------------------
// Internal state.

struct Ftl::WriteCtx {
  uint32_t remaining = 1;  // +1 while the request is still being appended
  bool fua = false;
  Status status;
  Done done;
};

// An atomic batch (Ftl::WriteAtomic) on its way: appended to kAtomicData pages, then, once
// they are all durable, committed by one trim page of commit records (ftl_format.h).
struct Ftl::AtomicGroup {
  std::vector<AtomicOp> ops;
  bool fua = false;
  Done done;
  uint32_t attempts = 0;
  bool failed = false;     // a member page failed before the commit: the attempt is void
  bool committed = false;  // the commit page was submitted: the members are mapped
  bool finished = false;   // `done` was called
  std::size_t op = 0;      // append progress: operation, and sector within it
  uint64_t in_op = 0;
  // This attempt's member pages as submitted: (seq, PSA of slot 0), in order.
  std::vector<std::pair<uint64_t, Psa>> members;
  std::vector<std::pair<uint64_t, Psa>> placed;  // (lba, member slot), in op order
  // LEBs holding this attempt's members, pinned (not erased) until the group resolves:
  // until the commit maps them, nothing in them is valid and the groomer would free them.
  std::vector<uint32_t> pinned;
  WriteCtx* members_ctx = nullptr;  // waits for every member page to be durable
};

struct Ftl::PageBuf {
  uint32_t leb = 0, die = 0, page = 0;
  f::PageType type = f::PageType::kData;
  std::vector<uint8_t> data, meta;
  std::vector<uint64_t> lbas;  // per slot; kNoLba for padding or killed copies
  std::vector<f::TrimRecord> trims;
  uint32_t used = 0;
  uint64_t seq = 0;
  bool submitted = false, durable = false;
  // FlashBack's acknowledgement rule: a member of a parity row is durable only once a
  // parity page covering it is durable too (accepted under PLP, else on flash).
  bool covered = true;     // false while its row's parity does not yet protect it
  bool accepted = false;   // in the controller's protected buffer (PLP healthy)
  bool flash_done = false; // programmed
  bool final_parity = false;  // the row's own parity page (not a partial one elsewhere)
  // Write requests waiting on this page: (ctx, acknowledged already).
  std::vector<WriteCtx*> waiters;
  std::vector<uint8_t> pmeta;  // parity pages: XOR of the members' leading metadata
  Leb* victim = nullptr;  // the LEB whose data this GC page relocates (holds a reference)
  // Per slot: where the sector was before this copy (kUnmapped: nowhere; kKeepMapping: do
  // not revert). Until the page is durable the LEBs of those places are pinned (not
  // erased), and if the page can never be stored the map goes back to them, so a failed
  // overwrite leaves the sector as it was, never without any copy.
  std::vector<Psa> prev;
  std::vector<uint32_t> pinned;  // LEB indices this page pins
  std::shared_ptr<AtomicGroup> group;  // kAtomicData pages: the batch it holds
  uint32_t attempt = 0;                // and which attempt of it
};
inline constexpr Psa kKeepMapping = kUnmapped - 1;

struct Ftl::AppendPoint {
  bool gc = false;
  Leb* leb = nullptr;
  uint32_t row = 0, die = 0;  // next position to hand out
  PageBuf* open = nullptr;    // page being filled, not yet submitted
};

struct Ftl::Impl {
  Ftl& f;
  AppendPoint host{false}, gcap{true};
  std::unordered_map<PageBuf*, std::unique_ptr<PageBuf>> pages;  // every live page buffer
  std::set<uint64_t> inflight_seqs;  // submitted, not yet durable
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
  std::deque<Pending> pending;  // host work waiting for a free LEB
  struct FlushWaiter {
    uint64_t watermark;
    Done done;
  };
  std::vector<FlushWaiter> flush_waiters;
  // Groomer state.
  Leb* victim = nullptr;
  uint32_t victim_cursor = 0;  // next page slot (row * dies + die) to look at
  uint32_t victim_reads = 0;   // page reads in flight
  uint32_t victim_refs = 0;    // GC pages holding its relocated data, not yet durable
  bool victim_held = false;    // something could not be moved out: do not release it
  bool rebuild_turn_ = false;  // alternates rebuild and space victims while space is short
  std::vector<f::TrimRecord> carry_trims;  // kept records of the victim, to rewrite
  bool wear_check_due = true;  // an erase count changed since the last wear check
  bool shutting_down = false;
  bool device_lost = false;  // a command came back aborted (power lost): stop everything
  uint64_t open_writes = 0;  // host write requests not yet completed
  // Pacing: while the groomer runs with few free LEBs, each relocated sector earns the
  // host (invalid / valid) sectors of writing, so host writes interleave with grooming
  // at a fine grain instead of stalling until a whole LEB is free.
  double credits = 0;
  double credit_ratio = 0;
  std::vector<Done> groom_waiters;

  // Pages of a LEB's summary; 0 when a summary would take more than a quarter of a LEB
  // (tiny geometries), and LEBs are then scanned page by page.
  uint32_t summary_pages = 0;
  // FlashBack (set by Format/Open from the format's flags).
  bool parity_on = false;
  static constexpr uint32_t kNoDie = UINT32_MAX;
  std::vector<uint8_t> die_failed;      // per die: declared failed (or silent at attach)
  std::vector<uint32_t> rebuild_queue;  // LEBs holding data of a failed die
  std::vector<uint64_t> lost_lbas;      // sectors a second failure made unrecoverable
  uint64_t unnamed_lost_stripes = 0;    // FlashBackStatus::unnamed_lost_stripes
  std::vector<std::string> events;
  HealthMode mode = HealthMode::kNormal;
  // Coverage of parity rows, by (leb, row): members submitted but not yet covered by a
  // durable parity page, and the stage slot (if any) holding the row's running parity.
  struct RowCover {
    uint32_t pd = UINT32_MAX;
    std::vector<PageBuf*> waiting;
    int slot = -1;
    uint64_t staged_mask = 0;  // members in the last image sent to the slot
  };
  std::map<std::pair<uint32_t, uint32_t>, RowCover> covers;
  std::vector<uint8_t> slot_busy;  // per stage slot: owned by a row until its parity lands
  bool stage_posted = false;
  bool shutdown_parity_done = false;
  // FlashBack checkpoint after a die failure (see RequestCheckpoint).
  bool serving = false;        // attach is done: die failures from now on ask for one
  uint32_t ckpt_asked = 0;     // requests so far
  uint32_t ckpt_written = 0;   // requests the last completed checkpoint answered
  bool ckpt_quiesce = false;   // append points closed: no LEB opens until it is written
  bool ckpt_writing = false;
  bool CheckpointWanted() const { return ckpt_asked != ckpt_written; }

  explicit Impl(Ftl& ftl) : f(ftl) {
    const uint64_t bytes =
        f::SummaryBytes(f.geo_.dies_per_pipe(), f.geo_.pages_per_block, f.spp_);
    const uint64_t k = (bytes + f.geo_.page_data_bytes - 1) / f.geo_.page_data_bytes;
    if (4 * k <= uint64_t{f.geo_.dies_per_pipe()} * f.geo_.pages_per_block) {
      summary_pages = static_cast<uint32_t>(k);
    }
    die_failed.assign(f.geo_.dies_per_pipe(), 0);
    slot_busy.assign(f.pipe_.stage_slots(), 0);
  }

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

  void Event(std::string e) {
    Logger("ftl")->warn("{}", e);
    events.push_back(std::move(e));
    if (events.size() > 64) events.erase(events.begin());
  }

  // --- FlashBack layout ---
  // The narrowest stripe that carries parity: one data page and its parity (a mirror).
  // A LEB with fewer good dies is not formed under FlashBack, so a 4-die pipe still
  // rebuilds after its second die failure (onto 2-die mirrored stripes) if room allows.
  static constexpr uint32_t kMinStripeDies = 2;
  // The die holding row `row`'s parity: the good dies at the row's first use, rotating.
  uint32_t RowParityDie(Leb& l, uint32_t row) {
    if (!l.par) return kNoDie;
    uint8_t& pd = l.par->pdie[row];
    if (pd == RowParity::kUndecided) {
      std::vector<uint32_t> g;
      for (uint32_t d = 0; d < D(); ++d) {
        if (l.good[d]) g.push_back(d);
      }
      pd = g.size() >= kMinStripeDies ? static_cast<uint8_t>(g[row % g.size()]) : RowParity::kNone;
    }
    return pd == RowParity::kNone ? kNoDie : pd;
  }
  bool DataPos(Leb& l, uint32_t row, uint32_t d) { return l.good[d] && d != RowParityDie(l, row); }
  bool IsLastDataPos(Leb& l, uint32_t row, uint32_t die) {
    for (uint32_t d = die + 1; d < D(); ++d) {
      if (DataPos(l, row, d)) return false;
    }
    return true;
  }
  uint32_t DataDiesPerRow(const Leb& l, bool with_parity) const {
    const uint32_t g = l.good_dies();
    return g - (with_parity && g >= kMinStripeDies ? 1 : 0);
  }
  static void XorInto(uint8_t* dst, const uint8_t* src, std::size_t n) {
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t a, b;
      std::memcpy(&a, dst + i, 8);
      std::memcpy(&b, src + i, 8);
      a ^= b;
      std::memcpy(dst + i, &a, 8);
    }
    for (; i < n; ++i) dst[i] ^= src[i];
  }
  bool ParityValid(const uint8_t* meta) const {
    const auto* h = reinterpret_cast<const f::PageHeader*>(meta);
    if (h->type != static_cast<uint8_t>(f::PageType::kParity) ||
        h->version_major != f::kVersionMajor || h->sectors != S() || h->epoch != f.epoch_) {
      return false;
    }
    const std::size_t n = f::ParityMetaBytes(S()) - 4;
    uint32_t crc;
    std::memcpy(&crc, meta + n, 4);
    return Crc32c(meta, n) == crc;
  }
  static uint64_t ParityMask(const uint8_t* meta) {
    uint64_t m;
    std::memcpy(&m, meta + sizeof(f::PageHeader), 8);
    return m;
  }

  void AccumulateParity(Leb& l, PageBuf* b) {
    RowParity& rp = *l.par;
    if (rp.row != b->page) {
      rp.row = b->page;
      rp.submitted = false;
      rp.mask = 0;
      std::fill(rp.data.begin(), rp.data.end(), 0);
      std::fill(rp.meta.begin(), rp.meta.end(), 0);
    }
    XorInto(rp.data.data(), b->data.data(), rp.data.size());
    XorInto(rp.meta.data(), b->meta.data(), rp.meta.size());
    rp.mask |= uint64_t{1} << b->die;
    if (IsLastDataPos(l, b->page, b->die)) SubmitParity(l);
  }
  void SubmitParity(Leb& l) {
    RowParity& rp = *l.par;
    if (rp.submitted || rp.row == UINT32_MAX) return;
    rp.submitted = true;
    const uint32_t pd = RowParityDie(l, rp.row);
    // A row whose members all failed still gets its (empty) parity page: pages of a block
    // are programmed in order, so the parity die's page must not be skipped.
    if (pd == kNoDie || !l.good[pd] || die_failed[pd]) {
      // This row goes unprotected (its parity die failed): nothing more can cover it.
      return CoverRow(l.index, rp.row, ~uint64_t{0}, true);
    }
    PageBuf* b = MakeBuf(l.index, pd, rp.row, f::PageType::kParity);
    b->data = rp.data;
    b->pmeta = rp.meta;
    b->lbas[0] = rp.mask;
    b->final_parity = true;
    ++f.stats_.parity_pages;
    Submit(b);
  }

  // --- the acknowledgement rule under parity ---
  // Members of a parity row are "covered" once a durable parity page includes them: the
  // row's own parity page, a partial parity page written while the row waited, or the
  // row's running parity parked in a stage slot of the controller's protected buffer.
  // Until then a member is not durable: its writes are not acknowledged, flushes and the
  // groomer's victim wait, and the host keeps its buffer. So a die that dies with the
  // page still in the controller's buffer, followed by a power cut, loses nothing that
  // was acknowledged: the page is rebuilt from the parity and the other members.
  bool UseStages() const { return !slot_busy.empty() && PlpDurableOnAccept(); }

  // A durable parity page (or stage) for (leb, row) with members `mask`: those members
  // are covered. `final` (the row's own parity page, or the row can have no other): every
  // member is, and the row's stage slot is free again.
  void CoverRow(uint32_t leb, uint32_t row, uint64_t mask, bool final, bool landed = false) {
    auto it = covers.find({leb, row});
    if (it == covers.end()) return;
    RowCover& rc = it->second;
    std::vector<PageBuf*> now;
    for (std::size_t i = 0; i < rc.waiting.size();) {
      if (final || ((mask >> rc.waiting[i]->die) & 1)) {
        now.push_back(rc.waiting[i]);
        rc.waiting[i] = rc.waiting.back();
        rc.waiting.pop_back();
      } else {
        ++i;
      }
    }
    if (final) {
      if (rc.slot >= 0) {
        // The row's parity page landing at the staged address retired the image; any
        // other end of the row (no parity page after all) must empty the slot, or a
        // stale image would be programmed at a power cut into a reused block.
        if (!landed) f.pipe_.ClearStage(static_cast<uint32_t>(rc.slot));
        slot_busy[static_cast<uint32_t>(rc.slot)] = 0;
        ScheduleStage();  // a row that found no free slot may take this one
      }
      covers.erase(it);
    }
    for (PageBuf* b : now) {
      b->covered = true;
      Progress(b);
    }
  }
  // Power is gone: pages on flash still waiting for cover will never get it. Their
  // writes fail (they may or may not survive, like any unacknowledged write).
  void FailUncovered() {
    std::vector<PageBuf*> done;
    for (auto& [key, rc] : covers) {
      for (PageBuf* b : rc.waiting) {
        if (b->flash_done) done.push_back(b);
      }
    }
    for (PageBuf* b : done) {
      Uncover(b);
      FailWaiters(b);
      pages.erase(b);
    }
  }
  // `b` failed or was given up: it no longer waits for cover.
  void Uncover(PageBuf* b) {
    if (b->covered) return;
    b->covered = true;
    auto it = covers.find({b->leb, b->page});
    if (it == covers.end()) return;
    auto& w = it->second.waiting;
    w.erase(std::remove(w.begin(), w.end(), b), w.end());
  }
  // Moves a page on as far as its state allows: durable (and non-FUA writes acknowledged)
  // once covered and accepted under PLP; finished once covered and on flash.
  // Debug aid: VSL_TRACE_LBA=<lba> prints, on stderr, every page that carries that sector
  // as it is appended, submitted and acknowledged, and each mapping attach replays.
  static uint64_t TraceLba() {
    static const uint64_t t = [] {
      const char* e = std::getenv("VSL_TRACE_LBA");
      return e ? std::strtoull(e, nullptr, 10) : UINT64_MAX;
    }();
    return t;
  }
  bool Traced(const PageBuf* b) const {
    if (TraceLba() == UINT64_MAX) return false;
    if (b->type == f::PageType::kTrim) {
      for (const auto& t : b->trims) {
        if (TraceLba() - t.lba < t.count) return true;
      }
      return false;
    }
    if (b->type != f::PageType::kData && b->type != f::PageType::kAtomicData) return false;
    return std::find(b->lbas.begin(), b->lbas.end(), TraceLba()) != b->lbas.end();
  }
  void Progress(PageBuf* b) {
    if (Traced(b)) {
      fmt::print(stderr, "trace t={} progress leb {} die {} page {} covered={} accepted={} done={} waiters={}\n",
                 f.clock_.Now(), b->leb, b->die, b->page, b->covered, b->accepted, b->flash_done,
                 b->waiters.size());
    }
    // On flash (or in the protected buffer) the copy no longer needs its old places kept:
    // waiting for its row's parity too could hold a victim (and the room that would
    // complete the row) for ever.
    if ((b->accepted || b->flash_done) && !b->pinned.empty()) Unpin(b);
    if (!b->covered) return;
    if (b->accepted || b->flash_done) {
      MarkDurable(b);
      std::vector<WriteCtx*> keep;
      for (WriteCtx* c : b->waiters) {
        if (c->fua && !b->flash_done) keep.push_back(c);
        else Ack(c);
      }
      b->waiters.swap(keep);
    }
    if (b->flash_done) pages.erase(b);
  }

  // Stage slots: after each burst of submissions, the running parity of every open row
  // with uncovered members goes to the row's slot (one image per row per burst).
  void ScheduleStage() {
    if (stage_posted) return;
    stage_posted = true;
    Post([this] {
      stage_posted = false;
      StageRows();
    });
  }
  void StageRows() {
    if (device_lost || !UseStages()) return;
    for (AppendPoint* ap : {&host, &gcap}) {
      Leb* l = ap->leb;
      if (l == nullptr || !l->par || l->par->row == UINT32_MAX || l->par->submitted) continue;
      RowParity& rp = *l->par;
      auto it = covers.find({l->index, rp.row});
      if (it == covers.end()) continue;
      RowCover& rc = it->second;
      bool need = false;
      for (PageBuf* b : rc.waiting) need = need || !((rc.staged_mask >> b->die) & 1);
      if (!need || rc.pd == kNoDie || die_failed[rc.pd]) continue;
      if (rc.slot < 0) {
        for (uint32_t s = 0; s < slot_busy.size() && rc.slot < 0; ++s) {
          if (!slot_busy[s]) {
            slot_busy[s] = 1;
            rc.slot = static_cast<int>(s);
          }
        }
        if (rc.slot < 0) {
          ++f.stats_.stage_slot_waits;
          continue;  // its members wait for the row's parity page, or a free slot
        }
      }
      auto img = std::make_shared<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>();
      img->first = rp.data;
      img->second.assign(f.geo_.meta_bytes_per_page(), 0xFF);
      FillParityMeta(img->second.data(), f.next_seq_++, rp.mask, rp.meta);
      rc.staged_mask = rp.mask;
      ++f.stats_.parity_stages;
      const uint32_t leb = l->index, row = rp.row, pd = rc.pd;
      const uint64_t mask = rp.mask;
      f.pipe_.Stage(static_cast<uint32_t>(rc.slot), {{pd, leb, row}, img->first.data(), img->second.data()},
                    [this, img, leb, row, mask](const Completion&) {
                      if (PlpDurableOnAccept()) CoverRow(leb, row, mask, false);
                    },
                    [this, img, pd](const Completion& c) {
                      if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(pd);
                    });
    }
  }
  // Spare area of a parity page: header, member mask, XOR of the members' metadata, CRC.
  void FillParityMeta(uint8_t* meta, uint64_t seq, uint64_t mask, const std::vector<uint8_t>& pmeta) {
    auto* h = reinterpret_cast<f::PageHeader*>(meta);
    h->bad_block_marker = 0xFF;
    h->type = static_cast<uint8_t>(f::PageType::kParity);
    h->version_major = f::kVersionMajor;
    h->sectors = static_cast<uint8_t>(S());
    h->epoch = f.epoch_;
    h->seq = seq;
    std::memcpy(meta + sizeof(f::PageHeader), &mask, 8);
    std::memcpy(meta + sizeof(f::PageHeader) + 8, pmeta.data(), pmeta.size());
    const std::size_t n = f::ParityMetaBytes(S()) - 4;
    const uint32_t crc = Crc32c(meta, n);
    std::memcpy(meta + n, &crc, 4);
  }
  // The LEB takes no more pages: parity of a last, partial row, then the state goes.
  void FinishParity(Leb& l) {
    if (!l.par) return;
    if (!device_lost) SubmitParity(l);
    l.par.reset();
  }

  // Rebuilds page (leb, die, row) as the XOR of its row's parity and other members.
  using RebuildDone = Function<void(bool, std::vector<uint8_t>, std::vector<uint8_t>)>;
  void RebuildPage(uint32_t leb, uint32_t die, uint32_t row, RebuildDone done) {
    struct R {
      uint32_t left = 1;
      std::vector<std::vector<uint8_t>> data, meta;
      std::vector<uint8_t> ok;
      RebuildDone done;
      // The row still being written: its running parity, from host memory (on flash it
      // exists at most as a stage image, which is programmed only at a power cut).
      uint64_t acc_mask = 0;
      std::vector<uint8_t> acc_data, acc_meta;
    };
    auto r = std::make_shared<R>();
    r->done = std::move(done);
    if (leb < f.lebs_.size()) {
      Leb& l = f.lebs_.leb(leb);
      if (l.par && l.par->row == row && !l.par->submitted && ((l.par->mask >> die) & 1)) {
        r->acc_mask = l.par->mask;
        r->acc_data = l.par->data;
        r->acc_meta = l.par->meta;
      }
    }
    r->data.resize(D());
    r->meta.resize(D());
    r->ok.assign(D(), 0);
    auto finish = [this, r, die]() {
      if (--r->left != 0) return;
      auto fail = [r]() {
        auto d = std::move(r->done);
        d(false, {}, {});
      };
      if (!parity_on) return fail();
      // A row has its parity page and perhaps a partial one (written while the row
      // waited), or, while it is being written, the running parity in memory: any whose
      // members are all readable rebuilds the page.
      for (uint32_t pd = 0; pd <= D(); ++pd) {
        uint64_t mask, pseq;
        std::vector<uint8_t> data, lead;
        if (pd == D()) {
          if (r->acc_mask == 0) continue;
          mask = r->acc_mask;
          pseq = UINT64_MAX;
          data = r->acc_data;
          lead = r->acc_meta;
        } else {
          if (pd == die || !r->ok[pd] || !ParityValid(r->meta[pd].data())) continue;
          mask = ParityMask(r->meta[pd].data());
          if (!((mask >> die) & 1)) continue;
          data = r->data[pd];
          lead.assign(r->meta[pd].begin() + sizeof(f::PageHeader) + 8,
                      r->meta[pd].begin() + sizeof(f::PageHeader) + 8 + f::MetaBytes(S()));
          pseq = reinterpret_cast<const f::PageHeader*>(r->meta[pd].data())->seq;
        }
        // Members must be the pages the parity was made of: written (valid header, this
        // format) before it. An erased, torn or newer page means the row is not whole.
        auto member_ok = [&](const std::vector<uint8_t>& m) {
          const auto* h = reinterpret_cast<const f::PageHeader*>(m.data());
          const std::size_t hn = f::MetaBytes(S()) - 4;
          uint32_t hcrc;
          std::memcpy(&hcrc, m.data() + hn, 4);
          return h->version_major == f::kVersionMajor && h->sectors == S() &&
                 h->epoch == f.epoch_ && h->seq < pseq && Crc32c(m.data(), hn) == hcrc;
        };
        bool complete = true;
        for (uint32_t d = 0; d < D() && complete; ++d) {
          if (d == die || d == pd || !((mask >> d) & 1)) continue;
          if (!r->ok[d] || !member_ok(r->meta[d])) complete = false;  // a second member is gone too
          else {
            XorInto(data.data(), r->data[d].data(), data.size());
            XorInto(lead.data(), r->meta[d].data(), lead.size());
          }
        }
        if (!complete) continue;
        std::vector<uint8_t> meta(f.geo_.meta_bytes_per_page(), 0xFF);
        std::memcpy(meta.data(), lead.data(), lead.size());
        const std::size_t n = f::MetaBytes(S()) - 4;
        uint32_t crc;
        std::memcpy(&crc, meta.data() + n, 4);
        if (Crc32c(meta.data(), n) != crc) continue;
        const auto* rh = reinterpret_cast<const f::PageHeader*>(meta.data());
        if (rh->epoch != f.epoch_ || rh->seq >= pseq) continue;
        ++f.stats_.rebuilt_pages;
        auto d = std::move(r->done);
        return d(true, std::move(data), std::move(meta));
      }
      fail();
    };
    for (uint32_t d = 0; d < D(); ++d) {
      if (d == die || die_failed[d]) continue;
      ++r->left;
      r->data[d].resize(f.geo_.page_data_bytes);
      r->meta[d].resize(f.geo_.meta_bytes_per_page());
      f.pipe_.Read({{d, leb, row}, 0, 0, r->data[d].data(), r->meta[d].data()},
                   [this, r, d, finish](const Completion& c) mutable {
                     r->ok[d] = c.ok();
                     if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(d);
                     finish();
                   });
    }
    Post(finish);
  }

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
      const Psa p = MakePsa(leb, die, page, s);
      if (lba >= f.map_.sectors() || f.map_.Get(lba) != p) continue;  // kNoLba is out of range
      const uint8_t* src = data.data() + uint64_t{s} * f.sector_bytes_;
      if (Crc32c(src, f.sector_bytes_) != e[s].crc) continue;
      if (!fn(lba, p, src)) return;
    }
  }

  void RelocateRebuilt(uint32_t leb, uint32_t die, uint32_t page, const std::vector<uint8_t>& data,
                       const std::vector<uint8_t>& meta) {
    if (device_lost || shutting_down) return;
    bool moved = false;
    ForEachLiveSector(leb, die, page, data, meta, [&](uint64_t lba, Psa, const uint8_t* src) {
      if (!AppendSector(gcap, lba, src, nullptr, nullptr)) return false;
      ++f.stats_.gc_write_sectors;
      moved = true;
      return true;
    });
    if (moved && (victim == nullptr || gcap.open == nullptr || gcap.open->victim == nullptr)) {
      SubmitOpen(gcap);
    }
  }

  void NoteLost(uint64_t lba) {
    if (lost_lbas.size() < 4096 &&
        std::find(lost_lbas.begin(), lost_lbas.end(), lba) == lost_lbas.end()) {
      lost_lbas.push_back(lba);
    }
  }

  // Data pages an attach found without parity, by (leb, die, row): their live sectors are
  // read and rewritten (through the rewrite backlog, ahead of host writes, as space
  // allows); `done` once they are all durable, and so covered, again.
  std::vector<std::array<uint32_t, 3>> reprotect_pages;
  std::vector<Function<void()>> backlog_waiters;  // run once the backlog is empty
  void ReprotectPages(Function<void()> done) {
    if (reprotect_pages.empty()) return done();
    auto left = std::make_shared<uint32_t>(1);
    auto shared = std::make_shared<Function<void()>>(std::move(done));
    auto finish = [this, left, shared]() {
      if (--*left != 0) return;
      backlog_waiters.push_back([this, shared]() {
        SubmitOpen(host);
        SubmitOpen(gcap);
        f.Flush([shared](Status) { (*shared)(); });
      });
      RunPending();
      MaybeGroom();
      if (victim == nullptr) RunBacklogWaiters();  // no room will appear: do not wait
    };
    std::vector<std::array<uint32_t, 3>> todo;
    todo.swap(reprotect_pages);
    for (const auto& [leb, die, row] : todo) {
      if (die_failed[die]) continue;  // nothing to read: not recoverable (no parity)
      ++*left;
      auto buf = std::make_shared<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>();
      buf->first.resize(f.geo_.page_data_bytes);
      buf->second.resize(f.geo_.meta_bytes_per_page());
      f.pipe_.Read({{die, leb, row}, 0, 0, buf->first.data(), buf->second.data()},
                   [this, buf, finish, leb = leb, die = die, row = row](const Completion& c) mutable {
                     if (c.ok()) QueueRewrite(leb, die, row, buf->first, buf->second);
                     finish();
                   });
    }
    finish();
  }

  // `l` holds pages no parity covers: the groomer moves its data (with the rebuild's
  // priority), and the flag persists in checkpoints until then.
  void Reprotect(Leb& l) {
    l.unprotected = true;
    if (std::find(rebuild_queue.begin(), rebuild_queue.end(), l.index) == rebuild_queue.end()) {
      rebuild_queue.push_back(l.index);
    }
  }

  // An uncorrectable read, program or erase failure in block `block` of die `d`: errors
  // in too many distinct blocks within the window retire the die
  // (FtlOptions::die_error_limit). A block going bad fails every later page program in
  // it: that is one error, not one per page.
  std::vector<std::deque<std::pair<TimeNs, uint32_t>>> die_errors;  // (when, block)
  void NoteDieError(uint32_t d, uint32_t block) {
    if (d >= D() || die_failed[d] || f.opts_.die_error_limit == 0 || !parity_on) return;
    if (die_errors.size() != D()) die_errors.resize(D());
    auto& q = die_errors[d];
    const TimeNs now = f.clock_.Now();
    while (!q.empty() && now - q.front().first > f.opts_.die_error_window_ns) q.pop_front();
    for (const auto& e : q) {
      if (e.second == block) return;
    }
    q.emplace_back(now, block);
    if (q.size() < f.opts_.die_error_limit) return;
    Event(fmt::format("die {} retired: {} media errors within {} ms crossed the bound", d, q.size(),
                      f.opts_.die_error_window_ns / kMs));
    DeclareDieFailed(d);
  }

  void OnDieTimeout(uint32_t d) {
    if (d < D() && !die_failed[d]) DeclareDieFailed(d);
  }
  // A die stopped answering: write nothing more to it, and move every LEB's data off it
  // (the groomer reads its pages back through parity). Also called at attach for dies
  // that did not answer.
  void DeclareDieFailed(uint32_t d) {
    die_failed[d] = 1;
    if (serving && parity_on) ++ckpt_asked;
    Event(fmt::format("FlashBack substitution active: die {} failed; {}", d,
                      parity_on ? "rebuilding its data from parity"
                                : "this format has no parity: its data is lost"));
    for (uint32_t i = 0; i < f.lebs_.size(); ++i) {
      Leb& l = f.lebs_.leb(i);
      if (i < kMetaLebs || l.state == LebState::kFree) {
        l.good[d] = 0;
        l.capacity = LebCapacity(l);
        continue;
      }
      // Every LEB whose stripes include the die is moved, not only its pages on the die:
      // their rows have lost their redundancy, and only LEBs formed without the die let
      // the pipe survive the next failure the same way.
      // (An open LEB's earlier rows include the die: it is queued when it closes.)
      if (l.state == LebState::kOpen) {
        l.unprotected = true;
      } else if (l.good[d] && l.valid > 0) {
        Reprotect(l);
      }
      if (l.state == LebState::kOpen) l.good[d] = 0;  // no more pages there
    }
    f.lebs_.Recount();  // free LEBs left too narrow to carry parity are out
    // The open LEBs' earlier rows include the die: they close now, without a summary (a
    // scan reads them page by page; a summary placed mid-row would break the dies' page
    // order), and join the rebuild instead of waiting to fill. Done at the engine's next
    // turn, not inside whatever completion declared the failure.
    Post([this] {
      for (AppendPoint* ap : {&host, &gcap}) {
        if (ap->leb == nullptr || !ap->leb->unprotected || device_lost || shutting_down) continue;
        SubmitOpen(*ap);
        if (ap->leb == nullptr) continue;
        ap->leb->summary.clear();
        CloseLeb(*ap);
      }
      MaybeGroom();
      CheckCheckpoint();
    });
    // Rows whose parity was to go to this die can get none: their members (on live dies)
    // are as safe as they can be.
    std::vector<std::pair<uint32_t, uint32_t>> orphans;
    for (const auto& [key, rc] : covers) {
      if (rc.pd == d) orphans.push_back(key);
    }
    for (const auto& k : orphans) CoverRow(k.first, k.second, ~uint64_t{0}, true);
    UpdateMode();
    MaybeGroom();
  }
  // Dies not declared failed (so how wide a LEB formed now is, with all blocks good).
  uint32_t AliveDies() const {
    uint32_t alive = 0;
    for (uint32_t d = 0; d < D(); ++d) alive += d >= die_failed.size() || !die_failed[d];
    return alive;
  }
  // Open LEBs formed with a die that has failed since (each joins the rebuild when it
  // closes).
  uint32_t OpenUnprotected() const {
    uint32_t n = 0;
    for (const AppendPoint* ap : {&host, &gcap}) n += ap->leb != nullptr && ap->leb->unprotected;
    return n;
  }
  // Capacity the surviving flash offers, against what the format promised and what is
  // mapped; and the reserve space: the spare room beyond the capacity, against what the
  // format set aside (rho * capacity). Called whenever a die or a block is lost.
  void UpdateMode() {
    uint64_t phys = 0;
    for (uint32_t i = kMetaLebs; i < f.lebs_.size(); ++i) {
      const Leb& l = f.lebs_.leb(i);
      uint32_t g = 0;
      for (uint32_t d = 0; d < D(); ++d) g += l.good[d] && !die_failed[d];
      phys += LebDataSectors(g);
    }
    const uint32_t alive = AliveDies();
    const uint64_t reserved =
        uint64_t{f.opts_.gc_reserve_lebs + f.opts_.gc_start_free_lebs + 2} * LebDataSectors(alive);
    const uint64_t usable = phys > reserved ? phys - reserved : 0;
    const double rho = f.reserve_ppm_ / 1e6;
    // What the format promised: the capacity, or for a sparse space the physical room a
    // flawless card offers.
    uint64_t capacity = f.map_.sectors();
    if (f.sparse_) {
      const uint64_t nominal = uint64_t{f.lebs_.size() - kMetaLebs} * LebDataSectors(D());
      const uint64_t nres = uint64_t{f.opts_.gc_reserve_lebs + f.opts_.gc_start_free_lebs + 2} * LebDataSectors(D());
      capacity = nominal > nres ? static_cast<uint64_t>(static_cast<double>(nominal - nres) / (1.0 + rho)) : 0;
    }
    reserve_full_sectors = static_cast<uint64_t>(static_cast<double>(capacity) * rho);
    reserve_sectors = usable > capacity ? usable - capacity : 0;
    reserve_percent = reserve_full_sectors == 0
                          ? (usable >= capacity ? 100.0 : 0.0)
                          : std::min(100.0, 100.0 * static_cast<double>(reserve_sectors) /
                                                static_cast<double>(reserve_full_sectors));
    const bool reserve_low = reserve_full_sectors != 0 && reserve_percent <= kReducedWritePercent;
    // A sparse space promises only the physical room (its address space is far larger).
    const HealthMode m = f.map_.mapped() > usable ? HealthMode::kReadOnly
                         : (capacity > usable || reserve_low) ? HealthMode::kReducedWrite
                                                              : HealthMode::kNormal;
    surviving_sectors = usable;
    // The warning is raised no later than the mode it warns of: when one update crosses
    // both levels (several bad blocks at once), its event comes first.
    const bool warn = reserve_percent <= kReserveWarnPercent;
    if (warn && !reserve_warned) {
      Event(fmt::format("reserve space {:.1f}%: at or below the {:.0f}% warning level", reserve_percent,
                        kReserveWarnPercent));
    }
    reserve_warned = warn;
    if (m != mode) {
      mode = m;
      Event(fmt::format("pipe health: {} (reserve {:.1f}%; surviving flash holds {} of {} sectors)",
                        HealthModeName(m), reserve_percent, usable, f.map_.sectors()));
    }
    f.room_valid_ = false;
  }
  uint64_t reserve_sectors = 0, reserve_full_sectors = 0;
  double reserve_percent = 100.0;
  bool reserve_warned = false;
  uint64_t surviving_sectors = UINT64_MAX;


  // --- addressing ---
  uint32_t D() const { return f.geo_.dies_per_pipe(); }
  uint32_t P() const { return f.geo_.pages_per_block; }
  uint32_t S() const { return f.spp_; }
  Psa MakePsa(uint32_t leb, uint32_t die, uint32_t page, uint32_t slot) const {
    return ((leb * D() + die) * P() + page) * S() + slot;
  }
  uint32_t LebOf(Psa p) const { return p / (D() * P() * S()); }
  uint32_t SlotInLeb(Psa p) const { return p % (D() * P() * S()); }
  uint32_t DieOf(Psa p) const { return (p / (P() * S())) % D(); }
  uint32_t PageOf(Psa p) const { return (p / S()) % P(); }
  uint32_t SlotOf(Psa p) const { return p % S(); }
  bool PlpDurableOnAccept() const { return f.pipe_.plp_state() == nand::PlpState::kHealthy; }

  // A plain trim record covering `lba` (commit records cover nothing).
  static bool TrimCovers(const f::TrimRecord& t, uint64_t lba) {
    return !f::IsCommitRecord(t) && lba >= t.lba && lba - t.lba < t.count;
  }

  // --- validity ---
  void SetValid(Psa p) {
    Leb& l = f.lebs_.leb(LebOf(p));
    const uint32_t s = SlotInLeb(p);
    const uint64_t bit = uint64_t{1} << (s % 64);
    if (l.valid_bits[s / 64] & bit) return;  // already counted (never count a slot twice)
    l.valid_bits[s / 64] |= bit;
    ++l.valid;
    f.lebs_.OnValidChanged(l);
  }
  void ClearValid(Psa p) {
    Leb& l = f.lebs_.leb(LebOf(p));
    const uint32_t s = SlotInLeb(p);
    const uint64_t bit = uint64_t{1} << (s % 64);
    if ((l.valid_bits[s / 64] & bit) == 0) return;
    l.valid_bits[s / 64] &= ~bit;
    --l.valid;
    f.lebs_.OnValidChanged(l);
    KillInOpenBuffer(host, p);
    KillInOpenBuffer(gcap, p);
  }
  // A stale copy still in an unsubmitted buffer would get a newer sequence number than
  // the write that replaced it; turn it into padding so replay can never resurrect it.
  void KillInOpenBuffer(AppendPoint& ap, Psa p) {
    PageBuf* b = ap.open;
    if (b && b->leb == LebOf(p) && b->die == DieOf(p) && b->page == PageOf(p)) {
      b->lbas[SlotOf(p)] = f::kNoLba;
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
  bool NextPosition(AppendPoint& ap, uint32_t* leb, uint32_t* die, uint32_t* page) {
    for (;;) {
      if (ap.leb == nullptr) {
        if (ckpt_quiesce) return false;  // a checkpoint needs every LEB closed
        if (!ap.gc && f.lebs_.free_count() <= f.opts_.gc_reserve_lebs) return false;
        Leb* l = f.lebs_.PickFree();
        if (l == nullptr) return false;
        OpenLeb(ap, *l);
      }
      Leb& l = *ap.leb;
      while (ap.row < P()) {
        while (ap.die < D() && !DataPos(l, ap.row, ap.die)) ++ap.die;
        if (ap.die < D()) break;
        // The row is done: its parity goes now, before any page of the next row (a die
        // that failed mid-row can leave the last member position unused).
        if (l.par && l.par->row == ap.row) SubmitParity(l);
        ap.die = 0;
        ++ap.row;
      }
      // The last summary_pages positions of the LEB are left for its summary.
      if (ap.row >= P() || RemainingPositions(l, ap.row, ap.die) <= summary_pages) {
        CloseLeb(ap);
        continue;
      }
      *leb = l.index;
      *die = ap.die;
      *page = ap.row;
      ++ap.die;
      return true;
    }
  }
  // Page positions of `l` from (row, die) to its end, over its good dies.
  // Data page positions (not parity) of `l` from (row, die) to its end.
  uint32_t RemainingPositions(Leb& l, uint32_t row, uint32_t die) {
    uint32_t n = 0;
    for (uint32_t d = die; d < D(); ++d) n += DataPos(l, row, d);
    return n + (P() - row - 1) * DataDiesPerRow(l, l.par != nullptr);
  }
  // Sectors of data a LEB holds with `dies` usable dies: less a parity die per row (with
  // FlashBack) and its summary pages.
  uint64_t LebDataSectors(uint32_t dies) const {
    if (parity_on && dies < kMinStripeDies) return 0;  // not formed: it could not carry parity
    const uint32_t positions = (dies - (parity_on ? 1 : 0)) * P();
    return uint64_t{positions - std::min(positions, summary_pages)} * S();
  }
  uint32_t LebCapacity(const Leb& l) const {
    return static_cast<uint32_t>(LebDataSectors(l.good_dies()));
  }

  void OpenLeb(AppendPoint& ap, Leb& l) {
    f.lebs_.SetState(l, LebState::kOpen);
    ap.leb = &l;
    ap.row = ap.die = 0;
    l.open_seq = 0;
    l.close_seq = 0;
    l.gc_skip = false;
    l.trim_pages.clear();
    std::fill(l.valid_bits.begin(), l.valid_bits.end(), 0);
    l.valid = 0;
    l.capacity = LebCapacity(l);
    l.summary_due = false;
    l.unprotected = false;

    if (summary_pages != 0) l.summary.assign(uint64_t{D()} * P() * (1 + S()), 0);
    l.par.reset();
    if (parity_on) {
      l.par = std::make_unique<RowParity>();
      l.par->data.assign(f.geo_.page_data_bytes, 0);
      l.par->meta.assign(f::MetaBytes(S()), 0);
      l.par->pdie.assign(P(), RowParity::kUndecided);
    }
    if (l.needs_erase) {
      // Erases queue ahead of this LEB's programs on each die (dies run commands in order).
      auto left = std::make_shared<std::pair<uint32_t, bool>>(0, true);  // erases, all ok
      for (uint32_t d = 0; d < D(); ++d) {
        if (!l.good[d]) continue;
        ++l.inflight;
        ++left->first;
        f.pipe_.Erase(d, l.index, [this, &l, d, left](const Completion& c) {
          --l.inflight;
          if (!c.ok()) left->second = false;
          if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(d);
          if (!c.ok() && c.status != FlashStatus::kAborted) {
            ++f.stats_.erase_failures;
            if (c.status == FlashStatus::kEraseFail) NoteDieError(d, l.index);
            l.good[d] = 0;  // its programs fail too and are rewritten elsewhere
            UpdateMode();
          }
          if (--left->first == 0 && left->second) l.stale_seq = 0;  // nothing stale left
          MaybeWriteSummary(l);  // closed early (a checkpoint) before its erases were done
          CheckCheckpoint();
        });
      }
      ++l.erase_count;
      ++f.stats_.lebs_erased;
      l.needs_erase = false;
      wear_check_due = true;
    }
    MaybeGroom();
  }
  void CloseLeb(AppendPoint& ap) {
    Leb& l = *ap.leb;
    l.close_seq = f.next_seq_;
    l.needs_erase = true;
    l.summary_from = std::min(ap.row, P()) * D() + (ap.row < P() ? ap.die : 0);
    l.summary_due = !l.summary.empty();
    f.lebs_.SetState(l, LebState::kClosed);
    ap.leb = nullptr;
    if (l.unprotected) Reprotect(l);  // formed with a die that has failed since
    if (l.summary_due) {
      MaybeWriteSummary(l);
    } else {
      FinishParity(l);
    }
  }

  // Writes the summary of a closed LEB once every other page of it is done, so a summary
  // on flash vouches for the pages it lists. If its positions are no longer usable (a
  // die failed) there is none, and a scan reads the LEB page by page.
  void MaybeWriteSummary(Leb& l) {
    if (!l.summary_due || l.inflight != 0) return;
    l.summary_due = false;
    std::vector<uint64_t> grid;
    grid.swap(l.summary);
    if (device_lost) return FinishParity(l);
    std::vector<std::pair<uint32_t, uint32_t>> where;  // (die, page)
    for (uint32_t pos = l.summary_from; pos < P() * D() && where.size() < summary_pages; ++pos) {
      if (DataPos(l, pos / D(), pos % D())) where.emplace_back(pos % D(), pos / D());
    }
    if (where.size() < summary_pages) return FinishParity(l);
    f::SummaryHeader h{f::kSummaryMagic, l.index, D(), P(), S()};
    std::vector<uint8_t> bytes(uint64_t{summary_pages} * f.geo_.page_data_bytes, 0);
    std::memcpy(bytes.data(), &h, sizeof(h));
    std::memcpy(bytes.data() + sizeof(h), grid.data(), grid.size() * 8);
    for (uint32_t j = 0; j < summary_pages; ++j) {
      PageBuf* b = MakeBuf(l.index, where[j].first, where[j].second, f::PageType::kSummary);
      std::memcpy(b->data.data(), bytes.data() + uint64_t{j} * f.geo_.page_data_bytes,
                  f.geo_.page_data_bytes);
      b->lbas[0] = j | (uint64_t{summary_pages} << 32);
      ++f.stats_.summary_pages;
      Submit(b);
    }
    FinishParity(l);
  }

  PageBuf* NewPage(AppendPoint& ap, f::PageType type) {
    uint32_t leb, die, page;
    if (!NextPosition(ap, &leb, &die, &page)) return nullptr;
    return MakeBuf(leb, die, page, type);
  }
  PageBuf* MakeBuf(uint32_t leb, uint32_t die, uint32_t page, f::PageType type) {
    auto owned = std::make_unique<PageBuf>();
    PageBuf* b = owned.get();
    pages.emplace(b, std::move(owned));
    b->leb = leb;
    b->die = die;
    b->page = page;
    b->type = type;
    b->data.assign(f.geo_.page_data_bytes, 0);
    b->meta.assign(f.geo_.meta_bytes_per_page(), 0xFF);
    b->lbas.assign(S(), f::kNoLba);
    return b;
  }

  // Appends one sector to `ap`. Null when no page position could be had.
  // Returns the page the sector went into (submitted already if it filled), or null.
  PageBuf* AppendSector(AppendPoint& ap, uint64_t lba, const uint8_t* src, WriteCtx* ctx,
                        Leb* src_victim, Psa prev = kUnmapped - 2) {
    if (ap.open != nullptr && ap.open->type != f::PageType::kData) SubmitOpen(ap);
    if (ap.open == nullptr) {
      ap.open = NewPage(ap, f::PageType::kData);
      if (ap.open == nullptr) return nullptr;
      PageBuf* b = ap.open;
      // Groomer pages are never padded on idle: they fill, or are pushed out when a
      // victim must be released. Host pages are programmed when nothing more is coming.
      if (!ap.gc) {
        auto flush = [this, &ap, b] {
          if (ap.open == b) SubmitOpen(ap);
        };
        if (open_writes > 1 || pending.size() > 1) {
          After(f.opts_.pad_delay_ns, flush);
        } else {
          Post(flush);
        }
      }
    }
    PageBuf* b = ap.open;
    if (lba == TraceLba()) {
      fmt::print(stderr, "trace t={} append gc={} was psa {} -> leb {} die {} page {} slot {} data {:02x}{:02x}\n",
                 f.clock_.Now(), ap.gc, f.map_.Get(lba), b->leb, b->die, b->page, b->used, src[0], src[1]);
    }
    const uint32_t slot = b->used++;
    std::memcpy(b->data.data() + uint64_t{slot} * f.sector_bytes_, src, f.sector_bytes_);
    b->lbas[slot] = lba;
    if (ctx != nullptr) {
      ++ctx->remaining;
      b->waiters.push_back(ctx);
    }
    if (src_victim != nullptr && b->victim == nullptr) {
      b->victim = src_victim;
      ++victim_refs;
    }
    if (b->prev.size() != S()) b->prev.assign(S(), kKeepMapping);
    Psa before = prev == kUnmapped - 2 ? f.map_.Get(lba) : prev;
    // A copy still in an open buffer is killed when the map moves: go back past it.
    for (AppendPoint* a : {&host, &gcap}) {
      PageBuf* o = a->open;
      if (o != nullptr && o != b && before < kKeepMapping && o->leb == LebOf(before) &&
          o->die == DieOf(before) && o->page == PageOf(before)) {
        before = SlotOf(before) < o->prev.size() ? o->prev[SlotOf(before)] : kKeepMapping;
      }
    }
    if (before < kKeepMapping && b->leb == LebOf(before) && b->die == DieOf(before) &&
        b->page == PageOf(before)) {
      before = SlotOf(before) < b->prev.size() ? b->prev[SlotOf(before)] : kKeepMapping;
    }
    b->prev[slot] = before;
    Pin(b, b->prev[slot]);
    Remap(lba, MakePsa(b->leb, b->die, b->page, slot));
    if (b->used == S()) SubmitOpen(ap);
    return b;
  }

  void SubmitOpen(AppendPoint& ap) {
    PageBuf* b = ap.open;
    ap.open = nullptr;
    if (b == nullptr) return;
    for (uint32_t s = b->used; s < S(); ++s) b->lbas[s] = f::kNoLba;
    f.stats_.pad_sectors += S() - b->used;
    Submit(b);
  }

  void Submit(PageBuf* b) {
    Leb& l = f.lebs_.leb(b->leb);
    // A row that ended short of its last member (a die left the LEB after the row began,
    // and the summary written at close goes on in the next row) gets its parity page
    // first: its members would otherwise wait for cover for ever, and each die's pages
    // must be programmed in order.
    if (l.par && b->type != f::PageType::kParity && l.par->row != UINT32_MAX &&
        l.par->row != b->page && !l.par->submitted) {
      SubmitParity(l);
    }
    b->seq = f.next_seq_++;
    b->submitted = true;
    if (b->group && b->attempt == b->group->attempts) {
      b->group->members.emplace_back(b->seq, MakePsa(b->leb, b->die, b->page, 0));
    }
    if (l.open_seq == 0) l.open_seq = b->seq;
    // Header.
    auto* h = reinterpret_cast<f::PageHeader*>(b->meta.data());
    h->bad_block_marker = 0xFF;
    h->type = static_cast<uint8_t>(b->type);
    h->version_major = f::kVersionMajor;
    h->sectors = static_cast<uint8_t>(S());
    h->epoch = f.epoch_;
    h->seq = b->seq;
    auto* e = reinterpret_cast<f::SectorEntry*>(b->meta.data() + sizeof(f::PageHeader));
    if (b->type == f::PageType::kData || b->type == f::PageType::kAtomicData) {
      for (uint32_t s = 0; s < S(); ++s) {
        e[s].lba = b->lbas[s];
        e[s].crc = Crc32c(b->data.data() + uint64_t{s} * f.sector_bytes_, f.sector_bytes_);
      }
    } else if (b->type == f::PageType::kTrim) {
      std::memcpy(b->data.data(), b->trims.data(), b->trims.size() * sizeof(f::TrimRecord));
      for (uint32_t s = 0; s < S(); ++s) e[s] = {f::kNoLba, 0};
      e[0].lba = b->trims.size();
      e[0].crc = Crc32c(b->data.data(), b->data.size());
      l.trim_pages.push_back(b->page * D() + b->die);
      ++f.stats_.trim_pages;
    } else if (b->type == f::PageType::kSummary) {
      for (uint32_t s = 0; s < S(); ++s) e[s] = {f::kNoLba, 0};
      e[0].lba = b->lbas[0];
      e[0].crc = Crc32c(b->data.data(), b->data.size());
    }
    if (!l.summary.empty() && b->type != f::PageType::kSummary) {
      uint64_t* ent = &l.summary[(uint64_t{b->page} * D() + b->die) * (1 + S())];
      ent[0] = b->seq | (uint64_t{static_cast<uint8_t>(b->type)} << f::kSummaryTypeShift);
      for (uint32_t s = 0; s < S(); ++s) {
        ent[1 + s] = b->type == f::PageType::kData || b->type == f::PageType::kAtomicData
                         ? b->lbas[s] : f::kNoLba;
      }
    }
    if (b->type == f::PageType::kParity) {
      FillParityMeta(b->meta.data(), b->seq, b->lbas[0], b->pmeta);
    } else {
      const std::size_t hdr = f::MetaBytes(S()) - 4;
      const uint32_t crc = Crc32c(b->meta.data(), hdr);
      std::memcpy(b->meta.data() + hdr, &crc, 4);
    }
    if (Traced(b)) {
      fmt::print(stderr, "trace t={} submit leb {} die {} page {} seq {} good dies {}\n", f.clock_.Now(),
                 b->leb, b->die, b->page, b->seq, l.good_dies());
    }
    ++l.inflight;
    inflight_seqs.insert(b->seq);
    ++f.stats_.pages_programmed;
    // A parity page is fenced: accepted only once every member before it is, so a
    // durable parity page always has its members in the buffer or on flash.
    f.pipe_.Program({{b->die, b->leb, b->page}, b->data.data(), b->meta.data(),
                     b->type == f::PageType::kParity},
                    [this, b](const Completion&) { OnAccepted(b); },
                    [this, b](const Completion& c) { OnDone(b, c); });
    if (l.par && b->type != f::PageType::kParity) {
      const uint32_t pd = RowParityDie(l, b->page);
      // A member is covered once a durable parity includes it; a row without a parity
      // page (narrow LEB, failed parity die, parity already written at shutdown) cannot
      // be covered and is taken as it is.
      if (pd != kNoDie && l.good[pd] && !die_failed[pd] &&
          !(l.par->row == b->page && l.par->submitted)) {
        b->covered = false;
        RowCover& rc = covers[{l.index, b->page}];
        rc.pd = pd;
        rc.waiting.push_back(b);
      }
      AccumulateParity(l, b);
      if (UseStages()) {
        if (!b->covered) ScheduleStage();
      } else {
        ScheduleRowProtection(l, b->page);
      }
    }
  }

  // If the row stays part-written (no more pages for it), protect it with a partial
  // parity page (opts.partial_parity_delay_ns).
  void ScheduleRowProtection(Leb& l, uint32_t row) {
    if (!l.par || l.par->submitted || f.opts_.partial_parity_delay_ns == 0) return;
    const uint64_t mask = l.par->mask;
    const uint32_t leb = l.index;
    After(f.opts_.partial_parity_delay_ns, [this, leb, row, mask] {
      for (AppendPoint* ap : {&host, &gcap}) {
        if (ap->leb != nullptr && ap->leb->index == leb) ProtectPartialRow(*ap, row, mask);
      }
    });
  }
  void ProtectPartialRow(AppendPoint& ap, uint32_t row, uint64_t mask) {
    Leb& l = *ap.leb;
    if (&ap == &gcap && victim != nullptr && l.par && l.par->row == row && !l.par->submitted &&
        (victim_cursor < P() * D() || victim_reads > 0)) {
      // The groomer is still moving data into this row: look again later rather than
      // spend a position on a partial parity page now.
      return ScheduleRowProtection(l, row);
    }
    if (device_lost || !l.par || l.par->submitted || l.par->row != row || l.par->mask != mask ||
        ap.open != nullptr || ap.row != row || l.state != LebState::kOpen) {
      return;  // the row moved on, or a page for it is being filled
    }
    // The next position must still be in this row, and not the last data position (that
    // one completes the row and its parity follows on its own).
    uint32_t next = ap.die;
    while (next < D() && !DataPos(l, row, next)) ++next;
    if (next >= D()) return;
    uint32_t leb, die, page;
    if (IsLastDataPos(l, row, next) || RemainingPositions(l, row, next) <= summary_pages + 1) {
      // No room for a partial parity page before the row (or the LEB) ends: a padding
      // page in the next position moves it on, and the row's parity page follows as the
      // row completes (or the LEB closes). Without it a lone writer would wait for cover
      // until someone else wrote.
      if (!NextPosition(ap, &leb, &die, &page)) return;
      PageBuf* pad = MakeBuf(leb, die, page, f::PageType::kData);
      f.stats_.pad_sectors += S();
      Submit(pad);
      return;
    }
    if (!NextPosition(ap, &leb, &die, &page)) return;
    PageBuf* b = MakeBuf(leb, die, page, f::PageType::kParity);
    b->data = l.par->data;
    b->pmeta = l.par->meta;
    b->lbas[0] = l.par->mask;
    ++f.stats_.parity_pages;
    ++f.stats_.partial_parity_pages;
    Submit(b);
  }

  void Ack(WriteCtx* ctx) {
    if (--ctx->remaining == 0) {
      --open_writes;
      Done d = std::move(ctx->done);
      Status s = ctx->status;
      delete ctx;
      d(s);
    }
  }

  // In the protected buffer: durable while PLP is healthy. Non-FUA writes are acknowledged
  // now if the page is covered (see CoverRow); FUA waits for the page to be on flash.
  void OnAccepted(PageBuf* b) {
    if (!PlpDurableOnAccept()) return;
    b->accepted = true;
    if (b->type == f::PageType::kParity) {
      CoverRow(b->leb, b->page, b->lbas[0], b->final_parity, b->final_parity);
    }
    Progress(b);
  }

  void Pin(PageBuf* b, Psa p) {
    if (p >= kKeepMapping) return;
    const uint32_t l = LebOf(p);
    if (std::find(b->pinned.begin(), b->pinned.end(), l) != b->pinned.end()) return;
    b->pinned.push_back(l);
    ++f.lebs_.leb(l).pins;
  }
  void UnpinLeb(uint32_t l) {
    Leb& x = f.lebs_.leb(l);
    if (x.pins > 0 && --x.pins == 0 && victim == &x) MaybeFinishVictim();
  }
  // The page is safe (or resolved): its previous places are no longer kept, and a later
  // failure of it keeps the mapping (a failed member stays in its row's parity).
  void Unpin(PageBuf* b) {
    std::fill(b->prev.begin(), b->prev.end(), kKeepMapping);
    std::vector<uint32_t> pinned;
    pinned.swap(b->pinned);
    for (uint32_t l : pinned) UnpinLeb(l);
  }
  // Page `b` will never be stored: sectors whose newest copy it held go back to where
  // they were before it, and later copies that would go back to `b` go back there too.
  void RevertPage(PageBuf* b) {
    if (b->type != f::PageType::kData) return;
    for (uint32_t s = 0; s < S() && s < b->prev.size(); ++s) {
      const uint64_t lba = b->lbas[s];
      if (lba == f::kNoLba || b->prev[s] == kKeepMapping) continue;
      const Psa here = MakePsa(b->leb, b->die, b->page, s);
      if (f.map_.Get(lba) == here) Remap(lba, b->prev[s]);
      for (auto& [q, owned] : pages) {
        if (q == b) continue;
        for (Psa& pv : q->prev) {
          if (pv != here) continue;
          pv = b->prev[s];
          Pin(q, pv);
        }
      }
      for (RewriteJob& j : rewrite_backlog) {
        if (j.prev != here) continue;
        // The job's pin moves with its place to go back to.
        if (j.pinned != UINT32_MAX) UnpinLeb(j.pinned);
        j.pinned = UINT32_MAX;
        j.prev = b->prev[s];
        if (j.prev < kKeepMapping) {
          j.pinned = LebOf(j.prev);
          ++f.lebs_.leb(j.pinned).pins;
        }
      }
    }
  }
  void MarkDurable(PageBuf* b) {
    if (b->durable) return;
    b->durable = true;
    Unpin(b);
    inflight_seqs.erase(b->seq);
    if (!failed_trims.empty()) {
      uint64_t newest = 0;
      for (const auto& t : failed_trims) newest = std::max(newest, t.seq);
      if (inflight_seqs.empty() || *inflight_seqs.begin() > newest) failed_trims.clear();
    }
    if (b->victim != nullptr) {
      --victim_refs;
      b->victim = nullptr;
      MaybeFinishVictim();
    }
    CheckFlushWaiters();
  }

  void OnDone(PageBuf* b, const Completion& c) {
    Leb& l = f.lebs_.leb(b->leb);
    --l.inflight;
    if (c.status == FlashStatus::kAborted) {
      // Power lost or the die was reset: nothing can be rewritten now. Unacknowledged
      // writes fail; acknowledged ones are the controller's (PLP) or recovery's business.
      DeviceLost();
      Uncover(b);
      FailWaiters(b);
      pages.erase(b);
      FailUncovered();
    } else if (!c.ok()) {
      ++f.stats_.program_failures;
      Uncover(b);
      if (c.status == FlashStatus::kProgramFail) NoteDieError(b->die, b->leb);
      if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(b->die);
      l.good[b->die] = 0;
      UpdateMode();
      // A failed member stays in its row's parity: until its rewritten sectors are
      // durable, the stage or parity page holding its XOR is what brings its acknowledged
      // data back after a power cut. (The price: a second fault in that row cannot be
      // rebuilt, the double-failure case.)
      if (b->type == f::PageType::kParity) {
        Logger("ftl")->warn("parity program failed leb={} die={} page={}: that row is unprotected",
                            b->leb, b->die, b->page);
        MarkDurable(b);
        // Its members are as safe as they will get (a stage may still hold the row).
        if (b->final_parity) CoverRow(b->leb, b->page, ~uint64_t{0}, true);
      } else if (b->type == f::PageType::kSummary) {
        // The LEB simply has no summary: a scan reads it page by page.
        Logger("ftl")->warn("summary program failed leb={} die={} page={} status={}", b->leb,
                            b->die, b->page, nand::FlashStatusName(c.status));
        MarkDurable(b);
      } else if (b->type == f::PageType::kAtomicData &&
                 !(b->group && b->group->committed && b->attempt == b->group->attempts)) {
        // Not committed: the attempt is void (the batch is written again); its sectors
        // were never mapped, so there is nothing to rewrite.
        Logger("ftl")->warn("program failed leb={} die={} page={} status={} in an atomic batch; "
                            "retrying the batch", b->leb, b->die, b->page,
                            nand::FlashStatusName(c.status));
        if (b->group && b->attempt == b->group->attempts) b->group->failed = true;
        FailWaiters(b);
      } else {
        Logger("ftl")->warn("program failed leb={} die={} page={} status={}; rewriting", b->leb,
                            b->die, b->page, nand::FlashStatusName(c.status));
        Rewrite(b);
      }
      pages.erase(b);
    } else {
      b->flash_done = true;
      if (b->type == f::PageType::kParity && !b->accepted) {
        CoverRow(b->leb, b->page, b->lbas[0], b->final_parity, b->final_parity);
      }
      Progress(b);  // frees `b` unless it still waits for cover
    }
    MaybeWriteSummary(l);
    MaybeGroom();
    if (shutting_down) CheckShutdown();
    CheckCheckpoint();
  }

  // A failed page: its live sectors (and trim records) go to a new page. Writes not yet
  // acknowledged follow them.
  void Rewrite(PageBuf* b) {
    if (b->type == f::PageType::kTrim) {
      auto& tp = f.lebs_.leb(b->leb).trim_pages;
      tp.erase(std::remove(tp.begin(), tp.end(), b->page * D() + b->die), tp.end());
      if (!RetryTrim(b->trims, b->waiters)) {
        // Held while a checkpoint has every LEB closed: written once it is done.
        if (ckpt_quiesce && !device_lost) {
          deferred_trims.push_back({b->trims, std::move(b->waiters)});
          b->waiters.clear();
          MarkDurable(b);
          return;
        }
        return FailWaiters(b);
      }
      b->waiters.clear();
      MarkDurable(b);
      return;
    }
    AppendPoint& ap = b->victim != nullptr ? gcap : host;
    std::vector<WriteCtx*> waiters = std::move(b->waiters);
    b->waiters.clear();
    std::vector<PageBuf*> targets;  // pages now holding the rewritten sectors
    for (uint32_t s = 0; s < S(); ++s) {
      const uint64_t lba = b->lbas[s];
      if (lba == f::kNoLba) continue;
      if (f.map_.Get(lba) != MakePsa(b->leb, b->die, b->page, s)) {
        if (f.map_.Get(lba) == kUnmapped && InFailedTrim(lba, b->seq)) {
          // Trimmed after this write, and that trim never reached flash: neither did
          // this write.
          for (WriteCtx* w : waiters) {
            w->status = Status::IOError("write could not be stored, and the trim after it failed");
          }
        }
        AddSupersedingHolders(lba, b, targets);
        // Or a trim held back by a checkpoint: the writes wait for it to be stored.
        if (f.map_.Get(lba) == kUnmapped) {
          for (DeferredTrim& t : deferred_trims) {
            bool hit = false;
            for (const auto& r : t.trims) hit = hit || TrimCovers(r, lba);
            if (!hit) continue;
            for (WriteCtx* w : waiters) {
              if (std::find(t.waiters.begin(), t.waiters.end(), w) != t.waiters.end()) continue;
              ++w->remaining;
              t.waiters.push_back(w);
            }
          }
        }
        // The newer state may itself be waiting for room to be rewritten.
        for (RewriteJob& j : rewrite_backlog) {
          if (j.lba != lba || f.map_.Get(lba) != j.from) continue;
          for (WriteCtx* w : waiters) {
            ++w->remaining;
            j.waiters.push_back(w);
          }
        }
        continue;
      }
      const uint8_t* src = b->data.data() + uint64_t{s} * f.sector_bytes_;
      // (Host sectors do not take the groomer's reserve: it must stay free for the
      // groomer to make room, for them too.)
      const Psa before = s < b->prev.size() ? b->prev[s] : kKeepMapping;
      PageBuf* t = AppendSector(ap, lba, src, nullptr, b->victim, before);
      if (t == nullptr) {
        // No page anywhere now: the sector waits in host memory (its writes unanswered,
        // a groomer victim it came from held) until space appears.
        Logger("ftl")->warn("no room to rewrite lba={} after a program failure; it waits for space", lba);
        RewriteJob job{lba, MakePsa(b->leb, b->die, b->page, s),
                       std::vector<uint8_t>(src, src + f.sector_bytes_), {}, b->victim, before};
        if (before < kKeepMapping) {
          job.pinned = LebOf(before);
          ++f.lebs_.leb(job.pinned).pins;
        }
        if (job.victim != nullptr) ++victim_refs;
        for (WriteCtx* w : waiters) {
          ++w->remaining;
          job.waiters.push_back(w);
        }
        rewrite_backlog.push_back(std::move(job));
      } else if (std::find(targets.begin(), targets.end(), t) == targets.end()) {
        targets.push_back(t);
      }
    }
    // The waiters now wait for every page holding rewritten (or superseding) sectors (one
    // may have filled and gone already: it still owes its acknowledgement), then drop
    // their hold on `b`.
    for (WriteCtx* w : waiters) {
      for (PageBuf* t : targets) {
        ++w->remaining;
        t->waiters.push_back(w);
      }
    }
    for (AppendPoint* a : {&host, &gcap}) {
      if (a->open != nullptr && std::find(targets.begin(), targets.end(), a->open) != targets.end()) {
        SubmitOpen(*a);
      }
    }
    for (WriteCtx* w : waiters) Ack(w);
    MarkDurable(b);
  }

  // Puts trim records `trims` (of a page that failed) on a new page, its writes waiting
  // there; false when no page position can be had now.
  bool RetryTrim(const std::vector<f::TrimRecord>& trims, std::vector<WriteCtx*>& waiters) {
    PageBuf* nb = NewPage(host, f::PageType::kTrim);
    if (nb == nullptr) nb = NewPage(gcap, f::PageType::kTrim);
    if (nb == nullptr) return false;
    nb->trims = trims;
    nb->waiters = std::move(waiters);
    waiters.clear();
    Submit(nb);
    return true;
  }
  struct DeferredTrim {
    std::vector<f::TrimRecord> trims;
    std::vector<WriteCtx*> waiters;
  };
  std::vector<DeferredTrim> deferred_trims;  // failed trim pages held by a checkpoint
  void RunDeferredTrims() {
    std::vector<DeferredTrim> todo;
    todo.swap(deferred_trims);
    for (DeferredTrim& t : todo) {
      if (device_lost || !RetryTrim(t.trims, t.waiters)) {
        for (WriteCtx* c : t.waiters) {
          c->status = Status::IOError("trim could not be stored (power lost or no room)");
          Ack(c);
        }
      }
    }
  }
  // Trim records whose page failed and could not be written again: until every page
  // older than them is done, a failed older write of those sectors (superseded by the
  // trim in the map, with nothing durable after it) must fail too, not be acknowledged.
  std::vector<f::TrimRecord> failed_trims;
  bool InFailedTrim(uint64_t lba, uint64_t after_seq) const {
    for (const auto& t : failed_trims) {
      if (TrimCovers(t, lba) && t.seq > after_seq) return true;
    }
    return false;
  }

  // `lba` was written again or trimmed after a write now being rewritten: that write's
  // acknowledgement must wait for the newer state to be durable, or a power cut could
  // leave the sector older than what was acknowledged. Adds the pages holding the newer
  // state that are not durable yet.
  void AddSupersedingHolders(uint64_t lba, PageBuf* except, std::vector<PageBuf*>& out) {
    const Psa cur = f.map_.Get(lba);
    for (auto& [h, own] : pages) {
      if (h == except || h->durable) continue;
      bool holds = false;
      if (cur != kUnmapped) {
        holds = (h->type == f::PageType::kData || h->type == f::PageType::kAtomicData) &&
                h->leb == LebOf(cur) && h->die == DieOf(cur) && h->page == PageOf(cur);
      } else if (h->type == f::PageType::kTrim) {
        for (const auto& t : h->trims) holds = holds || TrimCovers(t, lba);
      }
      if (holds && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
    }
  }

  // Sectors of failed pages that found no page when they were rewritten, oldest first.
  struct RewriteJob {
    uint64_t lba;
    Psa from;  // the failed page's slot the map points at while the job waits
    std::vector<uint8_t> data;
    std::vector<WriteCtx*> waiters;  // each holds a reference until the sector has a page
    Leb* victim;                     // a groomer victim it came from, held until then
    Psa prev = kKeepMapping;         // where the sector goes back to if it never finds room
    uint32_t pinned = UINT32_MAX;    // the LEB of `prev`, pinned while the job waits
  };
  std::deque<RewriteJob> rewrite_backlog;
  // Live sectors of page (leb, die, page), read back, join the rewrite backlog.
  void QueueRewrite(uint32_t leb, uint32_t die, uint32_t page, const std::vector<uint8_t>& data,
                    const std::vector<uint8_t>& meta) {
    ForEachLiveSector(leb, die, page, data, meta, [&](uint64_t lba, Psa p, const uint8_t* src) {
      rewrite_backlog.push_back({lba, p, std::vector<uint8_t>(src, src + f.sector_bytes_), {}, nullptr});
      return true;
    });
  }
  // Gives backlogged sectors their pages; false while some still find none.
  bool DrainRewrites() {
    bool any = false;
    while (!rewrite_backlog.empty()) {
      RewriteJob& job = rewrite_backlog.front();
      if (f.map_.Get(job.lba) != job.from) {
        // Written again or trimmed since: the job's copy is stale; its writes wait for
        // the newer state instead.
        std::vector<PageBuf*> holders;
        AddSupersedingHolders(job.lba, nullptr, holders);
        for (WriteCtx* w : job.waiters) {
          for (PageBuf* h : holders) {
            ++w->remaining;
            h->waiters.push_back(w);
          }
        }
      } else {
        PageBuf* t = AppendSector(job.victim != nullptr ? gcap : host, job.lba, job.data.data(),
                                  nullptr, job.victim, job.prev);
        if (t == nullptr) return false;
        any = true;
        for (WriteCtx* w : job.waiters) {
          ++w->remaining;
          t->waiters.push_back(w);
        }
      }
      std::vector<WriteCtx*> waiters = std::move(job.waiters);
      Leb* v = job.victim;
      const uint32_t pinned = job.pinned;  // the new page pins `prev` itself now
      rewrite_backlog.pop_front();
      if (pinned != UINT32_MAX) UnpinLeb(pinned);
      for (WriteCtx* w : waiters) Ack(w);
      if (v != nullptr) {
        --victim_refs;
        MaybeFinishVictim();
      }
    }
    if (any) {
      SubmitOpen(host);
      SubmitOpen(gcap);
    }
    RunBacklogWaiters();
    return true;
  }
  void RunBacklogWaiters() {
    if (backlog_waiters.empty()) return;
    if (!rewrite_backlog.empty()) {
      Logger("ftl")->warn("{} sector(s) wait for room to be rewritten under parity", rewrite_backlog.size());
    }
    std::vector<Function<void()>> w;
    w.swap(backlog_waiters);
    Post([w = std::move(w)]() mutable {
      for (auto& fn : w) fn();
    });
  }

  void FailWaiters(PageBuf* b) {
    if (b->type == f::PageType::kTrim && !device_lost) {
      failed_trims.insert(failed_trims.end(), b->trims.begin(), b->trims.end());
    }
    RevertPage(b);
    for (WriteCtx* c : b->waiters) {
      c->status = Status::IOError("write could not be stored (power lost or no room)");
      Ack(c);
    }
    b->waiters.clear();
    MarkDurable(b);
  }

  // --- host work ---
  void RunPending() {
    if (device_lost) {
      for (RewriteJob& job : rewrite_backlog) {
        if (job.pinned != UINT32_MAX) UnpinLeb(job.pinned);
        for (WriteCtx* w : job.waiters) {
          w->status = Status::IOError("device lost (power cut)");
          Ack(w);
        }
      }
      rewrite_backlog.clear();
      while (!pending.empty()) {
        Pending p = std::move(pending.front());
        pending.pop_front();
        if (p.kind == Pending::kWrite) {
          p.ctx->status = Status::IOError("device lost (power cut)");
          Ack(p.ctx);
        } else if (p.kind == Pending::kTrim) {
          p.trim_done(Status::IOError("device lost (power cut)"));
        } else if (p.kind == Pending::kAtomic && p.group->members_ctx != nullptr) {
          // Its members' answer (an error now) finishes the batch.
          WriteCtx* c = p.group->members_ctx;
          c->status = Status::IOError("device lost (power cut)");
          Ack(c);
        } else {
          FinishGroup(p.group, Status::IOError("device lost (power cut)"));
        }
      }
      return;
    }
    if (!DrainRewrites()) {
      MaybeGroom();
      return;
    }
    while (!pending.empty()) {
      Pending& p = pending.front();
      if (p.kind == Pending::kWrite) {
        while (p.done_sectors < p.count) {
          if (Paced() && credits < 1) {
            ++f.stats_.paced_waits;
            return;  // resumed as the groomer relocates
          }
          if (Paced()) credits -= 1;
          if (!AppendSector(host, p.lba + p.done_sectors,
                            p.data + p.done_sectors * f.sector_bytes_, p.ctx, nullptr)) {
            MaybeGroom();
            return;
          }
          ++p.done_sectors;
        }
        WriteCtx* ctx = p.ctx;
        pending.pop_front();
        Ack(ctx);  // drop the "still appending" reference
      } else if (p.kind == Pending::kAtomic) {
        std::shared_ptr<AtomicGroup> g = p.group;
        if (!AppendAtomic(g)) {
          MaybeGroom();
          return;
        }
        pending.pop_front();
        WriteCtx* c = g->members_ctx;
        Ack(c);  // drop the "still appending" reference (answers through a Post)
      } else if (p.kind == Pending::kCommit) {
        std::shared_ptr<AtomicGroup> g = p.group;
        if (g->failed) {
          pending.pop_front();
          RetryGroup(g, Status::IOError("a page of the atomic batch could not be stored"));
          continue;
        }
        if (!CommitAtomic(g)) {
          MaybeGroom();
          return;
        }
        pending.pop_front();
      } else {
        if (!DoTrim(p.lba, p.count, p.trim_done)) {
          MaybeGroom();
          return;
        }
        pending.pop_front();
      }
    }
  }

  // --- atomic batches ---
  // Records one trim page holds, and so the most records one commit may need.
  uint32_t RecordsPerPage() const {
    return static_cast<uint32_t>(f.geo_.page_data_bytes / sizeof(f::TrimRecord));
  }
  static constexpr uint32_t kAtomicAttempts = 4;  // a batch whose pages keep failing fails

  // Appends the rest of `g`'s sectors to kAtomicData pages (never shared with other
  // data). False while no page position can be had (resumed by RunPending).
  bool AppendAtomic(const std::shared_ptr<AtomicGroup>& g) {
    if (g->members_ctx == nullptr) {  // a new attempt
      auto* ctx = new WriteCtx();
      ctx->done = [this, g](Status s) { OnMembersDone(g, s); };
      ++open_writes;
      g->members_ctx = ctx;
    }
    while (g->op < g->ops.size()) {
      const AtomicOp& o = g->ops[g->op];
      if (o.kind == AtomicOp::kWrite) {
        while (g->in_op < o.count) {
          if (Paced() && credits < 1) {
            ++f.stats_.paced_waits;
            return false;
          }
          if (Paced()) credits -= 1;
          if (!AppendAtomicSector(g, o.lba + g->in_op, o.data + g->in_op * f.sector_bytes_)) {
            return false;
          }
          ++g->in_op;
        }
      }
      ++g->op;
      g->in_op = 0;
    }
    if (host.open != nullptr && host.open->group == g) SubmitOpen(host);
    return true;
  }
  bool AppendAtomicSector(const std::shared_ptr<AtomicGroup>& g, uint64_t lba, const uint8_t* src) {
    AppendPoint& ap = host;
    if (ap.open != nullptr && ap.open->group != g) SubmitOpen(ap);
    if (ap.open == nullptr) {
      PageBuf* b = NewPage(ap, f::PageType::kAtomicData);
      if (b == nullptr) return false;
      ap.open = b;
      b->group = g;
      b->attempt = g->attempts;
      ++g->members_ctx->remaining;
      b->waiters.push_back(g->members_ctx);
      if (std::find(g->pinned.begin(), g->pinned.end(), b->leb) == g->pinned.end()) {
        g->pinned.push_back(b->leb);
        ++f.lebs_.leb(b->leb).pins;
        ++f.lebs_.leb(b->leb).atomic_pins;
      }
    }
    PageBuf* b = ap.open;
    const uint32_t slot = b->used++;
    std::memcpy(b->data.data() + uint64_t{slot} * f.sector_bytes_, src, f.sector_bytes_);
    b->lbas[slot] = lba;
    g->placed.emplace_back(lba, MakePsa(b->leb, b->die, b->page, slot));
    if (lba == TraceLba()) {
      fmt::print(stderr, "trace t={} atomic append -> leb {} die {} page {} slot {}\n", f.clock_.Now(),
                 b->leb, b->die, b->page, slot);
    }
    if (b->used == S()) SubmitOpen(ap);
    return true;
  }
  // Every member page is durable (or one failed): commit, or try the batch again.
  void OnMembersDone(const std::shared_ptr<AtomicGroup>& g, Status s) {
    g->members_ctx = nullptr;
    Post([this, g, s] {
      if (!s.ok() || g->failed) {
        RetryGroup(g, s.ok() ? Status::IOError("a page of the atomic batch could not be stored") : s);
      } else {
        pending.push_front({Pending::kCommit, 0, 0, nullptr, 0, nullptr, nullptr, g});
      }
      RunPending();
    });
  }
  // Voids this attempt (its pages stay on flash, named by no commit) and queues another,
  // unless the device is gone or the batch failed kAtomicAttempts times.
  void RetryGroup(const std::shared_ptr<AtomicGroup>& g, Status why) {
    g->members.clear();
    g->placed.clear();
    g->op = 0;
    g->in_op = 0;
    g->failed = false;
    ReleaseAtomicPins(*g);
    if (device_lost || ++g->attempts >= kAtomicAttempts) return FinishGroup(g, why);
    ++f.stats_.atomic_retries;
    Logger("ftl")->warn("atomic batch attempt {} failed ({}); writing it again", g->attempts,
                        why.ToString());
    pending.push_front({Pending::kAtomic, 0, 0, nullptr, 0, nullptr, nullptr, g});
  }
  // Writes the commit page: trims first, then the members, all at the page's seq; the
  // map changes in this one step, so readers see the whole batch or none of it. Until
  // the page is durable the LEBs of the replaced copies stay pinned, so after a power
  // cut that takes the commit the old contents are all still there.
  bool CommitAtomic(const std::shared_ptr<AtomicGroup>& g) {
    uint32_t records = static_cast<uint32_t>(g->members.size());
    for (const AtomicOp& o : g->ops) records += o.kind == AtomicOp::kTrim;
    if (records > RecordsPerPage()) {
      // The limits leave room for this; only pages split by rewrites can get here.
      RetryGroup(g, Status::IOError("the atomic batch took more pages than one commit can name"));
      return true;
    }
    // The commit must follow every page holding data it replaces (see DoTrim).
    SubmitOpen(host);
    SubmitOpen(gcap);
    PageBuf* b = NewPage(host, f::PageType::kTrim);
    if (b == nullptr) return false;
    const uint64_t cseq = f.next_seq_;  // the page's seq, assigned in Submit
    for (const AtomicOp& o : g->ops) {
      if (o.kind != AtomicOp::kTrim) continue;
      b->trims.push_back({o.lba, o.count, cseq});
      std::vector<uint64_t> mapped;
      f.map_.ForEachMappedIn(o.lba, o.count, [&](uint64_t l, Psa p) {
        mapped.push_back(l);
        Pin(b, p);
      });
      for (uint64_t l : mapped) Remap(l, kUnmapped);
      f.stats_.trim_sectors += o.count;
    }
    for (const auto& [mseq, mpsa] : g->members) {
      b->trims.push_back({mseq, f::kCommitFlag | mpsa, cseq});
    }
    for (const auto& [lba, psa] : g->placed) {
      if (lba == TraceLba()) {
        fmt::print(stderr, "trace t={} atomic commit seq {} maps it to leb {} die {} page {} (commit page leb {} die {} page {})\n",
                   f.clock_.Now(), cseq, LebOf(psa), DieOf(psa), PageOf(psa), b->leb, b->die, b->page);
      }
      Pin(b, f.map_.Get(lba));
      Remap(lba, psa);
    }
    g->committed = true;
    auto* ctx = new WriteCtx();
    ctx->fua = g->fua;
    ctx->done = [this, g](Status s) { FinishGroup(g, s); };
    ++open_writes;
    b->waiters.push_back(ctx);
    Submit(b);
    return true;
  }
  void ReleaseAtomicPins(AtomicGroup& g) {
    std::vector<uint32_t> pins;
    pins.swap(g.pinned);
    for (uint32_t l : pins) {
      --f.lebs_.leb(l).atomic_pins;
      UnpinLeb(l);
    }
  }
  void FinishGroup(const std::shared_ptr<AtomicGroup>& g, Status s) {
    if (g->finished) return;
    g->finished = true;
    ReleaseAtomicPins(*g);
    --atomic_inflight;
    Done d = std::move(g->done);
    d(s);
    // A checkpoint held back for this batch may go now: at the next turn, not inside the
    // page completion that answered the batch.
    Post([this] { CheckCheckpoint(); });
  }

  bool Paced() const {
    return victim != nullptr && credit_ratio > 0 &&
           f.lebs_.free_count() <= f.opts_.gc_start_free_lebs;
  }

  bool DoTrim(uint64_t lba, uint64_t count, Done& done) {
    // The trim page must follow every page already holding data for these sectors, so
    // the open pages go first.
    SubmitOpen(host);
    SubmitOpen(gcap);
    PageBuf* b = NewPage(host, f::PageType::kTrim);
    if (b == nullptr) return false;
    std::vector<uint64_t> mapped;
    f.map_.ForEachMappedIn(lba, count, [&](uint64_t l, Psa) { mapped.push_back(l); });
    for (uint64_t l : mapped) Remap(l, kUnmapped);
    f.stats_.trim_sectors += count;
    auto* ctx = new WriteCtx();
    ctx->remaining = 1;
    ctx->done = std::move(done);
    ++open_writes;
    b->waiters.push_back(ctx);
    // The record's own seq is the page's: assigned in Submit.
    b->trims.push_back({lba, count, f.next_seq_});
    if (TraceLba() - lba < count) fmt::print(stderr, "trace t={} trim {}+{} page leb {} die {} page {} seq {}\n", f.clock_.Now(), lba, count, b->leb, b->die, b->page, f.next_seq_);
    Submit(b);
    return true;
  }

  // --- flush ---
  void CheckFlushWaiters() {
    const uint64_t oldest = inflight_seqs.empty() ? UINT64_MAX : *inflight_seqs.begin();
    for (std::size_t i = 0; i < flush_waiters.size();) {
      if (oldest > flush_waiters[i].watermark) {
        Done d = std::move(flush_waiters[i].done);
        flush_waiters.erase(flush_waiters.begin() + static_cast<std::ptrdiff_t>(i));
        d(Status::Ok());
      } else {
        ++i;
      }
    }
  }

  // --- groomer ---
  void MaybeGroom() {
    if (victim != nullptr || shutting_down || device_lost || CheckpointWanted()) return;
    const bool need = f.lebs_.free_count() <= f.opts_.gc_start_free_lebs;
    // Rebuild goes first, but when space is short every other victim is groomed for
    // space, so host writes are not starved while rebuild victims (nearly full) free
    // little.
    Leb* v = (need && rebuild_turn_) ? nullptr : NextRebuildVictim();
    rebuild_turn_ = !rebuild_turn_;
    if (v != nullptr) {
      ++f.stats_.rebuild_lebs;
    } else if (!need && groom_waiters.empty()) {
      // Erase counts change only when a LEB is opened: look for wear work only then, not
      // on every page completion (the scan covers every LEB).
      if (!wear_check_due) return;
      wear_check_due = false;
      v = WearVictim();
      if (v == nullptr) return;
      ++f.stats_.wear_moves;
    } else {
      // Grooming must free more than it writes. A victim's room once freed is what it
      // offers when formed again (without failed dies or blocks gone bad since it was
      // opened: less than it held); its live data and the trim records it carries take
      // room again. On a pipe over-full after die failures a victim that gains nothing
      // would only churn, so the best victim that gains is taken. (Trim pages count only
      // then: most records need not be carried, and a pipe with all its dies has stale
      // room elsewhere.)
      const bool gain_check = groom_waiters.empty();
      const bool any_failed = AliveDies() != D();
      v = f.lebs_.PickVictim(f.opts_.victim_policy, f.next_seq_, [&](const Leb& c) {
        if (!gain_check) return true;
        uint32_t g = 0;
        for (uint32_t d = 0; d < D(); ++d) g += c.good[d] && !die_failed[d];
        const uint64_t refills = c.valid + (any_failed ? uint64_t{c.trim_pages.size()} * S() : 0);
        return refills < LebDataSectors(g);
      });
    }
    if (v == nullptr) {
      if (need) Post([this] { FailStuckWrites(); });
      for (auto& w : groom_waiters) w(Status::Ok());
      groom_waiters.clear();
      return;
    }
    victim = v;
    victim_held = false;
    carry_trims.clear();
    // Host sectors allowed per relocated sector: what this victim frees per sector moved.
    credit_ratio = v->valid == 0 ? 0.0
                                 : static_cast<double>(v->capacity - std::min(v->capacity, v->valid)) / v->valid;
    credits = std::min(credits, 4.0 * S() * D());
    victim_cursor = 0;
    victim_reads = 0;
    victim_refs = 0;
    f.lebs_.SetState(*v, LebState::kVictim);
    ++f.stats_.victims;
    GroomStep();
  }

  // Space is short and the groomer found nothing it can move (every LEB full of live
  // data, or held): nothing will free room, so host writes waiting for it fail with a
  // clear error instead of waiting for ever. (Trims need a page too.)
  // Sectors waiting in the rewrite backlog (their page failed, e.g. on a die that died)
  // stay mapped where they are: a failed page reads back through its row's parity. The
  // writes waiting on them fail: their data could not be stored again under parity.
  void FailBacklog(const char* why) {
    if (rewrite_backlog.empty()) return;
    Logger("ftl")->error("{}: {} sector(s) could not be rewritten under parity (no room)", why,
                         rewrite_backlog.size());
    std::vector<RewriteJob> jobs(std::make_move_iterator(rewrite_backlog.begin()),
                                 std::make_move_iterator(rewrite_backlog.end()));
    rewrite_backlog.clear();
    for (RewriteJob& job : jobs) {
      // The write never gets stored: the sector goes back to where it was before it.
      if (job.prev != kKeepMapping && f.map_.Get(job.lba) == job.from) Remap(job.lba, job.prev);
      if (job.pinned != UINT32_MAX) UnpinLeb(job.pinned);
      for (WriteCtx* w : job.waiters) {
        w->status = Status::IOError("no room to rewrite the sector after a program failure");
        Ack(w);
      }
      if (job.victim != nullptr) {
        --victim_refs;
        MaybeFinishVictim();
      }
    }
    RunBacklogWaiters();
  }

  void FailStuckWrites() {
    if (victim != nullptr || (pending.empty() && rewrite_backlog.empty()) || device_lost ||
        CheckpointWanted()) {
      return;
    }
    RunPending();
    if (victim != nullptr || (pending.empty() && rewrite_backlog.empty()) ||
        f.lebs_.free_count() > f.opts_.gc_reserve_lebs) {
      return;
    }
    FailBacklog("no room");
    if (pending.empty()) {
      if (shutting_down) CheckShutdown();
      return;
    }
    Logger("ftl")->error("no room: the groomer cannot free space; {} waiting request(s) fail",
                         pending.size());
    while (!pending.empty()) {
      Pending p = std::move(pending.front());
      pending.pop_front();
      const Status s = Status::NoSpace("no room: the surviving flash is full and nothing can be groomed");
      if (p.kind == Pending::kWrite) {
        p.ctx->status = s;
        Ack(p.ctx);
      } else {
        p.trim_done(s);
      }
    }
    if (shutting_down) CheckShutdown();
  }

  // The next LEB to rebuild (data whose stripes include a failed die, or pages a power cut
  // left without parity) that can be groomed now. Rebuild goes before grooming for
  // space: it frees LEBs too.
  Leb* NextRebuildVictim() {
    for (std::size_t k = 0; k < rebuild_queue.size();) {
      Leb& l = f.lebs_.leb(rebuild_queue[k]);
      // Done once nothing live is left and no newer copy of what it held is still on
      // its way (if that copy fails, the sector goes back here and must be moved).
      const bool still = l.unprotected && (l.valid > 0 || l.pins > 0);
      if (!still || l.state == LebState::kFree) {
        if (l.valid == 0) l.unprotected = false;
        rebuild_queue.erase(rebuild_queue.begin() + static_cast<std::ptrdiff_t>(k));
        if (rebuild_queue.empty() && OpenUnprotected() == 0) {
          const uint32_t alive = AliveDies();
          const uint32_t failed = D() - alive;
          Event(failed == 0 ? std::string("FlashBack: every stripe row is protected again")
                : alive > kMinStripeDies
                    ? fmt::format("FlashBack rebuild complete: every stripe is formed without the "
                                  "failed die(s) on {} dies; the pipe can survive another die "
                                  "failure as far as spare room allows", alive)
                    : fmt::format("FlashBack rebuild complete: every stripe is formed without the "
                                  "failed die(s) on {} dies (mirrored); another die failure "
                                  "leaves too few dies for parity", alive));
          UpdateMode();
        }
        continue;
      }
      // Only a victim whose data fits where the groomer can write: one that runs out of
      // room half-way is held with its data, and takes the room with it.
      if (l.state == LebState::kClosed && l.inflight == 0 && !l.gc_skip && l.atomic_pins == 0 && l.valid <= GroomerRoom()) {
        rebuild_queue.erase(rebuild_queue.begin() + static_cast<std::ptrdiff_t>(k));
        rebuild_queue.push_back(l.index);  // leaves the queue once it is empty of such data
        return &l;
      }
      ++k;
    }
    return nullptr;
  }

  // Sectors the groomer can still write: its open LEB's remaining positions and the free
  // LEBs (each as wide as the surviving dies make it).
  uint64_t GroomerRoom() {
    uint64_t room = uint64_t{f.lebs_.free_count()} * LebDataSectors(AliveDies());
    if (gcap.leb != nullptr && gcap.row < P()) {
      const uint32_t left = RemainingPositions(*gcap.leb, gcap.row, gcap.die);
      room += uint64_t{left > summary_pages ? left - summary_pages : 0} * S();
    }
    return room;
  }

  // The closed LEB with the lowest erase count, when it lags the most-erased data LEB by
  // more than wl_max_spread: its data is cold, and its block should take hot writes.
  Leb* WearVictim() {
    if (f.opts_.wl_max_spread == 0) return nullptr;
    Leb* coldest = nullptr;
    uint32_t max_ec = 0;
    for (uint32_t i = kMetaLebs; i < f.lebs_.size(); ++i) {
      Leb& l = f.lebs_.leb(i);
      max_ec = std::max(max_ec, l.erase_count);
      if (l.state == LebState::kClosed && l.inflight == 0 && !l.gc_skip && l.atomic_pins == 0 &&
          (coldest == nullptr || l.erase_count < coldest->erase_count)) {
        coldest = &l;
      }
    }
    if (coldest == nullptr || max_ec - coldest->erase_count <= f.opts_.wl_max_spread) return nullptr;
    return coldest;
  }

  // Issues relocation reads, a few pages at a time, so host I/O interleaves with grooming.
  void GroomStep() {
    Leb* v = victim;
    if (v == nullptr) return;
    const uint32_t total = P() * D();
    while (victim_reads < f.opts_.gc_max_reads && victim_cursor < total) {
      const uint32_t ps = victim_cursor++;
      const uint32_t page = ps / D(), die = ps % D();
      const bool is_trim =
          std::find(v->trim_pages.begin(), v->trim_pages.end(), ps) != v->trim_pages.end();
      bool any_valid = false;
      for (uint32_t s = 0; s < S() && !any_valid; ++s) {
        const uint32_t slot = (die * P() + page) * S() + s;
        any_valid = (v->valid_bits[slot / 64] >> (slot % 64)) & 1;
      }
      if (!any_valid && !is_trim) continue;
      ++victim_reads;
      auto buf = std::make_shared<std::pair<std::vector<uint8_t>, std::vector<uint8_t>>>();
      buf->first.resize(f.geo_.page_data_bytes);
      buf->second.resize(f.geo_.meta_bytes_per_page());
      f.pipe_.Read({{die, v->index, page}, 0, 0, buf->first.data(), buf->second.data()},
                   [this, v, die, page, buf, is_trim](const Completion& c) {
                     if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(die);
                     if (c.status == FlashStatus::kUncorrectable) NoteDieError(die, v->index);
                     if (!c.ok() && c.status != FlashStatus::kAborted && !device_lost) {
                       // FlashBack: rebuild the page from its row, then move it as usual.
                       RebuildPage(v->index, die, page,
                                   [this, v, die, page, is_trim, st = c.status](
                                       bool ok, std::vector<uint8_t> data, std::vector<uint8_t> meta) {
                                     --victim_reads;
                                     if (victim == v) {
                                       Completion rc;
                                       rc.status = ok ? FlashStatus::kOk : st;
                                       Relocate(*v, die, page, rc, data, meta, is_trim);
                                     }
                                     GroomStep();
                                   });
                       return;
                     }
                     --victim_reads;
                     if (victim == v) Relocate(*v, die, page, c, buf->first, buf->second, is_trim);
                     GroomStep();
                   });
    }
    // A victim with nothing (left) to read is finished here, not by a read callback.
    if (victim_reads == 0) MaybeFinishVictim();
  }

  void Relocate(Leb& v, uint32_t die, uint32_t page, const Completion& c,
                const std::vector<uint8_t>& data, const std::vector<uint8_t>& meta, bool is_trim) {
    if (c.status == FlashStatus::kAborted) {
      DeviceLost();
      return;
    }
    if (!c.ok()) {
      ++f.stats_.read_errors;
      if (is_trim && TraceLba() != UINT64_MAX) fmt::print(stderr, "trace t={} groomer cannot read trim page leb {} die {} page {}\n", f.clock_.Now(), v.index, die, page);
      Logger("ftl")->error("groomer read failed leb={} die={} page={}: {}", v.index, die, page,
                           nand::FlashStatusName(c.status));
      return;  // FlashBack (issue 4) rebuilds such pages; until then they stay mapped
    }
    const auto* e = reinterpret_cast<const f::SectorEntry*>(meta.data() + sizeof(f::PageHeader));
    if (is_trim) {
      // Trust the records only if the page really is one of ours: a listed page may never
      // have reached flash (power cut) and read back erased.
      const auto* ph = reinterpret_cast<const f::PageHeader*>(meta.data());
      const std::size_t hn = f::MetaBytes(S()) - 4;
      uint32_t hcrc;
      std::memcpy(&hcrc, meta.data() + hn, 4);
      if (ph->type != static_cast<uint8_t>(f::PageType::kTrim) || ph->epoch != f.epoch_ ||
          ph->sectors != S() || Crc32c(meta.data(), hn) != hcrc ||
          Crc32c(data.data(), data.size()) != e[0].crc) {
        return;
      }
      const uint64_t n = e[0].lba;
      const auto* recs = reinterpret_cast<const f::TrimRecord*>(data.data());
      // With a recovery base checkpoint on flash, records at or before it are in its
      // map and no recovery replays them; newer ones are kept. Without one, a record is
      // kept while data older than it may still be on flash, the victim's own included
      // (its erase could be cut short on some dies).
      const uint64_t oldest = f.base_ckpt_seq_ != 0 ? f.base_ckpt_seq_ : OldestDataSeqOnFlash();
      std::vector<f::TrimRecord> keep;
      for (uint64_t i = 0; i < n && i < data.size() / sizeof(f::TrimRecord); ++i) {
        if (TraceLba() - recs[i].lba < recs[i].count) {
          fmt::print(stderr, "trace t={} groomer {} trim record seq {} from leb {} die {} page {} (oldest {})\n",
                     f.clock_.Now(), recs[i].seq > oldest ? "carries" : "drops", recs[i].seq, v.index, die, page, oldest);
        }
        if (recs[i].seq > oldest) keep.push_back(recs[i]);
      }
      // Kept records are packed densely and written when the victim's pages are done.
      carry_trims.insert(carry_trims.end(), keep.begin(), keep.end());
      return;
    }
    for (uint32_t s = 0; s < S(); ++s) {
      const Psa p = MakePsa(v.index, die, page, s);
      const uint64_t lba = e[s].lba;
      if (lba == f::kNoLba || lba >= f.map_.sectors() || f.map_.Get(lba) != p) continue;
      const uint8_t* src = data.data() + uint64_t{s} * f.sector_bytes_;
      if (Crc32c(src, f.sector_bytes_) != e[s].crc) {
        ++f.stats_.read_errors;
        continue;
      }
      AppendPoint& ap = f.opts_.separate_gc_stream ? gcap : host;
      if (!AppendSector(ap, lba, src, nullptr, &v)) {
        {
          uint32_t st[5] = {0, 0, 0, 0, 0};
          uint64_t valid = 0, cap = 0, held = 0;
          for (uint32_t i = kMetaLebs; i < f.lebs_.size(); ++i) {
            const Leb& l = f.lebs_.leb(i);
            ++st[static_cast<int>(l.state)];
            valid += l.valid;
            cap += l.capacity;
            held += l.gc_skip;
          }
          Logger("ftl")->error("groomer has no free LEB to relocate into (free {} open {} closed {} "
                               "victim {}; valid {} of {} slots; held {}; mapped {} of {})",
                               st[0], st[1], st[2], st[3], valid, cap, held, f.map_.mapped(), f.map_.sectors());
        }
        return;
      }
      ++f.stats_.gc_write_sectors;
      credits += credit_ratio;
      if (!pending.empty() && credits >= 1) {
        Post([this] { RunPending(); });
      }
    }
  }

  uint64_t OldestDataSeqOnFlash() const {
    uint64_t oldest = UINT64_MAX;
    for (uint32_t i = kMetaLebs; i < f.lebs_.size(); ++i) {
      const Leb& l = f.lebs_.leb(i);
      if (l.stale_seq != 0) oldest = std::min(oldest, l.stale_seq);
      if (l.open_seq == 0) continue;
      if (l.state == LebState::kOpen || l.state == LebState::kClosed ||
          l.state == LebState::kVictim) {
        oldest = std::min(oldest, l.open_seq);
      }
    }
    return oldest;
  }

  // Writes the trim records carried out of the victim, packed into as few pages as they
  // need. A record that finds no page holds the victim back: releasing it could let
  // the data the record hides come back after a power cut.
  void WriteCarriedTrims(Leb& v) {
    const std::size_t per_page = f.geo_.page_data_bytes / sizeof(f::TrimRecord);
    while (!carry_trims.empty()) {
      SubmitOpen(gcap);
      PageBuf* b = NewPage(gcap, f::PageType::kTrim);
      if (b == nullptr) {
        Logger("ftl")->warn("no room to carry {} trim records out of leb={}; it stays",
                            carry_trims.size(), v.index);
        victim_held = true;
        carry_trims.clear();
        return;
      }
      const std::size_t n = std::min(per_page, carry_trims.size());
      b->trims.assign(carry_trims.begin(), carry_trims.begin() + static_cast<std::ptrdiff_t>(n));
      carry_trims.erase(carry_trims.begin(), carry_trims.begin() + static_cast<std::ptrdiff_t>(n));
      b->victim = &v;
      ++victim_refs;
      Submit(b);
    }
  }

  void MaybeFinishVictim() {
    Leb* v = victim;
    if (v == nullptr) return;
    if (victim_cursor < P() * D() || victim_reads > 0) return;
    if (!carry_trims.empty()) WriteCarriedTrims(*v);
    if (victim_refs > 0) {
      // Relocated data must be durable before the victim may be erased: push it out.
      if (gcap.open != nullptr && gcap.open->victim == v) SubmitOpen(gcap);
      return;
    }
    // So must every newer copy of sectors it held (a write over them still on its way):
    // if that copy fails, the sector goes back here.
    // A rewrite job waiting for room also pins the LEB of its sector's previous copy;
    // waiting for it here could deadlock (the room it needs is this victim's), so the
    // victim is kept (closed, not erased) and the job can still go back to it.
    uint32_t job_pins = 0;
    for (const RewriteJob& j : rewrite_backlog) job_pins += j.pinned == v->index;
    if (v->pins > job_pins && !device_lost) {
      for (AppendPoint* a : {&host, &gcap}) {
        if (a->open != nullptr && !a->open->pinned.empty() &&
            std::find(a->open->pinned.begin(), a->open->pinned.end(), v->index) != a->open->pinned.end()) {
          SubmitOpen(*a);
        }
      }
      return;
    }
    if (job_pins > 0) victim_held = true;
    if (v->valid != 0 || victim_held) {
      // Sectors that could not be read stay where they are; try again later.
      if (!device_lost) {
        if (v->valid != 0) {
          Logger("ftl")->warn("victim leb={} keeps {} sectors it could not move", v->index, v->valid);
        }
        v->gc_skip = true;  // not picked again until some LEB frees up
      }
      f.lebs_.SetState(*v, LebState::kClosed);
    } else {
      v->needs_erase = true;
      for (uint32_t d = 0; d < D(); ++d) {
        if (die_failed[d]) v->good[d] = 0;  // formed without failed dies from now on
      }
      if (v->stale_seq == 0 || (v->open_seq != 0 && v->open_seq < v->stale_seq)) {
        v->stale_seq = v->open_seq;
      }
      v->open_seq = 0;
      v->trim_pages.clear();
      f.lebs_.SetState(*v, LebState::kFree);
      // Space appeared: LEBs held back for lack of room may be tried again.
      for (uint32_t i = kMetaLebs; i < f.lebs_.size(); ++i) f.lebs_.leb(i).gc_skip = false;
    }
    victim = nullptr;
    Post([this] {
      RunPending();
      MaybeGroom();
      if (victim == nullptr) RunBacklogWaiters();  // the groomer is done: no more room
      if (victim == nullptr && !groom_waiters.empty()) {
        for (auto& w : groom_waiters) w(Status::Ok());
        groom_waiters.clear();
      }
      if (shutting_down) CheckShutdown();
      CheckCheckpoint();
    });
  }

  // A command came back aborted: power is gone or the LUN's host side was cut. Nothing
  // more reaches flash, so every request still waiting (queued host writes and trims,
  // rewrite jobs, trims held by a checkpoint) is answered with an error at the next turn,
  // not left waiting for ever (a caller, e.g. an NBD client, would hang).
  void DeviceLost() {
    if (device_lost) return;
    device_lost = true;
    Post([this] {
      // Pages still being filled will never be submitted.
      for (AppendPoint* ap : {&host, &gcap}) {
        PageBuf* b = ap->open;
        if (b == nullptr) continue;
        ap->open = nullptr;
        FailWaiters(b);
        pages.erase(b);
      }
      RunDeferredTrims();
      RunPending();
    });
  }

  // The owner gives the FTL up (its LUN's host side crashed): as a device loss, and
  // every write not yet durable fails now; what the controller already has still reaches
  // flash, and the next attach finds it.
  void Abandon() {
    DeviceLost();
    std::vector<PageBuf*> all;
    for (auto& [b, own] : pages) all.push_back(b);
    for (PageBuf* b : all) {
      if (b->durable) continue;
      Uncover(b);
      FailWaiters(b);
      if (!b->submitted) {
        for (AppendPoint* ap : {&host, &gcap}) {
          if (ap->open == b) ap->open = nullptr;
        }
        pages.erase(b);
      } else if (b->flash_done) {
        pages.erase(b);
      }
    }
  }

  // --- checkpoint after a die failure ---
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
  void CheckCheckpoint() {
    if (!CheckpointWanted() || ckpt_writing || device_lost || shutting_down) return;
    if (victim != nullptr) return;  // finishing; MaybeGroom picks none while one is wanted
    if (!ckpt_quiesce) {
      // A batch never spans a checkpoint: its members and commit are in the same scan.
      if (atomic_inflight != 0) return;
      ckpt_quiesce = true;
      for (AppendPoint* ap : {&host, &gcap}) {
        SubmitOpen(*ap);
        if (ap->leb != nullptr) CloseLeb(*ap);
      }
    }
    if (!pages.empty()) return;
    // A closed LEB's summary is written once its erases and programs are done: it must be
    // on flash before the record (a summary newer than the base would make a scan take
    // the LEB for one opened after it).
    for (uint32_t i = kMetaLebs; i < f.lebs_.size(); ++i) {
      const Leb& l = f.lebs_.leb(i);
      if (l.summary_due || l.inflight != 0) return;
    }
    ckpt_writing = true;
    const uint32_t answers = ckpt_asked;
    const uint64_t seq = f.next_seq_;
    const uint32_t target = f.meta_leb_ == 0 ? 1 : 0;
    const TimeNs t0 = f.clock_.Now();
    f.WriteMetaRecord(static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint),
                      [this, answers, seq, target, t0](Status s) {
      ckpt_writing = false;
      ckpt_quiesce = false;
      ckpt_written = answers;
      if (s.ok()) {
        f.base_ckpt_seq_ = seq;
        f.base_ckpt_leb_ = target;
        ++f.stats_.failure_checkpoints;
        Event(fmt::format("FlashBack: checkpoint written after the die failure ({} us of held "
                          "writes); data of the stripes it broke is now found from it",
                          (f.clock_.Now() - t0) / kUs));
      } else if (!device_lost) {
        Logger("ftl")->warn("checkpoint after the die failure failed: {}", s.ToString());
      }
      RunDeferredTrims();
      RunPending();
      MaybeGroom();
      if (shutting_down) return CheckShutdown();
      CheckCheckpoint();  // another failure meanwhile
    });
  }
  // Shutdown writes its own checkpoint: a pending one is dropped (unless being written).
  void DropCheckpoint() {
    if (ckpt_writing) return;
    ckpt_written = ckpt_asked;
    if (ckpt_quiesce) {
      ckpt_quiesce = false;
      RunDeferredTrims();
      RunPending();
    }
  }

  // --- shutdown ---
  Done shutdown_done;
  void CheckShutdown() {
    if (!shutting_down || !shutdown_done) return;
    if (victim != nullptr || !pending.empty() || ckpt_writing) return;
    if (!rewrite_backlog.empty()) {
      if (DrainRewrites()) return CheckShutdown();
      // No room and nothing being groomed (an uncovered page reads as it is).
      FailBacklog("shutdown");
    }
    if (!shutdown_parity_done && !device_lost) {
      // Nothing more will be appended: part-written rows get their parity page now, so
      // every row is protected after a clean shutdown (a stage is only for power cuts).
      shutdown_parity_done = true;
      SubmitOpen(host);
      SubmitOpen(gcap);
      for (AppendPoint* ap : {&host, &gcap}) {
        if (ap->leb != nullptr && ap->leb->par) SubmitParity(*ap->leb);
      }
    }
    if (!pages.empty()) return;
    // Everything is on flash and covered by parity now: the shutdown is clean even when
    // the checkpoint does not fit and a mount record stands in for it.
    f.WriteCheckpointRecord(static_cast<uint32_t>(f::MetaKind::kCheckpoint),
                            [d = std::move(shutdown_done)](Status s, bool) mutable { d(s); });
  }
};

}  // namespace vsl::ftl
