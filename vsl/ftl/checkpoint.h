// Metadata record payloads (docs/formats/ftl.md, "Metadata records"): the MetaHeader, the
// LEB table and, for checkpoints, the forward map, encoded and decoded on their own. Where
// a record goes on flash is meta_record.cc's (slots, copies); what loading one does to the
// FTL's state is checkpoint.cc's (Ftl::LoadMetaPayload).
//
// Contract: DecodeMetaRecord(EncodeMetaRecord(c, lebs, map)) visits every LEB entry in
// order and every mapped sector once (dense maps in LBA order, sparse ones by chunk);
// unmapped sectors are not visited. A truncated or inconsistent record is Corruption,
// never a partial load the caller cannot tell from a whole one (the caller discards its
// state on error).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "vsl/core/status.h"
#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/leb.h"
#include "vsl/ftl/map.h"

namespace vsl::ftl {

struct RecordConfig {
  format::MetaKind kind = format::MetaKind::kMount;
  uint64_t seq = 0, next_seq = 0;
  uint32_t epoch = 0, sector_bytes = 4096, dies = 0, reserve_ppm = 0;
  uint32_t slot_lebs = 1;  // > 1: kFlagMetaSlots and a MetaSlots after the header
  bool sparse = false;     // the map by chunk (kFlagMapChunks)
  bool flashback = false;
  bool summary_crcs = false;  // kFlagSummaryCrcs
};

// Checkpoints (clean and dirty) carry the map and the LEBs' states; mount records neither.
bool RecordHasMap(format::MetaKind kind);

std::vector<uint8_t> EncodeMetaRecord(const RecordConfig& c, const LebTable& lebs, const ForwardMap& map);

// One LEB table entry: the fixed part, the per-die good bytes (h.dies of them, valid
// during the call) and the trim page list.
struct RecordLeb {
  format::MetaLeb m{};
  const uint8_t* good = nullptr;
  std::vector<uint32_t> trim_pages;
};

// Decodes `in`: `header` (if given) gets the MetaHeader; on_leb(i, entry) for each LEB;
// with `with_map`, on_entry(lba, psa) for each mapped sector of a map of `sectors`
// sectors (its Status stops the decode). Corruption when anything is truncated, a dense
// map's length is not `sectors`, or a chunk record is not at a chunk boundary in range.
Status DecodeMetaRecord(const std::vector<uint8_t>& in, bool with_map, uint64_t sectors,
                        const std::function<void(uint32_t, const RecordLeb&)>& on_leb,
                        const std::function<Status(uint64_t, Psa)>& on_entry,
                        format::MetaHeader* header = nullptr);

}  // namespace vsl::ftl
