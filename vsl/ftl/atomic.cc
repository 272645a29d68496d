// Atomic batches (Ftl::WriteAtomic): members appended to pages of their own, committed
// by one trim page of commit records once every member is durable, retried when a
// member fails; the LEBs involved stay pinned until the batch resolves.
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {

bool Ftl::Impl::AppendAtomic(const std::shared_ptr<AtomicGroup>& g) {
  if (g->members_ctx == nullptr) {  // a new attempt
    auto* ctx = write_ctxs.Take();
    ctx->done = [this, g](Status s) { OnMembersDone(g, s); };
    ++open_writes;
    g->members_ctx = ctx;
  }
  while (const auto sector = g->Next(f.sector_bytes_)) {
    bool paid = false;
    if (!PayHostSector(&paid)) return false;
    if (!AppendAtomicSector(g, sector->lba, sector->src)) {
      UnpayHostSector(paid);
      return false;
    }
  }
  if (host.open != nullptr && host.open->group == g) SubmitOpen(host);
  return true;
}

bool Ftl::Impl::AppendAtomicSector(const std::shared_ptr<AtomicGroup>& g, uint64_t lba, const uint8_t* src) {
  AppendPoint& ap = host;
  if (ap.open != nullptr && ap.open->group != g) SubmitOpen(ap);
  if (ap.open == nullptr) {
    PageBuf* b = NewPage(ap, f::PageType::kAtomicData);
    if (b == nullptr) return false;
    ap.open = b;
    b->group = g;
    b->attempt = g->attempt();
    ++g->members_ctx->remaining;
    b->waiters.push_back(g->members_ctx);
    if (g->Pin(b->leb)) {
      ++f.lebs_.leb(b->leb).pins;
      ++f.lebs_.leb(b->leb).atomic_pins;
    }
  }
  PageBuf* b = ap.open;
  const uint32_t slot = b->used++;
  std::memcpy(b->data.data() + uint64_t{slot} * f.sector_bytes_, src, f.sector_bytes_);
  b->lbas[slot] = lba;
  g->Placed(lba, addr.Make(b->leb, b->die, b->page, slot));
  if (lba == TraceLba()) {
    fmt::print(stderr, "trace t={} atomic append -> leb {} die {} page {} slot {}\n", f.clock_.Now(),
               b->leb, b->die, b->page, slot);
  }
  if (b->used == S()) SubmitOpen(ap);
  return true;
}

void Ftl::Impl::OnMembersDone(const std::shared_ptr<AtomicGroup>& g, Status s) {
  g->members_ctx = nullptr;
  Post([this, g, s] {
    if (!s.ok() || g->failed()) {
      RetryGroup(g, s.ok() ? Status::IOError("a page of the atomic batch could not be stored") : s);
    } else {
      pending.push_front({Pending::kCommit, 0, 0, nullptr, 0, nullptr, nullptr, g});
    }
    RunPending();
  });
}

void Ftl::Impl::RetryGroup(const std::shared_ptr<AtomicGroup>& g, Status why) {
  g->NewAttempt();
  ReleaseAtomicPins(*g);
  if (device_lost || !g->MayRetry()) return FinishGroup(g, why);
  ++f.stats_.atomic_retries;
  Logger("ftl")->warn("atomic batch attempt {} failed ({}); writing it again", g->attempt(),
                      why.ToString());
  pending.push_front({Pending::kAtomic, 0, 0, nullptr, 0, nullptr, nullptr, g});
}

bool Ftl::Impl::CommitAtomic(const std::shared_ptr<AtomicGroup>& g) {
  if (g->CommitRecordCount() > RecordsPerPage()) {
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
  b->trims = g->CommitRecords(cseq);
  for (const AtomicOp& o : g->ops()) {
    if (o.kind != AtomicOp::kTrim) continue;
    std::vector<uint64_t> mapped;
    f.map_.ForEachMappedIn(o.lba, o.count, [&](uint64_t l, Psa p) {
      mapped.push_back(l);
      Pin(b, p);
    });
    for (uint64_t l : mapped) Remap(l, kUnmapped);
    f.stats_.trim_sectors += o.count;
  }
  for (const auto& [lba, psa] : g->placed()) {
    if (lba == TraceLba()) {
      fmt::print(stderr, "trace t={} atomic commit seq {} maps it to leb {} die {} page {} (commit page leb {} die {} page {})\n",
                 f.clock_.Now(), cseq, addr.LebOf(psa), addr.DieOf(psa), addr.PageOf(psa), b->leb, b->die, b->page);
    }
    Pin(b, f.map_.Get(lba));
    Remap(lba, psa);
  }
  g->MarkCommitted();
  auto* ctx = write_ctxs.Take();
  ctx->fua = g->fua();
  ctx->done = [this, g](Status s) { FinishGroup(g, s); };
  ++open_writes;
  b->waiters.push_back(ctx);
  Submit(b);
  return true;
}

void Ftl::Impl::ReleaseAtomicPins(AtomicGroup& g) {
  for (uint32_t l : g.TakePins()) {
    --f.lebs_.leb(l).atomic_pins;
    UnpinLeb(l);
  }
}

void Ftl::Impl::FinishGroup(const std::shared_ptr<AtomicGroup>& g, Status s) {
  if (!g->Finish()) return;
  ReleaseAtomicPins(*g);
  --atomic_inflight;
  Done d = std::move(g->done);
  d(s);
  // A checkpoint held back for this batch may go now: at the next turn, not inside the
  // page completion that answered the batch.
  Post([this] { CheckCheckpoint(); });
}

}  // namespace vsl::ftl
