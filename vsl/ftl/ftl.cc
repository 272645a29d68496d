#include "vsl/ftl/ftl.h"

#include <algorithm>
#include <cstring>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "vsl/core/crc.h"
#include "vsl/core/log.h"
#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/ftl_impl.h"
#include "vsl/ftl/wear.h"

namespace vsl::ftl {


// ---------------------------------------------------------------------------------------

Ftl::Ftl(nand::FlashPipe& pipe, Clock& clock, const FtlOptions& opts, const nand::Geometry& g,
         uint64_t sectors, uint32_t sector_bytes, uint32_t slot_lebs)
    : retry_(std::make_unique<nand::ReadRetryPipe>(pipe, opts.read_retries)),
      pipe_(*retry_),
      clock_(clock),
      opts_(opts),
      geo_(g),
      sector_bytes_(sector_bytes),
      spp_(g.page_data_bytes / sector_bytes),
      slot_lebs_(slot_lebs),
      meta_lebs_(2 * slot_lebs),
      map_(sectors),
      lebs_(g.blocks_per_lun, g.dies_per_pipe(), g.dies_per_pipe() * g.pages_per_block * spp_,
            g.dies_per_pipe() * g.pages_per_block * spp_),
      impl_(std::make_unique<Impl>(*this)) {
  for (uint32_t i = 0; i < meta_lebs_; ++i) lebs_.SetState(lebs_.leb(i), LebState::kMeta);
  impl_->InitAccumulators();
}

Ftl::~Ftl() = default;

std::pair<uint32_t, uint32_t> Ftl::EraseCountRange() const { return ftl::EraseCountRange(lebs_, meta_lebs_); }

std::string_view HealthModeName(HealthMode m) {
  switch (m) {
    case HealthMode::kNormal: return "healthy";
    case HealthMode::kReducedWrite: return "reduced-write";
    case HealthMode::kReadOnly: return "read-only";
  }
  return "?";
}

ReserveStatus Ftl::reserve_status() const {
  const Impl& im = *impl_;
  ReserveStatus r;
  r.mode = im.mode;
  r.percent = im.reserve.percent;
  r.sectors = im.reserve.sectors;
  r.full_sectors = im.reserve.full_sectors;
  r.usable_sectors = im.reserve.surviving;
  r.warning = im.reserve.percent <= kReserveWarnPercent;
  return r;
}

HealthMode Ftl::health_mode() const { return impl_->mode; }

FlashBackStatus Ftl::flashback_status() const {
  FlashBackStatus st;
  const Impl& im = *impl_;
  st.enabled = im.stripe.parity();
  for (uint32_t d = 0; d < im.dies.dies(); ++d) {
    if (im.dies.failed(d)) st.failed_dies.push_back(d);
  }
  st.active = !st.failed_dies.empty();
  st.rebuild_lebs_left = static_cast<uint32_t>(im.policy.rebuild().size()) + im.OpenUnprotected();
  st.rebuilt_pages = stats_.rebuilt_pages;
  st.lost_lbas = im.dies.lost();
  st.unnamed_lost_stripes = im.dies.unnamed_lost_stripes;
  st.failure_checkpoints = stats_.failure_checkpoints;
  st.mode = im.mode;
  st.events = im.dies.events();
  return st;
}

bool Ftl::Quiescent() const { return impl_->scheduled == 0; }

void Ftl::Abandon() { impl_->Abandon(); }

bool Ftl::idle() const {
  return impl_->pages.empty() && !impl_->gc.reloc.busy() && impl_->gc.vnext.left == 0 && impl_->pending.empty();
}

uint64_t Ftl::leb_data_sectors() const {
  return impl_->stripe.LebDataSectors(geo_.dies_per_pipe());
}

uint64_t Ftl::memory_bytes() const {
  uint64_t leb_bytes = 0;
  for (uint32_t i = 0; i < lebs_.size(); ++i) {
    const Leb& l = lebs_.leb(i);
    leb_bytes += sizeof(Leb) + l.good.size() + l.valid_bits.size() * 8 + l.trim_pages.size() * 4;
  }
  return map_.memory_bytes() + leb_bytes;
}

Status Ftl::CheckRequest(const char* what, uint64_t lba, uint64_t count, const void* buf,
                         bool needs_buf) const {
  if (impl_->shutting_down) {
    return Status::FailedPrecondition(fmt::format("{} after shutdown", what));
  }
  if (needs_buf && buf == nullptr) {
    return Status::InvalidArgument(fmt::format("{} without a buffer", what));
  }
  if (count == 0 || lba >= sectors() || count > sectors() - lba) {
    return Status::InvalidArgument(fmt::format(
        "{} of {} sectors at {} is outside the {} sectors of the device", what, count, lba,
        sectors()));
  }
  return Status::Ok();
}

void Ftl::Reject(Done done, Status s) {
  impl_->Post([d = std::move(done), s]() mutable { d(s); });
}

void Ftl::Write(uint64_t lba, uint32_t count, const uint8_t* data, bool fua, Done done) {
  if (Status s = CheckRequest("write", lba, count, data, true); !s.ok()) {
    return Reject(std::move(done), s);
  }
  if (impl_->mode == HealthMode::kReadOnly) {
    return Reject(std::move(done), Status::FailedPrecondition(
        "the pipe is read-only: after bad blocks and die failures the surviving flash cannot hold its data"));
  }
  if ((sparse_ || impl_->reserve.surviving < map_.sectors()) && map_.mapped() + count > WriteRoom()) {
    uint64_t fresh = 0;  // only sectors not yet mapped need new room
    for (uint32_t i = 0; i < count; ++i) fresh += map_.Get(lba + i) == kUnmapped;
    if (map_.mapped() + fresh > WriteRoom()) {
      return Reject(std::move(done), Status::NoSpace(
          impl_->mode == HealthMode::kReducedWrite
              ? "reduced-write: the flash left after bad blocks and die failures is full"
              : "the sparse device's physical space is full"));
    }
  }
  stats_.host_write_sectors += count;
  ++stats_.host_writes;
  auto* ctx = impl_->write_ctxs.Take();
  ctx->fua = fua;
  ctx->start = clock_.Now();
  ctx->done = std::move(done);
  ++impl_->open_writes;
  const bool queued = !impl_->pending.empty();
  impl_->pending.push_back({Impl::Pending::kWrite, lba, count, data, 0, ctx, nullptr, nullptr});
  if (queued) ++stats_.write_stalls;
  impl_->RunPending();
  if (!impl_->pending.empty() && !queued) ++stats_.write_stalls;
}

void Ftl::Trim(uint64_t lba, uint64_t count, Done done) {
  if (Status s = CheckRequest("trim", lba, count, nullptr, false); !s.ok()) {
    return Reject(std::move(done), s);
  }
  ++stats_.host_trims;
  impl_->pending.push_back({Impl::Pending::kTrim, lba, count, nullptr, 0, nullptr, std::move(done), nullptr});
  impl_->RunPending();
}

AtomicLimits Ftl::atomic_limits() const {
  // One trim page names every member page and holds every trim; a few records are left
  // for members split by rewrites of other data while the batch is appended. Write
  // vectors cost nothing there (sectors are packed into member pages whatever their
  // vectors), so a batch may hold many scattered writes.
  const uint32_t records = impl_->RecordsPerPage();
  AtomicLimits l;
  l.max_ops = 1024;
  l.max_trims = std::min<uint32_t>(32, records / 4);
  const uint64_t pages = records - l.max_trims - 8;
  // And at most a quarter of a LEB, so a batch never waits on more room than grooming
  // makes at once.
  l.max_write_sectors = std::min<uint64_t>(pages * spp_, leb_data_sectors() / 4);
  return l;
}

void Ftl::WriteAtomic(std::vector<AtomicOp> ops, bool fua, Done done) {
  const AtomicLimits lim = atomic_limits();
  if (ops.empty() || ops.size() > lim.max_ops) {
    return Reject(std::move(done), Status::InvalidArgument(fmt::format(
        "an atomic batch holds 1 to {} operations, not {}", lim.max_ops, ops.size())));
  }
  uint64_t write_sectors = 0;
  uint32_t trims = 0;
  for (const AtomicOp& o : ops) {
    trims += o.kind == AtomicOp::kTrim;
    const bool w = o.kind == AtomicOp::kWrite;
    if (!w && o.kind != AtomicOp::kTrim) {
      return Reject(std::move(done), Status::InvalidArgument("unknown atomic operation"));
    }
    if (Status s = CheckRequest(w ? "atomic write" : "atomic trim", o.lba, o.count, o.data, w);
        !s.ok()) {
      return Reject(std::move(done), s);
    }
    if (w) write_sectors += o.count;
  }
  if (trims > lim.max_trims) {
    return Reject(std::move(done), Status::InvalidArgument(fmt::format(
        "an atomic batch holds at most {} trims, not {}", lim.max_trims, trims)));
  }
  if (write_sectors > lim.max_write_sectors) {
    return Reject(std::move(done), Status::InvalidArgument(fmt::format(
        "an atomic batch writes at most {} sectors, not {}", lim.max_write_sectors, write_sectors)));
  }
  for (const AtomicOp& t : ops) {
    if (t.kind != AtomicOp::kTrim) continue;
    for (const AtomicOp& w : ops) {
      if (w.kind == AtomicOp::kWrite && w.lba < t.lba + t.count && t.lba < w.lba + w.count) {
        return Reject(std::move(done), Status::InvalidArgument(fmt::format(
            "sectors {}..{} are both written and trimmed in one atomic batch",
            std::max(w.lba, t.lba), std::min(w.lba + w.count, t.lba + t.count) - 1)));
      }
    }
  }
  if (impl_->mode == HealthMode::kReadOnly) {
    return Reject(std::move(done), Status::FailedPrecondition(
        "the pipe is read-only: after bad blocks and die failures the surviving flash cannot hold its data"));
  }
  if ((sparse_ || impl_->reserve.surviving < map_.sectors()) && map_.mapped() + write_sectors > WriteRoom()) {
    uint64_t fresh = 0;  // only sectors not yet mapped need new room (a trim frees some)
    for (const AtomicOp& o : ops) {
      if (o.kind != AtomicOp::kWrite) continue;
      for (uint64_t i = 0; i < o.count; ++i) fresh += map_.Get(o.lba + i) == kUnmapped;
    }
    if (map_.mapped() + fresh > WriteRoom()) {
      return Reject(std::move(done), Status::NoSpace(
          impl_->mode == HealthMode::kReducedWrite
              ? "reduced-write: the flash left after bad blocks and die failures is full"
              : "the sparse device's physical space is full"));
    }
  }
  stats_.host_write_sectors += write_sectors;
  ++stats_.atomic_batches;
  auto g = std::make_shared<AtomicGroup>(std::move(ops), fua);
  g->done = std::move(done);
  ++impl_->atomic_inflight;
  impl_->pending.push_back({Impl::Pending::kAtomic, 0, 0, nullptr, 0, nullptr, nullptr, g});
  impl_->RunPending();
}

std::string Ftl::TEST_DebugState() const {
  const Impl& im = *impl_;
  std::string q;
  for (std::size_t i = 0; i < im.pending.size(); ++i) q += "WTAC"[im.pending[i].kind];
  std::string v = "none";
  if (const Leb* vic = im.gc.reloc.victim(); vic != nullptr) {
    v = fmt::format("leb {} valid {} pins {} atomic_pins {} cursor {} reads {} refs {}", vic->index, vic->valid,
                    vic->pins, vic->atomic_pins, im.gc.reloc.cursor(), im.gc.reloc.reads(), im.gc.reloc.refs());
  }
  for (const Leb* d : im.gc.reloc.draining()) {
    v += fmt::format("; draining leb {} valid {} pins {} refs {}", d->index, d->valid, d->pins, d->reloc_refs);
  }
  std::string pg;
  for (const auto& b : im.pages.live()) {
    pg += fmt::format(" [type {} leb {} die {} page {} seq {} sub {} cov {} acc {} done {} waiters {}]",
                      static_cast<int>(b->type), b->leb, b->die, b->page, b->seq, b->submitted,
                      b->covered, b->accepted, b->flash_done, b->waiters.size());
  }
  for (const auto* ap : {&im.host, &im.gcap}) {
    if (ap->leb() != nullptr) {
      pg += fmt::format(" ap{} leb {} row {} die {}", ap->gc, ap->leb()->index, ap->pos.row(), ap->pos.die());
    }
  }
  return pg + fmt::format(" pending [{}] atomic_inflight {} open_writes {} pages {} free_lebs {} "
                     "victim {} ckpt quiesce {} writing {} rewrites {} device_lost {}",
                     q, im.atomic_inflight, im.open_writes, im.pages.size(), lebs_.free_count(), v,
                     im.ckpt.quiesce, im.ckpt.writing, im.rw.size(), im.device_lost);
}

uint64_t Ftl::WriteRoom() {
  // PhysicalUserSectors walks every LEB (16k on the reference card): at most once per
  // 10 ms of clock time, not per write. The room only shrinks as blocks go bad, and a
  // write admitted on a slightly stale figure still finds the groomer's reserve.
  const TimeNs now = clock_.Now();
  if (!room_valid_ || now - room_at_ >= 10 * kMs) {
    room_valid_ = true;
    room_cache_ = PhysicalUserSectors();
    room_at_ = now;
  }
  // Bad blocks or dead dies left less than the capacity (reduced-write): what survives
  // beyond the groomer's own reserve (the spare the format set aside is gone).
  if (!sparse_ && impl_->reserve.surviving < map_.sectors()) return impl_->reserve.surviving;
  return room_cache_;
}

uint64_t Ftl::MappedIn(uint64_t lba, uint64_t count) const {
  uint64_t n = 0;
  map_.ForEachMappedIn(lba, count, [&](uint64_t, Psa) { ++n; });
  return n;
}

std::vector<std::pair<uint64_t, uint64_t>> Ftl::MappedRuns(uint64_t lba, uint64_t count,
                                                           std::size_t max_runs,
                                                           uint64_t* next) const {
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  const uint64_t stop = map_.ForEachMappedUntil(lba, count, [&](uint64_t s, Psa) {
    if (!runs.empty() && runs.back().first + runs.back().second == s) {
      ++runs.back().second;
      return true;
    }
    if (runs.size() == max_runs) return false;
    runs.emplace_back(s, 1);
    return true;
  });
  if (next != nullptr) *next = stop;
  return runs;
}

void Ftl::Flush(Done done) {
  if (impl_->shutting_down) {
    return Reject(std::move(done), Status::FailedPrecondition("flush after shutdown"));
  }
  // Everything acknowledged so far was in a page submitted before now.
  const uint64_t watermark = next_seq_ - 1;
  impl_->flush_waiters.push_back({watermark, std::move(done)});
  impl_->Post([this] { impl_->CheckFlushWaiters(); });
  impl_->ScheduleStage();  // the groomer's rows are staged now too (GroomerStillFills)
}

void Ftl::Read(uint64_t lba, uint32_t count, uint8_t* out, Done done) {
  if (Status s = CheckRequest("read", lba, count, out, true); !s.ok()) {
    return Reject(std::move(done), s);
  }
  stats_.host_read_sectors += count;
  ++stats_.host_reads;
  ReadMapped(lba, count, out, std::move(done), clock_.Now());
}

void Ftl::ReadMapped(uint64_t lba, uint32_t count, uint8_t* out, Done done, TimeNs start) {
  Impl& im = *impl_;
  Impl::ReadCtx* rc = im.read_ctxs.Take();
  rc->done = std::move(done);
  rc->start = start;
  const uint32_t sb = sector_bytes_;
  const uint32_t cw_per_sector = sb / geo_.ecc_codeword_bytes;
  uint32_t i = 0;
  while (i < count) {
    const uint64_t l = lba + i;
    uint8_t* dst = out + uint64_t{i} * sb;
    const Psa p = map_.Get(l);
    if (p == kUnmapped) {
      std::memset(dst, 0, sb);
      ++i;
      continue;
    }
    // Still in an open page buffer: serve from host memory. A sector of an open copy page
    // has no data in host memory (the controller will move it): it is read where it is
    // copied from, which its victim keeps until the copy is durable.
    bool served = false;
    Psa at = p;
    for (AppendPoint* ap : {&im.host, &im.gcap}) {
      PageBuf* b = ap->open;
      if (b && b->leb == im.addr.LebOf(p) && b->die == im.addr.DieOf(p) && b->page == im.addr.PageOf(p)) {
        if (b->copy) {
          at = b->csrc[im.addr.SlotOf(p)];
        } else {
          std::memcpy(dst, b->data.data() + uint64_t{im.addr.SlotOf(p)} * sb, sb);
          served = true;
        }
      }
    }
    if (served) {
      ++i;
      continue;
    }
    // A run of sectors stored contiguously in one page: one flash read.
    uint32_t n = 1;
    while (at == p && i + n < count && im.addr.SlotOf(p) + n < spp_ && map_.Get(l + n) == p + n) ++n;
    Impl::ReadPiece* pc = im.read_pieces.Take();
    pc->rc = rc;
    pc->meta.resize(geo_.meta_bytes_per_page());
    pc->dst = dst;
    pc->lba = l;
    pc->n = n;
    pc->slot = im.addr.SlotOf(at);
    pc->p = at;
    pc->mapped = p;
    ++rc->remaining;
    if (im.dies.silent(im.addr.DieOf(at))) {
      // A die that stopped answering is not asked again (only a timeout would come): the
      // page is rebuilt from its row at once.
      im.RebuildPiece(pc, nand::FlashStatus::kDieTimeout);
      i += n;
      continue;
    }
    pipe_.Read({{im.addr.DieOf(at), im.addr.LebOf(at), im.addr.PageOf(at)}, pc->slot * cw_per_sector,
                n * cw_per_sector, dst, pc->meta.data()},
               [this, pc](const Completion& c) { impl_->OnReadPiece(pc, c); });
    i += n;
  }
  im.Post([this, rc] { impl_->FinishRead(rc); });
}

void Ftl::Impl::FinishRead(ReadCtx* rc) {
  if (--rc->remaining != 0) return;
  if (rc->start != kTimeNever) f.stats_.read_latency.Record(f.clock_.Now() - rc->start);
  Done d = std::move(rc->done);
  const Status s = rc->status;
  read_ctxs.Give(rc);
  d(s);
}

bool Ftl::Impl::RetryMovedRead(ReadCtx* rc, uint64_t sector, Psa was, uint8_t* dst) {
  if (f.map_.Get(sector) == was) return false;
  ++rc->remaining;
  f.ReadMapped(sector, 1, dst, [this, rc](Status s) {
    if (!s.ok()) rc->status = s;
    FinishRead(rc);
  });
  return true;
}

void Ftl::Impl::RebuildPiece(ReadPiece* pc, FlashStatus st) {
  // FlashBack: rebuild the page from the rest of its row, answer from it, and move its
  // live sectors to a healthy die.
  ReadCtx* rc = pc->rc;
  uint8_t* const dst = pc->dst;
  const uint64_t l = pc->lba;
  const uint32_t n = pc->n, slot = pc->slot, sb = f.sector_bytes_;
  const Psa p = pc->p, mapped = pc->mapped;
  read_pieces.Give(pc);
  const uint32_t leb = addr.LebOf(p), die = addr.DieOf(p), page = addr.PageOf(p);
  RebuildPage(leb, die, page,
              [this, rc, dst, l, n, slot, sb, leb, die, page, mapped, st](
                  bool ok, std::vector<uint8_t> data, std::vector<uint8_t> m) {
                const auto* e =
                    ok ? reinterpret_cast<const f::SectorEntry*>(m.data() + sizeof(f::PageHeader)) : nullptr;
                for (uint32_t k = 0; k < n; ++k) {
                  const uint8_t* src = ok ? data.data() + uint64_t{slot + k} * sb : nullptr;
                  if (!ok || e[slot + k].lba != l + k || Crc32c(src, sb) != e[slot + k].crc) {
                    if (RetryMovedRead(rc, l + k, mapped + k, dst + uint64_t{k} * sb)) continue;
                    dies.NoteLost(l + k);
                    rc->status = Status::IOError(
                        fmt::format("sector {} is unreadable and its stripe cannot rebuild it ({})", l + k,
                                    nand::FlashStatusName(st)));
                    continue;
                  }
                  std::memcpy(dst + uint64_t{k} * sb, src, sb);
                }
                if (ok) RelocateRebuilt(leb, die, page, data, m);
                FinishRead(rc);
              });
}

void Ftl::Impl::OnReadPiece(ReadPiece* pc, const Completion& c) {
  ReadCtx* rc = pc->rc;
  uint8_t* const dst = pc->dst;
  const uint64_t l = pc->lba;
  const uint32_t n = pc->n, slot = pc->slot, sb = f.sector_bytes_;
  const Psa p = pc->p, mapped = pc->mapped;
  if (c.status == FlashStatus::kDieTimeout) OnDieTimeout(addr.DieOf(p));
  if (c.status == FlashStatus::kUncorrectable) NoteDieError(addr.DieOf(p), addr.LebOf(p));
  if (!c.ok() && !LostToHost(c.status)) {
    ++f.stats_.read_errors;
    RebuildPiece(pc, c.status);
    return;
  }
  if (!c.ok()) {
    ++f.stats_.read_errors;
    rc->status =
        Status::IOError(fmt::format("read of sectors {}..{} failed: {}", l, l + n - 1, nand::FlashStatusName(c.status)));
  } else {
    const auto* e = reinterpret_cast<const f::SectorEntry*>(pc->meta.data() + sizeof(f::PageHeader));
    for (uint32_t k = 0; k < n; ++k) {
      if (e[slot + k].lba != l + k || Crc32c(dst + uint64_t{k} * sb, sb) != e[slot + k].crc) {
        if (RetryMovedRead(rc, l + k, mapped + k, dst + uint64_t{k} * sb)) continue;
        ++f.stats_.read_errors;
        rc->status = Status::IOError(fmt::format("sector {} failed its check on read", l + k));
      }
    }
  }
  read_pieces.Give(pc);
  FinishRead(rc);
}

void Ftl::Shutdown(Done done) {
  impl_->shutting_down = true;
  impl_->DropCheckpoint();
  impl_->SubmitOpen(impl_->host);
  impl_->SubmitOpen(impl_->gcap);
  impl_->shutdown_done = std::move(done);
  impl_->Post([this] { impl_->CheckShutdown(); });
}

std::vector<uint64_t> Ftl::TEST_OpenCopyLbas() const {
  std::vector<uint64_t> lbas;
  for (const AppendPoint* ap : {&impl_->host, &impl_->gcap}) {
    const PageBuf* b = ap->open;
    if (b != nullptr && b->copy) lbas.insert(lbas.end(), b->lbas.begin(), b->lbas.begin() + b->used);
  }
  return lbas;
}

void Ftl::TEST_ForceGroom(Done done) {
  impl_->gc.waiters.push_back(std::move(done));
  impl_->MaybeGroom();
}

}  // namespace vsl::ftl
