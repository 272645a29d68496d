// Helpers shared by format, metadata records, checkpoints, attach and scan (internal).
#pragma once

#include <algorithm>
#include <cstring>
#include <optional>
#include <vector>

#include "vsl/ftl/ftl_impl.h"

namespace vsl::ftl::detail {

inline double SpareFraction(const FormatOptions& o) {
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
inline uint32_t ReservedLebs() {
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

using format::HeaderValid;
using format::AllOnes;

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

// The newest complete record found in a metadata LEB.
struct MetaRead {
  uint64_t seq = 0;
  std::vector<uint8_t> payload;
};

// LEBs per metadata slot for a format: one while a checkpoint of the full map fits the
// first LEB twice over, else enough for two copies of it (format 1.5, MetaSlotTag).
uint32_t MetaSlotLebs(const nand::Geometry& g, uint32_t spp, const LebTable& lebs, uint64_t user_sectors,
                      bool sparse, uint64_t physical_user_sectors);

// What reading a metadata slot learnt besides its newest record.
struct SlotInfo {
  uint32_t spp = 0;        // sectors per page, from any valid metadata page
  bool any_meta = false;   // a valid metadata page was seen
  uint32_t slot_lebs = 0;  // from a page's MetaSlotTag (0: none seen: slots of one LEB)
  uint32_t slot = 0;       // and the slot it said the page is in
  uint64_t row0_seq = 0;   // the newest record seq among row 0's valid metadata pages
};

// Reads the metadata slot of `slot_lebs` LEBs from `first_leb`, row by row over the dies
// that answer: row 0 tells, from any valid page, the sector layout and the newest
// record's page count and copies, so only the rows holding that record are read (one
// copy of each page is kept). Calls `done` with the newest complete record, if any. If
// row 0's pages say the slot spans more LEBs than `slot_lebs`, stops there and returns
// no record with `slot_lebs` set: the caller reads the slot again whole.
// `row0_only`: read row 0 alone (the newest seq it shows, in SlotInfo), no record.
void ReadMetaSlot(nand::FlashPipe& pipe, const nand::Geometry& g, uint32_t first_leb, uint32_t slot_lebs,
                  const std::vector<uint32_t>& silent, Function<void(std::optional<MetaRead>, SlotInfo)> done,
                  bool row0_only = false);

}  // namespace vsl::ftl::detail
