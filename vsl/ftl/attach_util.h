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

inline bool HeaderValid(const uint8_t* meta, uint32_t spp) {
  const auto* h = reinterpret_cast<const f::PageHeader*>(meta);
  if (h->type == static_cast<uint8_t>(f::PageType::kErased)) return false;
  if (h->version_major != f::kVersionMajor || h->sectors != spp || spp == 0) return false;
  const std::size_t n = f::MetaBytes(spp) - 4;
  uint32_t crc;
  std::memcpy(&crc, meta + n, 4);
  return Crc32c(meta, n) == crc;
}

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

inline bool AllOnes(const std::vector<uint8_t>& v) {
  return std::all_of(v.begin(), v.end(), [](uint8_t b) { return b == 0xFF; });
}

// The newest complete record found in a metadata LEB.
struct MetaRead {
  uint64_t seq = 0;
  std::vector<uint8_t> payload;
};

// Reads metadata LEB `leb` row by row: row 0 tells, from any valid page, the sector
// layout (the header's sector count) and the newest record's page count, so only the rows
// holding that record are read (each page is stored twice, in row-major order over the
// good dies). Calls `done` with the newest complete record, if any.
void ReadMetaLeb(nand::FlashPipe& pipe, const nand::Geometry& g, uint32_t leb,
                 const std::vector<uint32_t>& silent,
                 Function<void(std::optional<MetaRead>, uint32_t spp)> done);

}  // namespace vsl::ftl::detail
