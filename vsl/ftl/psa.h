// Physical sector addresses (PSAs) of one pipe: sector slot `slot` of page `page` of die
// `die` of LEB `leb`, packed as ((leb * dies + die) * pages + page) * sectors + slot. The
// forward map stores PSAs (4 bytes each), LEB validity bitmaps index SlotInLeb, and page
// headers and checkpoints name sectors by them, so this packing is part of the on-flash
// format (docs/formats/ftl.md). Pure arithmetic, no state beyond the geometry.
#pragma once

#include <cstdint>

#include "vsl/ftl/map.h"

namespace vsl::ftl {

class PsaLayout {
 public:
  PsaLayout(uint32_t dies, uint32_t pages_per_block, uint32_t sectors_per_page)
      : d_(dies), p_(pages_per_block), s_(sectors_per_page) {}

  uint32_t dies() const { return d_; }
  uint32_t pages() const { return p_; }
  uint32_t sectors() const { return s_; }
  // Sector slots in one LEB (its validity bitmap's length).
  uint32_t slots_per_leb() const { return d_ * p_ * s_; }

  Psa Make(uint32_t leb, uint32_t die, uint32_t page, uint32_t slot) const {
    return ((leb * d_ + die) * p_ + page) * s_ + slot;
  }
  uint32_t LebOf(Psa p) const { return p / (d_ * p_ * s_); }
  uint32_t SlotInLeb(Psa p) const { return p % (d_ * p_ * s_); }
  uint32_t DieOf(Psa p) const { return (p / (p_ * s_)) % d_; }
  uint32_t PageOf(Psa p) const { return (p / s_) % p_; }
  uint32_t SlotOf(Psa p) const { return p % s_; }
  // One past the highest PSA of a pipe of `lebs` LEBs.
  uint64_t End(uint32_t lebs) const { return uint64_t{lebs} * d_ * p_ * s_; }

 private:
  uint32_t d_, p_, s_;
};

}  // namespace vsl::ftl
