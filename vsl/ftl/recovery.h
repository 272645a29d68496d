// Recovery's judgement, apart from its I/O: what a scan read (ScanImage), which LEBs need
// reading past their first row (JudgeFirstRow), which pages the spares name and in which
// order they are replayed (SortScanPages, PlanReplay), the pages FlashBack must rebuild
// before the replay (PagesToRebuild), a LEB summary turned back into spares
// (ExpandSummary), and FlashBack's checks of a LEB cut while open (UncoveredMembers,
// RowsCovered) and of stripes two failed dies left unnamed (UnnamedLostStripes).
//
// scan.cc owns the reading (row by row, summaries, rebuilds through parity) and applies
// the plan to the map and the LEB table; everything here is a pure function of what it is
// given, so its contract is tested on spares a test writes (tests/ftl/recovery_test.cc).
// The order of replay and what counts as torn are part of the recovery's contract with
// the writer (docs/ftl.md, "Recovery"): a change here changes the golden digests.
#pragma once

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

#include "vsl/ftl/die_health.h"
#include "vsl/ftl/leb.h"
#include "vsl/ftl/psa.h"
#include "vsl/ftl/stripe.h"

namespace vsl::ftl {

// What recovery needs of the format to judge a page's spare area.
struct ScanFormat {
  uint32_t meta_lebs = 0;  // LEBs [0, meta_lebs) hold metadata records: never replayed
  uint32_t epoch = 0;      // the format's epoch: a page of another is a remnant
  uint32_t spp = 0;        // sectors per page (a data page's sector entries)
  const StripeLayout* stripe = nullptr;  // the parity page's spare format

  // A data, trim, summary or atomic page's header and entries, CRC-checked (any epoch).
  bool HeaderValid(const uint8_t* spare) const;
  bool ParityValid(const uint8_t* spare) const { return stripe->ParityValid(spare, epoch); }
};

// The page spares a scan read, by (leb, die, page), and what it learnt of each LEB. The
// reader fills it; the functions below only read it (ExpandSummary excepted). A spare
// counts only if it was read (not empty) and its read succeeded (`ok`).
struct ScanImage {
  // What became of a LEB at its first row, when a base checkpoint is loaded.
  enum Skip : uint8_t {
    kRead = 0,       // written since the base: read and replayed
    kUnchanged = 1,  // nothing newer than the base: left as the checkpoint has it
    kErased = 2,     // erased (or torn through) since the base: it was being reused
  };

  ScanImage(uint32_t lebs, uint32_t dies, uint32_t pages);
  uint64_t Index(uint32_t leb, uint32_t die, uint32_t page) const {
    return (uint64_t{leb} * dies + die) * pages + page;
  }
  // The spare of page `i` if it was read and the read succeeded, else null.
  const uint8_t* Spare(uint64_t i) const { return ok[i] && !meta[i].empty() ? meta[i].data() : nullptr; }

  uint32_t lebs, dies, pages;
  std::vector<std::vector<uint8_t>> meta;  // per page; empty: not read (or dropped)
  std::vector<uint8_t> ok;                 // per page: the read succeeded
  std::vector<uint8_t> skipped;            // per LEB: Skip
  std::vector<uint8_t> summarized;         // per LEB: its spares came from its summary
  uint64_t summary_max_seq = 0;            // newest parity page known only from a summary
};

// The verdict on row 0 of LEB `leb` (spares of `dies`, the LEB's good dies, read): with a
// base checkpoint of `after_seq` (0: none, every LEB is read), a LEB none of whose row-0
// pages (data or parity, this epoch) is newer than the base is kUnchanged, or kErased
// when every row-0 page reads erased or torn (the LEB was being reused when the power
// went). A parity page counts as newer: its row's data may not have reached flash (no
// power-loss protection) while later pages did.
ScanImage::Skip JudgeFirstRow(const ScanImage& img, uint32_t leb, const std::vector<uint32_t>& dies,
                              const ScanFormat& fmt, uint64_t after_seq);

// Row `row` of `leb` holds anything but erased pages on `dies` (an unreadable page counts
// as written): the scan goes on to the next row.
bool RowWritten(const ScanImage& img, uint32_t leb, uint32_t row, const std::vector<uint32_t>& dies);

struct PageRec {
  uint64_t seq;
  uint32_t leb, die, page;
};

// The pages a scan found, by kind, in (leb, die, page) order.
struct ScanPages {
  std::vector<PageRec> data, trim, atomic;
  uint64_t max_seq = 0;  // newest seq of any valid page of this epoch, parity included
  uint64_t scanned = 0;  // spares looked at
  uint64_t torn = 0;     // spares unreadable or failing their check, not erased
};

// Sorts the spares of the LEBs from fmt.meta_lebs on. Pages of another epoch, and pages at
// or before `after_seq` (remnants of a LEB's previous use: its dies were erased one by one
// when it was reused and the power went before all were; the base's map knows where their
// sectors went, and replaying them could bring back trimmed data), are not replayed, but
// their seq still counts towards max_seq, which starts at `seq_floor`.
ScanPages SortScanPages(const ScanImage& img, const ScanFormat& fmt, uint64_t after_seq, uint64_t seq_floor);

struct ReplayEvent {
  enum Kind : int { kData = 0, kTrim = 1, kCommitted = 2 };
  uint64_t seq;
  int kind;
  // kData: index into ScanPages::data; kCommitted: into ScanPages::atomic; kTrim: lba, count.
  uint64_t a, b;
};

struct ReplayPlan {
  // In replay order: by seq; at one seq, data pages, then trims, then committed atomic
  // members (a batch's trims come before its members: both carry the commit's seq).
  std::vector<ReplayEvent> events;
  // Trim pages whose records were taken, as (leb, row * dies + die), in scan order: the
  // LEB table's trim page lists are rebuilt from them.
  std::vector<std::pair<uint32_t, uint32_t>> trim_pages;
  uint64_t torn = 0;  // trim pages whose data failed its CRC
  // Commit records that name no intact member (the page at that PSA is not an atomic page
  // of that seq): ignored; listed for the trace aid.
  struct Unmatched {
    uint64_t commit_seq, member_seq;
    Psa psa;
    bool page_there;  // an atomic page is at the PSA, of another seq
  };
  std::vector<Unmatched> unmatched;
  // Per LEB: the oldest and newest seq of its replayable pages (data, trim, atomic), if any.
  std::vector<uint64_t> first, last;
  std::vector<uint8_t> seen;
};

// The replay of `pages`, with the data areas of pages.trim in `trim_data` (by index; empty:
// could not be read or rebuilt, skipped). Records at or before `after_seq` are in the base
// already (a record carried forward keeps its old seq) and are left out. A commit record
// counts only if the page it names is an atomic page of the seq it names.
ReplayPlan PlanReplay(const ScanImage& img, const ScanPages& pages,
                      const std::vector<std::vector<uint8_t>>& trim_data, const PsaLayout& addr,
                      uint64_t after_seq);

// FlashBack: pages a valid parity page names as members whose spares could not be read
// (a dead die, an uncorrectable page), as (image index, {leb, die, page}). They are
// rebuilt from their rows before the replay, so nothing on a failed die drops out of the
// map.
std::vector<std::pair<uint64_t, std::array<uint32_t, 3>>> PagesToRebuild(const ScanImage& img,
                                                                          const ScanFormat& fmt);

// A LEB's summary `grid` (ftl_format.h: per position `seq | type << 56`, then the LBAs)
// turned back into spares of `leb` in `img`: a data or atomic page gets its header rebuilt
// (CRC-valid, sector CRCs 0: unchecked) and ok; a parity page's seq raises
// summary_max_seq and its spare is dropped. Returns the positions (row * dies + die) of
// trim pages, whose spares the caller still reads (their records are in the data area,
// checked against the header's CRC). `meta_bytes`: the page's spare size.
std::vector<uint64_t> ExpandSummary(const std::vector<uint64_t>& grid, uint32_t leb, uint32_t meta_bytes,
                                    const ScanFormat& fmt, ScanImage& img);

// The spares of one stripe row, by die (null: not read): the dies of valid member pages
// of this epoch that no valid parity page written after them covers. `has_parity`: any
// valid parity page is in the row.
uint64_t UncoveredMembers(const std::vector<const uint8_t*>& row, const ScanFormat& fmt, bool* has_parity);

// FlashBack, for a LEB cut while open: whether every member page of `leb` is covered by a
// valid parity page of its row written after it. Uncovered data pages are appended to
// `reprotect` as {leb, die, row} (their data is moved into protected LEBs); false if a trim
// page is uncovered (the LEB is groomed like a rebuild victim). A LEB formed with a die
// since failed is the rebuild's business in rows whose parity may sit on that die.
bool RowsCovered(const ScanImage& img, uint32_t leb, const Leb& l, const DieHealth& dies, const ScanFormat& fmt,
                 std::vector<std::array<uint32_t, 3>>& reprotect);

// Stripes of LEBs the scan read with two or more members on failed dies that could not be
// rebuilt and were written since the base (a valid parity page names a lost member, or a
// live member or a later row holds a page newer than `after_seq`): the sectors their pages
// held cannot be named. One failed die never leaves such a stripe (a lost member without
// parity held only unacknowledged data), so this is 0 unless two dies failed.
uint64_t UnnamedLostStripes(const ScanImage& img, const LebTable& lebs, const DieHealth& dies,
                            const ScanFormat& fmt, uint64_t after_seq);

}  // namespace vsl::ftl
