#include "vsl/ftl/wear.h"

#include <algorithm>

namespace vsl::ftl {

Leb* PickWearVictim(LebTable& lebs, uint32_t first_data_leb, uint32_t max_spread) {
  if (max_spread == 0) return nullptr;
  Leb* coldest = nullptr;
  uint32_t max_ec = 0;
  for (uint32_t i = first_data_leb; i < lebs.size(); ++i) {
    Leb& l = lebs.leb(i);
    max_ec = std::max(max_ec, l.erase_count);
    if (l.state == LebState::kClosed && l.inflight == 0 && !l.gc_skip && l.atomic_pins == 0 &&
        (coldest == nullptr || l.erase_count < coldest->erase_count)) {
      coldest = &l;
    }
  }
  if (coldest == nullptr || max_ec - coldest->erase_count <= max_spread) return nullptr;
  return coldest;
}

std::pair<uint32_t, uint32_t> EraseCountRange(const LebTable& lebs, uint32_t first_data_leb) {
  uint32_t lo = UINT32_MAX, hi = 0;
  for (uint32_t i = first_data_leb; i < lebs.size(); ++i) {
    const Leb& l = lebs.leb(i);
    if (l.good_dies() == 0) continue;  // no block left to wear
    lo = std::min(lo, l.erase_count);
    hi = std::max(hi, l.erase_count);
  }
  return {lo == UINT32_MAX ? 0 : lo, hi};
}

}  // namespace vsl::ftl
