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

namespace vsl::ftl {
using namespace detail;

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
    if (!HeaderValid(m, spp_) && !impl_->stripe.ParityValid(m, epoch_)) return false;
    const auto* h = reinterpret_cast<const f::PageHeader*>(m);
    return h->epoch == epoch_ && h->seq > after_seq;
  };
  uint64_t stripes = 0;
  for (uint32_t leb = meta_lebs_; leb < lebs_.size(); ++leb) {
    if (skipped[leb]) continue;
    const Leb& l = lebs_.leb(leb);
    uint32_t dead = 0;
    for (uint32_t d = 0; d < D; ++d) dead += l.good[d] && impl_->dies.failed(d);
    if (dead < 2) continue;
    bool later_written = false;  // a row after this one holds a page newer than the base
    for (uint32_t p = P; p-- > 0;) {
      uint64_t mask = 0;
      bool parity = false, row_written = false;
      uint32_t missing = 0;
      for (uint32_t d = 0; d < D; ++d) {
        if (!l.good[d]) continue;
        const uint64_t i = idx(leb, d, p);
        if (!meta[i].empty() && ok[i] && impl_->stripe.ParityValid(meta[i].data(), epoch_)) {
          parity = true;
          mask |= StripeLayout::ParityMask(meta[i].data());
        }
        row_written = row_written || newer(i);
        missing += impl_->dies.failed(d) && !(ok[i] && !meta[i].empty() && HeaderValid(meta[i].data(), spp_));
      }
      bool lost = false;
      if (parity) {
        // The parity named a member on a failed die that could not be rebuilt.
        for (uint32_t d = 0; d < D && !lost; ++d) {
          const uint64_t i = idx(leb, d, p);
          lost = ((mask >> d) & 1) && impl_->dies.failed(d) &&
                 !(ok[i] && !meta[i].empty() && HeaderValid(meta[i].data(), spp_));
        }
      } else {
        lost = missing >= 2 && (row_written || later_written);
      }
      stripes += lost;
      later_written = later_written || row_written;
    }
  }
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
                   if (impl_->stripe.parity() && row == geo_.pages_per_block - 1) {
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
    if (m != nullptr && impl_->stripe.ParityValid(m, epoch_)) {
      parities.emplace_back(reinterpret_cast<const f::PageHeader*>(m)->seq, StripeLayout::ParityMask(m));
    }
  }
  if (has_parity != nullptr) *has_parity = !parities.empty();
  uint64_t uncovered = 0;
  for (uint32_t d = 0; d < row.size(); ++d) {
    const uint8_t* m = row[d];
    if (m == nullptr || impl_->stripe.ParityValid(m, epoch_) || !HeaderValid(m, spp_)) continue;
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
  for (uint32_t d = 0; d < D; ++d) failed_die = failed_die || (impl_->dies.failed(d) && lb.good[d]);
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
        impl_->rw.reprotect_pages.push_back({leb, d, row});
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
    for (uint32_t leb = meta_lebs_; leb < L; ++leb) {
      for (uint32_t d = 0; d < D; ++d) {
        for (uint32_t p = 0; p < P; ++p) {
          const uint64_t i = idx(leb, d, p);
          if (ctx->meta[i].empty()) continue;
          ++attach_.pages_scanned;
          const uint8_t* m = ctx->meta[i].data();
          if (ctx->ok[i] && impl_->stripe.ParityValid(m, epoch_)) {
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
        atomic_at[impl_->addr.Make(pr.leb, pr.die, pr.page, 0)] = k;
      }
      std::vector<Event> ev;
      for (uint32_t i = meta_lebs_; i < lebs_.size(); ++i) {
        if (!ctx->skipped[i]) lebs_.leb(i).trim_pages.clear();  // rebuilt from what is read
      }
      if (after_seq != 0) {
        // Checkpoint mappings into LEBs erased or rewritten since the checkpoint are
        // stale: their sectors moved (or were trimmed) and the newer state is in what the
        // scan replays. Left in place, they would share slots with the new contents and
        // clear their valid bits when replayed over.
        std::vector<uint64_t> stale;
        map_.ForEachMappedIn(0, map_.sectors(), [&](uint64_t l, Psa p) {
          if (ctx->skipped[impl_->addr.LebOf(p)] != 1) stale.push_back(l);
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
            impl_->Remap(se[s].lba, impl_->addr.Make(pr.leb, pr.die, pr.page, s));
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
      for (uint32_t i = meta_lebs_; i < lebs_.size(); ++i) {
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
        l.capacity = impl_->stripe.LebCapacity(l);
        l.needs_erase = true;
        if (seen[i]) {
          l.open_seq = first[i];
          l.close_seq = last[i];
          lebs_.SetState(l, LebState::kClosed);
          // A LEB cut while open may hold members no parity covers (written after its
          // row's last durable parity): FlashBack moves their data into protected LEBs.
          const std::size_t before = impl_->rw.reprotect_pages.size();
          if (impl_->stripe.parity() && !ctx->summarized[i]) {
            if (!RowsCovered(i, ctx->meta, ctx->ok)) impl_->Reprotect(l);
            unprotected += impl_->rw.reprotect_pages.size() != before || l.unprotected;
          }
        } else {
          l.open_seq = 0;
          lebs_.SetState(l, LebState::kFree);
        }
      }
      if (unprotected != 0) {
        impl_->Event(fmt::format("FlashBack: {} LEB(s) cut while open hold {} page(s) no parity "
                                 "covers; moving their data into protected LEBs",
                                 unprotected, impl_->rw.reprotect_pages.size()));
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
      if (impl_->dies.failed(tp.die)) {
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
    for (uint32_t leb = meta_lebs_; leb < L; ++leb) {
      for (uint32_t p = 0; p < P; ++p) {
        uint64_t mask = 0;
        for (uint32_t d = 0; d < D; ++d) {
          const uint64_t i = idx(leb, d, p);
          if (!ctx->meta[i].empty() && ctx->ok[i] && impl_->stripe.ParityValid(ctx->meta[i].data(), epoch_)) {
            mask |= StripeLayout::ParityMask(ctx->meta[i].data());
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
        if (!impl_->dies.failed(die)) ++attach_.pages_read;
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
        if (impl_->dies.failed(die)) {
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
                                           !impl_->stripe.ParityValid(ctx->meta[j].data(), epoch_))) {
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
                                                           !impl_->stripe.ParityValid(ctx->meta[j].data(), epoch_));
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
      pipe_.Read({{d, leb, row}, last_cw, 1, nullptr, ctx->meta[i].data()}, std::move(cb));
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
