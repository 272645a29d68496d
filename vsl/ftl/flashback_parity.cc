// FlashBack parity of the rows being written: running XOR, the row's parity page, the
// acknowledgement rule (a member is durable only once a durable parity covers it), stage
// slots holding a row's running parity in the controller's protected buffer, and
// Progress (a page's way to durable and done). Drives `cover` (parity_cover.h).
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {

void Ftl::Impl::InitAccumulators() {
  use_accs = f.opts_.controller_parity && f.pipe_.copy_accumulators() >= kMinRowAccs;
  row_accs = use_accs ? std::min(f.pipe_.copy_accumulators(), kMaxRowAccs) : 0;
  use_copy = use_accs && f.opts_.copy_relocation && f.opts_.separate_gc_stream;
  if (!use_accs) return;
  // Whatever a previous attach left in them (a killed process mid-row) is not ours.
  for (uint32_t k = 0; k < row_accs; ++k) f.pipe_.ClearAccumulator(k);
}

void Ftl::Impl::SetAccMeta(nand::ProgramRequest& req) const {
  req.acc_meta_at = static_cast<uint16_t>(sizeof(f::PageHeader) + 8);
  req.acc_meta_len = static_cast<uint16_t>(f::MetaBytes(S()));
  req.acc_crc_at = static_cast<uint16_t>(f::ParityMetaBytes(S()) - 4);
}

uint32_t Ftl::Impl::TakeRowAcc() {
  if (!use_accs) return nand::kNoAccumulator;
  for (uint32_t k = 0; k < row_accs; ++k) {
    if (accs[k] == AccState::kFree) {
      accs[k] = AccState::kBusy;
      return k;
    }
  }
  return nand::kNoAccumulator;
}

void Ftl::Impl::AccumulateParity(Leb& l, PageBuf* b) {
  RowParity& rp = *l.par;
  const bool first = rp.row != b->page;
  if (first) {
    rp.row = b->page;
    rp.submitted = false;
    rp.mask = 0;
  }
  rp.mask |= uint64_t{1} << b->die;
  // A row with an accumulator is formed in the controller alone: its parity page, its
  // stage images and (by writing the parity page early, RebuildPage) a rebuild of one of
  // its members all come from there, so the host keeps no running XOR of it. Nor of a
  // row whose parity page has gone (a page after it adds to nothing). A row without an
  // accumulator has no copied member (Submit reverts a copy into such a row).
  if (rp.acc == nand::kNoAccumulator && !rp.submitted) {
    if (first) {
      // The row's first member: its parity so far is the member itself.
      std::memcpy(rp.data.data(), b->data.data(), rp.data.size());
      std::memcpy(rp.meta.data(), b->meta.data(), rp.meta.size());
    } else {
      stripe.XorInto(rp.data.data(), b->data.data(), rp.data.size());
      stripe.XorInto(rp.meta.data(), b->meta.data(), rp.meta.size());
    }
  }
  if (stripe.IsLastDataPos(l, b->page, b->die)) SubmitParity(l);
}

void Ftl::Impl::SubmitParity(Leb& l) {
  RowParity& rp = *l.par;
  if (rp.submitted || rp.row == UINT32_MAX) return;
  rp.submitted = true;
  const uint32_t pd = stripe.RowParityDie(l, rp.row);
  // A row whose members all failed still gets its (empty) parity page: pages of a block
  // are programmed in order, so the parity die's page must not be skipped.
  if (pd == kNoDie || !l.good[pd] || dies.failed(pd)) {
    // This row goes unprotected (its parity die failed): nothing more can cover it, and
    // nothing takes its accumulator.
    if (rp.acc < row_accs) {
      accs[rp.acc] = AccState::kDirty;
      ReuseDirtyAcc(rp.acc);
    }
    rp.acc = nand::kNoAccumulator;
    return CoverRow(l.index, rp.row, ~uint64_t{0}, true);
  }
  PageBuf* b = MakeBuf(l.index, pd, rp.row, f::PageType::kParity);
  // Taken, not copied: a submitted row's running XOR is not read again (rebuilds use it
  // only while the row is unsubmitted) until the next row's first member overwrites it
  // whole (AccumulateParity).
  b->data.swap(rp.data);
  b->pmeta = rp.meta;
  b->lbas[0] = rp.mask;
  b->final_parity = true;
  b->acc = rp.acc;
  ++f.stats_.parity_pages;
  Submit(b);  // its accumulator is free again once the page lands (OnAccepted)
}

void Ftl::Impl::CoverRow(uint32_t leb, uint32_t row, uint64_t mask, bool final, bool landed) {
  const auto covered = cover.Cover(leb, row, mask, final);
  if (covered.freed_slot >= 0) {
    // The row's parity page landing at the staged address retired the image; any other
    // end of the row (no parity page after all) must empty the slot, or a stale image
    // would be programmed at a power cut into a reused block.
    if (!landed) f.pipe_.ClearStage(static_cast<uint32_t>(covered.freed_slot));
    ScheduleStage();  // a row that found no free slot may take this one
  }
  covered.ForEach([this](PageBuf* b) {
    b->covered = true;
    Progress(b);
  });
}

void Ftl::Impl::FailUncovered() {
  std::vector<PageBuf*> done;
  for (const auto& [key, rc] : cover.rows()) {
    for (PageBuf* b : rc.waiting) {
      if (b->flash_done) done.push_back(b);
    }
  }
  for (PageBuf* b : done) {
    Uncover(b);
    FailWaiters(b);
    pages.Release(b);
  }
}

void Ftl::Impl::Uncover(PageBuf* b) {
  if (b->covered) return;
  b->covered = true;
  cover.Remove(b->leb, b->page, b);
}

const uint64_t Ftl::Impl::kTraceLba = [] {
  const char* e = std::getenv("VSL_TRACE_LBA");
  return e ? std::strtoull(e, nullptr, 10) : UINT64_MAX;
}();

bool Ftl::Impl::TracedPage(const PageBuf* b) const {
  if (b->type == f::PageType::kTrim) {
    for (const auto& t : b->trims) {
      if (TraceLba() - t.lba < t.count) return true;
    }
    return false;
  }
  if (b->type != f::PageType::kData && b->type != f::PageType::kAtomicData) return false;
  return std::find(b->lbas.begin(), b->lbas.end(), TraceLba()) != b->lbas.end();
}

void Ftl::Impl::Progress(PageBuf* b) {
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
    // FUA writes stay until the page is on flash; the rest are answered. Compacted in
    // place (the vector keeps its storage), by index: an answer runs the caller's code.
    auto& w = b->waiters;
    const std::size_t n = w.size();
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; ++i) {
      WriteCtx* c = w[i];
      if (c->fua && !b->flash_done) w[kept++] = c;
      else Ack(c);
    }
    w.erase(w.begin() + static_cast<std::ptrdiff_t>(kept), w.begin() + static_cast<std::ptrdiff_t>(n));
  }
  if (b->flash_done) pages.Release(b);
}

void Ftl::Impl::ScheduleStage() {
  if (!cover.PostStage()) return;
  Post([this] {
    cover.StageRan();
    StageRows();
  });
}

bool Ftl::Impl::GroomerStillFills(const ParityCover<PageBuf>::Row& rc) const {
  // A stage buys early acknowledgements. A row of relocated data alone (no host write
  // waits on any of its pages) has none to give while the groomer still reads its victim:
  // the row's next members are on their way and its parity page covers them all. What
  // does wait for these pages (the victim's release, a flush, pins) asks again once the
  // groomer stops: MaybeFinishVictim and Flush schedule a stage, and a closing LEB gets
  // its parity pages (FinishParity). Without this a stage went out per copied page. (A
  // host row fails the test at its first page: no victim.)
  if (!gc.reloc.Reading() || !flush_waiters.empty() || shutting_down) return false;
  for (const PageBuf* b : rc.waiting) {
    if (b->victim == nullptr || !b->waiters.empty()) return false;
  }
  return true;
}

void Ftl::Impl::StageRows() {
  if (device_lost || !UseStages()) return;
  for (AppendPoint* ap : {&host, &gcap}) {
    Leb* l = ap->leb();
    if (l == nullptr || !l->par || l->par->row == UINT32_MAX || l->par->submitted) continue;
    RowParity& rp = *l->par;
    auto* row_cover = cover.Find(l->index, rp.row);
    if (row_cover == nullptr) continue;
    auto& rc = *row_cover;
    bool need = false;
    for (PageBuf* b : rc.waiting) need = need || !((rc.staged_mask >> b->die) & 1);
    if (!need || rc.pd == kNoDie || dies.failed(rc.pd)) continue;
    if (GroomerStillFills(rc)) continue;
    if (!cover.TakeSlot(rc)) {
      ++f.stats_.stage_slot_waits;
      continue;  // its members wait for the row's parity page, or a free slot
    }
    // The image stays put until the stage ends (the pipe reads it until it is accepted).
    StageImage* img = stage_imgs.Make();
    if (rp.acc == nand::kNoAccumulator) img->data = rp.data;
    img->meta.assign(f.geo_.meta_bytes_per_page(), 0xFF);
    if (rp.acc == nand::kNoAccumulator) {
      stripe.FillParityMeta(img->meta.data(), f.next_seq_++, rp.mask, rp.meta, f.epoch_);
    } else {
      // Formed in the controller: its metadata XOR starts from zeros.
      if (zero_pmeta.size() != rp.meta.size()) zero_pmeta.assign(rp.meta.size(), 0);
      stripe.FillParityMeta(img->meta.data(), f.next_seq_++, rp.mask, zero_pmeta, f.epoch_);
    }
    rc.staged_mask = rp.mask;
    ++f.stats_.parity_stages;
    const uint32_t leb = l->index, row = rp.row, pd = rc.pd;
    const uint64_t mask = rp.mask;
    // With the row's accumulator the image is the controller's XOR of the members (a
    // peek): only the metadata crosses the link.
    nand::ProgramRequest req{{pd, leb, row}, img->data.empty() ? nullptr : img->data.data(), img->meta.data()};
    if (rp.acc != nand::kNoAccumulator) {
      req.data = nullptr;
      req.acc = rp.acc;
      req.acc_op = nand::AccOp::kPeek;
      SetAccMeta(req);
    }
    f.pipe_.Stage(static_cast<uint32_t>(rc.slot), req,
                  [this, leb, row, mask](const Completion&) {
                    if (PlpDurableOnAccept()) CoverRow(leb, row, mask, false);
                  },
                  [this, img, pd](const Completion& c) {
                    stage_imgs.Release(img);
                    if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(pd);
                  });
  }
}

}  // namespace vsl::ftl
