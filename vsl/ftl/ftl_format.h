// On-flash formats written by the FTL. See docs/formats/ftl.md for the prose.
//
// Every page the FTL programs carries a PageHeader in its host metadata (the page's spare
// bytes after ECC parity), so the forward map can be rebuilt from flash alone:
//
//   PageHeader (16 B) | SectorEntry[sectors_per_page] (12 B each) | header CRC32C (4 B)
//
// - Data pages: entry i names the LBA held in sector slot i (kNoLba for padding) and the
//   CRC32C of that sector's data, checked on every read.
// - Trim pages: the data area holds TrimRecord[] (lba, count, seq); entry 0 holds the
//   record count (as lba) and the CRC32C of the data area.
// - Meta pages (in the metadata LEBs): a record split over pages; entry 0 holds the page
//   index in the record (low 32 bits) and the record's page count (high 32 bits) as its
//   lba, and the page data's CRC.
// - Summary pages (the last page positions of a data LEB, written once every other page
//   of the LEB is on flash): entry 0 holds the page index in the summary (low 32 bits)
//   and the summary's page count (high 32 bits), and the page data's CRC. The summary's
//   pages, concatenated, are a SummaryHeader and then one SummaryEntry per page position
//   of the LEB (row * dies + die), so a scan reads the summary instead of every page.
// - Parity pages (FlashBack: one per stripe row of a LEB, its die rotating row by row):
//   the data area is the XOR of the data areas of the row's member pages; the metadata is
//   PageHeader | member die mask (u64) | XOR of the members' first MetaBytes(S) metadata
//   bytes | CRC32C of all before (ParityMetaBytes). A lost member is its row's XOR.
// Byte 0 stays 0xFF: it is the factory bad-block marker position.
//
// Versioning: kVersionMajor changes when an older reader would misread the layout; pages
// of another major version are treated as foreign (their LEB is reclaimed as free).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "vsl/core/crc.h"

namespace vsl::ftl::format {

inline constexpr uint8_t kVersionMajor = 1;
inline constexpr uint8_t kVersionMinor = 6;  // 1: LEB summary pages; 2: FlashBack parity pages;
                                             // 3: metadata pages in up to 3 copies, layout in the tag
                                             // 4: atomic batches (kAtomicData pages, commit
                                             //    records in trim pages); sparse maps by chunk
                                             // 5: metadata slots of several LEBs (MetaSlotTag)
                                             // 6: summaries carry sector CRCs (kFlagSummaryCrcs)
inline constexpr uint64_t kNoLba = UINT64_MAX;

enum class PageType : uint8_t {
  kErased = 0xFF,  // what an erased page's metadata reads as
  kData = 1,
  kTrim = 2,
  kMeta = 3,
  kSummary = 4,
  kParity = 5,
  // Data of an atomic batch: laid out as kData, but its sectors count only if a commit
  // record naming the page is found (see TrimRecord's commit form).
  kAtomicData = 6,
};

#pragma pack(push, 1)
struct PageHeader {
  uint8_t bad_block_marker;  // always 0xFF
  uint8_t type;              // PageType
  uint8_t version_major;
  uint8_t sectors;           // sector entries that follow
  uint32_t epoch;            // format epoch: pages of an older format are ignored
  uint64_t seq;              // write sequence number, strictly increasing per pipe
};
struct SectorEntry {
  uint64_t lba;
  uint32_t crc;  // CRC32C of the sector's data
};
struct TrimRecord {
  uint64_t lba;
  uint64_t count;
  uint64_t seq;  // the trim's own sequence number (kept when the record is carried forward)
};
// Atomic batches. A batch's sectors go to kAtomicData pages; once every one of them is
// durable, one trim page is written holding the batch's trims (plain records) and one
// commit record per member page, all with the trim page's own seq (the commit seq):
//   lba   = the member page's seq
//   count = kCommitFlag | the PSA of the member page's slot 0
// Recovery applies a member page (checked: its header's seq and type) and the batch's
// trims at the commit seq, trims first; a kAtomicData page no record names is ignored.
// A trim page holds at most page_data_bytes / 24 records, so that bounds a batch; its
// records are never split over two pages when written, so a commit is all or nothing.
// The groomer carries commit records like trims (while data older than them may be on
// flash, which includes their member pages).
inline constexpr uint64_t kCommitFlag = uint64_t{1} << 63;
constexpr bool IsCommitRecord(const TrimRecord& r) { return (r.count & kCommitFlag) != 0; }
// A plain trim record covering `lba` (commit records name a member page, no range).
constexpr bool TrimCovers(const TrimRecord& t, uint64_t lba) {
  return !IsCommitRecord(t) && lba >= t.lba && lba - t.lba < t.count;
}
#pragma pack(pop)
static_assert(sizeof(PageHeader) == 16, "PageHeader size is part of the format");
static_assert(sizeof(SectorEntry) == 12, "SectorEntry size is part of the format");
static_assert(sizeof(TrimRecord) == 24, "TrimRecord size is part of the format");

// The LEB summary (see above). Each position's entry is a uint64_t `seq | type << 56`
// (0: nothing valid was written there: a failed program, a bad die, the summary itself)
// followed by `spp` uint64_t LBAs (kNoLba for padding; unused for trim pages). On a card
// formatted with kFlagSummaryCrcs (format 1.6) the entries are followed by one uint32_t
// per sector slot (position-major, as the entries): the CRC32C of the sector as its page
// was sealed (its SectorEntry's crc), so the groomer can have the controller copy a page
// it has not read (FlashPipe::Copy needs the new page's metadata, CRCs included).
inline constexpr uint64_t kSummaryMagic = 0x4D4D5553'4C53564FULL;  // "OVSLSUMM"
inline constexpr unsigned kSummaryTypeShift = 56;
#pragma pack(push, 1)
struct SummaryHeader {
  uint64_t magic;
  uint32_t leb;
  uint32_t dies;
  uint32_t pages;  // pages per block
  uint32_t spp;    // sectors per page
};
#pragma pack(pop)
static_assert(sizeof(SummaryHeader) == 24, "SummaryHeader size is part of the format");
constexpr std::size_t SummaryBytes(uint32_t dies, uint32_t pages, uint32_t spp, bool crcs) {
  return sizeof(SummaryHeader) + std::size_t{dies} * pages * 8 * (1 + std::size_t{spp}) +
         (crcs ? std::size_t{dies} * pages * spp * 4 : 0);
}

// Bytes of host metadata a page with `sectors` entries needs.
constexpr std::size_t MetaBytes(uint32_t sectors) {
  return sizeof(PageHeader) + sectors * sizeof(SectorEntry) + 4;
}

// A data, trim, summary or atomic page's spare: a header of this format version with
// `spp` sector entries and a CRC that checks (any epoch; the caller compares it).
inline bool HeaderValid(const uint8_t* meta, uint32_t spp) {
  const auto* h = reinterpret_cast<const PageHeader*>(meta);
  if (h->type == static_cast<uint8_t>(PageType::kErased)) return false;
  if (h->version_major != kVersionMajor || h->sectors != spp || spp == 0) return false;
  const std::size_t n = MetaBytes(spp) - 4;
  uint32_t crc;
  std::memcpy(&crc, meta + n, 4);
  return Crc32c(meta, n) == crc;
}

// What an erased page reads as.
inline bool AllOnes(const std::vector<uint8_t>& v) {
  for (uint8_t b : v) {
    if (b != 0xFF) return false;
  }
  return true;
}

// Metadata bytes a parity page needs; FlashBack is off when the device has fewer.
constexpr std::size_t ParityMetaBytes(uint32_t sectors) {
  return sizeof(PageHeader) + 8 + MetaBytes(sectors) + 4;
}


// The metadata record (superblock + optional checkpoint), written to one of the two
// metadata slots (LEBs 0 and 1 of every die before format 1.5; see MetaSlotTag), alternately.
inline constexpr uint64_t kMetaMagic = 0x314C5446'4C53564FULL;  // "OVSLFTL1"
enum class MetaKind : uint32_t {
  kMount = 1,       // written at format (config, LEB table, no map); also the fallback
                    // when a checkpoint does not fit a metadata slot
  kCheckpoint = 2,  // written at clean shutdown: config, LEB table, forward map
  kDirtyCheckpoint = 3,  // written at every attach: a checkpoint that marks the FTL in use;
                         // recovery loads it and scans the LEBs opened after it
};

// Entry 0's LBA field of a metadata page: which page of its record it is, and how the
// record is laid out. Bits 0-23 page index, 24-31 copies of each page (0 = written by
// format 1.2 or older: two), 32-55 the record's page count, 56-63 the good dies the
// record was spread over, row-major (0 = older: take the dies that answer). A reader
// needs the layout to know how many rows the record spans.
struct MetaPageTag {
  static constexpr uint64_t kMaxPages = uint64_t{1} << 24;
  uint64_t index = 0, pages = 0;
  uint32_t copies = 0, dies = 0;
  uint64_t Pack() const {
    return (index & 0xFFFFFF) | (uint64_t{copies & 0xFF} << 24) | ((pages & 0xFFFFFF) << 32) |
           (uint64_t{dies & 0xFF} << 56);
  }
  static MetaPageTag Unpack(uint64_t v) {
    MetaPageTag t;
    t.index = v & 0xFFFFFF;
    t.copies = static_cast<uint32_t>((v >> 24) & 0xFF);
    t.pages = (v >> 32) & 0xFFFFFF;
    t.dies = static_cast<uint32_t>(v >> 56);
    return t;
  }
};

#pragma pack(push, 1)
struct MetaHeader {
  uint64_t magic;
  uint32_t kind;           // MetaKind
  uint32_t version_major;
  uint32_t epoch;
  uint32_t sector_bytes;
  uint64_t user_sectors;   // logical capacity
  uint64_t seq;            // this record's sequence number (shared with data pages)
  uint64_t next_seq;       // first sequence number not used at the time of the record
  uint32_t lebs;           // LEB count (blocks per die)
  uint32_t dies;
  uint32_t flags;          // kFlagSparse | kFlagFlashBack
  uint32_t reserve_ppm;    // spare over user capacity, parts per million
  uint64_t leb_table_bytes;
  uint64_t map_entries;    // 0 in a mount record
};
struct MetaLeb {
  uint8_t state;           // LebState
  uint8_t flags;           // kMetaLebUnprotected (0 in records before it existed)
  uint8_t reserved[2];
  uint32_t erase_count;
  uint64_t open_seq;       // seq of its first page (0 if free)
  uint32_t trim_pages;     // count of page indices that follow (uint32_t each)
  // followed by: uint8_t good[dies], uint32_t trim_page_index[trim_pages]
};
#pragma pack(pop)
inline constexpr uint32_t kFlagSparse = 1;     // sparse address space
inline constexpr uint32_t kFlagFlashBack = 2;  // stripe rows carry parity (format 1.2)
// The record's map is stored by chunk (sparse devices, format 1.4): map_entries chunk
// records, each the chunk's first LBA (u64) then ForwardMap::kChunkEntries PSAs; chunks
// never allocated are absent (all unmapped). Without the flag: map_entries PSAs, one per
// LBA from 0. Readers of 1.3 and older do not know the flag: a sparse card checkpointed
// by 1.4 must not be attached by them (they would reject the map as truncated).
inline constexpr uint32_t kFlagMapChunks = 4;
// MetaLeb.flags: the LEB holds rows that could not survive another die failure (pages a
// power cut left without parity, or stripes that include a failed die); FlashBack moves
// its data into protected LEBs.
inline constexpr uint8_t kMetaLebUnprotected = 1;
// Metadata slots (format 1.5). The metadata area is two slots of `slot_lebs` LEBs each
// (LEBs 0 .. 2 * slot_lebs - 1), sized at format for the checkpoint of a full map; a
// record is written to the slot not holding the newest one, its pages (each in 2 or 3
// copies on distinct dies) row-major over the good dies of the slot's LEBs in order.
// With slot_lebs 1 the layout is format 1.4's (LEBs 0 and 1, no tag, no flag). With more,
// every metadata page carries a slot tag, so a reader finds slot 1 (at LEB slot_lebs) from
// any page of either slot: in its sector entry 1 (unused by metadata pages) when a page
// has two sectors or more (lba = MetaSlotTag::Pack(), crc = CRC32C of those 8 bytes),
// else in a MetaSlotTag right after its MetaBytes(1) bytes. The record's MetaHeader has
// kFlagMetaSlots and is followed by a MetaSlots. Readers of 1.4 and older see an
// incomplete record in LEB 0 and refuse the card as unformatted: a 1.5 card with
// multi-LEB slots must not be attached by them (1.5 reads 1.4 cards as slot_lebs 1).
inline constexpr uint32_t kFlagMetaSlots = 8;
// LEB summaries carry their sectors' CRCs (format 1.6; see SummaryBytes): the summary has
// more pages, so a data LEB holds fewer sectors. Readers of 1.5 and older do not know the
// flag and would place the summary wrongly: a 1.6 card must not be attached by them.
inline constexpr uint32_t kFlagSummaryCrcs = 16;
inline constexpr uint32_t kMetaSlotMagic = 0x544F4C53;  // "SLOT"
struct MetaSlotTag {
  uint32_t magic;      // kMetaSlotMagic
  uint32_t slot_lebs;  // LEBs per slot
  uint32_t slot;       // 0 or 1: the slot this page is in
  uint32_t crc;        // CRC32C of the 12 bytes before
  // The sector-entry form: magic in bits 32-63, the slot in bit 31, slot_lebs in 0-30.
  uint64_t Pack() const { return (uint64_t{magic} << 32) | (uint64_t{slot & 1} << 31) | (slot_lebs & 0x7FFFFFFF); }
  static MetaSlotTag Unpack(uint64_t v) {
    return {static_cast<uint32_t>(v >> 32), static_cast<uint32_t>(v & 0x7FFFFFFF), static_cast<uint32_t>((v >> 31) & 1), 0};
  }
};
struct MetaSlots {
  uint32_t slot_lebs;
  uint32_t reserved;
};
static_assert(sizeof(MetaHeader) == 80, "MetaHeader size is part of the format");
static_assert(sizeof(MetaSlotTag) == 16, "MetaSlotTag size is part of the format");
static_assert(sizeof(MetaSlots) == 8, "MetaSlots size is part of the format");
static_assert(sizeof(MetaLeb) == 20, "MetaLeb size is part of the format");

}  // namespace vsl::ftl::format
