// FlashBack after a failure: a page rebuilt from its row's parity and other members,
// live sectors of rebuilt pages relocated, pages a cut left without parity reprotected,
// dies retired (dead, or past the error bound) and the LEBs formed with them queued for
// the rebuild; the reserve and health mode. Owns `reserve` and `mode`.
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {

void Ftl::Impl::RebuildPage(uint32_t leb, uint32_t die, uint32_t row, RebuildDone done) {
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
      if (l.par->acc != nand::kNoAccumulator) {
        // The row's parity exists only in its accumulator: write the parity page now.
        // A die runs its commands in submission order, so the reads below find it on
        // flash, and the flash path rebuilds from it (copied members too). The members
        // the row takes after it go unprotected, as after a short row's parity. (With
        // the device lost nothing can be written: the reads below fail the rebuild.)
        if (!device_lost) {
          ++f.stats_.rebuild_parity_pages;
          SubmitParity(l);
        }
      } else {
        // The host's running XOR of the row (which has no copied member: a copy needs
        // an accumulator).
        r->acc_mask = l.par->mask;
        r->acc_data = l.par->data;
        r->acc_meta = l.par->meta;
      }
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
    if (!stripe.parity()) return fail();
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
        if (pd == die || !r->ok[pd] || !stripe.ParityValid(r->meta[pd].data(), f.epoch_)) continue;
        mask = stripe.ParityMask(r->meta[pd].data());
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
          stripe.XorInto(data.data(), r->data[d].data(), data.size());
          stripe.XorInto(lead.data(), r->meta[d].data(), lead.size());
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
    if (d == die || dies.failed(d)) continue;
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

void Ftl::Impl::RelocateRebuilt(uint32_t leb, uint32_t die, uint32_t page, const std::vector<uint8_t>& data,
                       const std::vector<uint8_t>& meta) {
  if (device_lost || shutting_down) return;
  bool moved = false;
  ForEachLiveSector(leb, die, page, data, meta, [&](uint64_t lba, Psa, const uint8_t* src) {
    if (!AppendSector(gcap, lba, src, nullptr, nullptr)) return false;
    ++f.stats_.gc_write_sectors;
    moved = true;
    return true;
  });
  if (moved && (gc.reloc.victim() == nullptr || gcap.open == nullptr || gcap.open->victim == nullptr)) {
    SubmitOpen(gcap);
  }
}

void Ftl::Impl::ReprotectPages(Function<void()> done) {
  if (rw.reprotect().empty()) return done();
  auto left = std::make_shared<uint32_t>(1);
  auto shared = std::make_shared<Function<void()>>(std::move(done));
  auto finish = [this, left, shared]() {
    if (--*left != 0) return;
    rw.WhenDrained([this, shared]() {
      SubmitOpen(host);
      SubmitOpen(gcap);
      f.Flush([shared](Status) { (*shared)(); });
    });
    RunPending();
    MaybeGroom();
    if (!gc.reloc.busy()) RunBacklogWaiters();  // no room will appear: do not wait
  };
  for (const auto& [leb, die, row] : rw.TakeReprotect()) {
    if (dies.failed(die)) continue;  // nothing to read: not recoverable (no parity)
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

void Ftl::Impl::NoteDieError(uint32_t d, uint32_t block) {
  if (d >= D() || !stripe.parity()) return;
  std::size_t n = 0;
  if (!dies.NoteError(d, block, f.clock_.Now(), &n)) return;
  Event(fmt::format("die {} retired: {} media errors within {} ms crossed the bound", d, n,
                    dies.window() / kMs));
  DeclareDieFailed(d);
}

void Ftl::Impl::DeclareDieFailed(uint32_t d) {
  dies.MarkFailed(d);
  if (serving && stripe.parity()) {
    ++ckpt.asked;
    ckpt.for_failure = true;
  }
  Event(fmt::format("FlashBack substitution active: die {} failed; {}", d,
                    stripe.parity() ? "rebuilding its data from parity"
                              : "this format has no parity: its data is lost"));
  for (uint32_t i = 0; i < f.lebs_.size(); ++i) {
    Leb& l = f.lebs_.leb(i);
    if (i < f.meta_lebs_ || l.state == LebState::kFree) {
      l.good[d] = 0;
      l.capacity = stripe.LebCapacity(l);
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
  // Copy pages on the die whose rows are not protected yet cannot be rebuilt from host
  // memory (their data is only in the accumulator): their sectors go back to their
  // sources, which their victims still hold, and move through host memory.
  std::vector<PageBuf*> copies;
  for (const auto& owned : pages.live()) {
    PageBuf* b = owned.get();
    if (b->copy && b->submitted && b->die == d && !b->durable && b->victim != nullptr) copies.push_back(b);
  }
  for (PageBuf* b : copies) RevertCopy(b);
  // The open LEBs' earlier rows include the die: they close now, without a summary (a
  // scan reads them page by page; a summary placed mid-row would break the dies' page
  // order), and join the rebuild instead of waiting to fill. Done at the engine's next
  // turn, not inside whatever completion declared the failure.
  Post([this] {
    for (AppendPoint* ap : {&host, &gcap}) {
      if (ap->leb() == nullptr || !ap->leb()->unprotected || device_lost || shutting_down) continue;
      SubmitOpen(*ap);
      if (ap->leb() == nullptr) continue;
      ap->leb()->summary.clear();
      CloseLeb(*ap);
    }
    MaybeGroom();
    CheckCheckpoint();
  });
  // Rows whose parity was to go to this die can get none: their members (on live dies)
  // are as safe as they can be.
  std::vector<std::pair<uint32_t, uint32_t>> orphans;
  for (const auto& [key, rc] : cover.rows()) {
    if (rc.pd == d) orphans.push_back(key);
  }
  for (const auto& k : orphans) CoverRow(k.first, k.second, ~uint64_t{0}, true);
  UpdateMode();
  MaybeGroom();
}

void Ftl::Impl::UpdateMode() {
  uint64_t phys = 0;
  for (uint32_t i = f.meta_lebs_; i < f.lebs_.size(); ++i) {
    const Leb& l = f.lebs_.leb(i);
    uint32_t g = 0;
    for (uint32_t d = 0; d < D(); ++d) g += l.good[d] && !dies.failed(d);
    phys += stripe.LebDataSectors(g);
  }
  const uint32_t alive = AliveDies();
  const uint64_t reserved =
      uint64_t{f.opts_.gc_reserve_lebs + f.opts_.gc_start_free_lebs + 2} * stripe.LebDataSectors(alive);
  const uint64_t usable = phys > reserved ? phys - reserved : 0;
  const double rho = f.reserve_ppm_ / 1e6;
  // What the format promised: the capacity, or for a sparse space the physical room a
  // flawless card offers.
  uint64_t capacity = f.map_.sectors();
  if (f.sparse_) {
    const uint64_t nominal = uint64_t{f.lebs_.size() - f.meta_lebs_} * stripe.LebDataSectors(D());
    const uint64_t nres = uint64_t{f.opts_.gc_reserve_lebs + f.opts_.gc_start_free_lebs + 2} * stripe.LebDataSectors(D());
    capacity = nominal > nres ? static_cast<uint64_t>(static_cast<double>(nominal - nres) / (1.0 + rho)) : 0;
  }
  reserve.full_sectors = static_cast<uint64_t>(static_cast<double>(capacity) * rho);
  reserve.sectors = usable > capacity ? usable - capacity : 0;
  reserve.percent = reserve.full_sectors == 0
                        ? (usable >= capacity ? 100.0 : 0.0)
                        : std::min(100.0, 100.0 * static_cast<double>(reserve.sectors) /
                                              static_cast<double>(reserve.full_sectors));
  const bool reserve_low = reserve.full_sectors != 0 && reserve.percent <= kReducedWritePercent;
  // A sparse space promises only the physical room (its address space is far larger).
  const HealthMode m = f.map_.mapped() > usable ? HealthMode::kReadOnly
                       : (capacity > usable || reserve_low) ? HealthMode::kReducedWrite
                                                            : HealthMode::kNormal;
  reserve.surviving = usable;
  // The warning is raised no later than the mode it warns of: when one update crosses
  // both levels (several bad blocks at once), its event comes first.
  const bool warn = reserve.percent <= kReserveWarnPercent;
  if (warn && !reserve.warned) {
    Event(fmt::format("reserve space {:.1f}%: at or below the {:.0f}% warning level", reserve.percent,
                      kReserveWarnPercent));
  }
  reserve.warned = warn;
  if (m != mode) {
    mode = m;
    Event(fmt::format("pipe health: {} (reserve {:.1f}%; surviving flash holds {} of {} sectors)",
                      HealthModeName(m), reserve.percent, usable, f.map_.sectors()));
  }
  f.room_valid_ = false;
}

}  // namespace vsl::ftl
