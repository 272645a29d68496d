// Host work waiting for room (`pending`): writes, trims and atomic batches run as free
// LEBs and grooming credits allow; flush waiters complete once everything before them is
// durable.
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {

void Ftl::Impl::RunPending() {
  if (device_lost) {
    for (RewriteJob& job : rw.TakeAll()) {
      rw.Release(job);
      for (WriteCtx* w : job.waiters) {
        w->status = Status::IOError("device lost (power cut)");
        Ack(w);
      }
    }
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
        bool paid = false;
        if (!PayHostSector(&paid)) return;  // resumed as the groomer relocates
        if (!AppendSector(host, p.lba + p.done_sectors,
                          p.data + p.done_sectors * f.sector_bytes_, p.ctx, nullptr)) {
          UnpayHostSector(paid);
          ++f.stats_.room_waits;
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
      if (g->failed()) {
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

bool Ftl::Impl::DoTrim(uint64_t lba, uint64_t count, Done& done) {
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
  auto* ctx = write_ctxs.Take();
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

void Ftl::Impl::CheckFlushWaiters() {
  const uint64_t oldest = inflight_seqs.empty() ? UINT64_MAX : inflight_seqs.oldest();
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

}  // namespace vsl::ftl
