// Scan recovery: page headers (or LEB summaries) of every LEB written since the base
// checkpoint, replayed in sequence order, with FlashBack coverage checks.
#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "vsl/ftl/attach_util.h"
#include "vsl/ftl/ftl.h"
#include "vsl/ftl/ftl_impl.h"
#include "vsl/ftl/recovery.h"

namespace vsl::ftl {
using namespace detail;

ScanFormat Ftl::ScanFmt() const { return ScanFormat{meta_lebs_, epoch_, spp_, &impl_->stripe}; }

void Ftl::NoteUnnamedLosses(const ScanImage& img, uint64_t after_seq) {
  const uint64_t stripes = UnnamedLostStripes(img, lebs_, impl_->dies, ScanFmt(), after_seq);
  impl_->dies.unnamed_lost_stripes += stripes;
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
    if (lebs_.leb(leb).good[d] && !impl_->dies.failed(d)) dies.push_back(d);
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
                       bytes.size() < f::SummaryBytes(D, P, spp_, impl_->stripe.summary_crcs())) {
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
                   if (impl_->stripe.parity() && row == geo_.pages_per_block - 1) {
                     // The summary may have landed without the last row's parity (fenced,
                     // so its landing implies every page before it did): then pages of
                     // that row may be unprotected, and the page-by-page scan finds them.
                     std::vector<const uint8_t*> spares(D, nullptr);
                     for (std::size_t m = 0; m < dies.size(); ++m) {
                       if (st->row_ok[m]) spares[dies[m]] = st->row_meta[m].data();
                     }
                     if (UncoveredMembers(spares, ScanFmt(), nullptr) != 0) return fail();
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

void Ftl::Scan(uint64_t after_seq, Function<void(Status)> done) {
  struct Ctx {
    explicit Ctx(uint32_t l, uint32_t d, uint32_t p) : img(l, d, p) {}
    uint32_t remaining = 1;
    ScanImage img;
    std::vector<std::vector<uint8_t>> trim_data;
    Function<void(Status)> done;
    std::shared_ptr<Function<void(uint32_t, uint32_t)>> scan_row;  // reset when done
    std::shared_ptr<Function<void(uint32_t)>> read_summary;        // reset when done
  };
  const uint32_t D = geo_.dies_per_pipe(), P = geo_.pages_per_block, L = lebs_.size();
  auto ctx = std::make_shared<Ctx>(L, D, P);
  ctx->done = std::move(done);
  // Replays what was read (recovery.h's plan) into the map and the LEB table.
  auto apply = [this, ctx, after_seq](const ScanPages& pages) {
    ScanImage& img = ctx->img;
    ReplayPlan plan = PlanReplay(img, pages, ctx->trim_data, impl_->addr, after_seq);
    attach_.torn_pages += plan.torn;
    if (Impl::TraceLba() != UINT64_MAX) {
      for (const auto& u : plan.unmatched) {
        fmt::print(stderr, "trace attach: commit seq {} names member seq {} psa {}: {}\n", u.commit_seq,
                   u.member_seq, u.psa, u.page_there ? "another seq there" : "no atomic page there");
      }
    }
    for (uint32_t i = meta_lebs_; i < lebs_.size(); ++i) {
      if (!img.skipped[i]) lebs_.leb(i).trim_pages.clear();  // rebuilt from what is read
    }
    if (after_seq != 0) {
      // Checkpoint mappings into LEBs erased or rewritten since the checkpoint are
      // stale: their sectors moved (or were trimmed) and the newer state is in what the
      // scan replays. Left in place, they would share slots with the new contents and
      // clear their valid bits when replayed over.
      std::vector<uint64_t> stale;
      map_.ForEachMappedIn(0, map_.sectors(), [&](uint64_t l, Psa p) {
        if (img.skipped[impl_->addr.LebOf(p)] != ScanImage::kUnchanged) stale.push_back(l);
      });
      for (uint64_t l : stale) impl_->Remap(l, kUnmapped);
    }
    for (const auto& [leb, pos] : plan.trim_pages) lebs_.leb(leb).trim_pages.push_back(pos);
    for (const ReplayEvent& e : plan.events) {
      if (e.kind == ReplayEvent::kTrim) {
        std::vector<uint64_t> mapped;
        if (Impl::TraceLba() - e.a < e.b) fmt::print(stderr, "trace attach replays a trim seq {}\n", e.seq);
        map_.ForEachMappedIn(e.a, e.b, [&](uint64_t l, Psa) { mapped.push_back(l); });
        for (uint64_t l : mapped) impl_->Remap(l, kUnmapped);
        continue;
      }
      const PageRec& pr = e.kind == ReplayEvent::kData ? pages.data[e.a] : pages.atomic[e.a];
      const auto* se = reinterpret_cast<const f::SectorEntry*>(
          img.meta[img.Index(pr.leb, pr.die, pr.page)].data() + sizeof(f::PageHeader));
      for (uint32_t s = 0; s < spp_; ++s) {
        if (se[s].lba == f::kNoLba || se[s].lba >= map_.sectors()) continue;
        if (se[s].lba == Impl::TraceLba()) {
          fmt::print(stderr, "trace attach maps it to leb {} die {} page {} seq {} (event seq {} kind {})\n",
                     pr.leb, pr.die, pr.page, pr.seq, e.seq, e.kind);
        }
        impl_->Remap(se[s].lba, impl_->addr.Make(pr.leb, pr.die, pr.page, s));
      }
    }
    // LEB states from what was found.
    uint32_t unprotected = 0;
    for (uint32_t i = meta_lebs_; i < lebs_.size(); ++i) {
      Leb& l = lebs_.leb(i);
      if (img.skipped[i] == ScanImage::kErased && l.valid == 0) {
        l.trim_pages.clear();
        l.open_seq = 0;
        l.needs_erase = true;  // cheap insurance: erase again before use
        lebs_.SetState(l, LebState::kFree);
        continue;
      }
      if (img.skipped[i]) continue;
      ++attach_.lebs_scanned;
      l.capacity = impl_->stripe.LebCapacity(l);
      l.needs_erase = true;
      if (plan.seen[i]) {
        l.open_seq = plan.first[i];
        l.close_seq = plan.last[i];
        lebs_.SetState(l, LebState::kClosed);
        // A LEB cut while open may hold members no parity covers (written after its
        // row's last durable parity): FlashBack moves their data into protected LEBs.
        const std::size_t before = impl_->rw.reprotect().size();
        if (impl_->stripe.parity() && !img.summarized[i]) {
          if (!RowsCovered(img, i, l, impl_->dies, ScanFmt(), impl_->rw.reprotect())) impl_->Reprotect(l);
          unprotected += impl_->rw.reprotect().size() != before || l.unprotected;
        }
      } else {
        l.open_seq = 0;
        lebs_.SetState(l, LebState::kFree);
      }
    }
    if (unprotected != 0) {
      impl_->Event(fmt::format("FlashBack: {} LEB(s) cut while open hold {} page(s) no parity "
                               "covers; moving their data into protected LEBs",
                               unprotected, impl_->rw.reprotect().size()));
    }
    auto d = std::move(ctx->done);
    d(Status::Ok());
  };
  auto replay_main = [this, ctx, after_seq, apply]() {
    auto pages = std::make_shared<ScanPages>(
        SortScanPages(ctx->img, ScanFmt(), after_seq, std::max(next_seq_ - 1, ctx->img.summary_max_seq)));
    attach_.pages_scanned += pages->scanned;
    attach_.torn_pages += pages->torn;
    next_seq_ = pages->max_seq + 1;
    NoteUnnamedLosses(ctx->img, after_seq);
    // Trim pages need their data area: read those now, then replay.
    if (pages->trim.empty()) return apply(*pages);
    ctx->trim_data.resize(pages->trim.size());
    auto pending = std::make_shared<uint32_t>(1);
    auto after = [pending, pages, apply]() mutable {
      if (--*pending == 0) apply(*pages);
    };
    for (std::size_t k = 0; k < pages->trim.size(); ++k) {
      ctx->trim_data[k].resize(geo_.page_data_bytes);
      ++*pending;
      ++attach_.pages_read;
      const PageRec tp = pages->trim[k];
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
      if (impl_->dies.failed(tp.die)) {
        PostDieTimeout(clock_, std::move(on_read));
        continue;
      }
      pipe_.Read({{tp.die, tp.leb, tp.page}, 0, 0, ctx->trim_data[k].data(), nullptr},
                 std::move(on_read));
    }
    after();
  };
  auto replay = [this, ctx, replay_main]() {
    if (--ctx->remaining != 0) return;
    // The row reader refers to itself; dropping it here ends that cycle.
    if (ctx->scan_row) *ctx->scan_row = nullptr;
    if (ctx->read_summary) *ctx->read_summary = nullptr;
    // FlashBack: page headers that could not be read (a dead die, an uncorrectable page)
    // are rebuilt from their row's parity, so nothing on a failed die drops out of the map.
    const auto todo = PagesToRebuild(ctx->img, ScanFmt());
    if (todo.empty()) return replay_main();
    auto left = std::make_shared<std::size_t>(todo.size());
    for (const auto& [i, at] : todo) {
      impl_->RebuildPage(at[0], at[1], at[2],
                         [ctx, i = i, left, replay_main](bool ok, std::vector<uint8_t>,
                                                         std::vector<uint8_t> meta) mutable {
                           if (ok) {
                             ctx->img.meta[i] = std::move(meta);
                             ctx->img.ok[i] = 1;
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
  *read_summary = [this, ctx, replay, scan_row, D](uint32_t leb) mutable {
    ReadSummary(leb, [this, ctx, replay, scan_row, leb, D](
                         std::vector<uint64_t> grid,
                         std::vector<std::pair<uint64_t, std::vector<uint8_t>>> pages) mutable {
      // No usable summary: read the LEB row by row (row 0 is in already).
      if (grid.empty()) return (*scan_row)(leb, 1);
      ScanImage& img = ctx->img;
      ++attach_.summaries_used;
      img.summarized[leb] = 1;
      for (auto& [pos, meta] : pages) {
        const uint64_t i = img.Index(leb, static_cast<uint32_t>(pos % D), static_cast<uint32_t>(pos / D));
        img.meta[i] = std::move(meta);
        img.ok[i] = 1;
      }
      const std::vector<uint64_t> trims = ExpandSummary(grid, leb, geo_.meta_bytes_per_page(), ScanFmt(), img);
      if (trims.empty()) return replay();
      auto left = std::make_shared<std::size_t>(trims.size());
      const uint32_t cw = geo_.codewords_per_page() - 1;
      for (uint64_t pos : trims) {
        const auto die = static_cast<uint32_t>(pos % D), row = static_cast<uint32_t>(pos / D);
        const uint64_t i = img.Index(leb, die, row);
        img.meta[i].assign(geo_.meta_bytes_per_page(), 0);
        if (!impl_->dies.failed(die)) ++attach_.pages_read;
        auto on_meta = [this, ctx, i, left, replay, leb, die, row](const Completion& c) mutable {
          ctx->img.ok[i] = c.ok();
          if (c.ok()) {
            if (--*left == 0) replay();
            return;
          }
          // FlashBack: a trim page on a dead die; its header comes back from parity.
          impl_->RebuildPage(leb, die, row,
                             [ctx, i, left, replay](bool ok, std::vector<uint8_t>,
                                                    std::vector<uint8_t> meta) mutable {
                               if (ok) {
                                 ctx->img.meta[i] = std::move(meta);
                                 ctx->img.ok[i] = 1;
                               }
                               if (--*left == 0) replay();
                             });
        };
        if (impl_->dies.failed(die)) {
          PostDieTimeout(clock_, std::move(on_meta));
          continue;
        }
        pipe_.Read({{die, leb, row}, cw, 1, nullptr, img.meta[i].data()}, std::move(on_meta));
      }
    });
  };
  ctx->read_summary = read_summary;
  *scan_row = [this, ctx, last_cw, replay, scan_row, read_summary, leb_left, D, P, after_seq](uint32_t leb,
                                                                                             uint32_t row) mutable {
    std::vector<uint32_t> dies;
    for (uint32_t d = 0; d < D; ++d) {
      if (lebs_.leb(leb).good[d]) dies.push_back(d);
    }
    (*leb_left)[leb] = static_cast<uint32_t>(dies.size());
    for (uint32_t d : dies) {
      const uint64_t i = ctx->img.Index(leb, d, row);
      ctx->img.meta[i].resize(geo_.meta_bytes_per_page());
      auto cb = [this, ctx, i, leb, row, dies, replay, scan_row, read_summary, leb_left, P,
                 after_seq](const Completion& c) mutable {
        ScanImage& img = ctx->img;
        img.ok[i] = c.ok();
        if (--(*leb_left)[leb] != 0) return;
        if (row == 0) {
          // Only LEBs opened after the checkpoint need reading.
          const ScanImage::Skip verdict = JudgeFirstRow(img, leb, dies, ScanFmt(), after_seq);
          if (verdict != ScanImage::kRead) {
            for (uint32_t d2 : dies) img.meta[img.Index(leb, d2, 0)].clear();
            img.skipped[leb] = verdict;
            return replay();
          }
        }
        const bool any_written = RowWritten(img, leb, row, dies);
        // A closed LEB's summary saves reading the rest of it.
        if (any_written && row == 0 && P > 1 && impl_->stripe.summary_pages() != 0) {
          return (*read_summary)(leb);
        }
        if (any_written && row + 1 < P) return (*scan_row)(leb, row + 1);
        replay();  // this LEB is done
      };
      if (impl_->dies.failed(d)) {
        // A die that did not answer at attach: its pages count as unreadable, and are
        // rebuilt from parity before the replay.
        PostDieTimeout(clock_, std::move(cb));
        continue;
      }
      ++attach_.pages_read;
      pipe_.Read({{d, leb, row}, last_cw, 1, nullptr, ctx->img.meta[i].data()}, std::move(cb));
    }
    if (dies.empty()) replay();
  };
  ctx->scan_row = scan_row;
  for (uint32_t leb = meta_lebs_; leb < L; ++leb) {
    ++ctx->remaining;
    (*scan_row)(leb, 0);
  }
  replay();
}

}  // namespace vsl::ftl
