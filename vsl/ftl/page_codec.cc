// The writer's half of the page format (page_codec.h).
#include "vsl/ftl/page_codec.h"

#include <algorithm>
#include <cstring>

#include "vsl/core/crc.h"

namespace vsl::ftl {
namespace f = format;

namespace {
bool HoldsSectors(f::PageType t) { return t == f::PageType::kData || t == f::PageType::kAtomicData; }
}  // namespace

void WriteSpareHeader(uint8_t* meta, f::PageType type, uint64_t seq, uint32_t epoch, uint32_t spp) {
  const f::PageHeader h{0xFF, static_cast<uint8_t>(type), f::kVersionMajor, static_cast<uint8_t>(spp), epoch, seq};
  std::memcpy(meta, &h, sizeof(h));
}

void SealSpareCrc(uint8_t* meta, uint32_t spp) {
  const std::size_t hdr = f::MetaBytes(spp) - 4;
  const uint32_t crc = Crc32c(meta, hdr);
  std::memcpy(meta + hdr, &crc, 4);
}

const f::TrimRecord* TrimPageRecords(const uint8_t* meta, const std::vector<uint8_t>& data, uint64_t* n) {
  const auto* e = reinterpret_cast<const f::SectorEntry*>(meta + sizeof(f::PageHeader));
  if (Crc32c(data.data(), data.size()) != e[0].crc) return nullptr;
  *n = std::min<uint64_t>(e[0].lba, data.size() / sizeof(f::TrimRecord));
  return reinterpret_cast<const f::TrimRecord*>(data.data());
}

void SealPage(const PageContent& page, std::vector<uint8_t>& data, uint8_t* meta) {
  const uint32_t S = page.spp;
  WriteSpareHeader(meta, page.type, page.seq, page.epoch, S);
  auto* e = reinterpret_cast<f::SectorEntry*>(meta + sizeof(f::PageHeader));
  const uint64_t sb = page.sector_bytes;
  if (HoldsSectors(page.type)) {
    uint32_t pad_crc = 0;
    if (page.used < S) {
      std::memset(data.data() + page.used * sb, 0, (S - page.used) * sb);
      // every padding slot is this
      pad_crc = page.zero_crc != nullptr ? *page.zero_crc : Crc32c(data.data() + page.used * sb, sb);
    }
    for (uint32_t s = 0; s < S; ++s) {
      e[s].lba = page.lbas[s];
      if (s >= page.used) e[s].crc = pad_crc;
      else e[s].crc = page.crcs != nullptr ? page.crcs[s] : Crc32c(data.data() + s * sb, sb);
    }
  } else if (page.type == f::PageType::kTrim) {
    std::memcpy(data.data(), page.trims->data(), page.trims->size() * sizeof(f::TrimRecord));
    for (uint32_t s = 0; s < S; ++s) e[s] = {f::kNoLba, 0};
    e[0].lba = page.trims->size();
    e[0].crc = Crc32c(data.data(), data.size());
  } else if (page.type == f::PageType::kSummary) {
    for (uint32_t s = 0; s < S; ++s) e[s] = {f::kNoLba, 0};
    e[0].lba = page.lbas[0];
    e[0].crc = Crc32c(data.data(), data.size());
  }
  SealSpareCrc(meta, S);
}

void SummaryEntry(const PageContent& page, uint64_t* ent) {
  ent[0] = page.seq | (uint64_t{static_cast<uint8_t>(page.type)} << f::kSummaryTypeShift);
  for (uint32_t s = 0; s < page.spp; ++s) ent[1 + s] = HoldsSectors(page.type) ? page.lbas[s] : f::kNoLba;
}

}  // namespace vsl::ftl
