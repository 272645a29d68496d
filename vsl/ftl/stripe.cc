#include "vsl/ftl/stripe.h"

#include <algorithm>
#include <cstring>

#include "vsl/core/crc.h"
#include "vsl/core/xor.h"
#include "vsl/ftl/ftl_format.h"

namespace vsl::ftl {

namespace f = format;

StripeLayout::StripeLayout(const nand::Geometry& g, uint32_t sectors_per_page)
    : d_(g.dies_per_pipe()),
      p_(g.pages_per_block),
      s_(sectors_per_page),
      meta_bytes_(g.meta_bytes_per_page()),
      page_bytes_(g.page_data_bytes) {
  set_summary_crcs(false);
}

void StripeLayout::set_summary_crcs(bool on) {
  summary_crcs_ = on;
  const uint64_t bytes = f::SummaryBytes(d_, p_, s_, on);
  const uint64_t k = (bytes + page_bytes_ - 1) / page_bytes_;
  summary_pages_ = 4 * k <= uint64_t{d_} * p_ ? static_cast<uint32_t>(k) : 0;
}

uint32_t StripeLayout::RowParityDie(Leb& l, uint32_t row) const {
  if (!l.par) return kNoDie;
  uint8_t& pd = l.par->pdie[row];
  if (pd == RowParity::kUndecided) {
    // The (row mod good dies)-th good die.
    const uint32_t g = l.good_dies();
    pd = RowParity::kNone;
    if (g >= kMinStripeDies) {
      uint32_t k = row % g;
      for (uint32_t d = 0; d < d_; ++d) {
        if (l.good[d] && k-- == 0) {
          pd = static_cast<uint8_t>(d);
          break;
        }
      }
    }
  }
  return pd == RowParity::kNone ? kNoDie : pd;
}

bool StripeLayout::IsLastDataPos(Leb& l, uint32_t row, uint32_t die) const {
  const uint32_t pd = RowParityDie(l, row);
  for (uint32_t d = die + 1; d < d_; ++d) {
    if (l.good[d] && d != pd) return false;  // DataPos
  }
  return true;
}

uint32_t StripeLayout::RemainingPositions(Leb& l, uint32_t row, uint32_t die) const {
  const uint32_t pd = RowParityDie(l, row);
  uint32_t n = 0;
  for (uint32_t d = die; d < d_; ++d) n += l.good[d] && d != pd;  // DataPos
  return n + (p_ - row - 1) * DataDiesPerRow(l, l.par != nullptr);
}

uint64_t StripeLayout::LebDataSectors(uint32_t dies) const {
  if (parity_ && dies < kMinStripeDies) return 0;  // not formed: it could not carry parity
  const uint32_t positions = (dies - (parity_ ? 1 : 0)) * p_;
  return uint64_t{positions - std::min(positions, summary_pages_)} * s_;
}

void StripeLayout::XorInto(uint8_t* dst, const uint8_t* src, std::size_t n) { vsl::XorInto(dst, src, n); }

bool StripeLayout::ParityValid(const uint8_t* meta, uint32_t epoch) const {
  // A spare too small for a parity spare (512 B sectors on a small spare: the format
  // turns FlashBack off) holds none, whatever its header says; checking its CRC would
  // read past the spare.
  if (f::ParityMetaBytes(s_) > meta_bytes_) return false;
  const auto* h = reinterpret_cast<const f::PageHeader*>(meta);
  if (h->type != static_cast<uint8_t>(f::PageType::kParity) || h->version_major != f::kVersionMajor ||
      h->sectors != s_ || h->epoch != epoch) {
    return false;
  }
  const std::size_t n = f::ParityMetaBytes(s_) - 4;
  uint32_t crc;
  std::memcpy(&crc, meta + n, 4);
  return Crc32c(meta, n) == crc;
}

uint64_t StripeLayout::ParityMask(const uint8_t* meta) {
  uint64_t m;
  std::memcpy(&m, meta + sizeof(f::PageHeader), 8);
  return m;
}

void StripeLayout::FillParityMeta(uint8_t* meta, uint64_t seq, uint64_t mask, const std::vector<uint8_t>& pmeta,
                                  uint32_t epoch) const {
  auto* h = reinterpret_cast<f::PageHeader*>(meta);
  h->bad_block_marker = 0xFF;
  h->type = static_cast<uint8_t>(f::PageType::kParity);
  h->version_major = f::kVersionMajor;
  h->sectors = static_cast<uint8_t>(s_);
  h->epoch = epoch;
  h->seq = seq;
  std::memcpy(meta + sizeof(f::PageHeader), &mask, 8);
  std::memcpy(meta + sizeof(f::PageHeader) + 8, pmeta.data(), pmeta.size());
  const std::size_t n = f::ParityMetaBytes(s_) - 4;
  const uint32_t crc = Crc32c(meta, n);
  std::memcpy(meta + n, &crc, 4);
}

}  // namespace vsl::ftl
