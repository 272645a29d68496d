// The page format's codec (docs/formats/ftl.md): what a page's spare area and, for trim
// pages, its data area hold when it is programmed, a page's entry in its LEB's summary,
// and the records a trim page holds when read back. Recovery and the groomer read pages
// through it and format::HeaderValid (recovery.h, relocation.h), so writing and reading
// are tested against each other (tests/ftl/page_codec_test.cc). Pure.
#pragma once

#include <cstdint>
#include <vector>

#include "vsl/ftl/ftl_format.h"

namespace vsl::ftl {

// What a page being sealed holds.
struct PageContent {
  format::PageType type = format::PageType::kData;
  uint64_t seq = 0;
  uint32_t epoch = 0;
  uint32_t spp = 0;           // sectors per page: sector entries in the spare
  uint32_t sector_bytes = 0;  // data and atomic pages
  uint32_t used = 0;          // data and atomic pages: slots filled; the rest are padding
  const uint64_t* lbas = nullptr;  // per slot (kNoLba: padding); summary pages: [0] = its index and count
  const std::vector<format::TrimRecord>* trims = nullptr;  // trim pages: the records
  // Data and atomic pages: the CRCs of slots below `used` when the writer has them (for
  // sectors copied inside the controller, as their sources' metadata holds them; else
  // the CRC of each slot's bytes in `data`, which the writer vouches for); null: computed
  // here from `data`.
  const uint32_t* crcs = nullptr;
  // Data and atomic pages: the CRC of a zeroed sector (every padding slot's) when the
  // writer has it; null: computed here.
  const uint32_t* zero_crc = nullptr;
};

// Seals a page for programming: the header (type, version, sector count, epoch, seq) and
// sector entries in `meta`, then the header's CRC. Data and atomic pages: each slot's LBA
// and the CRC of its sector, slots from `used` on zeroed in `data` first. Trim pages: the
// records are copied to the start of `data`, entry 0 holds their count and the CRC of the
// whole data area, the other entries are empty. Summary pages: entry 0 holds lbas[0] and
// the data area's CRC. Not for parity pages (StripeLayout::FillParityMeta).
void SealPage(const PageContent& page, std::vector<uint8_t>& data, uint8_t* meta);

// The spare's header (type, version, sector count, epoch, seq), without its CRC.
void WriteSpareHeader(uint8_t* meta, format::PageType type, uint64_t seq, uint32_t epoch, uint32_t spp);
// The CRC over the header and `spp` sector entries, after them: the spare is sealed.
void SealSpareCrc(uint8_t* meta, uint32_t spp);

// The records of a trim page read back as `meta` / `data`, and their count in `*n`, or
// null if the data area fails the CRC its entry 0 holds (a torn or never written page).
// The count is bounded by what the data area can hold. The header is the caller's to
// check (format::HeaderValid, type and epoch).
const format::TrimRecord* TrimPageRecords(const uint8_t* meta, const std::vector<uint8_t>& data, uint64_t* n);

// A page's entry in its LEB's summary (`1 + spp` words at `ent`): `seq | type << 56`, then
// the slots' LBAs for data and atomic pages, kNoLba for any other type.
void SummaryEntry(const PageContent& page, uint64_t* ent);

}  // namespace vsl::ftl
