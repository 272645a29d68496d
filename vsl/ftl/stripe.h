// FlashBack stripe layout of a pipe's LEBs: which die of each page row holds the row's XOR
// parity, which positions hold data, how much data a LEB holds, and the parity page's
// spare-area format (docs/flashback.md, docs/formats/ftl.md).
//
// A row's parity die is chosen at the row's first use, rotating over the LEB's good dies
// then (cached in the LEB's RowParity), so it does not move when a die fails later.
// Without FlashBack (parity() false) every good die of a row holds data. The last
// `summary_pages()` data positions of a LEB hold its summary.
//
// Owns no mutable state beyond what it caches in a LEB's RowParity; safe to share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vsl/ftl/leb.h"
#include "vsl/nand/geometry.h"

namespace vsl::ftl {

class StripeLayout {
 public:
  // The narrowest stripe that carries parity: one data page and its parity (a mirror). A
  // LEB with fewer good dies is not formed under FlashBack, so a 4-die pipe still rebuilds
  // after its second die failure (onto 2-die mirrored stripes) if room allows.
  static constexpr uint32_t kMinStripeDies = 2;
  static constexpr uint32_t kNoDie = UINT32_MAX;

  StripeLayout(const nand::Geometry& g, uint32_t sectors_per_page);

  // Set once from the format's flags (Format, Open), before any LEB is formed.
  void set_parity(bool on) { parity_ = on; }
  bool parity() const { return parity_; }
  // Whether summaries carry the sectors' CRCs (format::kFlagSummaryCrcs); set once, like
  // parity, before any LEB is formed: it decides summary_pages().
  void set_summary_crcs(bool on);
  bool summary_crcs() const { return summary_crcs_; }
  // Pages of a LEB's summary; 0 when a summary would take more than a quarter of a LEB
  // (tiny geometries), and LEBs are then scanned page by page.
  uint32_t summary_pages() const { return summary_pages_; }

  // The die holding row `row`'s parity, or kNoDie (no parity: FlashBack off, or fewer than
  // kMinStripeDies good dies). Decided at the row's first use and cached in l.par.
  uint32_t RowParityDie(Leb& l, uint32_t row) const;
  bool DataPos(Leb& l, uint32_t row, uint32_t d) const { return l.good[d] && d != RowParityDie(l, row); }
  // No data position of row `row` after `die`.
  bool IsLastDataPos(Leb& l, uint32_t row, uint32_t die) const;
  uint32_t DataDiesPerRow(const Leb& l, bool with_parity) const {
    const uint32_t g = l.good_dies();
    return g - (with_parity && g >= kMinStripeDies ? 1 : 0);
  }
  // Data page positions (not parity) of `l` from (row, die) to its end.
  uint32_t RemainingPositions(Leb& l, uint32_t row, uint32_t die) const;
  // Sectors of data a LEB holds with `dies` usable dies: less a parity die per row (with
  // FlashBack) and its summary pages. 0 when such a LEB is not formed.
  uint64_t LebDataSectors(uint32_t dies) const;
  uint32_t LebCapacity(const Leb& l) const { return static_cast<uint32_t>(LebDataSectors(l.good_dies())); }

  // Parity pages' spare area: header, member mask, XOR of the members' leading metadata
  // (format::MetaBytes), CRC. `epoch` is the format's.
  void FillParityMeta(uint8_t* meta, uint64_t seq, uint64_t mask, const std::vector<uint8_t>& pmeta,
                      uint32_t epoch) const;
  // A parity spare of this layout and `epoch` whose CRC checks; never true where the
  // page's spare cannot hold one. Reads at most the page's spare.
  bool ParityValid(const uint8_t* meta, uint32_t epoch) const;
  static uint64_t ParityMask(const uint8_t* meta);
  static void XorInto(uint8_t* dst, const uint8_t* src, std::size_t n);

 private:
  uint32_t d_, p_, s_;
  uint32_t meta_bytes_;  // the page's spare for the host
  uint32_t page_bytes_;
  uint32_t summary_pages_ = 0;
  bool summary_crcs_ = false;
  bool parity_ = false;
};

}  // namespace vsl::ftl
