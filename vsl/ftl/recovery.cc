// Recovery's judgement over what a scan read (recovery.h): pure functions of a ScanImage.
#include "vsl/ftl/recovery.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/page_codec.h"

namespace vsl::ftl {
namespace f = format;

namespace {

const f::PageHeader* Header(const uint8_t* spare) { return reinterpret_cast<const f::PageHeader*>(spare); }

bool IsDataType(uint8_t type) {
  return type == static_cast<uint8_t>(f::PageType::kData) || type == static_cast<uint8_t>(f::PageType::kAtomicData);
}

// Valid (header or parity) and of this epoch with a seq after `after_seq`.
bool NewerThan(const uint8_t* spare, const ScanFormat& fmt, uint64_t after_seq) {
  if (!fmt.HeaderValid(spare) && !fmt.ParityValid(spare)) return false;
  return Header(spare)->epoch == fmt.epoch && Header(spare)->seq > after_seq;
}

}  // namespace

bool ScanFormat::HeaderValid(const uint8_t* spare) const { return f::HeaderValid(spare, spp); }

ScanImage::ScanImage(uint32_t lebs_, uint32_t dies_, uint32_t pages_)
    : lebs(lebs_),
      dies(dies_),
      pages(pages_),
      meta(uint64_t{lebs_} * dies_ * pages_),
      ok(uint64_t{lebs_} * dies_ * pages_, 0),
      skipped(lebs_, kRead),
      summarized(lebs_, 0) {}

ScanImage::Skip JudgeFirstRow(const ScanImage& img, uint32_t leb, const std::vector<uint32_t>& dies,
                              const ScanFormat& fmt, uint64_t after_seq) {
  if (after_seq == 0) return ScanImage::kRead;
  bool newer = false, erased = true;
  for (uint32_t d : dies) {
    const uint64_t j = img.Index(leb, d, 0);
    const bool readable = img.ok[j] && !img.meta[j].empty();
    const uint8_t* m = img.meta[j].data();
    const bool valid = readable && (fmt.HeaderValid(m) || fmt.ParityValid(m));
    newer = newer || (valid && Header(m)->epoch == fmt.epoch && Header(m)->seq > after_seq);
    const bool clean = readable && f::AllOnes(img.meta[j]);
    erased = erased && (clean || !valid);
  }
  if (newer) return ScanImage::kRead;
  return erased ? ScanImage::kErased : ScanImage::kUnchanged;
}

bool RowWritten(const ScanImage& img, uint32_t leb, uint32_t row, const std::vector<uint32_t>& dies) {
  for (uint32_t d : dies) {
    const uint64_t j = img.Index(leb, d, row);
    if (!(img.ok[j] && f::AllOnes(img.meta[j]))) return true;
  }
  return false;
}

ScanPages SortScanPages(const ScanImage& img, const ScanFormat& fmt, uint64_t after_seq, uint64_t seq_floor) {
  ScanPages out;
  out.max_seq = seq_floor;
  for (uint32_t leb = fmt.meta_lebs; leb < img.lebs; ++leb) {
    for (uint32_t d = 0; d < img.dies; ++d) {
      for (uint32_t p = 0; p < img.pages; ++p) {
        const uint64_t i = img.Index(leb, d, p);
        if (img.meta[i].empty()) continue;
        ++out.scanned;
        const uint8_t* m = img.meta[i].data();
        if (img.ok[i] && fmt.ParityValid(m)) {
          out.max_seq = std::max(out.max_seq, Header(m)->seq);
          continue;
        }
        if (!img.ok[i] || !fmt.HeaderValid(m)) {
          if (!(img.ok[i] && f::AllOnes(img.meta[i]))) ++out.torn;
          continue;
        }
        const f::PageHeader* h = Header(m);
        if (h->epoch != fmt.epoch) continue;
        out.max_seq = std::max(out.max_seq, h->seq);
        if (after_seq != 0 && h->seq <= after_seq) continue;
        const PageRec rec{h->seq, leb, d, p};
        if (h->type == static_cast<uint8_t>(f::PageType::kData)) {
          out.data.push_back(rec);
        } else if (h->type == static_cast<uint8_t>(f::PageType::kAtomicData)) {
          out.atomic.push_back(rec);
        } else if (h->type == static_cast<uint8_t>(f::PageType::kTrim)) {
          out.trim.push_back(rec);
        }
      }
    }
  }
  return out;
}

ReplayPlan PlanReplay(const ScanImage& img, const ScanPages& pages,
                      const std::vector<std::vector<uint8_t>>& trim_data, const PsaLayout& addr,
                      uint64_t after_seq) {
  ReplayPlan plan;
  // Atomic members by the PSA of their slot 0, to check commit records against.
  std::unordered_map<Psa, std::size_t> atomic_at;
  for (std::size_t k = 0; k < pages.atomic.size(); ++k) {
    const PageRec& pr = pages.atomic[k];
    atomic_at[addr.Make(pr.leb, pr.die, pr.page, 0)] = k;
  }
  for (std::size_t k = 0; k < pages.data.size(); ++k) {
    plan.events.push_back({pages.data[k].seq, ReplayEvent::kData, k, 0});
  }
  for (std::size_t k = 0; k < pages.trim.size() && k < trim_data.size(); ++k) {
    const std::vector<uint8_t>& td = trim_data[k];
    if (td.empty()) continue;
    const PageRec& tp = pages.trim[k];
    uint64_t n = 0;
    const f::TrimRecord* recs = TrimPageRecords(img.meta[img.Index(tp.leb, tp.die, tp.page)].data(), td, &n);
    if (recs == nullptr) {
      ++plan.torn;
      continue;
    }
    for (uint64_t r = 0; r < n; ++r) {
      if (recs[r].seq <= after_seq) continue;
      if (f::IsCommitRecord(recs[r])) {
        const auto psa = static_cast<Psa>(recs[r].count & ~f::kCommitFlag);
        const auto it = atomic_at.find(psa);
        if (it != atomic_at.end() && pages.atomic[it->second].seq == recs[r].lba) {
          plan.events.push_back({recs[r].seq, ReplayEvent::kCommitted, it->second, 0});
        } else {
          plan.unmatched.push_back({recs[r].seq, recs[r].lba, psa, it != atomic_at.end()});
        }
        continue;
      }
      plan.events.push_back({recs[r].seq, ReplayEvent::kTrim, recs[r].lba, recs[r].count});
    }
    plan.trim_pages.emplace_back(tp.leb, tp.page * img.dies + tp.die);
  }
  std::stable_sort(plan.events.begin(), plan.events.end(), [](const ReplayEvent& x, const ReplayEvent& y) {
    return x.seq < y.seq || (x.seq == y.seq && x.kind < y.kind);
  });
  plan.first.assign(img.lebs, 0);
  plan.last.assign(img.lebs, 0);
  plan.seen.assign(img.lebs, 0);
  for (const auto* list : {&pages.data, &pages.trim, &pages.atomic}) {
    for (const PageRec& pr : *list) {
      if (!plan.seen[pr.leb] || pr.seq < plan.first[pr.leb]) plan.first[pr.leb] = pr.seq;
      plan.last[pr.leb] = std::max(plan.last[pr.leb], pr.seq);
      plan.seen[pr.leb] = 1;
    }
  }
  return plan;
}

std::vector<std::pair<uint64_t, std::array<uint32_t, 3>>> PagesToRebuild(const ScanImage& img,
                                                                          const ScanFormat& fmt) {
  std::vector<std::pair<uint64_t, std::array<uint32_t, 3>>> todo;
  for (uint32_t leb = fmt.meta_lebs; leb < img.lebs; ++leb) {
    for (uint32_t p = 0; p < img.pages; ++p) {
      uint64_t mask = 0;
      for (uint32_t d = 0; d < img.dies; ++d) {
        const uint8_t* m = img.Spare(img.Index(leb, d, p));
        if (m != nullptr && fmt.ParityValid(m)) mask |= StripeLayout::ParityMask(m);
      }
      for (uint32_t d = 0; d < img.dies && mask != 0; ++d) {
        const uint64_t i = img.Index(leb, d, p);
        if (((mask >> d) & 1) && img.Spare(i) == nullptr) todo.push_back({i, {leb, d, p}});
      }
    }
  }
  return todo;
}

std::vector<uint64_t> ExpandSummary(const std::vector<uint64_t>& grid, uint32_t leb, uint32_t meta_bytes,
                                    const ScanFormat& fmt, ScanImage& img) {
  std::vector<uint64_t> trims;
  const uint32_t D = img.dies, S = fmt.spp;
  constexpr uint64_t kSeqMask = (uint64_t{1} << f::kSummaryTypeShift) - 1;
  for (uint64_t pos = 0; pos < uint64_t{D} * img.pages && (pos + 1) * (1 + S) <= grid.size(); ++pos) {
    const uint64_t* ent = &grid[pos * (1 + S)];
    if (ent[0] == 0) continue;
    const uint64_t i = img.Index(leb, static_cast<uint32_t>(pos % D), static_cast<uint32_t>(pos / D));
    const auto type = static_cast<uint8_t>(ent[0] >> f::kSummaryTypeShift);
    if (type == static_cast<uint8_t>(f::PageType::kTrim)) {
      trims.push_back(pos);
      continue;
    }
    if (!IsDataType(type)) {
      // Parity: nothing to map, but its sequence number counts.
      img.summary_max_seq = std::max(img.summary_max_seq, ent[0] & kSeqMask);
      img.meta[i].clear();
      continue;
    }
    std::vector<uint8_t>& m = img.meta[i];
    m.assign(meta_bytes, 0xFF);
    WriteSpareHeader(m.data(), static_cast<f::PageType>(type), ent[0] & kSeqMask, fmt.epoch, S);
    for (uint32_t s = 0; s < S; ++s) {
      const f::SectorEntry e{ent[1 + s], 0};
      std::memcpy(m.data() + sizeof(f::PageHeader) + s * sizeof(e), &e, sizeof(e));
    }
    SealSpareCrc(m.data(), S);
    img.ok[i] = 1;
  }
  return trims;
}

uint64_t UncoveredMembers(const std::vector<const uint8_t*>& row, const ScanFormat& fmt, bool* has_parity) {
  std::vector<std::pair<uint64_t, uint64_t>> parities;  // (seq, mask)
  for (const uint8_t* m : row) {
    if (m != nullptr && fmt.ParityValid(m)) parities.emplace_back(Header(m)->seq, StripeLayout::ParityMask(m));
  }
  if (has_parity != nullptr) *has_parity = !parities.empty();
  uint64_t uncovered = 0;
  for (uint32_t d = 0; d < row.size(); ++d) {
    const uint8_t* m = row[d];
    if (m == nullptr || fmt.ParityValid(m) || !fmt.HeaderValid(m)) continue;
    if (Header(m)->epoch != fmt.epoch) continue;
    bool covered = false;
    for (const auto& [pseq, mask] : parities) covered = covered || (pseq > Header(m)->seq && ((mask >> d) & 1));
    if (!covered) uncovered |= uint64_t{1} << d;
  }
  return uncovered;
}

bool RowsCovered(const ScanImage& img, uint32_t leb, const Leb& l, const DieHealth& dies, const ScanFormat& fmt,
                 std::vector<std::array<uint32_t, 3>>& reprotect) {
  bool failed_die = false;
  for (uint32_t d = 0; d < img.dies; ++d) failed_die = failed_die || (dies.failed(d) && l.good[d]);
  bool all = true;
  std::vector<const uint8_t*> spares(img.dies);
  for (uint32_t row = 0; row < img.pages; ++row) {
    for (uint32_t d = 0; d < img.dies; ++d) spares[d] = img.Spare(img.Index(leb, d, row));
    bool has_parity = false;
    const uint64_t uncovered = UncoveredMembers(spares, fmt, &has_parity);
    if (failed_die && !has_parity) continue;
    for (uint32_t d = 0; d < img.dies; ++d) {
      if (!((uncovered >> d) & 1)) continue;
      const uint8_t type = Header(spares[d])->type;
      if (IsDataType(type)) {
        reprotect.push_back({leb, d, row});
      } else if (type == static_cast<uint8_t>(f::PageType::kTrim)) {
        all = false;
      }
    }
  }
  return all;
}

uint64_t UnnamedLostStripes(const ScanImage& img, const LebTable& lebs, const DieHealth& dies,
                            const ScanFormat& fmt, uint64_t after_seq) {
  const auto intact = [&](uint64_t i) {
    const uint8_t* m = img.Spare(i);
    return m != nullptr && fmt.HeaderValid(m);
  };
  uint64_t stripes = 0;
  for (uint32_t leb = fmt.meta_lebs; leb < img.lebs; ++leb) {
    if (img.skipped[leb]) continue;
    const Leb& l = lebs.leb(leb);
    uint32_t dead = 0;
    for (uint32_t d = 0; d < img.dies; ++d) dead += l.good[d] && dies.failed(d);
    if (dead < 2) continue;
    bool later_written = false;  // a row after this one holds a page newer than the base
    for (uint32_t p = img.pages; p-- > 0;) {
      uint64_t mask = 0;
      bool parity = false, row_written = false;
      uint32_t missing = 0;
      for (uint32_t d = 0; d < img.dies; ++d) {
        if (!l.good[d]) continue;
        const uint64_t i = img.Index(leb, d, p);
        const uint8_t* m = img.Spare(i);
        if (m != nullptr && fmt.ParityValid(m)) {
          parity = true;
          mask |= StripeLayout::ParityMask(m);
        }
        row_written = row_written || (m != nullptr && NewerThan(m, fmt, after_seq));
        missing += dies.failed(d) && !intact(i);
      }
      bool lost = false;
      if (parity) {
        // The parity names a member on a failed die that could not be rebuilt.
        for (uint32_t d = 0; d < img.dies && !lost; ++d) {
          lost = ((mask >> d) & 1) && dies.failed(d) && !intact(img.Index(leb, d, p));
        }
      } else {
        lost = missing >= 2 && (row_written || later_written);
      }
      stripes += lost;
      later_written = later_written || row_written;
    }
  }
  return stripes;
}

}  // namespace vsl::ftl
