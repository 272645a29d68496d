// Append points and page assembly: validity (SetValid/ClearValid/Remap keep the LEB
// table's counts and bitmaps in step with the map), page positions row by row across
// the open LEB's dies, opening and closing LEBs (summaries), page buffers, Submit
// (sequence number, header, summary entry, parity accumulation) and the partial-row
// protection of FlashBack without stage slots. Owns the append points.
#include "vsl/ftl/ftl_impl.h"
#include "vsl/ftl/page_codec.h"

namespace vsl::ftl {

void Ftl::Impl::SetValid(Psa p) {
  Leb& l = f.lebs_.leb(addr.LebOf(p));
  const uint32_t s = addr.SlotInLeb(p);
  const uint64_t bit = uint64_t{1} << (s % 64);
  if (l.valid_bits[s / 64] & bit) return;  // already counted (never count a slot twice)
  l.valid_bits[s / 64] |= bit;
  ++l.valid;
  f.lebs_.OnValidChanged(l);
}

void Ftl::Impl::ClearValid(Psa p) {
  Leb& l = f.lebs_.leb(addr.LebOf(p));
  const uint32_t s = addr.SlotInLeb(p);
  const uint64_t bit = uint64_t{1} << (s % 64);
  if ((l.valid_bits[s / 64] & bit) == 0) return;
  l.valid_bits[s / 64] &= ~bit;
  --l.valid;
  f.lebs_.OnValidChanged(l);
  KillInOpenBuffer(host, p);
  KillInOpenBuffer(gcap, p);
}

bool Ftl::Impl::NextPosition(AppendPoint& ap, uint32_t* leb, uint32_t* die, uint32_t* page) {
  for (;;) {
    if (ap.leb() == nullptr) {
      if (ckpt.quiesce) return false;  // a checkpoint needs every LEB closed
      if (!ap.gc && f.lebs_.free_count() <= f.opts_.gc_reserve_lebs) {
        if (!HostMayTakeReserve()) return false;
        ++f.stats_.reserve_takes;
      }
      Leb* l = f.lebs_.PickFree();
      if (l == nullptr) return false;
      OpenLeb(ap, *l);
    }
    Leb& l = *ap.leb();
    uint32_t d = 0, row = 0;
    switch (ap.pos.Next(stripe, &d, &row)) {
      case AppendCursor::Step::kRowDone:
        // Its parity goes now, before any page of the next row (a die that failed
        // mid-row can leave the last member position unused).
        if (l.par && l.par->row == row) SubmitParity(l);
        continue;
      case AppendCursor::Step::kFull:  // what is left is the summary's
        CloseLeb(ap);
        continue;
      case AppendCursor::Step::kPosition:
        *leb = l.index;
        *die = d;
        *page = row;
        return true;
    }
  }
}

void Ftl::Impl::OpenLeb(AppendPoint& ap, Leb& l) {
  f.lebs_.SetState(l, LebState::kOpen);
  // Periodic checkpoint: a recovery after a cut scans at most the LEBs opened since the
  // last one (FtlOptions::checkpoint_interval_lebs).
  const uint32_t every = f.opts_.checkpoint_interval_lebs;
  if (serving && every != 0 && ++ckpt.lebs_since >= every && !CheckpointWanted()) {
    ++ckpt.asked;
    Post([this] { CheckCheckpoint(); });
  }
  ap.pos.Open(&l);
  l.open_seq = 0;
  l.close_seq = 0;
  l.gc_skip = false;
  l.trim_pages.clear();
  std::fill(l.valid_bits.begin(), l.valid_bits.end(), 0);
  l.valid = 0;
  l.capacity = stripe.LebCapacity(l);
  l.summary_due = false;
  l.unprotected = false;

  if (stripe.summary_pages() != 0) {
    l.summary.assign(uint64_t{D()} * P() * (1 + S()), 0);
    if (stripe.summary_crcs()) l.summary_crc.assign(uint64_t{D()} * P() * S(), 0);
  }
  l.summary_at.clear();
  l.summary_left = 0;
  l.summary_ok = false;
  l.par.reset();
  if (stripe.parity()) {
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
        if (!c.ok() && !LostToHost(c.status)) {
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
    policy.NoteErase();
  }
  MaybeGroom();
}

void Ftl::Impl::CloseLeb(AppendPoint& ap) {
  Leb& l = *ap.leb();
  l.close_seq = f.next_seq_;
  l.needs_erase = true;
  l.summary_from = ap.pos.SummaryFrom();
  l.summary_due = !l.summary.empty();
  f.lebs_.SetState(l, LebState::kClosed);
  ap.pos.Close();
  if (l.unprotected) Reprotect(l);  // formed with a die that has failed since
  if (l.summary_due) {
    MaybeWriteSummary(l);
  } else {
    FinishParity(l);
  }
}

void Ftl::Impl::MaybeWriteSummary(Leb& l) {
  if (!l.summary_due || l.inflight != 0) return;
  l.summary_due = false;
  std::vector<uint64_t> grid;
  grid.swap(l.summary);
  std::vector<uint32_t> crcs;
  crcs.swap(l.summary_crc);
  if (device_lost) return FinishParity(l);
  std::vector<std::pair<uint32_t, uint32_t>> where;  // (die, page)
  for (uint32_t pos = l.summary_from; pos < P() * D() && where.size() < stripe.summary_pages(); ++pos) {
    if (stripe.DataPos(l, pos / D(), pos % D())) where.emplace_back(pos % D(), pos / D());
  }
  if (where.size() < stripe.summary_pages()) return FinishParity(l);
  f::SummaryHeader h{f::kSummaryMagic, l.index, D(), P(), S()};
  std::vector<uint8_t> bytes(uint64_t{stripe.summary_pages()} * f.geo_.page_data_bytes, 0);
  std::memcpy(bytes.data(), &h, sizeof(h));
  std::memcpy(bytes.data() + sizeof(h), grid.data(), grid.size() * 8);
  if (!crcs.empty()) std::memcpy(bytes.data() + sizeof(h) + grid.size() * 8, crcs.data(), crcs.size() * 4);
  l.summary_left = stripe.summary_pages();
  l.summary_at.clear();
  for (uint32_t j = 0; j < stripe.summary_pages(); ++j) {
    l.summary_at.push_back(where[j].second * D() + where[j].first);
    PageBuf* b = MakeBuf(l.index, where[j].first, where[j].second, f::PageType::kSummary);
    std::memcpy(b->data.data(), bytes.data() + uint64_t{j} * f.geo_.page_data_bytes,
                f.geo_.page_data_bytes);
    b->lbas[0] = j | (uint64_t{stripe.summary_pages()} << 32);
    ++f.stats_.summary_pages;
    Submit(b);
  }
  FinishParity(l);
}

void Ftl::PageBuf::Recycle() {
  static_cast<PageBufFields&>(*this) = PageBufFields{};
  trims.clear();
  waiters.clear();
  pmeta.clear();
  csrc.clear();
  ccrc.clear();
  prev.clear();
  pinned.clear();
}

Ftl::PageBuf* Ftl::Impl::MakeBuf(uint32_t leb, uint32_t die, uint32_t page, f::PageType type) {
  PageBuf* b = pages.Make();
  b->leb = leb;
  b->die = die;
  b->page = page;
  b->type = type;
  // Data pages get every byte before they are programmed (their sectors, and Submit
  // zeroes the slots never filled); parity pages are assigned whole. The rest are zeroed.
  if (type == f::PageType::kData || type == f::PageType::kAtomicData || type == f::PageType::kParity) {
    b->data.resize(f.geo_.page_data_bytes);
  } else {
    b->data.assign(f.geo_.page_data_bytes, 0);
  }
  b->meta.assign(f.geo_.meta_bytes_per_page(), 0xFF);
  b->lbas.assign(S(), f::kNoLba);
  return b;
}

Ftl::PageBuf* Ftl::Impl::AppendSector(AppendPoint& ap, uint64_t lba, const uint8_t* src, WriteCtx* ctx,
                        Leb* src_victim, Psa prev, Psa copy_from, std::optional<uint32_t> crc) {
  const bool copy = src == nullptr;
  if (ap.open != nullptr && (ap.open->type != f::PageType::kData || ap.open->copy != copy)) SubmitOpen(ap);
  // A page holds one victim's relocated sectors at most: its durability releases that
  // victim (PageBuf::victim), and victims overlap (Relocation::Drain).
  if (ap.open != nullptr && src_victim != nullptr && ap.open->victim != nullptr && ap.open->victim != src_victim) {
    SubmitOpen(ap);
  }
  // A gathered copy has at most kMaxCopySegments runs: a sector that would start one more
  // (small sectors on a large page) goes to the next page.
  if (copy && ap.open != nullptr && ap.open->used != 0 && ap.open->copy_runs >= nand::kMaxCopySegments &&
      !CopyRunContinues(ap.open->csrc[ap.open->used - 1], copy_from)) {
    SubmitOpen(ap);
  }
  if (ap.open == nullptr) {
    ap.open = NewPage(ap, f::PageType::kData);
    if (ap.open == nullptr) return nullptr;
    PageBuf* b = ap.open;
    b->ccrc.assign(S(), 0);
    if (copy) {
      b->copy = true;
      b->csrc.assign(S(), kUnmapped);
    }
    // Groomer pages are never padded on idle: they fill, or are pushed out when a
    // victim must be released. Host pages are programmed when nothing more is coming,
    // unless one sector fills them (one sector per page): then the page is submitted
    // below, at once, and a flush would only cost a timer per write.
    if (!ap.gc && S() > 1) {
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
    fmt::print(stderr, "trace t={} append gc={} was psa {} -> leb {} die {} page {} slot {} {}\n",
               f.clock_.Now(), ap.gc, f.map_.Get(lba), b->leb, b->die, b->page, b->used,
               copy ? fmt::format("copy of psa {}", copy_from) : fmt::format("data {:02x}{:02x}", src[0], src[1]));
  }
  const uint32_t slot = b->used++;
  if (copy) {
    if (slot == 0 || !CopyRunContinues(b->csrc[slot - 1], copy_from)) ++b->copy_runs;
    b->csrc[slot] = copy_from;
    b->ccrc[slot] = crc.value_or(0);
  } else {
    uint8_t* dst = b->data.data() + uint64_t{slot} * f.sector_bytes_;
    if (crc) {
      std::memcpy(dst, src, f.sector_bytes_);
      b->ccrc[slot] = *crc;
    } else {
      b->ccrc[slot] = Crc32cCopy(dst, src, f.sector_bytes_);  // the check rides the one copy
    }
  }
  b->lbas[slot] = lba;
  if (ctx != nullptr) {
    ++ctx->remaining;
    b->waiters.push_back(ctx);
  }
  if (src_victim != nullptr && b->victim == nullptr) {
    b->victim = src_victim;
    Relocation::AddRef(*src_victim);
  }
  if (b->prev.size() != S()) b->prev.assign(S(), kKeepMapping);
  Psa before = prev == kUnmapped - 2 ? f.map_.Get(lba) : prev;
  // A copy still in an open buffer is killed when the map moves: go back past it.
  for (AppendPoint* a : {&host, &gcap}) {
    PageBuf* o = a->open;
    if (o != nullptr && o != b && before < kKeepMapping && o->leb == addr.LebOf(before) &&
        o->die == addr.DieOf(before) && o->page == addr.PageOf(before)) {
      before = addr.SlotOf(before) < o->prev.size() ? o->prev[addr.SlotOf(before)] : kKeepMapping;
    }
  }
  if (before < kKeepMapping && b->leb == addr.LebOf(before) && b->die == addr.DieOf(before) &&
      b->page == addr.PageOf(before)) {
    before = addr.SlotOf(before) < b->prev.size() ? b->prev[addr.SlotOf(before)] : kKeepMapping;
  }
  b->prev[slot] = before;
  Pin(b, b->prev[slot]);
  Remap(lba, addr.Make(b->leb, b->die, b->page, slot));
  if (b->used == S()) SubmitOpen(ap);
  return b;
}

void Ftl::Impl::SubmitOpen(AppendPoint& ap) {
  PageBuf* b = ap.open;
  ap.open = nullptr;
  if (b == nullptr) return;
  for (uint32_t s = b->used; s < S(); ++s) b->lbas[s] = f::kNoLba;
  f.stats_.pad_sectors += S() - b->used;
  Submit(b);
}

void Ftl::Impl::Submit(PageBuf* b) {
  Leb& l = f.lebs_.leb(b->leb);
  // A row that ended short of its last member (a die left the LEB after the row began,
  // and the summary written at close goes on in the next row) gets its parity page
  // first: its members would otherwise wait for cover for ever, and each die's pages
  // must be programmed in order.
  if (l.par && b->type != f::PageType::kParity && l.par->row != UINT32_MAX &&
      l.par->row != b->page && !l.par->submitted) {
    SubmitParity(l);
  }
  // The row's accumulator: its first member takes one. A member adds to it and the
  // parity page takes it (no page data over the link: the controller's XOR of the
  // members is the page); without one the host sends the parity page.
  uint32_t acc = nand::kNoAccumulator;
  if (l.par && b->type != f::PageType::kParity) {
    const bool first = l.par->row != b->page;
    if (first && b->copy && gc_acc_reserved != nand::kNoAccumulator) {
      l.par->acc = gc_acc_reserved;  // reserved for it (CopyRowReady)
      gc_acc_reserved = nand::kNoAccumulator;
      acc = l.par->acc;
    } else if (first) {
      l.par->acc = TakeRowAcc();
      acc = l.par->acc;
    } else if (!l.par->submitted) {
      acc = l.par->acc;  // (a page after its row's parity adds to nothing)
    }
    // A copied member exists only in the accumulator: a row without one cannot have it.
    if (b->copy && acc == nand::kNoAccumulator && (first || !l.par->submitted)) RevertCopy(b);
  }
  b->seq = f.next_seq_++;
  b->submitted = true;
  if (b->group && b->group->IsCurrent(b->attempt)) {
    b->group->AddMember(b->seq, addr.Make(b->leb, b->die, b->page, 0));
  }
  if (l.open_seq == 0) l.open_seq = b->seq;
  PageContent content;
  content.type = b->type;
  content.seq = b->seq;
  content.epoch = f.epoch_;
  content.spp = S();
  content.sector_bytes = f.sector_bytes_;
  content.used = b->used;
  content.lbas = b->lbas.data();
  content.trims = &b->trims;
  if (b->ccrc.size() == S() && (b->type == f::PageType::kData || b->type == f::PageType::kAtomicData)) {
    content.crcs = b->ccrc.data();
  }
  const uint32_t zero_crc = b->used < S() ? ZeroSectorCrc() : 0;
  if (b->used < S()) content.zero_crc = &zero_crc;  // padding: every slot from `used` on
  if (b->type == f::PageType::kTrim) {
    l.trim_pages.push_back(b->page * D() + b->die);
    ++f.stats_.trim_pages;
  }
  if (!l.summary.empty() && b->type != f::PageType::kSummary) {
    SummaryEntry(content, &l.summary[(uint64_t{b->page} * D() + b->die) * (1 + S())]);
  }
  if (b->type == f::PageType::kParity) {
    // Formed in the controller: it XORs in the members' metadata as they landed.
    if (b->acc != nand::kNoAccumulator) std::fill(b->pmeta.begin(), b->pmeta.end(), 0);
    stripe.FillParityMeta(b->meta.data(), b->seq, b->lbas[0], b->pmeta, f.epoch_);
  } else {
    SealPage(content, b->data, b->meta.data());
    // The sectors' CRCs as sealed (the summary's copy of them: format 1.6).
    if (!l.summary_crc.empty() && (b->type == f::PageType::kData || b->type == f::PageType::kAtomicData)) {
      const auto* e = reinterpret_cast<const f::SectorEntry*>(b->meta.data() + sizeof(f::PageHeader));
      uint32_t* c = &l.summary_crc[(uint64_t{b->page} * D() + b->die) * S()];
      for (uint32_t s = 0; s < S(); ++s) c[s] = e[s].crc;
    }
  }
  if (Traced(b)) {
    fmt::print(stderr, "trace t={} submit leb {} die {} page {} seq {} good dies {}{}\n", f.clock_.Now(),
               b->leb, b->die, b->page, b->seq, l.good_dies(), b->copy ? " (copy)" : "");
  }
  ++l.inflight;
  inflight_seqs.Insert(b->seq);
  if (b->victim != nullptr) {
    b->gc_queued = true;
    ++gc.queued;
    NoteQueued();
  }
  ++f.stats_.pages_programmed;
  // A parity page is fenced: accepted only once every member before it is, so a
  // durable parity page always has its members in the buffer or on flash.
  nand::ProgramRequest req{{b->die, b->leb, b->page}, b->data.data(), b->meta.data(),
                           b->type == f::PageType::kParity};
  req.acc = acc;
  if (b->type == f::PageType::kParity && b->acc != nand::kNoAccumulator) {
    req.acc = b->acc;
    req.acc_op = b->final_parity ? nand::AccOp::kTake : nand::AccOp::kPeek;
    req.data = nullptr;
    SetAccMeta(req);
  }
  b->acc_used = b->copy ? acc : req.acc;
  if (b->acc_used < row_accs) ++acc_users[b->acc_used];
  if (b->copy) {
    SendCopy(b, acc);
  } else {
    f.pipe_.Program(req, [this, b](const Completion&) { OnAccepted(b); },
                    [this, b](const Completion& c) { OnDone(b, c); });
  }
  if (l.par && b->type != f::PageType::kParity) {
    const uint32_t pd = stripe.RowParityDie(l, b->page);
    // A member is covered once a durable parity includes it; a row without a parity
    // page (narrow LEB, failed parity die, parity already written at shutdown) cannot
    // be covered and is taken as it is.
    if (pd != kNoDie && l.good[pd] && !dies.failed(pd) &&
        !(l.par->row == b->page && l.par->submitted)) {
      b->covered = false;
      cover.Wait(l.index, b->page, pd, b);
    }
    AccumulateParity(l, b);
    if (UseStages()) {
      if (!b->covered) ScheduleStage();
    } else {
      ScheduleRowProtection(l, b->page);
    }
  }
}

void Ftl::Impl::SendCopy(PageBuf* b, uint32_t acc) {
  // What the page holds if a source cannot be read: nothing (every slot padding, as
  // SealPage seals one: no LBA, the CRC of a zeroed sector).
  b->fail_meta.assign(f.geo_.meta_bytes_per_page(), 0xFF);
  WriteSpareHeader(b->fail_meta.data(), f::PageType::kData, b->seq, f.epoch_, S());
  auto* e = reinterpret_cast<f::SectorEntry*>(b->fail_meta.data() + sizeof(f::PageHeader));
  const uint32_t zero_crc = ZeroSectorCrc();
  for (uint32_t s = 0; s < S(); ++s) e[s] = {f::kNoLba, zero_crc};
  SealSpareCrc(b->fail_meta.data(), S());
  nand::CopyRequest req;
  req.dst = {b->die, b->leb, b->page};
  req.meta = b->meta.data();
  req.fail_meta = b->fail_meta.data();
  req.acc = acc;
  // Slots whose sources follow each other in one page go as one segment (AppendSector
  // kept their runs within kMaxCopySegments).
  const uint32_t cps = f.sector_bytes_ / f.geo_.ecc_codeword_bytes;
  for (uint32_t s = 0; s < b->used; ++s) {
    const Psa p = b->csrc[s];
    if (s != 0 && CopyRunContinues(b->csrc[s - 1], p)) {
      req.segments[req.segment_count - 1].cw_count += cps;
      continue;
    }
    req.segments[req.segment_count++] = {{addr.DieOf(p), addr.LebOf(p), addr.PageOf(p)}, addr.SlotOf(p) * cps, cps};
  }
  ++f.stats_.copy_pages;
  f.pipe_.Copy(req, [this, b](const Completion&) { OnAccepted(b); },
               [this, b](const Completion& c) { OnDone(b, c); });
}

void Ftl::Impl::ScheduleRowProtection(Leb& l, uint32_t row) {
  if (!l.par || l.par->submitted || f.opts_.partial_parity_delay_ns == 0) return;
  const uint64_t mask = l.par->mask;
  const uint32_t leb = l.index;
  After(f.opts_.partial_parity_delay_ns, [this, leb, row, mask] {
    for (AppendPoint* ap : {&host, &gcap}) {
      if (ap->leb() != nullptr && ap->leb()->index == leb) ProtectPartialRow(*ap, row, mask);
    }
  });
}

void Ftl::Impl::ProtectPartialRow(AppendPoint& ap, uint32_t row, uint64_t mask) {
  Leb& l = *ap.leb();
  if (&ap == &gcap && gc.reloc.victim() != nullptr && l.par && l.par->row == row && !l.par->submitted &&
      gc.reloc.Reading()) {
    // The groomer is still moving data into this row: look again later rather than
    // spend a position on a partial parity page now.
    return ScheduleRowProtection(l, row);
  }
  if (device_lost || !l.par || l.par->submitted || l.par->row != row || l.par->mask != mask ||
      ap.open != nullptr || ap.pos.row() != row || l.state != LebState::kOpen) {
    return;  // the row moved on, or a page for it is being filled
  }
  // The next position must still be in this row, and not the last data position (that
  // one completes the row and its parity follows on its own).
  uint32_t next = ap.pos.die();
  while (next < D() && !stripe.DataPos(l, row, next)) ++next;
  if (next >= D()) return;
  uint32_t leb, die, page;
  if (stripe.IsLastDataPos(l, row, next) || stripe.RemainingPositions(l, row, next) <= stripe.summary_pages() + 1) {
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
  // (With the row's accumulator the controller forms the page: the host holds no XOR.)
  if (l.par->acc == nand::kNoAccumulator) b->data = l.par->data;
  b->pmeta = l.par->meta;
  b->lbas[0] = l.par->mask;
  b->acc = l.par->acc;  // peeks: the row goes on adding to it
  ++f.stats_.parity_pages;
  ++f.stats_.partial_parity_pages;
  Submit(b);
}

}  // namespace vsl::ftl
