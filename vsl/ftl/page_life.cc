// A submitted page's life: acknowledgement, accepted and done completions, pins on the
// places its sectors came from, reverting a page that can never be stored, and failed
// pages' live sectors and trim records written again (the rewrite backlog). Owns `rw`.
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {

void Ftl::Impl::Ack(WriteCtx* ctx) {
  if (--ctx->remaining == 0) {
    --open_writes;
    if (ctx->start != kTimeNever) f.stats_.write_latency.Record(f.clock_.Now() - ctx->start);
    Done d = std::move(ctx->done);
    Status s = ctx->status;
    write_ctxs.Give(ctx);
    d(s);
  }
}

void Ftl::Impl::OnAccepted(PageBuf* b) {
  b->landed = true;
  ReleaseQueued(b);
  // A row's parity page has taken its accumulator (zeroed it): free for another row.
  if (b->final_parity) ReleaseRowAcc(b->acc, true);
  if (!PlpDurableOnAccept()) return;
  b->accepted = true;
  if (b->type == f::PageType::kParity) {
    CoverRow(b->leb, b->page, b->lbas[0], b->final_parity, b->final_parity);
  }
  Progress(b);
}

void Ftl::Impl::Pin(PageBuf* b, Psa p) {
  if (p >= kKeepMapping) return;
  const uint32_t l = addr.LebOf(p);
  if (std::find(b->pinned.begin(), b->pinned.end(), l) != b->pinned.end()) return;
  b->pinned.push_back(l);
  ++f.lebs_.leb(l).pins;
}

void Ftl::Impl::RevertPage(PageBuf* b) {
  if (b->type != f::PageType::kData) return;
  for (uint32_t s = 0; s < S() && s < b->prev.size(); ++s) {
    const uint64_t lba = b->lbas[s];
    if (lba == f::kNoLba || b->prev[s] == kKeepMapping) continue;
    const Psa here = addr.Make(b->leb, b->die, b->page, s);
    if (f.map_.Get(lba) == here) Remap(lba, b->prev[s]);
    for (const auto& owned : pages.live()) {
      PageBuf* q = owned.get();
      if (q == b) continue;
      for (Psa& pv : q->prev) {
        if (pv != here) continue;
        pv = b->prev[s];
        Pin(q, pv);
      }
    }
    rw.Retarget(here, b->prev[s]);
  }
}

void Ftl::Impl::MarkDurable(PageBuf* b) {
  if (b->durable) return;
  b->durable = true;
  Unpin(b);
  inflight_seqs.Erase(b->seq);
  rw.SettleFailedTrims(!inflight_seqs.empty(), inflight_seqs.empty() ? 0 : inflight_seqs.oldest());
  if (b->victim != nullptr) {
    Relocation::DropRef(*b->victim);
    b->victim = nullptr;
    MaybeFinishVictim();
  }
  CheckFlushWaiters();
}

void Ftl::Impl::OnDone(PageBuf* b, const Completion& c) {
  Leb& l = f.lebs_.leb(b->leb);
  --l.inflight;
  ReleaseQueued(b);
  if (b->acc_used < row_accs) {
    --acc_users[b->acc_used];
    ReuseDirtyAcc(b->acc_used);
  }
  // A parity page that never landed (its die dead, the power gone) took nothing: its
  // accumulator still holds the row.
  if (b->final_parity && !b->landed) ReleaseRowAcc(b->acc, false);
  if (LostToHost(c.status)) {
    // Power lost or the die was reset: nothing can be rewritten now. Unacknowledged
    // writes fail; acknowledged ones are the controller's (PLP) or recovery's business.
    DeviceLost();
    Uncover(b);
    FailWaiters(b);
    pages.Release(b);
    FailUncovered();
  } else if (b->copy && (c.status == FlashStatus::kUncorrectable ||
                          (c.status == FlashStatus::kDieTimeout && !dies.failed(b->die)))) {
    // A source of the copy could not be read: the page is on flash holding nothing, and
    // its sectors go back to their sources to move through host memory (rebuilt there
    // from parity if need be). The host's own reads of those sources find the die at
    // fault.
    CopyFailed(b, c);
    b->flash_done = true;
    Progress(b);
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
      l.summary_left = 0;  // the groomer reads this LEB's pages' metadata instead
      MarkDurable(b);
    } else if (b->type == f::PageType::kAtomicData &&
               !(b->group && b->group->committed() && b->group->IsCurrent(b->attempt))) {
      // Not committed: the attempt is void (the batch is written again); its sectors
      // were never mapped, so there is nothing to rewrite.
      Logger("ftl")->warn("program failed leb={} die={} page={} status={} in an atomic batch; "
                          "retrying the batch", b->leb, b->die, b->page,
                          nand::FlashStatusName(c.status));
      if (b->group && b->group->IsCurrent(b->attempt)) b->group->Fail();
      FailWaiters(b);
    } else if (b->copy) {
      Logger("ftl")->warn("copy failed to program leb={} die={} page={} status={}", b->leb, b->die,
                          b->page, nand::FlashStatusName(c.status));
      if (b->victim != nullptr) {
        RevertCopy(b);  // its sources are still there
      } else {
        // Durable already (its row's parity holds it) and its victim gone: rebuild it.
        const uint32_t leb = b->leb, die = b->die, page = b->page;
        RebuildPage(leb, die, page, [this, leb, die, page](bool ok, std::vector<uint8_t> data,
                                                           std::vector<uint8_t> meta) {
          if (ok) RelocateRebuilt(leb, die, page, data, meta);
        });
      }
      MarkDurable(b);
    } else {
      Logger("ftl")->warn("program failed leb={} die={} page={} status={}; rewriting", b->leb,
                          b->die, b->page, nand::FlashStatusName(c.status));
      Rewrite(b);
    }
    pages.Release(b);
  } else {
    b->flash_done = true;
    if (b->type == f::PageType::kSummary && l.summary_left != 0 && --l.summary_left == 0) l.summary_ok = true;
    if (b->type == f::PageType::kParity && !b->accepted) {
      CoverRow(b->leb, b->page, b->lbas[0], b->final_parity, b->final_parity);
    }
    Progress(b);  // frees `b` unless it still waits for cover
    // With the device lost (another host fenced this one while the controller still
    // flushed what it had accepted) no parity page can follow: its row is never covered.
    if (device_lost) FailUncovered();
  }
  MaybeWriteSummary(l);
  MaybeGroom();
  if (shutting_down) CheckShutdown();
  CheckCheckpoint();
}

void Ftl::Impl::Rewrite(PageBuf* b) {
  if (b->type == f::PageType::kTrim) {
    auto& tp = f.lebs_.leb(b->leb).trim_pages;
    tp.erase(std::remove(tp.begin(), tp.end(), b->page * D() + b->die), tp.end());
    if (!RetryTrim(b->trims, b->waiters)) {
      // Held while a checkpoint has every LEB closed: written once it is done.
      if (ckpt.quiesce && !device_lost) {
        rw.Defer(b->trims, std::move(b->waiters));
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
    if (f.map_.Get(lba) != addr.Make(b->leb, b->die, b->page, s)) {
      if (f.map_.Get(lba) == kUnmapped && rw.InFailedTrim(lba, b->seq)) {
        // Trimmed after this write, and that trim never reached flash: neither did
        // this write.
        for (WriteCtx* w : waiters) {
          w->status = Status::IOError("write could not be stored, and the trim after it failed");
        }
      }
      AddSupersedingHolders(lba, b, targets);
      // Or a trim held back by a checkpoint: the writes wait for it to be stored.
      if (f.map_.Get(lba) == kUnmapped) rw.JoinDeferredCovering(lba, waiters);
      // The newer state may itself be waiting for room to be rewritten.
      rw.JoinJobsOf(lba, f.map_.Get(lba), waiters);
      continue;
    }
    const uint8_t* src = b->data.data() + uint64_t{s} * f.sector_bytes_;
    // (Host sectors do not take the groomer's reserve: it must stay free for the
    // groomer to make room, for them too.)
    const Psa before = s < b->prev.size() ? b->prev[s] : kKeepMapping;
    // Its CRC was sealed into the failed page from these very bytes.
    const std::optional<uint32_t> crc =
        !b->copy && s < b->ccrc.size() && s < b->used ? std::optional<uint32_t>(b->ccrc[s]) : std::nullopt;
    PageBuf* t = AppendSector(ap, lba, src, nullptr, b->victim, before, kUnmapped, crc);
    if (t == nullptr) {
      // No page anywhere now: the sector waits in host memory (its writes unanswered,
      // a groomer victim it came from held) until space appears.
      Logger("ftl")->warn("no room to rewrite lba={} after a program failure; it waits for space", lba);
      RewriteJob job{lba, addr.Make(b->leb, b->die, b->page, s),
                     std::vector<uint8_t>(src, src + f.sector_bytes_), {}, b->victim, before};
      if (job.victim != nullptr) Relocation::AddRef(*job.victim);
      for (WriteCtx* w : waiters) {
        ++w->remaining;
        job.waiters.push_back(w);
      }
      rw.Add(std::move(job));
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

bool Ftl::Impl::RetryTrim(const std::vector<f::TrimRecord>& trims, std::vector<WriteCtx*>& waiters) {
  PageBuf* nb = NewPage(host, f::PageType::kTrim);
  if (nb == nullptr) nb = NewPage(gcap, f::PageType::kTrim);
  if (nb == nullptr) return false;
  nb->trims = trims;
  nb->waiters = std::move(waiters);
  waiters.clear();
  Submit(nb);
  return true;
}

void Ftl::Impl::RunDeferredTrims() {
  for (auto& t : rw.TakeDeferred()) {
    if (device_lost || !RetryTrim(t.trims, t.waiters)) {
      for (WriteCtx* c : t.waiters) {
        c->status = Status::IOError("trim could not be stored (power lost or no room)");
        Ack(c);
      }
    }
  }
}

void Ftl::Impl::AddSupersedingHolders(uint64_t lba, PageBuf* except, std::vector<PageBuf*>& out) {
  const Psa cur = f.map_.Get(lba);
  for (const auto& own : pages.live()) {
    PageBuf* h = own.get();
    if (h == except || h->durable) continue;
    bool holds = false;
    if (cur != kUnmapped) {
      holds = (h->type == f::PageType::kData || h->type == f::PageType::kAtomicData) &&
              h->leb == addr.LebOf(cur) && h->die == addr.DieOf(cur) && h->page == addr.PageOf(cur);
    } else if (h->type == f::PageType::kTrim) {
      for (const auto& t : h->trims) holds = holds || f::TrimCovers(t, lba);
    }
    if (holds && std::find(out.begin(), out.end(), h) == out.end()) out.push_back(h);
  }
}

void Ftl::Impl::QueueRewrite(uint32_t leb, uint32_t die, uint32_t page, const std::vector<uint8_t>& data,
                    const std::vector<uint8_t>& meta) {
  ForEachLiveSector(leb, die, page, data, meta, [&](uint64_t lba, Psa p, const uint8_t* src) {
    rw.Add({lba, p, std::vector<uint8_t>(src, src + f.sector_bytes_), {}, nullptr});
    return true;
  });
}

bool Ftl::Impl::DrainRewrites() {
  bool any = false;
  while (!rw.empty()) {
    RewriteJob& job = rw.front();
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
    RewriteJob done = rw.TakeFront();
    rw.Release(done);  // the new page pins `prev` itself now
    for (WriteCtx* w : done.waiters) Ack(w);
    if (done.victim != nullptr) {
      Relocation::DropRef(*done.victim);
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

void Ftl::Impl::RunBacklogWaiters() {
  if (!rw.has_drain_waiters()) return;
  if (!rw.empty()) {
    Logger("ftl")->warn("{} sector(s) wait for room to be rewritten under parity", rw.size());
  }
  std::vector<Function<void()>> w = rw.TakeDrainWaiters();
  Post([w = std::move(w)]() mutable {
    for (auto& fn : w) fn();
  });
}

void Ftl::Impl::FailWaiters(PageBuf* b) {
  if (b->type == f::PageType::kTrim && !device_lost) {
    rw.NoteFailedTrims(b->trims);
  }
  RevertPage(b);
  for (WriteCtx* c : b->waiters) {
    c->status = Status::IOError("write could not be stored (power lost or no room)");
    Ack(c);
  }
  b->waiters.clear();
  MarkDurable(b);
}

}  // namespace vsl::ftl
