// Format, metadata records (mount and checkpoint), attach and scan recovery.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "vsl/ftl/ftl.h"
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {
namespace {

double SpareFraction(const FormatOptions& o) {
  switch (o.reserve) {
    case ReserveMode::kStock: return 0.28;
    case ReserveMode::kHighPerformance: return 1.28 / 0.8 - 1.0;  // 20% less user space
    case ReserveMode::kCustom:
    case ReserveMode::kUnderProvision: return std::max(0.0, o.spare_percent / 100.0);
  }
  return 0.28;
}

// LEBs kept out of user capacity so grooming always has room: the groomer's reserve,
// its start threshold and the two open LEBs.
uint32_t ReservedLebs() {
  const FtlOptions d;
  return d.gc_reserve_lebs + d.gc_start_free_lebs + 2;
}

template <typename T>
void Append(std::vector<uint8_t>& out, const T& v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
bool Take(const std::vector<uint8_t>& in, std::size_t& off, T* v) {
  if (off + sizeof(T) > in.size()) return false;
  std::memcpy(v, in.data() + off, sizeof(T));
  off += sizeof(T);
  return true;
}

bool HeaderValid(const uint8_t* meta, uint32_t spp) {
  const auto* h = reinterpret_cast<const f::PageHeader*>(meta);
  if (h->type == static_cast<uint8_t>(f::PageType::kErased)) return false;
  if (h->version_major != f::kVersionMajor || h->sectors != spp || spp == 0) return false;
  const std::size_t n = f::MetaBytes(spp) - 4;
  uint32_t crc;
  std::memcpy(&crc, meta + n, 4);
  return Crc32c(meta, n) == crc;
}

// Completes `cb` on the clock as if its die had timed out: for dies known dead, whose
// reads would only wait out the controller's timeout.
template <typename Cb>
void PostDieTimeout(Clock& clock, Cb cb) {
  clock.Post([cb = std::move(cb)]() mutable {
    Completion c;
    c.status = FlashStatus::kDieTimeout;
    cb(c);
  });
}

bool AllOnes(const std::vector<uint8_t>& v) {
  return std::all_of(v.begin(), v.end(), [](uint8_t b) { return b == 0xFF; });
}

}  // namespace

uint64_t Ftl::PhysicalUserSectors() const {
  uint64_t phys = 0;
  for (uint32_t i = kMetaLebs; i < lebs_.size(); ++i) {
    phys += impl_->LebCapacity(lebs_.leb(i));
  }
  // The groomer's reserve is counted in LEBs as they are formed now: without failed dies.
  const uint64_t per_leb = impl_->LebDataSectors(impl_->AliveDies());
  const uint64_t reserved = uint64_t{ReservedLebs()} * per_leb;
  if (phys <= reserved) return 0;
  return static_cast<uint64_t>(static_cast<double>(phys - reserved) /
                               (1.0 + reserve_ppm_ / 1e6));
}

// ---- metadata records ----

std::vector<uint8_t> Ftl::BuildMetaPayload(uint32_t kind, uint64_t record_seq) const {
  std::vector<uint8_t> out;
  f::MetaHeader h{};
  h.magic = f::kMetaMagic;
  h.kind = kind;
  h.version_major = f::kVersionMajor;
  h.epoch = epoch_;
  h.sector_bytes = sector_bytes_;
  h.user_sectors = map_.sectors();
  h.seq = record_seq;
  h.next_seq = next_seq_;
  h.lebs = lebs_.size();
  h.dies = geo_.dies_per_pipe();
  h.flags = (sparse_ ? f::kFlagSparse | f::kFlagMapChunks : 0) |
            (impl_->parity_on ? f::kFlagFlashBack : 0);
  h.reserve_ppm = reserve_ppm_;
  const bool with_map = kind == static_cast<uint32_t>(f::MetaKind::kCheckpoint) ||
                        kind == static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint);
  h.map_entries = !with_map ? 0 : sparse_ ? map_.allocated_chunks() : map_.sectors();
  Append(out, h);
  const std::size_t table_start = out.size();
  for (uint32_t i = 0; i < lebs_.size(); ++i) {
    const Leb& l = lebs_.leb(i);
    f::MetaLeb m{};
    m.state = static_cast<uint8_t>(l.state);
    m.flags = l.unprotected && with_map ? f::kMetaLebUnprotected : 0;
    m.erase_count = l.erase_count;
    // For a free LEB this field carries its stale_seq (data not yet erased).
    m.open_seq = !with_map ? 0 : (l.state == LebState::kFree ? l.stale_seq : l.open_seq);
    m.trim_pages = with_map ? static_cast<uint32_t>(l.trim_pages.size()) : 0;
    Append(out, m);
    out.insert(out.end(), l.good.begin(), l.good.end());
    if (with_map) {
      for (uint32_t t : l.trim_pages) Append(out, t);
    }
  }
  reinterpret_cast<f::MetaHeader*>(out.data())->leb_table_bytes = out.size() - table_start;
  if (with_map && sparse_) {
    // Sparse: only allocated chunks, each as its first LBA then its entries.
    out.reserve(out.size() + map_.allocated_chunks() * (8 + ForwardMap::kChunkEntries * sizeof(Psa)));
    map_.ForEachChunk([&](uint64_t first) {
      Append(out, first);
      for (uint64_t i = 0; i < ForwardMap::kChunkEntries; ++i) {
        Append(out, first + i < map_.sectors() ? map_.Get(first + i) : kUnmapped);
      }
    });
  } else if (with_map) {
    out.reserve(out.size() + map_.sectors() * sizeof(Psa));
    for (uint64_t l = 0; l < map_.sectors(); ++l) Append(out, map_.Get(l));
  }
  return out;
}

Status Ftl::LoadMetaPayload(const std::vector<uint8_t>& in, bool with_map) {
  std::size_t off = 0;
  f::MetaHeader h;
  if (!Take(in, off, &h)) return Status::Corruption("metadata record too short");
  for (uint32_t i = 0; i < h.lebs; ++i) {
    f::MetaLeb m;
    if (!Take(in, off, &m) || off + h.dies > in.size()) {
      return Status::Corruption("metadata record: LEB table truncated");
    }
    Leb& l = lebs_.leb(i);
    std::copy(in.begin() + static_cast<std::ptrdiff_t>(off),
              in.begin() + static_cast<std::ptrdiff_t>(off + h.dies), l.good.begin());
    off += h.dies;
    l.erase_count = m.erase_count;
    l.trim_pages.clear();
    for (uint32_t t = 0; t < m.trim_pages; ++t) {
      uint32_t v;
      if (!Take(in, off, &v)) return Status::Corruption("metadata record: trim list truncated");
      l.trim_pages.push_back(v);
    }
    if (i < kMetaLebs) continue;
    l.capacity = impl_->LebCapacity(l);
    if (with_map) {
      l.open_seq = m.open_seq;
      l.close_seq = m.open_seq;
      const auto st = static_cast<LebState>(m.state);
      // An LEB open or being groomed at shutdown is simply closed now.
      const bool holds = st == LebState::kOpen || st == LebState::kClosed || st == LebState::kVictim;
      l.needs_erase = true;
      if (!holds) {
        l.stale_seq = m.open_seq;
        l.open_seq = 0;
      }
      lebs_.SetState(l, holds ? LebState::kClosed : LebState::kFree);
      l.unprotected = false;
      if (holds && (m.flags & f::kMetaLebUnprotected) != 0) impl_->Reprotect(l);
    }
  }
  if (with_map) {
    const uint64_t max_psa = uint64_t{lebs_.size()} * geo_.dies_per_pipe() * geo_.pages_per_block * spp_;
    auto load = [&](uint64_t lba, Psa p) {
      if (lba == Impl::TraceLba()) fmt::print(stderr, "trace checkpoint maps it to psa {}\n", p);
      if (p == kUnmapped) return Status::Ok();
      if (lba >= map_.sectors() || p >= max_psa ||
          p / (geo_.dies_per_pipe() * geo_.pages_per_block * spp_) < kMetaLebs) {
        return Status::Corruption(fmt::format("checkpoint maps sector {} outside the data area", lba));
      }
      impl_->Remap(lba, p);
      return Status::Ok();
    };
    if ((h.flags & f::kFlagMapChunks) != 0) {
      constexpr uint64_t kRecord = 8 + ForwardMap::kChunkEntries * sizeof(Psa);
      if (h.map_entries > (in.size() - off) / kRecord) {
        return Status::Corruption("checkpoint map truncated");
      }
      for (uint64_t c = 0; c < h.map_entries; ++c) {
        uint64_t first;
        std::memcpy(&first, in.data() + off, 8);
        off += 8;
        if (first % ForwardMap::kChunkEntries != 0 || first >= map_.sectors()) {
          return Status::Corruption(fmt::format("checkpoint map chunk at sector {} is not one", first));
        }
        for (uint64_t i = 0; i < ForwardMap::kChunkEntries; ++i, off += sizeof(Psa)) {
          Psa p;
          std::memcpy(&p, in.data() + off, sizeof(Psa));
          if (Status s = load(first + i, p); !s.ok()) return s;
        }
      }
      return Status::Ok();
    }
    if (h.map_entries != map_.sectors() || off + h.map_entries * sizeof(Psa) > in.size()) {
      return Status::Corruption("checkpoint map truncated");
    }
    for (uint64_t lba = 0; lba < h.map_entries; ++lba) {
      Psa p;
      std::memcpy(&p, in.data() + off + lba * sizeof(Psa), sizeof(Psa));
      if (Status s = load(lba, p); !s.ok()) return s;
    }
  }
  return Status::Ok();
}

void Ftl::WriteCheckpointRecord(uint32_t kind, Function<void(Status, bool)> done) {
  WriteMetaRecord(kind, [this, d = std::move(done)](Status s) mutable {
    if (s.code() != StatusCode::kNoSpace) return d(s, s.ok());
    Logger("ftl")->warn("{}: a mount record instead, the next attach scans", s.message());
    WriteMetaRecord(static_cast<uint32_t>(f::MetaKind::kMount),
                    [d = std::move(d)](Status s2) mutable { d(s2, false); });
  });
}

void Ftl::WriteMetaRecord(uint32_t kind, Done done) {
  const uint32_t target = meta_leb_ == 0 ? 1 : 0;
  Leb& l = lebs_.leb(target);
  const uint64_t seq = next_seq_++;
  auto payload = std::make_shared<std::vector<uint8_t>>(BuildMetaPayload(kind, seq));
  const uint32_t D = geo_.dies_per_pipe(), P = geo_.pages_per_block;
  const uint64_t page_bytes = geo_.page_data_bytes;
  const uint64_t pages = (payload->size() + page_bytes - 1) / page_bytes;
  // Every page is written on `copies` different dies: three when the LEB has the dies
  // and the room, never fewer than two. So one dead die never takes a record with it,
  // and with FlashBack a record written before a die failure still has a copy after the
  // next one (sequential failures leave no chance to rewrite it in between). More copies
  // would lengthen every attach and shutdown (24 copies on duo-slc: 8x the clean attach).
  const uint32_t G = l.good_dies();
  const uint64_t fit = pages == 0 ? 0 : uint64_t{G} * P / pages;
  const uint32_t copies = static_cast<uint32_t>(std::min<uint64_t>({G, fit, kMetaCopies}));
  if (copies < 2 || pages >= f::MetaPageTag::kMaxPages) {
    return clock_.Post([d = std::move(done), pages]() mutable {
      d(Status::NoSpace(fmt::format("metadata record of {} pages does not fit a metadata LEB", pages)));
    });
  }
  payload->resize(pages * page_bytes, 0);
  struct Ctx {
    uint32_t remaining = 1;
    Status status;
    Done done;
    std::vector<std::vector<uint8_t>> metas;
  };
  auto ctx = std::make_shared<Ctx>();
  ctx->done = std::move(done);
  if (base_ckpt_seq_ != 0 && base_ckpt_leb_ == target) base_ckpt_seq_ = 0;  // being erased
  auto finish = [this, ctx, target]() {
    if (--ctx->remaining != 0) return;
    if (ctx->status.ok()) meta_leb_ = target;
    Done d = std::move(ctx->done);
    d(ctx->status);
  };
  for (uint32_t d = 0; d < D; ++d) {
    if (!l.good[d]) continue;
    ++ctx->remaining;
    pipe_.Erase(d, target, [ctx, finish, d](const Completion& c) mutable {
      if (!c.ok()) ctx->status = Status::IOError(fmt::format("metadata erase failed on die {}", d));
      finish();
    });
  }
  ++l.erase_count;
  const uint64_t total = uint64_t{copies} * pages;
  ctx->metas.resize(total);
  // Row-major over the good dies: copy c holds page c / copies, so the copies of a page
  // are `copies` consecutive positions, on distinct dies.
  uint64_t placed = 0;
  for (uint32_t row = 0; row < P && placed < total; ++row) {
    for (uint32_t d = 0; d < D && placed < total; ++d) {
      if (!l.good[d]) continue;
      const uint64_t idx = placed / copies;
      auto& meta = ctx->metas[placed];
      meta.assign(geo_.meta_bytes_per_page(), 0xFF);
      auto* h = reinterpret_cast<f::PageHeader*>(meta.data());
      h->bad_block_marker = 0xFF;
      h->type = static_cast<uint8_t>(f::PageType::kMeta);
      h->version_major = f::kVersionMajor;
      h->sectors = static_cast<uint8_t>(spp_);
      h->epoch = epoch_;
      h->seq = seq;
      auto* e = reinterpret_cast<f::SectorEntry*>(meta.data() + sizeof(f::PageHeader));
      const uint8_t* data = payload->data() + idx * page_bytes;
      for (uint32_t s = 0; s < spp_; ++s) e[s] = {f::kNoLba, 0};
      e[0] = {f::MetaPageTag{idx, pages, copies, G <= 255 ? G : 0}.Pack(), Crc32c(data, page_bytes)};
      const std::size_t n = f::MetaBytes(spp_) - 4;
      const uint32_t crc = Crc32c(meta.data(), n);
      std::memcpy(meta.data() + n, &crc, 4);
      ++ctx->remaining;
      ++stats_.meta_pages;
      pipe_.Program({{d, target, row}, data, meta.data()}, nullptr,
                    [ctx, finish, payload](const Completion& c) mutable {
                      if (!c.ok()) ctx->status = Status::IOError("metadata program failed");
                      finish();
                    });
      ++placed;
    }
  }
  clock_.Post(finish);
}

// Reads the newest complete metadata record of metadata LEB `leb`.
namespace {
struct MetaRead {
  uint64_t seq = 0;
  std::vector<uint8_t> payload;
};

// Reads metadata LEB `leb` row by row: row 0 tells, from any valid page, the sector
// layout (the header's sector count) and the newest record's page count, so only the rows
// holding that record are read (each page is stored twice, in row-major order over the
// good dies). Calls `done` with the newest complete record, if any.
void ReadMetaLeb(nand::FlashPipe& pipe, const nand::Geometry& g, uint32_t leb,
                 const std::vector<uint32_t>& silent,
                 Function<void(std::optional<MetaRead>, uint32_t spp)> done) {
  const uint32_t D = g.dies_per_pipe(), P = g.pages_per_block;
  struct Ctx {
    uint32_t remaining = 0;
    uint32_t rows_read = 0, rows_needed = 1;
    uint32_t spp = 0;
    std::vector<uint32_t> dies;  // dies that answer
    std::vector<std::vector<uint8_t>> data, meta;
    std::vector<bool> ok;
    Function<void(std::optional<MetaRead>, uint32_t)> done;
  };
  auto ctx = std::make_shared<Ctx>();
  ctx->done = std::move(done);
  for (uint32_t d = 0; d < D; ++d) {
    if (std::find(silent.begin(), silent.end(), d) == silent.end()) ctx->dies.push_back(d);
  }
  ctx->data.resize(uint64_t{D} * P);
  ctx->meta.resize(uint64_t{D} * P);
  ctx->ok.assign(uint64_t{D} * P, false);
  auto valid_meta = [ctx](uint64_t i) -> const f::PageHeader* {
    if (!ctx->ok[i] || ctx->meta[i].size() < sizeof(f::PageHeader)) return nullptr;
    const auto* h = reinterpret_cast<const f::PageHeader*>(ctx->meta[i].data());
    if (h->type != static_cast<uint8_t>(f::PageType::kMeta) ||
        f::MetaBytes(h->sectors) > ctx->meta[i].size() || !HeaderValid(ctx->meta[i].data(), h->sectors)) {
      return nullptr;
    }
    return h;
  };
  auto assemble = [ctx, D, P, valid_meta]() {
    std::map<uint64_t, std::map<uint64_t, uint64_t>> by_seq;  // seq -> page index -> slot
    std::map<uint64_t, uint64_t> counts;
    for (uint64_t i = 0; i < uint64_t{D} * P; ++i) {
      const f::PageHeader* h = valid_meta(i);
      if (h == nullptr) continue;
      const auto* e = reinterpret_cast<const f::SectorEntry*>(ctx->meta[i].data() + sizeof(f::PageHeader));
      if (Crc32c(ctx->data[i].data(), ctx->data[i].size()) != e[0].crc) continue;
      const auto tag = f::MetaPageTag::Unpack(e[0].lba);
      by_seq[h->seq][tag.index] = i;
      counts[h->seq] = tag.pages;
      ctx->spp = h->sectors;
    }
    std::optional<MetaRead> best;
    for (auto it = by_seq.rbegin(); it != by_seq.rend() && !best; ++it) {
      const uint64_t n = counts[it->first];
      if (n == 0 || it->second.size() != n) continue;
      MetaRead r;
      r.seq = it->first;
      for (uint64_t k = 0; k < n; ++k) {
        const auto& d = ctx->data[it->second.at(k)];
        r.payload.insert(r.payload.end(), d.begin(), d.end());
      }
      best = std::move(r);
    }
    auto d = std::move(ctx->done);
    d(std::move(best), ctx->spp);
  };
  auto read_row = std::make_shared<Function<void(uint32_t)>>();
  *read_row = [ctx, D, P, &pipe, leb, g, valid_meta, assemble, read_row](uint32_t row) mutable {
    ctx->remaining = static_cast<uint32_t>(ctx->dies.size());
    if (ctx->remaining == 0) return assemble();
    for (uint32_t d : ctx->dies) {
      const uint64_t i = uint64_t{row} * D + d;
      ctx->data[i].resize(g.page_data_bytes);
      ctx->meta[i].resize(g.meta_bytes_per_page());
      pipe.Read({{d, leb, row}, 0, 0, ctx->data[i].data(), ctx->meta[i].data()},
                [ctx, i, row, D, P, valid_meta, assemble, read_row](const Completion& c) mutable {
                  ctx->ok[i] = c.ok();
                  if (--ctx->remaining != 0) return;
                  ++ctx->rows_read;
                  if (row == 0) {
                    // The newest record seen in row 0 says how many rows it spans.
                    uint64_t best_seq = 0;
                    f::MetaPageTag tag;
                    for (uint32_t dd = 0; dd < D; ++dd) {
                      const f::PageHeader* h = valid_meta(dd);
                      if (h == nullptr || h->seq < best_seq) continue;
                      best_seq = h->seq;
                      const auto* e = reinterpret_cast<const f::SectorEntry*>(
                          ctx->meta[dd].data() + sizeof(f::PageHeader));
                      tag = f::MetaPageTag::Unpack(e[0].lba);
                    }
                    // Records before format 1.3 carry no layout: two copies, spread
                    // over (at most) the dies that answer.
                    const uint64_t copies = tag.copies != 0 ? tag.copies : 2;
                    const uint64_t per_row =
                        std::max<uint64_t>(1, tag.dies != 0 ? tag.dies : ctx->dies.size());
                    ctx->rows_needed = static_cast<uint32_t>(
                        std::min<uint64_t>(P, (copies * tag.pages + per_row - 1) / per_row));
                  }
                  if (ctx->rows_read < ctx->rows_needed) return (*read_row)(row + 1);
                  auto self = std::move(*read_row);  // break the cycle before finishing
                  assemble();
                });
    }
  };
  (*read_row)(0);
}
}  // namespace

// ---- format ----

Status CheckFormatOptions(const FormatOptions& opts) {
  if (opts.sector_bytes != 512 && opts.sector_bytes != 4096) {
    return Status::InvalidArgument("sector size must be 512 or 4096 bytes");
  }
  // A spare figure out of range was silently clamped before (a negative one to zero, a
  // huge one to a device of almost nothing): refused instead.
  const double sp = opts.spare_percent;
  if (opts.reserve == ReserveMode::kCustom && !(sp >= 0 && sp <= kMaxSparePercent)) {
    return Status::InvalidArgument(fmt::format("custom spare of {}% is outside 0..{}%", sp, kMaxSparePercent));
  }
  if (opts.reserve == ReserveMode::kUnderProvision && !(sp >= 0 && sp < 7)) {
    return Status::InvalidArgument(fmt::format("under-provisioning leaves 0 to under 7% spare, not {}%", sp));
  }
  return Status::Ok();
}

void Ftl::Format(nand::FlashPipe& pipe, Clock& clock, const FormatOptions& opts, Done done) {
  auto shared_done = std::make_shared<Done>(std::move(done));
  nand::DiscoverPipe(pipe, [&pipe, &clock, opts, shared_done](Result<nand::DiscoveredPipe> r) {
    auto fail = [&](Status s) { (*shared_done)(s); };
    if (!r.ok()) return fail(r.status());
    const nand::Geometry g = r->geometry;
    if (Status s = CheckFormatOptions(opts); !s.ok()) return fail(s);
    if (opts.sector_bytes > g.page_data_bytes || g.page_data_bytes % opts.sector_bytes != 0) {
      return fail(Status::NotSupported("sector size does not divide the page"));
    }
    const uint32_t spp = g.page_data_bytes / opts.sector_bytes;
    if (f::MetaBytes(spp) > g.meta_bytes_per_page() || spp > 255) {
      return fail(Status::NotSupported(fmt::format(
          "{} sectors per page need {} bytes of page metadata; the device has {}", spp,
          f::MetaBytes(spp), g.meta_bytes_per_page())));
    }
    if (g.blocks_per_lun < kMetaLebs + ReservedLebs() + 2) {
      return fail(Status::NotSupported("too few blocks per die for the FTL"));
    }
    const double rho = SpareFraction(opts);
    if (opts.reserve == ReserveMode::kUnderProvision || rho < 0.07) {
      Logger("ftl")->warn("under-provisioned format: spare {:.1f}% of user capacity; expect "
                          "lower write speed and endurance", rho * 100);
    }
    // A provisional FTL to hold the geometry and bad-block table while formatting.
    auto ftl = std::unique_ptr<Ftl>(new Ftl(pipe, clock, FtlOptions{}, g, 1, opts.sector_bytes));
    ftl->reserve_ppm_ = static_cast<uint32_t>(rho * 1e6);
    if (opts.flashback) {
      const uint32_t dies_up = g.dies_per_pipe() - static_cast<uint32_t>(r->silent_dies.size());
      if (dies_up >= 3 && f::ParityMetaBytes(spp) <= g.meta_bytes_per_page() &&
          g.dies_per_pipe() <= 64) {
        ftl->impl_->parity_on = true;
        ftl->lebs_.set_min_good(Impl::kMinStripeDies);
      } else {
        Logger("ftl")->warn("FlashBack is off for this format: it needs 3 or more dies and {} "
                            "bytes of page metadata ({} dies, {} bytes)",
                            f::ParityMetaBytes(spp), dies_up, g.meta_bytes_per_page());
      }
    }
    ftl->epoch_ = opts.epoch != 0 ? opts.epoch
                                  : static_cast<uint32_t>(Rng(clock.Now() ^ 0x5EED).Next() | 1);
    for (uint32_t d : r->silent_dies) {
      for (uint32_t b = 0; b < g.blocks_per_lun; ++b) ftl->lebs_.leb(b).good[d] = 0;
    }
    // Factory bad-block scan: byte 0 of the first page's metadata.
    struct Scan {
      uint32_t remaining = 1;
      std::vector<std::vector<uint8_t>> meta;
    };
    auto scan = std::make_shared<Scan>();
    scan->meta.resize(uint64_t{g.blocks_per_lun} * g.dies_per_pipe());
    Ftl* raw = ftl.release();
    auto after_scan = [raw, scan, opts, shared_done, g]() {
      if (--scan->remaining != 0) return;
      std::unique_ptr<Ftl> prov(raw);
      for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
        for (uint32_t d = 0; d < g.dies_per_pipe(); ++d) {
          const auto& m = scan->meta[uint64_t{b} * g.dies_per_pipe() + d];
          if (m.empty() || m[0] != 0xFF) prov->lebs_.leb(b).good[d] = 0;
        }
      }
      for (uint32_t i = 0; i < kMetaLebs; ++i) {
        if (prov->lebs_.leb(i).good_dies() == 0) {
          return (*shared_done)(Status::IOError("both metadata blocks are bad on every die"));
        }
      }
      const uint64_t user =
          opts.sparse ? opts.sparse_sectors : prov->PhysicalUserSectors();
      if (user == 0) return (*shared_done)(Status::NoSpace("no room for user data"));
      // Rebuild with the real capacity, keeping the bad-block table.
      auto real = std::unique_ptr<Ftl>(new Ftl(prov->retry_->inner(), prov->clock_, FtlOptions{}, g, user,
                                               opts.sector_bytes));
      real->reserve_ppm_ = prov->reserve_ppm_;
      real->epoch_ = prov->epoch_;
      real->sparse_ = opts.sparse;
      real->impl_->parity_on = prov->impl_->parity_on;
      real->lebs_.set_min_good(real->impl_->parity_on ? Impl::kMinStripeDies : 0);
      for (uint32_t b = 0; b < g.blocks_per_lun; ++b) real->lebs_.leb(b).good = prov->lebs_.leb(b).good;
      real->lebs_.Recount();
      Ftl* rp = real.release();
      // Both metadata LEBs get the new record, so nothing of an older format can be newer.
      rp->WriteMetaRecord(static_cast<uint32_t>(f::MetaKind::kMount), [rp, shared_done](Status s) {
        if (!s.ok()) {
          std::unique_ptr<Ftl> owner(rp);
          return (*shared_done)(s);
        }
        rp->WriteMetaRecord(static_cast<uint32_t>(f::MetaKind::kMount), [rp, shared_done](Status s2) {
          std::unique_ptr<Ftl> owner(rp);
          Logger("ftl")->info("formatted: {} sectors of {} B, status {}", rp->sectors(),
                              rp->sector_bytes(), s2.ToString());
          (*shared_done)(s2);
        });
      });
    };
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
      for (uint32_t d = 0; d < g.dies_per_pipe(); ++d) {
        if (!raw->lebs_.leb(b).good[d]) continue;
        auto& m = scan->meta[uint64_t{b} * g.dies_per_pipe() + d];
        m.resize(g.meta_bytes_per_page());
        ++scan->remaining;
        pipe.Read({{d, b, 0}, g.codewords_per_page() - 1, 1, nullptr, m.data()},
                  [scan, after_scan, &m](const Completion& c) mutable {
                    if (!c.ok()) m.clear();
                    after_scan();
                  });
      }
    }
    after_scan();
  });
}

// ---- open ----

void Ftl::Open(nand::FlashPipe& pipe, Clock& clock, const FtlOptions& opts,
               Function<void(Result<std::unique_ptr<Ftl>>)> done) {
  using OpenDone = Function<void(Result<std::unique_ptr<Ftl>>)>;
  auto shared_done = std::make_shared<OpenDone>(std::move(done));
  const TimeNs t0 = clock.Now();
  nand::DiscoverPipe(pipe, [&pipe, &clock, opts, shared_done, t0](Result<nand::DiscoveredPipe> r) {
    if (!r.ok()) return (*shared_done)(r.status());
    const nand::Geometry g = r->geometry;
    auto silent = r->silent_dies;
    struct State {
      std::optional<MetaRead> best;
      std::optional<MetaRead> recs[kMetaLebs];
      uint32_t spp = 0;
      uint32_t best_leb = 0;
      int remaining = 0;
      std::vector<uint32_t> silent;
      std::unique_ptr<nand::ReadRetryPipe> retry;  // the metadata reads retry like the FTL's
    };
    auto st = std::make_shared<State>();
    st->silent = silent;
    st->retry = std::make_unique<nand::ReadRetryPipe>(pipe, opts.read_retries);
    st->remaining = static_cast<int>(kMetaLebs);
    auto decide = [&pipe, &clock, opts, shared_done, t0, st, g]() {
      if (--st->remaining != 0) return;
      if (!st->best) {
        return (*shared_done)(Status::NotFound(
            "no valid FTL metadata record: the pipe is not formatted (or its metadata is lost)"));
      }
      f::MetaHeader h;
      std::memcpy(&h, st->best->payload.data(), std::min(sizeof(h), st->best->payload.size()));
      if (st->best->payload.size() < sizeof(h) || h.magic != f::kMetaMagic ||
          h.version_major != f::kVersionMajor || h.lebs != g.blocks_per_lun ||
          h.dies != g.dies_per_pipe() || (h.sector_bytes != 512 && h.sector_bytes != 4096)) {
        return (*shared_done)(Status::Corruption("FTL metadata record does not match this pipe"));
      }
      auto ftl = std::unique_ptr<Ftl>(new Ftl(pipe, clock, opts, g, h.user_sectors, h.sector_bytes));
      ftl->epoch_ = h.epoch;
      ftl->sparse_ = (h.flags & f::kFlagSparse) != 0;
      ftl->impl_->parity_on = (h.flags & f::kFlagFlashBack) != 0;
      ftl->lebs_.set_min_good(ftl->impl_->parity_on ? Impl::kMinStripeDies : 0);
      ftl->reserve_ppm_ = h.reserve_ppm;
      ftl->meta_leb_ = st->best_leb;
      ftl->next_seq_ = std::max(h.next_seq, st->best->seq + 1);
      const bool checkpoint = h.kind == static_cast<uint32_t>(f::MetaKind::kCheckpoint);
      const bool dirty = h.kind == static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint);
      // A dirty checkpoint (written at attach) is loaded and the LEBs opened after it are
      // scanned. A bare mount record with an older checkpoint in the other metadata LEB
      // is handled the same way from that checkpoint.
      uint64_t scan_after = dirty ? st->best->seq : 0;
      const std::vector<uint8_t>* payload = &st->best->payload;
      bool with_map = checkpoint || dirty;
      const auto& other = st->recs[st->best_leb == 0 ? 1 : 0];
      if (!checkpoint && !dirty && other && other->seq < st->best->seq &&
          other->payload.size() >= sizeof(h)) {
        f::MetaHeader oh;
        std::memcpy(&oh, other->payload.data(), sizeof(oh));
        if (oh.magic == f::kMetaMagic &&
            (oh.kind == static_cast<uint32_t>(f::MetaKind::kCheckpoint) ||
             oh.kind == static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint)) &&
            oh.epoch == h.epoch && oh.sector_bytes == h.sector_bytes && oh.lebs == h.lebs &&
            oh.user_sectors == h.user_sectors) {
          scan_after = other->seq;
          payload = &other->payload;
          with_map = true;
        }
      }
      if (Status s = ftl->LoadMetaPayload(*payload, with_map); !s.ok()) {
        return (*shared_done)(s);
      }
      ftl->lebs_.Recount();
      // A die retired earlier (dead, or its error rate) is out of both metadata LEBs and
      // every free LEB in the record: it stays retired, and its data keeps moving off.
      if (with_map && ftl->impl_->parity_on) {
        for (uint32_t d = 0; d < g.dies_per_pipe(); ++d) {
          bool out = true;
          uint32_t free_lebs = 0;
          for (uint32_t b = 0; b < ftl->lebs_.size() && out; ++b) {
            const Leb& l = ftl->lebs_.leb(b);
            if (b < kMetaLebs || l.state == LebState::kFree) {
              out = !l.good[d];
              free_lebs += b >= kMetaLebs;
            }
          }
          if (out && free_lebs >= 2 && !ftl->impl_->die_failed[d]) {
            Logger("ftl")->warn("die {} was retired before: it stays out", d);
            ftl->impl_->die_failed[d] = 1;
          }
        }
      }
      // Dies that did not answer at attach: the scan rebuilds their page headers from
      // parity; after attach they are declared failed (nothing more is written to them,
      // and FlashBack moves their data off).
      for (uint32_t d : st->silent) {
        Logger("ftl")->warn("die {} does not answer", d);
        if (d < g.dies_per_pipe()) ftl->impl_->die_failed[d] = 1;
        for (uint32_t b = 0; b < kMetaLebs; ++b) ftl->lebs_.leb(b).good[d] = 0;
      }
      Ftl* raw = ftl.release();
      auto finish = [raw, shared_done, t0](Status s) {
        std::unique_ptr<Ftl> owner(raw);
        if (!s.ok()) return (*shared_done)(s);
        for (uint32_t d = 0; d < raw->impl_->die_failed.size(); ++d) {
          if (raw->impl_->die_failed[d]) raw->impl_->DeclareDieFailed(d);
        }
        // A dirty checkpoint marks the FTL in use and is the base of the next recovery:
        // a crash scans only the LEBs opened after it, and trim records older than it
        // need not be kept. If it does not fit, a mount record (full scan) is written.
        auto done_ok = [raw, shared_done, t0]() {
          // Pages the cut left without parity move first (after the checkpoint, so a
          // crash now scans the LEB they move into); the FTL is handed out once they are
          // durable and covered again.
          raw->impl_->ReprotectPages([raw, shared_done, t0]() {
            std::unique_ptr<Ftl> owner2(raw);
            raw->impl_->UpdateMode();  // health and reserve space as found
            raw->impl_->serving = true;
            raw->attach_.attach_ns = raw->clock_.Now() - t0;
            (*shared_done)(std::move(owner2));
          });
        };
        const uint64_t seq = raw->next_seq_;
        const uint32_t target = raw->meta_leb_ == 0 ? 1 : 0;
        raw->WriteCheckpointRecord(
            static_cast<uint32_t>(f::MetaKind::kDirtyCheckpoint),
            [raw, shared_done, done_ok, seq, target](Status s2, bool checkpointed) mutable {
              if (!s2.ok()) {
                std::unique_ptr<Ftl> owner2(raw);
                return (*shared_done)(s2);
              }
              if (checkpointed) {
                raw->base_ckpt_seq_ = seq;
                raw->base_ckpt_leb_ = target;
              }
              done_ok();
            });
        owner.release();
      };
      if (checkpoint) {
        raw->attach_.from_checkpoint = true;
        finish(Status::Ok());
      } else {
        raw->attach_.checkpoint_plus_scan = scan_after != 0;
        if (Impl::TraceLba() != UINT64_MAX) fmt::print(stderr, "trace attach scans after seq {}\n", scan_after);
        raw->Scan(scan_after, std::move(finish));
      }
    };
    for (uint32_t leb = 0; leb < kMetaLebs; ++leb) {
      ReadMetaLeb(*st->retry, g, leb, silent, [st, decide, leb](std::optional<MetaRead> m, uint32_t spp) mutable {
        st->recs[leb] = m;
        if (m && (!st->best || m->seq > st->best->seq)) {
          st->best = std::move(m);
          st->best_leb = leb;
          st->spp = spp;
        }
        decide();
      });
    }
  });
}

// ---- scan recovery ----

// A stripe (row) of a LEB the scan reads with two or more members on failed dies cannot
// be rebuilt, and its pages on those dies cannot even be named: their headers, the only
// record of which sectors they held, are gone (a LEB written before the last checkpoint
// needs no headers: the checkpoint's map names its sectors, and reading one reports the
// loss). Such a stripe is counted when it was written since the base checkpoint — a
// valid parity page names a lost member, or a live member or a later row of the LEB
// holds a page newer than the base — and the recovery says so: the sectors those pages
// held may read as older data. One failed die never leaves such a stripe (a lost member
// without parity held only unacknowledged data), so this is silent unless two failed.
void Ftl::CountUnnamedLosses(const std::vector<std::vector<uint8_t>>& meta,
                             const std::vector<uint8_t>& ok, const std::vector<uint8_t>& skipped,
                             uint64_t after_seq) {
  const uint32_t D = geo_.dies_per_pipe(), P = geo_.pages_per_block;
  auto idx = [D, P](uint32_t leb, uint32_t die, uint32_t page) {
    return (uint64_t{leb} * D + die) * P + page;
  };
  auto newer = [&](uint64_t i) {
    if (meta[i].empty() || !ok[i]) return false;
    const uint8_t* m = meta[i].data();
    if (!HeaderValid(m, spp_) && !impl_->ParityValid(m)) return false;
    const auto* h = reinterpret_cast<const f::PageHeader*>(m);
    return h->epoch == epoch_ && h->seq > after_seq;
  };
  uint64_t stripes = 0;
  for (uint32_t leb = kMetaLebs; leb < lebs_.size(); ++leb) {
    if (skipped[leb]) continue;
    const Leb& l = lebs_.leb(leb);
    uint32_t dead = 0;
    for (uint32_t d = 0; d < D; ++d) dead += l.good[d] && impl_->die_failed[d];
    if (dead < 2) continue;
    bool later_written = false;  // a row after this one holds a page newer than the base
    for (uint32_t p = P; p-- > 0;) {
      uint64_t mask = 0;
      bool parity = false, row_written = false;
      uint32_t missing = 0;
      for (uint32_t d = 0; d < D; ++d) {
        if (!l.good[d]) continue;
        const uint64_t i = idx(leb, d, p);
        if (!meta[i].empty() && ok[i] && impl_->ParityValid(meta[i].data())) {
          parity = true;
          mask |= Impl::ParityMask(meta[i].data());
        }
        row_written = row_written || newer(i);
        missing += impl_->die_failed[d] && !(ok[i] && !meta[i].empty() && HeaderValid(meta[i].data(), spp_));
      }
      bool lost = false;
      if (parity) {
        // The parity named a member on a failed die that could not be rebuilt.
        for (uint32_t d = 0; d < D && !lost; ++d) {
          const uint64_t i = idx(leb, d, p);
          lost = ((mask >> d) & 1) && impl_->die_failed[d] &&
                 !(ok[i] && !meta[i].empty() && HeaderValid(meta[i].data(), spp_));
        }
      } else {
        lost = missing >= 2 && (row_written || later_written);
      }
      stripes += lost;
      later_written = later_written || row_written;
    }
  }
  impl_->unnamed_lost_stripes += stripes;
  if (stripes != 0) {
    impl_->Event(fmt::format(
        "FlashBack: {} stripe(s) written since the last checkpoint lost two members to failed dies "
        "before the power went: the sectors their pages held cannot be named and may read as older "
        "data; restore what was written last from a backup",
        stripes));
  }
}

void Ftl::ReadSummary(uint32_t leb, SummaryDone done) {
  // Summary pages sit in the LEB's last page positions: read page spares row by row
  // from the last row back until every page of the summary is found, then their data.
  struct St {
    uint32_t k = 0, found = 0, left = 0;
    bool bad = false;
    std::vector<uint64_t> pos;   // per summary page: its position (row * dies + die)
    std::vector<uint32_t> crc;   // per summary page: CRC of its data
    std::vector<std::pair<uint64_t, std::vector<uint8_t>>> metas;  // spares to keep
    std::vector<std::vector<uint8_t>> data;
    std::vector<std::vector<uint8_t>> row_meta;
    std::vector<uint8_t> row_ok;
    SummaryDone done;
    Function<void(uint32_t)> read_row;  // reset when done
  };
  auto st = std::make_shared<St>();
  st->done = std::move(done);
  const uint32_t D = geo_.dies_per_pipe(), P = geo_.pages_per_block;
  std::vector<uint32_t> dies;
  for (uint32_t d = 0; d < D; ++d) {
    if (lebs_.leb(leb).good[d] && !impl_->die_failed[d]) dies.push_back(d);
  }
  auto fail = [st]() {
    st->read_row = nullptr;
    auto d = std::move(st->done);
    d({}, {});
  };
  auto read_data = [this, st, leb, D, P, fail]() mutable {
    st->data.assign(st->k, std::vector<uint8_t>(geo_.page_data_bytes));
    st->left = st->k;
    for (uint32_t j = 0; j < st->k; ++j) {
      const auto die = static_cast<uint32_t>(st->pos[j] % D);
      const auto row = static_cast<uint32_t>(st->pos[j] / D);
      ++attach_.pages_read;
      pipe_.Read({{die, leb, row}, 0, 0, st->data[j].data(), nullptr},
                 [this, st, j, leb, D, P, fail](const Completion& c) mutable {
                   if (!c.ok() || Crc32c(st->data[j].data(), st->data[j].size()) != st->crc[j]) {
                     st->bad = true;
                   }
                   if (--st->left != 0) return;
                   if (st->bad) return fail();
                   std::vector<uint8_t> bytes;
                   for (auto& v : st->data) bytes.insert(bytes.end(), v.begin(), v.end());
                   f::SummaryHeader h;
                   std::memcpy(&h, bytes.data(), sizeof(h));
                   if (h.magic != f::kSummaryMagic || h.leb != leb || h.dies != D ||
                       h.pages != P || h.spp != spp_ ||
                       bytes.size() < f::SummaryBytes(D, P, spp_)) {
                     return fail();
                   }
                   std::vector<uint64_t> grid(uint64_t{D} * P * (1 + spp_));
                   std::memcpy(grid.data(), bytes.data() + sizeof(h), grid.size() * 8);
                   st->read_row = nullptr;
                   auto d = std::move(st->done);
                   d(std::move(grid), std::move(st->metas));
                 });
    }
  };
  st->read_row = [this, st, leb, dies, D, fail, read_data](uint32_t row) mutable {
    st->row_meta.assign(dies.size(), std::vector<uint8_t>(geo_.meta_bytes_per_page()));
    st->row_ok.assign(dies.size(), 0);
    st->left = static_cast<uint32_t>(dies.size());
    const uint32_t cw = geo_.codewords_per_page() - 1;
    for (std::size_t n = 0; n < dies.size(); ++n) {
      ++attach_.pages_read;
      pipe_.Read({{dies[n], leb, row}, cw, 1, nullptr, st->row_meta[n].data()},
                 [this, st, n, row, dies, D, fail, read_data](const Completion& c) mutable {
                   st->row_ok[n] = c.ok();
                   if (--st->left != 0) return;
                   if (impl_->parity_on && row == geo_.pages_per_block - 1) {
                     // The summary may have landed without the last row's parity (fenced,
                     // so its landing implies every page before it did): then pages of
                     // that row may be unprotected, and the page-by-page scan finds them.
                     std::vector<const uint8_t*> spares(D, nullptr);
                     for (std::size_t m = 0; m < dies.size(); ++m) {
                       if (st->row_ok[m]) spares[dies[m]] = st->row_meta[m].data();
                     }
                     if (UncoveredMembers(spares, nullptr) != 0) return fail();
                   }
                   uint32_t here = 0;
                   for (std::size_t m = 0; m < dies.size(); ++m) {
                     const uint8_t* meta = st->row_meta[m].data();
                     if (!st->row_ok[m] || !HeaderValid(meta, spp_)) continue;
                     const auto* h = reinterpret_cast<const f::PageHeader*>(meta);
                     if (h->type != static_cast<uint8_t>(f::PageType::kSummary) ||
                         h->epoch != epoch_) {
                       continue;
                     }
                     f::SectorEntry e;
                     std::memcpy(&e, meta + sizeof(f::PageHeader), sizeof(e));
                     const auto j = static_cast<uint32_t>(e.lba), k = static_cast<uint32_t>(e.lba >> 32);
                     if (st->k == 0 && k != 0 && k <= 4096) {
                       st->k = k;
                       st->pos.assign(k, UINT64_MAX);
                       st->crc.assign(k, 0);
                     }
                     if (k != st->k || j >= k || st->pos[j] != UINT64_MAX) {
                       st->bad = true;
                       continue;
                     }
                     st->pos[j] = uint64_t{row} * D + dies[m];
                     st->crc[j] = e.crc;
                     st->metas.emplace_back(st->pos[j], st->row_meta[m]);
                     ++st->found;
                     ++here;
                   }
                   if (st->bad || st->k == 0) return fail();
                   if (st->found == st->k) return read_data();
                   if (here == 0 || row == 0) return fail();
                   st->read_row(row - 1);  // a completion: read_row is not running
                 });
    }
  };
  if (dies.empty()) return fail();
  st->read_row(P - 1);
}

uint64_t Ftl::UncoveredMembers(const std::vector<const uint8_t*>& row, bool* has_parity) const {
  std::vector<std::pair<uint64_t, uint64_t>> parities;  // (seq, mask)
  for (const uint8_t* m : row) {
    if (m != nullptr && impl_->ParityValid(m)) {
      parities.emplace_back(reinterpret_cast<const f::PageHeader*>(m)->seq, Impl::ParityMask(m));
    }
  }
  if (has_parity != nullptr) *has_parity = !parities.empty();
  uint64_t uncovered = 0;
  for (uint32_t d = 0; d < row.size(); ++d) {
    const uint8_t* m = row[d];
    if (m == nullptr || impl_->ParityValid(m) || !HeaderValid(m, spp_)) continue;
    const auto* h = reinterpret_cast<const f::PageHeader*>(m);
    if (h->epoch != epoch_) continue;
    bool covered = false;
    for (const auto& [pseq, mask] : parities) covered = covered || (pseq > h->seq && ((mask >> d) & 1));
    if (!covered) uncovered |= uint64_t{1} << d;
  }
  return uncovered;
}

bool Ftl::RowsCovered(uint32_t leb, const std::vector<std::vector<uint8_t>>& meta,
                      const std::vector<uint8_t>& ok) {
  const uint32_t D = geo_.dies_per_pipe(), P = geo_.pages_per_block;
  // A LEB whose stripes include a failed die is a rebuild victim (DeclareDieFailed): the
  // die's failure took the protection of its rows, and the rebuild moves all its data.
  // A LEB formed without the failed dies must have every row covered, or the next
  // failure could take a member.
  const Leb& lb = lebs_.leb(leb);
  bool failed_die = false;
  for (uint32_t d = 0; d < D; ++d) failed_die = failed_die || (impl_->die_failed[d] && lb.good[d]);
  bool all = true;
  std::vector<const uint8_t*> spares(D);
  for (uint32_t row = 0; row < P; ++row) {
    for (uint32_t d = 0; d < D; ++d) {
      const uint64_t i = (uint64_t{leb} * D + d) * P + row;
      spares[d] = ok[i] && !meta[i].empty() ? meta[i].data() : nullptr;
    }
    bool has_parity = false;
    const uint64_t uncovered = UncoveredMembers(spares, &has_parity);
    // A row whose parity could sit on a failed die is the rebuild's business.
    if (failed_die && !has_parity) continue;
    for (uint32_t d = 0; d < D; ++d) {
      if (!((uncovered >> d) & 1)) continue;
      // Data pages are moved right after attach; a LEB with an uncovered trim page is
      // groomed (its records carried) like a rebuild victim.
      const uint8_t type = reinterpret_cast<const f::PageHeader*>(spares[d])->type;
      if (type == static_cast<uint8_t>(f::PageType::kData) ||
          type == static_cast<uint8_t>(f::PageType::kAtomicData)) {
        impl_->reprotect_pages.push_back({leb, d, row});
      } else if (type == static_cast<uint8_t>(f::PageType::kTrim)) {
        all = false;
      }
    }
  }
  return all;
}

void Ftl::Scan(uint64_t after_seq, Function<void(Status)> done) {
  struct PageRec {
    uint64_t seq;
    uint32_t leb, die, page;
  };
  struct Ctx {
    uint32_t remaining = 1;
    std::vector<std::vector<uint8_t>> meta;  // per (leb, die, page)
    std::vector<uint8_t> ok;
    std::vector<std::vector<uint8_t>> trim_data;
    Function<void(Status)> done;
    std::shared_ptr<Function<void(uint32_t, uint32_t)>> scan_row;  // reset when done
    std::shared_ptr<Function<void(uint32_t)>> read_summary;        // reset when done
    std::vector<uint8_t> skipped;  // per LEB: left as the checkpoint had it
    std::vector<uint8_t> summarized;  // per LEB: read through its summary
    uint64_t max_seq = 0;          // of pages known only through a summary (parity)
  };
  auto ctx = std::make_shared<Ctx>();
  ctx->done = std::move(done);
  const uint32_t D = geo_.dies_per_pipe(), P = geo_.pages_per_block, L = lebs_.size();
  auto idx = [D, P](uint32_t leb, uint32_t die, uint32_t page) {
    return (uint64_t{leb} * D + die) * P + page;
  };
  ctx->meta.resize(uint64_t{L} * D * P);
  ctx->ok.assign(uint64_t{L} * D * P, 0);
  ctx->skipped.assign(L, 0);
  ctx->summarized.assign(L, 0);
  auto replay_main = [this, ctx, D, P, L, idx, after_seq]() {
    // Trim pages need their data area: read those now, then replay.
    std::vector<PageRec> data_pages, trim_pages, atomic_pages;
    uint64_t max_seq = std::max(next_seq_ - 1, ctx->max_seq);
    for (uint32_t leb = kMetaLebs; leb < L; ++leb) {
      for (uint32_t d = 0; d < D; ++d) {
        for (uint32_t p = 0; p < P; ++p) {
          const uint64_t i = idx(leb, d, p);
          if (ctx->meta[i].empty()) continue;
          ++attach_.pages_scanned;
          const uint8_t* m = ctx->meta[i].data();
          if (ctx->ok[i] && impl_->ParityValid(m)) {
            max_seq = std::max(max_seq, reinterpret_cast<const f::PageHeader*>(m)->seq);
            continue;
          }
          if (!ctx->ok[i] || !HeaderValid(m, spp_)) {
            if (!(ctx->ok[i] && AllOnes(ctx->meta[i]))) ++attach_.torn_pages;
            continue;
          }
          const auto* h = reinterpret_cast<const f::PageHeader*>(m);
          if (h->epoch != epoch_) continue;
          max_seq = std::max(max_seq, h->seq);
          // A LEB is read only if it was opened after the base checkpoint; a page of it
          // at or before the base is a remnant of its previous use (its dies erased one
          // by one when it was reused and the power went before all were): everything
          // it held was moved or trimmed before the LEB was freed, and the base's map
          // knows where to. Replaying it could bring back data a trim removed (the trim
          // record, older than the base, is not kept).
          if (after_seq != 0 && h->seq <= after_seq) continue;
          if (h->type == static_cast<uint8_t>(f::PageType::kData)) {
            data_pages.push_back({h->seq, leb, d, p});
          } else if (h->type == static_cast<uint8_t>(f::PageType::kAtomicData)) {
            atomic_pages.push_back({h->seq, leb, d, p});
          } else if (h->type == static_cast<uint8_t>(f::PageType::kTrim)) {
            trim_pages.push_back({h->seq, leb, d, p});
          }
        }
      }
    }
    next_seq_ = max_seq + 1;
    CountUnnamedLosses(ctx->meta, ctx->ok, ctx->skipped, after_seq);
    auto apply = [this, ctx, data_pages, trim_pages, atomic_pages, idx, D, after_seq]() mutable {
      struct Event {
        uint64_t seq;
        int kind;  // 0 data page, 1 trim, 2 committed member of an atomic batch
        uint64_t a, b;
      };
      // Atomic members by the PSA of their slot 0, to check commit records against.
      std::unordered_map<Psa, std::size_t> atomic_at;
      for (std::size_t k = 0; k < atomic_pages.size(); ++k) {
        const PageRec& pr = atomic_pages[k];
        atomic_at[impl_->MakePsa(pr.leb, pr.die, pr.page, 0)] = k;
      }
      std::vector<Event> ev;
      for (uint32_t i = kMetaLebs; i < lebs_.size(); ++i) {
        if (!ctx->skipped[i]) lebs_.leb(i).trim_pages.clear();  // rebuilt from what is read
      }
      if (after_seq != 0) {
        // Checkpoint mappings into LEBs erased or rewritten since the checkpoint are
        // stale: their sectors moved (or were trimmed) and the newer state is in what the
        // scan replays. Left in place, they would share slots with the new contents and
        // clear their valid bits when replayed over.
        std::vector<uint64_t> stale;
        map_.ForEachMappedIn(0, map_.sectors(), [&](uint64_t l, Psa p) {
          if (ctx->skipped[impl_->LebOf(p)] != 1) stale.push_back(l);
        });
        for (uint64_t l : stale) impl_->Remap(l, kUnmapped);
      }
      for (std::size_t k = 0; k < data_pages.size(); ++k) ev.push_back({data_pages[k].seq, 0, k, 0});
      for (std::size_t k = 0; k < trim_pages.size(); ++k) {
        const auto& td = ctx->trim_data[k];
        if (td.empty()) continue;
        const uint64_t i = idx(trim_pages[k].leb, trim_pages[k].die, trim_pages[k].page);
        const auto* e = reinterpret_cast<const f::SectorEntry*>(ctx->meta[i].data() + sizeof(f::PageHeader));
        if (Crc32c(td.data(), td.size()) != e[0].crc) {
          ++attach_.torn_pages;
          continue;
        }
        const auto* recs = reinterpret_cast<const f::TrimRecord*>(td.data());
        const uint64_t n = std::min<uint64_t>(e[0].lba, td.size() / sizeof(f::TrimRecord));
        for (uint64_t r = 0; r < n; ++r) {
          // A record carried forward after the checkpoint keeps its old seq; the
          // checkpoint already reflects it, and replaying it would unmap newer data.
          if (recs[r].seq <= after_seq) continue;
          if (f::IsCommitRecord(recs[r])) {
            // A member counts if the page named is the one committed (not a later use
            // of its position) and intact; it is applied at the commit's seq.
            const auto it = atomic_at.find(static_cast<Psa>(recs[r].count & ~f::kCommitFlag));
            if (it != atomic_at.end() && atomic_pages[it->second].seq == recs[r].lba) {
              ev.push_back({recs[r].seq, 2, it->second, 0});
            } else if (Impl::TraceLba() != UINT64_MAX) {
              fmt::print(stderr, "trace attach: commit seq {} names member seq {} psa {}: {}\n", recs[r].seq,
                         recs[r].lba, recs[r].count & ~f::kCommitFlag,
                         it == atomic_at.end() ? "no atomic page there" : "another seq there");
            }
            continue;
          }
          ev.push_back({recs[r].seq, 1, recs[r].lba, recs[r].count});
        }
        lebs_.leb(trim_pages[k].leb).trim_pages.push_back(trim_pages[k].page * D + trim_pages[k].die);
      }
      std::stable_sort(ev.begin(), ev.end(), [](const Event& x, const Event& y) {
        return x.seq < y.seq || (x.seq == y.seq && x.kind < y.kind);
      });
      for (const Event& e : ev) {
        if (e.kind == 0 || e.kind == 2) {
          const PageRec& pr = e.kind == 0 ? data_pages[e.a] : atomic_pages[e.a];
          const auto* se = reinterpret_cast<const f::SectorEntry*>(
              ctx->meta[idx(pr.leb, pr.die, pr.page)].data() + sizeof(f::PageHeader));
          for (uint32_t s = 0; s < spp_; ++s) {
            if (se[s].lba == f::kNoLba || se[s].lba >= map_.sectors()) continue;
            if (se[s].lba == Impl::TraceLba()) {
              fmt::print(stderr, "trace attach maps it to leb {} die {} page {} seq {} (event seq {} kind {})\n",
                         pr.leb, pr.die, pr.page, pr.seq, e.seq, e.kind);
            }
            impl_->Remap(se[s].lba, impl_->MakePsa(pr.leb, pr.die, pr.page, s));
          }
        } else {
          std::vector<uint64_t> mapped;
          if (Impl::TraceLba() - e.a < e.b) fmt::print(stderr, "trace attach replays a trim seq {}\n", e.seq);
          map_.ForEachMappedIn(e.a, e.b, [&](uint64_t l, Psa) { mapped.push_back(l); });
          for (uint64_t l : mapped) impl_->Remap(l, kUnmapped);
        }
      }
      // LEB states from what was found.
      std::vector<uint64_t> first(lebs_.size(), 0), last(lebs_.size(), 0);
      std::vector<bool> seen(lebs_.size(), false);
      for (const auto& pr : data_pages) {
        if (!seen[pr.leb] || pr.seq < first[pr.leb]) first[pr.leb] = pr.seq;
        last[pr.leb] = std::max(last[pr.leb], pr.seq);
        seen[pr.leb] = true;
      }
      for (const auto* list : {&trim_pages, &atomic_pages}) {
        for (const auto& pr : *list) {
          if (!seen[pr.leb] || pr.seq < first[pr.leb]) first[pr.leb] = pr.seq;
          last[pr.leb] = std::max(last[pr.leb], pr.seq);
          seen[pr.leb] = true;
        }
      }
      uint32_t unprotected = 0;
      for (uint32_t i = kMetaLebs; i < lebs_.size(); ++i) {
        Leb& l = lebs_.leb(i);
        if (ctx->skipped[i] == 2 && l.valid == 0) {
          l.trim_pages.clear();
          l.open_seq = 0;
          l.needs_erase = true;  // cheap insurance: erase again before use
          lebs_.SetState(l, LebState::kFree);
          continue;
        }
        if (ctx->skipped[i]) continue;
        ++attach_.lebs_scanned;
        l.capacity = impl_->LebCapacity(l);
        l.needs_erase = true;
        if (seen[i]) {
          l.open_seq = first[i];
          l.close_seq = last[i];
          lebs_.SetState(l, LebState::kClosed);
          // A LEB cut while open may hold members no parity covers (written after its
          // row's last durable parity): FlashBack moves their data into protected LEBs.
          const std::size_t before = impl_->reprotect_pages.size();
          if (impl_->parity_on && !ctx->summarized[i]) {
            if (!RowsCovered(i, ctx->meta, ctx->ok)) impl_->Reprotect(l);
            unprotected += impl_->reprotect_pages.size() != before || l.unprotected;
          }
        } else {
          l.open_seq = 0;
          lebs_.SetState(l, LebState::kFree);
        }
      }
      if (unprotected != 0) {
        impl_->Event(fmt::format("FlashBack: {} LEB(s) cut while open hold {} page(s) no parity "
                                 "covers; moving their data into protected LEBs",
                                 unprotected, impl_->reprotect_pages.size()));
      }
      auto d = std::move(ctx->done);
      d(Status::Ok());
    };
    if (trim_pages.empty()) return apply();
    ctx->trim_data.resize(trim_pages.size());
    auto pending = std::make_shared<uint32_t>(1);
    auto after = [pending, apply]() mutable {
      if (--*pending == 0) apply();
    };
    for (std::size_t k = 0; k < trim_pages.size(); ++k) {
      ctx->trim_data[k].resize(geo_.page_data_bytes);
      ++*pending;
      ++attach_.pages_read;
      const PageRec tp = trim_pages[k];
      auto on_read = [this, ctx, k, after, tp](const Completion& c) mutable {
        if (c.ok()) return after();
        // FlashBack: a trim page on a dead die is rebuilt from its row.
        impl_->RebuildPage(tp.leb, tp.die, tp.page,
                           [ctx, k, after](bool ok, std::vector<uint8_t> data, std::vector<uint8_t>) mutable {
                             if (ok) ctx->trim_data[k] = std::move(data);
                             else ctx->trim_data[k].clear();
                             after();
                           });
      };
      if (impl_->die_failed[tp.die]) {
        PostDieTimeout(clock_, std::move(on_read));
        continue;
      }
      pipe_.Read({{tp.die, tp.leb, tp.page}, 0, 0, ctx->trim_data[k].data(), nullptr},
                 std::move(on_read));
    }
    after();
  };
  auto replay = [this, ctx, D, P, L, idx, replay_main]() {
    if (--ctx->remaining != 0) return;
    // The row reader refers to itself; dropping it here ends that cycle.
    if (ctx->scan_row) *ctx->scan_row = nullptr;
    if (ctx->read_summary) *ctx->read_summary = nullptr;
    // FlashBack: page headers that could not be read (a dead die, an uncorrectable page)
    // are rebuilt from their row's parity, so nothing on a failed die drops out of the map.
    std::vector<std::pair<uint64_t, std::array<uint32_t, 3>>> todo;
    for (uint32_t leb = kMetaLebs; leb < L; ++leb) {
      for (uint32_t p = 0; p < P; ++p) {
        uint64_t mask = 0;
        for (uint32_t d = 0; d < D; ++d) {
          const uint64_t i = idx(leb, d, p);
          if (!ctx->meta[i].empty() && ctx->ok[i] && impl_->ParityValid(ctx->meta[i].data())) {
            mask |= Impl::ParityMask(ctx->meta[i].data());
          }
        }
        for (uint32_t d = 0; d < D && mask != 0; ++d) {
          const uint64_t i = idx(leb, d, p);
          if (((mask >> d) & 1) && (ctx->meta[i].empty() || !ctx->ok[i])) {
            todo.push_back({i, {leb, d, p}});
          }
        }
      }
    }
    if (todo.empty()) return replay_main();
    auto left = std::make_shared<std::size_t>(todo.size());
    for (const auto& [i, at] : todo) {
      impl_->RebuildPage(at[0], at[1], at[2],
                         [ctx, i = i, left, replay_main](bool ok, std::vector<uint8_t>,
                                                         std::vector<uint8_t> meta) mutable {
                           if (ok) {
                             ctx->meta[i] = std::move(meta);
                             ctx->ok[i] = 1;
                           }
                           if (--*left == 0) replay_main();
                         });
    }
  };
  // Pages of a LEB are written row by row across its dies, so each LEB is read one row
  // at a time and left at its first row where every die reads erased: the work is
  // proportional to what was written, not to the device.
  const uint32_t last_cw = geo_.codewords_per_page() - 1;
  auto scan_row = std::make_shared<Function<void(uint32_t, uint32_t)>>();
  auto read_summary = std::make_shared<Function<void(uint32_t)>>();
  auto leb_left = std::make_shared<std::vector<uint32_t>>(L, 0);
  *read_summary = [this, ctx, idx, replay, scan_row, D, P](uint32_t leb) mutable {
    ReadSummary(leb, [this, ctx, idx, replay, scan_row, leb, D, P](
                         std::vector<uint64_t> grid,
                         std::vector<std::pair<uint64_t, std::vector<uint8_t>>> pages) mutable {
      // No usable summary: read the LEB row by row (row 0 is in already).
      if (grid.empty()) return (*scan_row)(leb, 1);
      ++attach_.summaries_used;
      ctx->summarized[leb] = 1;
      for (auto& [pos, meta] : pages) {
        const uint64_t i = idx(leb, static_cast<uint32_t>(pos % D), static_cast<uint32_t>(pos / D));
        ctx->meta[i] = std::move(meta);
        ctx->ok[i] = 1;
      }
      // Data pages get their header rebuilt from the summary; trim pages are read (their
      // records are in the data area, checked against the header's CRC).
      std::vector<uint64_t> trims;
      const std::size_t n = f::MetaBytes(spp_) - 4;
      for (uint64_t pos = 0; pos < uint64_t{D} * P; ++pos) {
        const uint64_t* ent = &grid[pos * (1 + spp_)];
        if (ent[0] == 0) continue;
        const uint64_t i = idx(leb, static_cast<uint32_t>(pos % D), static_cast<uint32_t>(pos / D));
        const auto type = static_cast<uint8_t>(ent[0] >> f::kSummaryTypeShift);
        if (type == static_cast<uint8_t>(f::PageType::kTrim)) {
          trims.push_back(pos);
          continue;
        }
        if (type != static_cast<uint8_t>(f::PageType::kData) &&
            type != static_cast<uint8_t>(f::PageType::kAtomicData)) {
          // Parity: nothing to map, but its sequence number counts.
          ctx->max_seq = std::max(ctx->max_seq, ent[0] & ((uint64_t{1} << f::kSummaryTypeShift) - 1));
          ctx->meta[i].clear();
          continue;
        }
        std::vector<uint8_t>& m = ctx->meta[i];
        m.assign(geo_.meta_bytes_per_page(), 0xFF);
        f::PageHeader h{0xFF, type, f::kVersionMajor, static_cast<uint8_t>(spp_), epoch_,
                        ent[0] & ((uint64_t{1} << f::kSummaryTypeShift) - 1)};
        std::memcpy(m.data(), &h, sizeof(h));
        for (uint32_t s2 = 0; s2 < spp_; ++s2) {
          const f::SectorEntry e{ent[1 + s2], 0};
          std::memcpy(m.data() + sizeof(h) + s2 * sizeof(e), &e, sizeof(e));
        }
        const uint32_t crc = Crc32c(m.data(), n);
        std::memcpy(m.data() + n, &crc, 4);
        ctx->ok[i] = 1;
      }
      if (trims.empty()) return replay();
      auto left = std::make_shared<std::size_t>(trims.size());
      const uint32_t cw = geo_.codewords_per_page() - 1;
      for (uint64_t pos : trims) {
        const auto die = static_cast<uint32_t>(pos % D), row = static_cast<uint32_t>(pos / D);
        const uint64_t i = idx(leb, die, row);
        ctx->meta[i].assign(geo_.meta_bytes_per_page(), 0);
        if (!impl_->die_failed[die]) ++attach_.pages_read;
        auto on_meta = [this, ctx, i, left, replay, leb, die, row](const Completion& c) mutable {
          ctx->ok[i] = c.ok();
          if (c.ok()) {
            if (--*left == 0) replay();
            return;
          }
          // FlashBack: a trim page on a dead die; its header comes back from parity.
          impl_->RebuildPage(leb, die, row,
                             [ctx, i, left, replay](bool ok, std::vector<uint8_t>,
                                                    std::vector<uint8_t> meta) mutable {
                               if (ok) {
                                 ctx->meta[i] = std::move(meta);
                                 ctx->ok[i] = 1;
                               }
                               if (--*left == 0) replay();
                             });
        };
        if (impl_->die_failed[die]) {
          PostDieTimeout(clock_, std::move(on_meta));
          continue;
        }
        pipe_.Read({{die, leb, row}, cw, 1, nullptr, ctx->meta[i].data()}, std::move(on_meta));
      }
    });
  };
  ctx->read_summary = read_summary;
  *scan_row = [this, ctx, idx, last_cw, replay, scan_row, read_summary, leb_left, D, P, after_seq](uint32_t leb, uint32_t row) mutable {
    std::vector<uint32_t> dies;
    for (uint32_t d = 0; d < D; ++d) {
      if (lebs_.leb(leb).good[d]) dies.push_back(d);
    }
    (*leb_left)[leb] = static_cast<uint32_t>(dies.size());
    for (uint32_t d : dies) {
      const uint64_t i = idx(leb, d, row);
      ctx->meta[i].resize(geo_.meta_bytes_per_page());
      auto cb = [this, ctx, i, leb, row, dies, idx, replay, scan_row, read_summary, leb_left, P, after_seq](const Completion& c) mutable {
                   ctx->ok[i] = c.ok();
                   if (--(*leb_left)[leb] != 0) return;
                   if (row == 0 && after_seq != 0) {
                     // Only LEBs opened after the checkpoint need reading.
                     bool newer = false;
                     for (uint32_t d2 : dies) {
                       const uint64_t j = idx(leb, d2, 0);
                       // A parity page counts: its row's data may not have reached
                       // flash (no power-loss protection) while later pages did.
                       if (!ctx->ok[j] || (!HeaderValid(ctx->meta[j].data(), spp_) &&
                                           !impl_->ParityValid(ctx->meta[j].data()))) {
                         continue;
                       }
                       const auto* h = reinterpret_cast<const f::PageHeader*>(ctx->meta[j].data());
                       newer |= h->epoch == epoch_ && h->seq > after_seq;
                     }
                     if (!newer) {
                       // Erased (or half-erased: every page torn) since the checkpoint:
                       // the LEB was being reused when the power went.
                       bool erased = true;
                       for (uint32_t d2 : dies) {
                         const uint64_t j = idx(leb, d2, 0);
                         const bool clean = ctx->ok[j] && AllOnes(ctx->meta[j]);
                         const bool torn = !ctx->ok[j] || (!HeaderValid(ctx->meta[j].data(), spp_) &&
                                                           !impl_->ParityValid(ctx->meta[j].data()));
                         erased = erased && (clean || torn);
                       }
                       for (uint32_t d2 : dies) ctx->meta[idx(leb, d2, 0)].clear();
                       // Erased since the checkpoint (reused, cut before its first page):
                       // whatever the checkpoint says it held has moved or gone.
                       ctx->skipped[leb] = erased ? 2 : 1;
                       return replay();
                     }
                   }
                   bool any_written = false;
                   for (uint32_t d2 : dies) {
                     const uint64_t j = idx(leb, d2, row);
                     if (!(ctx->ok[j] && AllOnes(ctx->meta[j]))) any_written = true;
                   }
                   // A closed LEB's summary saves reading the rest of it.
                   if (any_written && row == 0 && P > 1 && impl_->summary_pages != 0) {
                     return (*read_summary)(leb);
                   }
                   if (any_written && row + 1 < P) return (*scan_row)(leb, row + 1);
                   replay();  // this LEB is done
                 };
      if (impl_->die_failed[d]) {
        // A die that did not answer at attach: its pages count as unreadable, and are
        // rebuilt from parity before the replay.
        PostDieTimeout(clock_, std::move(cb));
        continue;
      }
      ++attach_.pages_read;
      pipe_.Read({{d, leb, row}, last_cw, 1, nullptr, ctx->meta[i].data()}, std::move(cb));
    }
    if (dies.empty()) replay();
  };
  ctx->scan_row = scan_row;
  for (uint32_t leb = kMetaLebs; leb < L; ++leb) {
    ++ctx->remaining;
    (*scan_row)(leb, 0);
  }
  replay();
}

}  // namespace vsl::ftl
