// The writer's half of the page format (page_codec.h).
#include "vsl/ftl/page_codec.h"

#include <cstring>

#include "vsl/core/crc.h"

namespace vsl::ftl {
namespace f = format;

namespace {
bool HoldsSectors(f::PageType t) { return t == f::PageType::kData || t == f::PageType::kAtomicData; }
}  // namespace

void SealPage(const PageContent& page, std::vector<uint8_t>& data, uint8_t* meta) {
  const uint32_t S = page.spp;
  auto* h = reinterpret_cast<f::PageHeader*>(meta);
  h->bad_block_marker = 0xFF;
  h->type = static_cast<uint8_t>(page.type);
  h->version_major = f::kVersionMajor;
  h->sectors = static_cast<uint8_t>(S);
  h->epoch = page.epoch;
  h->seq = page.seq;
  auto* e = reinterpret_cast<f::SectorEntry*>(meta + sizeof(f::PageHeader));
  const uint64_t sb = page.sector_bytes;
  if (HoldsSectors(page.type)) {
    if (page.used < S) std::memset(data.data() + page.used * sb, 0, (S - page.used) * sb);
    for (uint32_t s = 0; s < S; ++s) {
      e[s].lba = page.lbas[s];
      e[s].crc = Crc32c(data.data() + s * sb, sb);
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
  const std::size_t hdr = f::MetaBytes(S) - 4;
  const uint32_t crc = Crc32c(meta, hdr);
  std::memcpy(meta + hdr, &crc, 4);
}

void SummaryEntry(const PageContent& page, uint64_t* ent) {
  ent[0] = page.seq | (uint64_t{static_cast<uint8_t>(page.type)} << f::kSummaryTypeShift);
  for (uint32_t s = 0; s < page.spp; ++s) ent[1 + s] = HoldsSectors(page.type) ? page.lbas[s] : f::kNoLba;
}

}  // namespace vsl::ftl
