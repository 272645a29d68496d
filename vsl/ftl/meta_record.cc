// Metadata records on flash: written with copies on distinct dies to the metadata LEB not
// holding the newest record, and read back.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "vsl/ftl/attach_util.h"
#include "vsl/ftl/ftl.h"
#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl {
using namespace detail;

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

namespace detail {
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
}  // namespace detail

}  // namespace vsl::ftl
