// The groomer's I/O: it takes the victim GroomPolicy chooses (groom_policy.h), reads the
// positions Relocation hands out (relocation.h) a few pages at a time, appends their live
// sectors, writes the trim records Relocation carries, and acts on its release verdict.
#include <cmath>

#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {

void Ftl::Impl::MaybeGroom() {
  if (gc.reloc.victim() != nullptr || shutting_down || device_lost || CheckpointWanted()) return;
  GroomPolicy::Inputs in;
  // A draining victim's LEB is as good as free (its data has moved; it waits for its
  // last pages to land).
  in.need = f.lebs_.free_count() + gc.reloc.draining().size() <= f.opts_.gc_start_free_lebs;
  in.waiting = !gc.waiters.empty();
  in.room = policy.rebuild().empty() ? 0 : GroomerRoom();
  in.now_seq = f.next_seq_;
  in.victim_policy = f.opts_.victim_policy;
  in.first_data_leb = f.meta_lebs_;
  in.wl_max_spread = f.opts_.wl_max_spread;
  in.sectors_per_page = S();
  const GroomPolicy::Choice ch = policy.Choose(in, [this] { OnRebuildDrained(); });
  if (ch.kind == GroomPolicy::Kind::kRebuild) ++f.stats_.rebuild_lebs;
  if (ch.kind == GroomPolicy::Kind::kWear) ++f.stats_.wear_moves;
  Leb* v = ch.victim;
  if (v == nullptr) {
    if (!in.need && !in.waiting) return;  // idle, and no wear work
    if (in.need) Post([this] { FailStuckWrites(); });
    for (auto& w : gc.waiters) w(Status::Ok());
    gc.waiters.clear();
    return;
  }
  gc.reloc.Start(v);
  // Host sectors allowed per relocated sector: what this victim frees per sector moved.
  gc.pacer.Start(v->valid, v->capacity, 4.0 * S() * D());
  f.lebs_.SetState(*v, LebState::kVictim);
  ++f.stats_.victims;
  LoadVictimSummary(*v);
  if (ch.kind == GroomPolicy::Kind::kSpace) MaybePrefetchSummary();
  GroomStep();
}

void Ftl::Impl::FailBacklog(const char* why) {
  if (rw.empty()) return;
  Logger("ftl")->error("{}: {} sector(s) could not be rewritten under parity (no room)", why,
                       rw.size());
  std::vector<RewriteJob> jobs = rw.TakeAll();
  for (RewriteJob& job : jobs) {
    // The write never gets stored: the sector goes back to where it was before it.
    if (job.prev != kKeepMapping && f.map_.Get(job.lba) == job.from) Remap(job.lba, job.prev);
    rw.Release(job);
    for (WriteCtx* w : job.waiters) {
      w->status = Status::IOError("no room to rewrite the sector after a program failure");
      Ack(w);
    }
    if (job.victim != nullptr) {
      Relocation::DropRef(*job.victim);
      MaybeFinishVictim();
    }
  }
  RunBacklogWaiters();
}

void Ftl::Impl::FailStuckWrites() {
  if (gc.reloc.busy() || (pending.empty() && rw.empty()) || device_lost ||
      CheckpointWanted()) {
    return;
  }
  RunPending();
  if (gc.reloc.busy() || (pending.empty() && rw.empty()) ||
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

void Ftl::Impl::OnRebuildDrained() {
  if (OpenUnprotected() != 0) return;  // an open LEB joins the queue when it closes
  const uint32_t alive = AliveDies();
  const uint32_t failed = D() - alive;
  Event(failed == 0 ? std::string("FlashBack: every stripe row is protected again")
        : alive > StripeLayout::kMinStripeDies
            ? fmt::format("FlashBack rebuild complete: every stripe is formed without the "
                          "failed die(s) on {} dies; the pipe can survive another die "
                          "failure as far as spare room allows", alive)
            : fmt::format("FlashBack rebuild complete: every stripe is formed without the "
                          "failed die(s) on {} dies (mirrored); another die failure "
                          "leaves too few dies for parity", alive));
  UpdateMode();
}

void Ftl::Impl::UpdatePacingSlack() {
  const uint64_t leb = stripe.LebDataSectors(AliveDies());
  if (leb != 0) {
    // The room as it will be once the victim is released: free LEBs, what the open LEBs
    // have left, and what the victim frees beyond its live data still to move. Moving a
    // sector takes a position and frees one, so only host writes lower this; without the
    // victim's term it would fall by a LEB over each victim and jump back at its release,
    // and the feedback would swing the host's rate with it.
    const Leb* v = gc.reloc.victim();
    uint64_t room = uint64_t{f.lebs_.free_count()} * leb +
                    uint64_t{host.pos.DataPositionsLeft(stripe) + gcap.pos.DataPositionsLeft(stripe)} * S() +
                    (v != nullptr ? v->capacity - std::min(v->capacity, v->valid) : 0);
    for (const Leb* d : gc.reloc.draining()) room += d->capacity - std::min(d->capacity, d->valid);
    const double target = f.opts_.gc_reserve_lebs + kPacingTargetAboveReserve;
    gc.pacer.SetSlack(static_cast<double>(room) / static_cast<double>(leb) - target);
  }
}

uint32_t Ftl::Impl::MaxQueuedRelocation() const {
  const uint32_t two_per_die = std::max<uint32_t>(8, 2 * D());
  if (!CopyingFromSummary()) return two_per_die;
  // Copies from the summary read nothing first, and a copy holds its destination die's
  // admission order until its source page is read: queued two per die they stood in
  // front of most host pages. A die's time splits between host pages and relocated
  // ones as the pacer pays (rate() host sectors per sector moved), so about that share
  // of the dies may each hold one copy not yet in the buffer.
  const double share = 1.0 / (1.0 + std::max(0.0, gc.pacer.rate()));
  const auto n = static_cast<uint32_t>(std::ceil(share * D()));
  return std::clamp<uint32_t>(n, kMinQueuedCopies, two_per_die);
}

void Ftl::Impl::ReleaseQueued(PageBuf* b) {
  if (!b->gc_queued) return;
  b->gc_queued = false;
  --gc.queued;
  if (gc.gated && gc.queued + gc.reloc.reads() < MaxQueuedRelocation()) {
    gc.gated = false;
    Post([this] { GroomStep(); });
  }
}

uint64_t Ftl::Impl::GroomerRoom() {
  uint64_t room = uint64_t{f.lebs_.free_count()} * stripe.LebDataSectors(AliveDies());
  room += uint64_t{gcap.pos.DataPositionsLeft(stripe)} * S();
  return room;
}

void Ftl::Impl::GroomStep() {
  Leb* v = gc.reloc.victim();
  if (v == nullptr || gc.vsum.loading) return;
  const uint32_t max_queued = MaxQueuedRelocation();
  gc.gated = false;
  while (true) {
    // Each read in flight may fill up to a page of relocated data.
    if (gc.queued + gc.reloc.reads() >= max_queued) {
      gc.gated = true;
      break;
    }
    const auto r = gc.reloc.NextRead(f.opts_.gc_max_reads);
    if (!r) break;
    NoteQueued();
    const uint32_t die = r->die, page = r->page;
    const bool is_trim = r->is_trim;
    // A page on a failed die is never copied (nor its metadata read): it is read through
    // FlashBack (ReadPage). Copies that failed against a dead die once livelocked the groomer.
    const bool copy = use_copy && !is_trim && !dies.failed(die);
    if (copy && CopyingFromSummary() && CopyFromSummary(*v, die, page)) {
      gc.reloc.ReadDone();  // nothing read: the summary named its sectors
      continue;
    }
    if (copy) {
      // Controller-side relocation: only the page's metadata comes over the link.
      ++f.stats_.gc_meta_reads;
      Relocation::Buffer buf = gc.reloc.TakeBuffer(0, f.geo_.meta_bytes_per_page());
      f.pipe_.Read({{die, v->index, page}, f.geo_.codewords_per_page() - 1, 1, nullptr, buf->second.data()},
                   [this, v, die, page, buf](const Completion& c) {
                     if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(die);
                     if (c.status == FlashStatus::kUncorrectable) NoteDieError(die, v->index);
                     if (gc.reloc.victim() == v && !device_lost) {
                       if (c.ok()) {
                         CopyRelocate(*v, die, page,
                                      reinterpret_cast<const f::SectorEntry*>(buf->second.data() + sizeof(f::PageHeader)));
                       } else if (LostToHost(c.status)) {
                         DeviceLost();
                       } else {
                         ReadAndRelocate(v, die, page, false);  // through host memory, rebuilt
                       }
                     }
                     gc.reloc.ReadDone();
                     gc.reloc.ReturnBuffer(buf);
                     GroomStep();
                   });
      continue;
    }
    ReadPage(v, die, page, is_trim);
  }
  // A victim with nothing (left) to read is finished here, not by a read callback.
  if (gc.reloc.reads() == 0) MaybeFinishVictim();
}

void Ftl::Impl::ReadAndRelocate(Leb* v, uint32_t die, uint32_t page, bool is_trim) {
  gc.reloc.ExtraRead();
  ReadPage(v, die, page, is_trim);
}

void Ftl::Impl::RebuildVictimPage(Leb* v, uint32_t die, uint32_t page, bool is_trim, FlashStatus st) {
  RebuildPage(v->index, die, page,
              [this, v, die, page, is_trim, st](bool ok, std::vector<uint8_t> data, std::vector<uint8_t> meta) {
                gc.reloc.ReadDone();
                if (gc.reloc.victim() == v) {
                  Completion rc;
                  rc.status = ok ? FlashStatus::kOk : st;
                  Relocate(*v, die, page, rc, data, meta, is_trim);
                }
                GroomStep();
              });
}

void Ftl::Impl::ReadPage(Leb* v, uint32_t die, uint32_t page, bool is_trim) {
  // A die that stopped answering is not asked again: only a timeout would come.
  if (dies.silent(die) && !device_lost) return RebuildVictimPage(v, die, page, is_trim, FlashStatus::kDieTimeout);
  Relocation::Buffer buf = gc.reloc.TakeBuffer(f.geo_.page_data_bytes, f.geo_.meta_bytes_per_page());
  f.pipe_.Read({{die, v->index, page}, 0, 0, buf->first.data(), buf->second.data()},
               [this, v, die, page, buf, is_trim](const Completion& c) {
                 if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(die);
                 if (c.status == FlashStatus::kUncorrectable) NoteDieError(die, v->index);
                 if (!c.ok() && !LostToHost(c.status) && !device_lost) {
                   return RebuildVictimPage(v, die, page, is_trim, c.status);
                 }
                 gc.reloc.ReadDone();
                 if (gc.reloc.victim() == v) Relocate(*v, die, page, c, buf->first, buf->second, is_trim);
                 gc.reloc.ReturnBuffer(buf);  // read through: reusable
                 GroomStep();
               });
}

void Ftl::Impl::LoadVictimSummary(Leb& v) {
  auto& vs = gc.vsum;
  auto& nx = gc.vnext;
  vs.leb = nullptr;
  vs.loading = vs.ready = false;
  if (vs.left != 0) return;  // (never: a victim is read through before the next starts)
  if (nx.leb == &v && nx.open_seq == v.open_seq && (nx.loading || nx.ready)) {
    // Read ahead: its reads (if still in flight) are not the victim's, and GroomStep
    // hands out nothing until it is loaded, so the victim cannot finish meanwhile.
    std::swap(vs, nx);
    ++f.stats_.summary_prefetch_hits;
    return;
  }
  if (nx.leb == &v) return;  // a stale read ahead of it still in flight: page by page
  if (nx.leb != nullptr && nx.left == 0) {
    ++f.stats_.summary_prefetch_misses;
    nx.leb = nullptr;
    nx.loading = nx.ready = false;
  }
  ReadSummaryInto(vs, v, true);
}

bool Ftl::Impl::ReadSummaryInto(GroomerState::VictimSummary& vs, Leb& v, bool counted) {
  const uint32_t k = stripe.summary_pages();
  if (!use_copy || !stripe.summary_crcs() || !v.summary_ok || v.summary_at.size() != k || k == 0) return false;
  // A summary page on a die that stopped answering could only time out: the victim is
  // groomed page by page instead.
  for (const uint32_t at : v.summary_at) {
    if (dies.silent(at % D())) return false;
  }
  const uint32_t pb = f.geo_.page_data_bytes, mb = f.geo_.meta_bytes_per_page();
  vs.raw.resize(uint64_t{k} * pb);  // (kept from victim to victim: no allocation once grown)
  vs.raw_meta.resize(uint64_t{k} * mb);
  vs.left = k;
  vs.bad = false;
  vs.leb = &v;
  vs.open_seq = v.open_seq;
  vs.counted = counted;
  vs.loading = true;
  vs.ready = false;
  for (uint32_t j = 0; j < k; ++j) {
    const uint32_t die = v.summary_at[j] % D(), row = v.summary_at[j] / D();
    if (counted) gc.reloc.ExtraRead();
    ++f.stats_.gc_meta_reads;
    f.pipe_.Read({{die, v.index, row}, 0, 0, vs.raw.data() + uint64_t{j} * pb, vs.raw_meta.data() + uint64_t{j} * mb},
                 [this, j, die, vp = &v](const Completion& c) { VictimSummaryPageRead(vp, j, die, c); });
  }
  return true;
}

void Ftl::Impl::MaybePrefetchSummary() {
  auto& nx = gc.vnext;
  if (nx.leb != nullptr || nx.left != 0 || device_lost || shutting_down || !use_copy || !stripe.summary_crcs() ||
      !policy.rebuild().empty() || dies.alive() != D()) {
    return;
  }
  GroomPolicy::Inputs in;
  in.need = true;
  in.now_seq = f.next_seq_;
  in.victim_policy = f.opts_.victim_policy;
  in.first_data_leb = f.meta_lebs_;
  in.sectors_per_page = S();
  Leb* next = policy.PeekSpaceVictim(in);
  if (next != nullptr) ReadSummaryInto(nx, *next, false);
}

void Ftl::Impl::VictimSummaryPageRead(const Leb* v, uint32_t j, uint32_t die, const Completion& c) {
  // The summary this read fills: the victim's, or the one read ahead (a swap may have
  // moved it; its buffers moved with it).
  auto& vs = gc.vsum.leb == v && gc.vsum.left != 0 ? gc.vsum : gc.vnext;
  const uint32_t k = stripe.summary_pages(), pb = f.geo_.page_data_bytes, mb = f.geo_.meta_bytes_per_page();
  if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(die);
  if (c.status == FlashStatus::kUncorrectable) NoteDieError(die, v->index);
  if (LostToHost(c.status)) DeviceLost();
  const uint8_t* meta = vs.raw_meta.data() + uint64_t{j} * mb;
  const uint8_t* data = vs.raw.data() + uint64_t{j} * pb;
  const auto* h = reinterpret_cast<const f::PageHeader*>(meta);
  const auto* e = reinterpret_cast<const f::SectorEntry*>(meta + sizeof(f::PageHeader));
  // A summary page of this format, this LEB's j-th of k, whose data its CRC vouches for.
  if (!c.ok() || !f::HeaderValid(meta, S()) || h->type != static_cast<uint8_t>(f::PageType::kSummary) ||
      h->epoch != f.epoch_ || e[0].lba != (j | (uint64_t{k} << 32)) || e[0].crc != Crc32c(data, pb)) {
    vs.bad = true;
  }
  if (vs.counted) gc.reloc.ReadDone();
  if (--vs.left != 0) return;
  if (vs.leb != v || !vs.loading) {
    if (&vs != &gc.vsum && shutting_down) CheckShutdown();
    return;
  }
  vs.loading = false;
  const std::size_t grid_n = uint64_t{D()} * P() * (1 + S()), crc_n = uint64_t{D()} * P() * S();
  f::SummaryHeader sh{};
  std::memcpy(&sh, vs.raw.data(), sizeof(sh));
  if (vs.bad || vs.raw.size() < f::SummaryBytes(D(), P(), S(), true) || sh.magic != f::kSummaryMagic ||
      sh.leb != v->index || sh.dies != D() || sh.pages != P() || sh.spp != S()) {
    if (!device_lost && &vs == &gc.vsum) {
      Logger("ftl")->warn("summary of victim leb={} unusable: its pages' metadata is read instead", v->index);
    }
  } else {
    vs.grid.resize(grid_n);
    vs.crc.resize(crc_n);
    std::memcpy(vs.grid.data(), vs.raw.data() + sizeof(f::SummaryHeader), grid_n * 8);
    std::memcpy(vs.crc.data(), vs.raw.data() + sizeof(f::SummaryHeader) + grid_n * 8, crc_n * 4);
    vs.ready = true;
  }
  if (&vs == &gc.vsum) {
    GroomStep();
  } else if (shutting_down) {
    CheckShutdown();  // it waited for this read ahead
  }
}

bool Ftl::Impl::CopyFromSummary(Leb& v, uint32_t die, uint32_t page) {
  const uint64_t pos = uint64_t{page} * D() + die;
  const uint64_t* ent = &gc.vsum.grid[pos * (1 + S())];
  const auto type = static_cast<uint8_t>(ent[0] >> f::kSummaryTypeShift);
  if (ent[0] == 0 || (type != static_cast<uint8_t>(f::PageType::kData) &&
                      type != static_cast<uint8_t>(f::PageType::kAtomicData))) {
    return false;
  }
  f::SectorEntry e[256];  // (S() <= 255: Format refuses more)
  for (uint32_t s = 0; s < S(); ++s) {
    e[s] = {ent[1 + s], gc.vsum.crc[pos * S() + s]};
    const Psa p = addr.Make(v.index, die, page, s);
    const uint32_t slot = addr.SlotInLeb(p);
    if ((v.valid_bits[slot / 64] >> (slot % 64) & 1) == 0) continue;
    // Every live sector of the page must be the one the summary names (the map is the
    // truth; the summary only saves reading what the map cannot say: LBA and CRC).
    if (e[s].lba == f::kNoLba || e[s].lba >= f.map_.sectors() || f.map_.Get(e[s].lba) != p) return false;
  }
  CopyRelocate(v, die, page, e);
  return true;
}

void Ftl::Impl::CopyRelocate(Leb& v, uint32_t die, uint32_t page, const f::SectorEntry* e) {
  // No accumulator for the row the copy would join (every one is forming another row's
  // parity): this page moves through host memory instead.
  if (!CopyRowReady()) return ReadAndRelocate(&v, die, page, false);
  UpdatePacingSlack();
  for (uint32_t s = 0; s < S(); ++s) {
    const Psa p = addr.Make(v.index, die, page, s);
    const uint64_t lba = e[s].lba;
    if (lba == f::kNoLba || lba >= f.map_.sectors() || f.map_.Get(lba) != p) continue;
    if (!AppendSector(gcap, lba, nullptr, nullptr, &v, p, p, e[s].crc)) {
      if (nofree_victim_ != &v) {  // once per victim: every page of it would say the same
        Logger("ftl")->error("groomer has no free LEB to copy into (leb={} die={} page={}); its sectors stay",
                             v.index, die, page);
        nofree_victim_ = &v;
      }
      return;
    }
    ++f.stats_.gc_write_sectors;
    ++f.stats_.gc_copy_sectors;
    gc.pacer.SetBacklog(static_cast<double>(pending.size()));
    gc.pacer.Earn();
    if (!pending.empty() && gc.pacer.CanSpend()) {
      Post([this] { RunPending(); });
    }
  }
}

void Ftl::Impl::RevertCopy(PageBuf* b) {
  Leb* v = b->victim;
  std::vector<std::pair<uint32_t, uint32_t>> srcs;  // (die, page) of the victim to read
  uint32_t back = 0;
  for (uint32_t s = 0; s < b->used && s < b->csrc.size(); ++s) {
    const uint64_t lba = b->lbas[s];
    if (lba == f::kNoLba || b->csrc[s] >= kKeepMapping) continue;
    if (f.map_.Get(lba) != addr.Make(b->leb, b->die, b->page, s)) continue;  // written again since
    const Psa from = b->csrc[s];
    Remap(lba, from);  // back in the victim, which `b` holds
    ++back;
    const std::pair<uint32_t, uint32_t> at{addr.DieOf(from), addr.PageOf(from)};
    if (std::find(srcs.begin(), srcs.end(), at) == srcs.end()) srcs.push_back(at);
  }
  ++f.stats_.copy_fallbacks;
  if (!b->submitted) {
    // Never sent: it goes as a padding page instead.
    f.stats_.pad_sectors += b->used;
    f.stats_.gc_write_sectors -= std::min<uint64_t>(f.stats_.gc_write_sectors, back);
    f.stats_.gc_copy_sectors -= std::min<uint64_t>(f.stats_.gc_copy_sectors, back);
    std::fill(b->lbas.begin(), b->lbas.end(), f::kNoLba);
    b->used = 0;
    b->copy = false;
  }
  if (v == nullptr || gc.reloc.victim() != v || device_lost) return;
  for (const auto& [die, page] : srcs) ReadAndRelocate(v, die, page, false);
}

void Ftl::Impl::CopyFailed(PageBuf* b, const Completion& c) {
  Logger("ftl")->warn("copy to leb={} die={} page={} failed ({}): its sectors move through host memory",
                      b->leb, b->die, b->page, nand::FlashStatusName(c.status));
  Leb& l = f.lebs_.leb(b->leb);
  // The page holds nothing (fail_meta; the row's parity took that in): the summary must
  // list nothing there either.
  if (!l.summary.empty()) {
    uint64_t* ent = &l.summary[(uint64_t{b->page} * D() + b->die) * (1 + S())];
    for (uint32_t s = 0; s < S(); ++s) ent[1 + s] = f::kNoLba;
  }
  RevertCopy(b);
}

void Ftl::Impl::Relocate(Leb& v, uint32_t die, uint32_t page, const Completion& c,
                const std::vector<uint8_t>& data, const std::vector<uint8_t>& meta, bool is_trim) {
  if (LostToHost(c.status)) {
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
  if (is_trim) {
    // With a recovery base checkpoint on flash, records at or before it are in its
    // map and no recovery replays them; newer ones are kept. Without one, a record is
    // kept while data older than it may still be on flash, the victim's own included
    // (its erase could be cut short on some dies). Kept records are packed densely and
    // written when the victim's pages are done.
    const uint64_t oldest = f.base_ckpt_seq_ != 0 ? f.base_ckpt_seq_ : OldestDataSeqOnFlash();
    std::function<void(const f::TrimRecord&, bool)> trace;
    if (TraceLba() != UINT64_MAX) {
      trace = [&](const f::TrimRecord& r, bool kept) {
        if (TraceLba() - r.lba >= r.count) return;
        fmt::print(stderr, "trace t={} groomer {} trim record seq {} from leb {} die {} page {} (oldest {})\n",
                   f.clock_.Now(), kept ? "carries" : "drops", r.seq, v.index, die, page, oldest);
      };
    }
    gc.reloc.CarryTrims(meta.data(), data, S(), f.epoch_, oldest, trace);
    return;
  }
  UpdatePacingSlack();
  const auto* e = reinterpret_cast<const f::SectorEntry*>(meta.data() + sizeof(f::PageHeader));
  for (uint32_t s = 0; s < S(); ++s) {
    const Psa p = addr.Make(v.index, die, page, s);
    const uint64_t lba = e[s].lba;
    if (lba == f::kNoLba || lba >= f.map_.sectors() || f.map_.Get(lba) != p) continue;
    const uint8_t* src = data.data() + uint64_t{s} * f.sector_bytes_;
    if (Crc32c(src, f.sector_bytes_) != e[s].crc) {
      ++f.stats_.read_errors;
      continue;
    }
    AppendPoint& ap = f.opts_.separate_gc_stream ? gcap : host;
    if (!AppendSector(ap, lba, src, nullptr, &v, kUnmapped - 2, kUnmapped, e[s].crc)) {
      {
        uint32_t st[5] = {0, 0, 0, 0, 0};
        uint64_t valid = 0, cap = 0, held = 0;
        for (uint32_t i = f.meta_lebs_; i < f.lebs_.size(); ++i) {
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
    gc.pacer.SetBacklog(static_cast<double>(pending.size()));
    gc.pacer.Earn();
    if (!pending.empty() && gc.pacer.CanSpend()) {
      Post([this] { RunPending(); });
    }
  }
}

uint64_t Ftl::Impl::OldestDataSeqOnFlash() const {
  uint64_t oldest = UINT64_MAX;
  for (uint32_t i = f.meta_lebs_; i < f.lebs_.size(); ++i) {
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

void Ftl::Impl::WriteCarriedTrims(Leb& v) {
  const std::size_t per_page = f.geo_.page_data_bytes / sizeof(f::TrimRecord);
  std::vector<f::TrimRecord>& carry = gc.reloc.carried();
  while (!carry.empty()) {
    SubmitOpen(gcap);
    PageBuf* b = NewPage(gcap, f::PageType::kTrim);
    if (b == nullptr) {
      Logger("ftl")->warn("no room to carry {} trim records out of leb={}; it stays",
                          carry.size(), v.index);
      gc.reloc.Hold();
      carry.clear();
      return;
    }
    const std::size_t n = std::min(per_page, carry.size());
    b->trims.assign(carry.begin(), carry.begin() + static_cast<std::ptrdiff_t>(n));
    carry.erase(carry.begin(), carry.begin() + static_cast<std::ptrdiff_t>(n));
    b->victim = &v;
    Relocation::AddRef(v);
    Submit(b);
  }
}

void Ftl::Impl::MaybeFinishVictim() {
  // Draining victims go as their last relocated pages land (End takes one out of the list).
  for (std::size_t i = 0; i < gc.reloc.draining().size();) {
    if (!TryReleaseVictim(*gc.reloc.draining()[i])) ++i;
  }
  Leb* v = gc.reloc.victim();
  if (v == nullptr || gc.reloc.Reading()) return;
  if (!gc.reloc.carried().empty()) WriteCarriedTrims(*v);
  if (TryReleaseVictim(*v)) return;
  // Read through; it only waits for its pages to land. The next victim may start beside
  // it (relocation.h): the groomer keeps earning the host credits meanwhile.
  if (gc.reloc.CanDrain() && !device_lost && !shutting_down) {
    gc.reloc.Drain();
    ++f.stats_.victims_overlapped;
    ForgetVictimSummary();
    Post([this] { MaybeGroom(); });
  }
}

bool Ftl::Impl::TryReleaseVictim(Leb& vr) {
  Leb* v = &vr;
  // Relocated data must be durable before the victim may be erased, and so must every
  // newer copy of sectors it held (a write over them still on its way): if that copy
  // fails, the sector goes back here. A rewrite job waiting for room also pins the LEB
  // of its sector's previous copy; waiting for it here could deadlock (the room it needs
  // is this victim's), so the victim is kept (closed, not erased) and the job can still
  // go back to it.
  const uint32_t job_pins = rw.PinsOn(v->index);
  const Relocation::Verdict verdict = gc.reloc.Release(*v, job_pins, device_lost);
  if (verdict == Relocation::Verdict::kReading) return false;
  if (verdict == Relocation::Verdict::kRefs) {
    if (gcap.open != nullptr && gcap.open->victim == v) SubmitOpen(gcap);
    ScheduleStage();  // rows of relocated data went unstaged while the groomer read
    return false;
  }
  if (verdict == Relocation::Verdict::kPins) {
    for (AppendPoint* a : {&host, &gcap}) {
      if (a->open != nullptr && !a->open->pinned.empty() &&
          std::find(a->open->pinned.begin(), a->open->pinned.end(), v->index) != a->open->pinned.end()) {
        SubmitOpen(*a);
      }
    }
    ScheduleStage();
    return false;
  }
  if (verdict == Relocation::Verdict::kKeep) {
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
      if (dies.failed(d)) v->good[d] = 0;  // formed without failed dies from now on
    }
    if (v->stale_seq == 0 || (v->open_seq != 0 && v->open_seq < v->stale_seq)) {
      v->stale_seq = v->open_seq;
    }
    v->open_seq = 0;
    v->trim_pages.clear();
    v->summary_ok = false;
    f.lebs_.SetState(*v, LebState::kFree);
    // Space appeared: LEBs held back for lack of room may be tried again.
    for (uint32_t i = f.meta_lebs_; i < f.lebs_.size(); ++i) f.lebs_.leb(i).gc_skip = false;
  }
  if (gc.reloc.victim() == v) ForgetVictimSummary();
  gc.reloc.End(v);
  if (gc.reloc.victim() == nullptr && (gcap.open == nullptr || !gcap.open->copy)) DropCopyReservation();
  Post([this] {
    RunPending();
    MaybeGroom();
    if (!gc.reloc.busy()) RunBacklogWaiters();  // the groomer is done: no more room
    if (!gc.reloc.busy() && !gc.waiters.empty()) {
      for (auto& w : gc.waiters) w(Status::Ok());
      gc.waiters.clear();
    }
    if (shutting_down) CheckShutdown();
    CheckCheckpoint();
  });
  return true;
}

}  // namespace vsl::ftl
