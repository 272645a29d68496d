// Metadata records on flash: written with copies on distinct dies to the metadata slot not
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
  const uint32_t first = target * slot_lebs_;
  const uint64_t seq = next_seq_++;
  auto payload = std::make_shared<std::vector<uint8_t>>(BuildMetaPayload(kind, seq));
  const uint32_t D = geo_.dies_per_pipe(), P = geo_.pages_per_block;
  const uint64_t page_bytes = geo_.page_data_bytes;
  const uint64_t pages = (payload->size() + page_bytes - 1) / page_bytes;
  // Every page is written on `copies` different dies: three when the slot has the dies
  // and the room, never fewer than two. So one dead die never takes a record with it,
  // and with FlashBack a record written before a die failure still has a copy after the
  // next one (sequential failures leave no chance to rewrite it in between). More copies
  // would lengthen every attach and shutdown (24 copies on duo-slc: 8x the clean attach).
  // A multi-LEB slot is sized for two copies of a full map (format.cc).
  uint32_t G = D;
  for (uint32_t i = 0; i < slot_lebs_; ++i) G = std::min(G, lebs_.leb(first + i).good_dies());
  // Pages of `c` copies the slot holds (copies of a page stay in one LEB).
  auto holds = [&](uint32_t c) {
    uint64_t n = 0;
    for (uint32_t i = 0; i < slot_lebs_; ++i) n += uint64_t{lebs_.leb(first + i).good_dies()} * P / c;
    return n;
  };
  uint32_t copies = std::min<uint32_t>(G, kMetaCopies);
  while (copies >= 2 && holds(copies) < pages) --copies;
  if (copies < 2 || pages >= f::MetaPageTag::kMaxPages) {
    return clock_.Post([d = std::move(done), pages]() mutable {
      d(Status::NoSpace(fmt::format("metadata record of {} pages does not fit a metadata slot", pages)));
    });
  }
  payload->resize(pages * page_bytes, 0);
  // The record stands if every page has at least one copy on flash (the reader takes
  // any copy that checks): a copy's program failing (a grown bad block, a random
  // failure) or its block's erase failing loses that copy only.
  struct Ctx {
    uint32_t remaining = 1;
    Done done;
    std::vector<std::vector<uint8_t>> metas;
    std::vector<uint8_t> stored;  // per page: a copy is on flash
    uint32_t failed = 0;          // copies lost
    nand::FlashStatus why = nand::FlashStatus::kOk;
  };
  auto ctx = std::make_shared<Ctx>();
  ctx->done = std::move(done);
  ctx->stored.assign(pages, 0);
  if (base_ckpt_seq_ != 0 && base_ckpt_leb_ == target) base_ckpt_seq_ = 0;  // being erased
  auto finish = [this, ctx, target]() {
    if (--ctx->remaining != 0) return;
    Status st;
    for (std::size_t i = 0; i < ctx->stored.size() && st.ok(); ++i) {
      if (ctx->stored[i] == 0) {
        st = Status::IOError(fmt::format("metadata program failed: every copy of page {} ({})", i,
                                         nand::FlashStatusName(ctx->why)));
      }
    }
    if (st.ok() && ctx->failed != 0) {
      Logger("ftl")->warn("metadata record: {} of its page copies failed ({}); every page has another",
                          ctx->failed, nand::FlashStatusName(ctx->why));
    }
    if (st.ok()) meta_leb_ = target;
    Done d = std::move(ctx->done);
    d(st);
  };
  for (uint32_t i = 0; i < slot_lebs_; ++i) {
    Leb& l = lebs_.leb(first + i);
    for (uint32_t d = 0; d < D; ++d) {
      if (!l.good[d]) continue;
      ++ctx->remaining;
      pipe_.Erase(d, first + i, [ctx, finish, d](const Completion& c) mutable {
        // The copies on this block then fail their programs and are counted there.
        if (!c.ok()) Logger("ftl")->warn("metadata erase failed on die {}: {}", d, nand::FlashStatusName(c.status));
        finish();
      });
    }
    ++l.erase_count;
  }
  const uint64_t total = uint64_t{copies} * pages;
  ctx->metas.resize(total);
  const uint32_t G0 = lebs_.leb(first).good_dies();
  // Row-major over the good dies of each LEB of the slot in turn: copy c holds page
  // c / copies, so the copies of a page are `copies` consecutive positions. A page's
  // copies never straddle two LEBs (their good dies may differ): a LEB's last positions
  // too few for all of them stay empty, and so the copies are on distinct dies.
  uint64_t placed = 0;
  for (uint32_t i = 0; i < slot_lebs_ && placed < total; ++i) {
    const uint32_t leb = first + i;
    const Leb& l = lebs_.leb(leb);
    uint64_t room = uint64_t{l.good_dies()} * P;
    for (uint32_t row = 0; row < P && placed < total; ++row) {
      for (uint32_t d = 0; d < D && placed < total; ++d) {
        if (!l.good[d]) continue;
        if (placed % copies == 0 && room < copies) break;
        --room;
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
        e[0] = {f::MetaPageTag{idx, pages, copies, G0 <= 255 ? G0 : 0}.Pack(), Crc32c(data, page_bytes)};
        f::MetaSlotTag t{f::kMetaSlotMagic, slot_lebs_, target, 0};
        if (slot_lebs_ > 1 && spp_ >= 2) {
          const uint64_t packed = t.Pack();
          e[1] = {packed, Crc32c(reinterpret_cast<const uint8_t*>(&packed), 8)};
        }
        const std::size_t n = f::MetaBytes(spp_) - 4;
        const uint32_t crc = Crc32c(meta.data(), n);
        std::memcpy(meta.data() + n, &crc, 4);
        if (slot_lebs_ > 1 && spp_ < 2) {
          t.crc = Crc32c(reinterpret_cast<const uint8_t*>(&t), 12);
          std::memcpy(meta.data() + f::MetaBytes(spp_), &t, sizeof(t));
        }
        ++ctx->remaining;
        ++stats_.meta_pages;
        pipe_.Program({{d, leb, row}, data, meta.data()}, nullptr,
                      [ctx, finish, payload, idx](const Completion& c) mutable {
                        if (c.ok()) {
                          ctx->stored[idx] = 1;
                        } else {
                          ++ctx->failed;
                          ctx->why = c.status;
                        }
                        finish();
                      });
        ++placed;
      }
    }
  }
  clock_.Post(finish);
}

// Reads the newest complete metadata record of metadata LEB `leb`.

namespace detail {
void ReadMetaSlot(nand::FlashPipe& pipe, const nand::Geometry& g, uint32_t first_leb, uint32_t slot_lebs,
                  const std::vector<uint32_t>& silent, Function<void(std::optional<MetaRead>, SlotInfo)> done,
                  bool row0_only) {
  const uint32_t D = g.dies_per_pipe(), P = g.pages_per_block;
  struct Ctx {
    uint32_t remaining = 0;
    uint32_t rows_read = 0, rows_needed = 1, rows_max = 0;
    uint64_t page_bytes = 0;
    SlotInfo info;
    std::vector<uint32_t> dies;  // dies that answer
    // The row being read, by die.
    std::vector<std::vector<uint8_t>> data, meta;
    std::vector<bool> ok;
    // Valid pages kept, one copy each: seq -> page index -> data; and each seq's page count.
    std::map<uint64_t, std::map<uint64_t, std::vector<uint8_t>>> by_seq;
    std::map<uint64_t, uint64_t> counts;
    Function<void(std::optional<MetaRead>, SlotInfo)> done;
  };
  auto ctx = std::make_shared<Ctx>();
  ctx->done = std::move(done);
  ctx->rows_max = slot_lebs * P;
  ctx->page_bytes = g.page_data_bytes;
  for (uint32_t d = 0; d < D; ++d) {
    if (std::find(silent.begin(), silent.end(), d) == silent.end()) ctx->dies.push_back(d);
  }
  ctx->data.resize(D);
  ctx->meta.resize(D);
  ctx->ok.assign(D, false);
  auto valid_meta = [ctx](uint32_t d) -> const f::PageHeader* {
    if (!ctx->ok[d] || ctx->meta[d].size() < sizeof(f::PageHeader)) return nullptr;
    const auto* h = reinterpret_cast<const f::PageHeader*>(ctx->meta[d].data());
    if (h->type != static_cast<uint8_t>(f::PageType::kMeta) ||
        f::MetaBytes(h->sectors) > ctx->meta[d].size() || !HeaderValid(ctx->meta[d].data(), h->sectors)) {
      return nullptr;
    }
    return h;
  };
  // The slot tag of a valid metadata page (format 1.5, multi-LEB slots), if it has one.
  auto slot_tag = [ctx](uint32_t d, uint32_t spp) -> std::optional<f::MetaSlotTag> {
    const auto& m = ctx->meta[d];
    f::MetaSlotTag t;
    if (spp >= 2) {  // in sector entry 1 (the page header's CRC covers it too)
      const auto* e = reinterpret_cast<const f::SectorEntry*>(m.data() + sizeof(f::PageHeader));
      const uint64_t packed = e[1].lba;
      if (e[1].crc != Crc32c(reinterpret_cast<const uint8_t*>(&packed), 8)) return std::nullopt;
      t = f::MetaSlotTag::Unpack(packed);
    } else {
      if (f::MetaBytes(spp) + sizeof(f::MetaSlotTag) > m.size()) return std::nullopt;
      std::memcpy(&t, m.data() + f::MetaBytes(spp), sizeof(t));
      if (t.crc != Crc32c(reinterpret_cast<const uint8_t*>(&t), 12)) return std::nullopt;
    }
    if (t.magic != f::kMetaSlotMagic || t.slot_lebs < 2 || t.slot > 1) return std::nullopt;
    return t;
  };
  auto assemble = [ctx]() {
    std::optional<MetaRead> best;
    for (auto it = ctx->by_seq.rbegin(); it != ctx->by_seq.rend() && !best; ++it) {
      const uint64_t n = ctx->counts[it->first];
      if (n == 0 || it->second.size() != n) continue;
      MetaRead r;
      r.seq = it->first;
      r.payload.reserve(n * ctx->page_bytes);
      for (auto& [k, d] : it->second) r.payload.insert(r.payload.end(), d.begin(), d.end());
      best = std::move(r);
    }
    ctx->by_seq.clear();
    auto d = std::move(ctx->done);
    d(std::move(best), ctx->info);
  };
  // The newest record's pages all found (one copy each) for the rows read so far.
  auto complete = [ctx]() {
    if (ctx->by_seq.empty()) return false;
    const auto& [seq, pages] = *ctx->by_seq.rbegin();
    const uint64_t n = ctx->counts[seq];
    return n != 0 && pages.size() == n;
  };
  auto read_row = std::make_shared<Function<void(uint32_t)>>();
  *read_row = [ctx, D, P, &pipe, first_leb, g, valid_meta, slot_tag, assemble, complete, read_row,
               row0_only](uint32_t row) mutable {
    ctx->remaining = static_cast<uint32_t>(ctx->dies.size());
    if (ctx->remaining == 0) return assemble();
    const uint32_t leb = first_leb + row / P, page = row % P;
    for (uint32_t d : ctx->dies) {
      ctx->data[d].resize(g.page_data_bytes);
      ctx->meta[d].resize(g.meta_bytes_per_page());
      pipe.Read({{d, leb, page}, 0, 0, ctx->data[d].data(), ctx->meta[d].data()},
                [ctx, d, row, D, P, valid_meta, slot_tag, assemble, complete, read_row,
                 row0_only](const Completion& c) mutable {
                  ctx->ok[d] = c.ok();
                  if (--ctx->remaining != 0) return;
                  ++ctx->rows_read;
                  uint64_t best_seq = 0;
                  f::MetaPageTag tag;
                  for (uint32_t dd = 0; dd < D; ++dd) {
                    const f::PageHeader* h = valid_meta(dd);
                    if (h == nullptr) continue;
                    ctx->info.any_meta = true;
                    if (auto t = slot_tag(dd, h->sectors)) {
                      ctx->info.slot_lebs = t->slot_lebs;
                      ctx->info.slot = t->slot;
                    }
                    const auto* e = reinterpret_cast<const f::SectorEntry*>(ctx->meta[dd].data() + sizeof(f::PageHeader));
                    if (row == 0) ctx->info.row0_seq = std::max(ctx->info.row0_seq, h->seq);
                    if (row == 0 && h->seq >= best_seq) {
                      best_seq = h->seq;
                      tag = f::MetaPageTag::Unpack(e[0].lba);
                    }
                    if (Crc32c(ctx->data[dd].data(), ctx->data[dd].size()) != e[0].crc) continue;
                    const auto t = f::MetaPageTag::Unpack(e[0].lba);
                    ctx->info.spp = h->sectors;
                    ctx->counts[h->seq] = t.pages;
                    auto& slot = ctx->by_seq[h->seq][t.index];
                    if (slot.empty()) slot.swap(ctx->data[dd]);
                  }
                  // Probing a slot by its first LEB only, and its pages say it spans more:
                  // the caller reads it again whole.
                  if (row == 0 && (row0_only || ctx->info.slot_lebs > ctx->rows_max / P)) {
                    ctx->by_seq.clear();
                    auto self = std::move(*read_row);
                    auto dn = std::move(ctx->done);
                    return dn(std::nullopt, ctx->info);
                  }
                  if (row == 0) {
                    // The newest record seen in row 0 says how many rows it spans.
                    // Records before format 1.3 carry no layout: two copies, spread over
                    // (at most) the dies that answer.
                    const uint64_t copies = tag.copies != 0 ? tag.copies : 2;
                    const uint64_t per_row = std::max<uint64_t>(1, tag.dies != 0 ? tag.dies : ctx->dies.size());
                    ctx->rows_needed = static_cast<uint32_t>(
                        std::min<uint64_t>(ctx->rows_max, (copies * tag.pages + per_row - 1) / per_row));
                  }
                  // A multi-LEB slot reads on past the estimate (bad blocks, copies kept
                  // within a LEB) until the newest record is whole or the slot ends.
                  const bool more = ctx->rows_read < ctx->rows_needed ||
                                    (ctx->rows_max > P && ctx->rows_read < ctx->rows_max && !complete() &&
                                     ctx->info.any_meta);
                  if (more) return (*read_row)(row + 1);
                  auto self = std::move(*read_row);  // break the cycle before finishing
                  assemble();
                });
    }
  };
  (*read_row)(0);
}
}  // namespace detail

}  // namespace vsl::ftl
