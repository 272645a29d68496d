// Ftl: the log-structured flash translation layer of one pipe.
//
// Owned by the pipe's engine: every call, and every callback, runs on the thread of the
// clock the backend was given. Writes append to the open page of the host append point;
// pages stream across the dies of the open LEB (page row r on die 0, 1, ... then row
// r+1), so all dies program in parallel. Relocated (groomed) data goes to its own append
// point. Every page carries a header (format: ftl_format.h) with the LBA, sequence number
// and CRC of each sector, so the map can be rebuilt from flash alone.
//
// Acknowledgement: a write completes when every page holding it has been accepted by the
// controller's protected buffer while PLP is healthy, or is done (on flash) otherwise. A
// partly filled page is padded and programmed as soon as the engine has nothing more to
// add to it, so a lone write at queue depth 1 waits for one DMA, not for a page to fill.
// FLUSH completes once everything acknowledged before it is durable; FUA writes complete
// only when durable.
//
// Trim: trimmed sectors read as zeroes; trims are logged as trim records so they survive
// power cuts, and the groomer carries a record forward while older data it hides may
// still be on flash.
//
// Recovery: a clean Shutdown writes a checkpoint (LEB table + map) so Open is fast. After
// an unclean shutdown Open rebuilds everything by reading the page headers of every LEB
// and replaying pages and trim records in sequence order; torn pages fail their CRC and
// are ignored.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/function.h"
#include "vsl/core/latency_histogram.h"
#include "vsl/core/status.h"
#include "vsl/core/time.h"
#include "vsl/ftl/leb.h"
#include "vsl/ftl/map.h"
#include "vsl/nand/discover.h"
#include "vsl/nand/flash.h"
#include "vsl/nand/read_retry.h"

namespace vsl::ftl {

struct ScanFormat;  // recovery.h
struct ScanImage;

enum class ReserveMode : uint8_t {
  kStock,            // ~28% spare over user capacity, as the reference card ships
  kHighPerformance,  // 20% less user capacity than stock
  kCustom,           // spare_percent over user capacity
  kUnderProvision,   // spare_percent below 7%: more capacity, less speed and endurance
};

inline constexpr double kMaxSparePercent = 400.0;  // custom spare: up to 4x the user capacity

struct FormatOptions {
  uint32_t sector_bytes = 4096;  // 512 or 4096
  ReserveMode reserve = ReserveMode::kStock;
  double spare_percent = 28.0;   // for kCustom (0..kMaxSparePercent) and kUnderProvision (0..<7)
  bool sparse = false;           // sparse address space of sparse_sectors
  uint64_t sparse_sectors = 0;
  uint32_t epoch = 0;            // 0: derived from the clock
  // Adaptive FlashBack: every stripe row of a LEB carries XOR parity of its other pages
  // (one die in N), so a dead die loses nothing. Needs 3+ dies and room for the parity
  // page's metadata (format::ParityMetaBytes); otherwise the format is without it.
  bool flashback = true;
  // LEB summaries carry the sectors' CRCs (format 1.6), so the groomer moves a page by
  // controller copy without reading it first. false formats as 1.5 did (a summary of
  // LBAs only, a few pages shorter per LEB): kept for the tests of cards formatted so.
  bool summary_crcs = true;
};

// How much the pipe still accepts after die failures (never silent loss).
// The checks Format makes of its options before it touches the pipe (sector size, spare
// range): a caller that changes other state first (the card layer's pipe mode) checks
// with this, so bad input changes nothing.
Status CheckFormatOptions(const FormatOptions& opts);

// Health follows the reserve space: the spare room the surviving flash offers beyond the
// capacity, against what the format set aside. Bad blocks and dead dies eat it.
enum class HealthMode : uint8_t {
  kNormal,        // "healthy"
  kReducedWrite,  // the reserve is down to kReducedWritePercent (the card layer caps write
                  // power to slow the wear), or gone: surviving flash holds less than the
                  // capacity, so writes that need new room fail with NoSpace while
                  // overwrites and trims work
  kReadOnly,      // surviving flash cannot hold what is mapped: writes fail
};
std::string_view HealthModeName(HealthMode m);
inline constexpr double kReserveWarnPercent = 10.0;
inline constexpr double kReducedWritePercent = 2.0;

struct ReserveStatus {
  HealthMode mode = HealthMode::kNormal;
  double percent = 100.0;     // spare left of what the format set aside (100 when formatted)
  uint64_t sectors = 0;       // spare room left beyond the capacity
  uint64_t full_sectors = 0;  // what the format set aside
  uint64_t usable_sectors = 0;  // user data the surviving flash holds (capacity + spare left)
  bool warning = false;       // percent <= kReserveWarnPercent
};

// What FlashBack has done: dies lost, rebuild progress, sectors lost to double failures.
struct FlashBackStatus {
  bool enabled = false;   // the format carries parity
  bool active = false;    // "FlashBack substitution active": a die has failed
  std::vector<uint32_t> failed_dies;
  uint32_t rebuild_lebs_left = 0;  // LEBs still holding data of a failed die
  uint64_t rebuilt_pages = 0;      // pages reconstructed from parity
  std::vector<uint64_t> lost_lbas; // sectors found unrecoverable (a second failure)
  // Stripes a recovery found written since the last checkpoint with two or more members
  // on failed dies, so the pages lost with them cannot even be named: the sectors they
  // held may read as older data (docs/flashback.md). Zero unless a second die failed
  // and the power was cut before the checkpoint that follows a failure was written.
  uint64_t unnamed_lost_stripes = 0;
  uint64_t failure_checkpoints = 0;  // checkpoints written because a die failed
  HealthMode mode = HealthMode::kNormal;
  std::vector<std::string> events;  // newest last, bounded
};

struct FtlOptions {
  VictimPolicy victim_policy = VictimPolicy::kCostBenefit;
  bool separate_gc_stream = true;  // relocated data to its own append point
  uint32_t gc_start_free_lebs = 4;  // groom when free LEBs drop to this
  uint32_t gc_reserve_lebs = 2;     // host writes wait when only this many are free
  // ... unless the victim being groomed fits in what the groomer's open LEB has left:
  // then the host may take one of them (Impl::HostMayTakeReserve). False: the strict
  // reserve (the host stops there until a whole victim is moved), for comparison.
  bool host_may_take_reserve = true;
  uint32_t gc_max_reads = 48;       // relocation page reads in flight
  // A partly filled host page is programmed at once when no other write is outstanding
  // (queue depth 1: the write waits one DMA). With other writes in flight it waits up to
  // this long for more sectors, so pages fill instead of being padded.
  DurNs pad_delay_ns = 50 * kUs;
  // FlashBack without controller stage slots (or with PLP failed): a stripe row left
  // part-written this long gets a partial parity page in its next position, so its
  // members are covered (and their writes acknowledged) even if the row is never
  // completed. With stage slots the running parity is parked there instead.
  DurNs partial_parity_delay_ns = 200 * kUs;
  // FlashBack: a die whose error rate crosses this bound is retired like a dead one
  // (declared failed, its data rebuilt elsewhere): uncorrectable reads, program or erase
  // failures in `die_error_limit` distinct blocks within `die_error_window_ns`. 0
  // disables it.
  uint32_t die_error_limit = 16;
  DurNs die_error_window_ns = 10 * kSec;
  // Static wear levelling: when the most-erased LEB is this many P/E cycles ahead of the
  // least-erased LEB holding data, that LEB's (cold) data is moved so the young block
  // returns to the free pool. 0 disables it.
  uint32_t wl_max_spread = 64;
  // Periodic checkpoint: after this many LEBs opened since the last checkpoint, one is
  // written (writes pause while it is, as for the checkpoint after a die failure), so a
  // recovery after a power cut reads the checkpoint and scans at most about this many
  // LEBs. 0 disables it (the recovery then scans every LEB written since the attach).
  uint32_t checkpoint_interval_lebs = 1024;
  // Read-retry: times a read the controller reports uncorrectable is issued again before
  // the failure counts (docs/ftl.md). 0 disables it.
  uint32_t read_retries = nand::ReadRetryPipe::kDefaultRetries;
  // FlashBack parity formed in the controller (FlashPipe accumulators, two per append
  // point) where the pipe has four or more: members are programmed adding to their row's
  // accumulator, and the parity page and the stage images take it, so neither crosses
  // the host link (a 4 KiB burst otherwise sends a stage image per page programmed).
  // The host still keeps the row's running parity for rebuilds. False: the host sends
  // every parity page and image.
  bool controller_parity = true;
  // Controller-side relocation (FlashPipe::Copy, gathered): the groomer reads only a
  // victim page's metadata and has the controller pack its live sectors into the
  // groomer's pages, so relocated data never crosses the host link. Needs the
  // controller's accumulators (controller_parity) and the groomer's own append point
  // (separate_gc_stream); relocation goes through host memory otherwise, and for pages
  // a copy could not move (an unreadable source, a row without an accumulator).
  bool copy_relocation = true;
};

// One operation of an atomic batch (Ftl::WriteAtomic).
struct AtomicOp {
  enum Kind : uint8_t { kWrite, kTrim };
  Kind kind = kWrite;
  uint64_t lba = 0;
  uint64_t count = 0;             // sectors
  const uint8_t* data = nullptr;  // kWrite: count sectors, valid until the batch completes
};

// What one atomic batch may hold. Fixed for a formatted pipe (it follows from the page
// size: one trim page must name every member page of a batch).
struct AtomicLimits {
  uint32_t max_ops = 0;            // operations (writes and trims) in one batch
  uint32_t max_trims = 0;          // of which trims (each takes a commit record)
  uint64_t max_write_sectors = 0;  // sectors written by one batch, all writes together
};

struct FtlStats {
  uint64_t host_write_sectors = 0, host_read_sectors = 0, trim_sectors = 0;
  // Host requests (Write, Read, Trim; atomic batches are atomic_batches) accepted, and the
  // time each read and write took from the call to its answer on the FTL's clock (failed
  // ones included; refused ones, answered at once, are not counted). Monitoring exposes
  // them per LUN (docs/monitoring.md).
  uint64_t host_writes = 0, host_reads = 0, host_trims = 0;
  LatencyHistogram read_latency, write_latency;
  uint64_t gc_write_sectors = 0, pad_sectors = 0;
  uint64_t pages_programmed = 0, trim_pages = 0, meta_pages = 0, summary_pages = 0;
  uint64_t failure_checkpoints = 0;  // checkpoints written because a die failed
  uint64_t periodic_checkpoints = 0;  // written after checkpoint_interval_lebs LEBs
  uint64_t lebs_erased = 0, victims = 0;
  uint64_t program_failures = 0, erase_failures = 0, read_errors = 0;
  uint64_t write_stalls = 0;  // host writes that waited for the groomer
  uint64_t room_waits = 0;    // times the host path stopped for want of free room (at the reserve)
  uint64_t reserve_takes = 0;  // LEBs the host took from the reserve (FtlOptions::host_may_take_reserve)
  uint64_t paced_waits = 0;   // times host writes waited for grooming credits
  uint64_t wear_moves = 0;    // LEBs groomed to level wear, not to free space
  uint64_t atomic_batches = 0, atomic_retries = 0;
  uint64_t parity_pages = 0, partial_parity_pages = 0, rebuilt_pages = 0, rebuild_lebs = 0;
  // Parity pages of rows formed in an accumulator written before their row was full, so
  // that a member of the row could be rebuilt (the host keeps no XOR of such a row).
  uint64_t rebuild_parity_pages = 0;
  // Running parity of part-written rows parked in the controller's stage slots, and times
  // a row found every slot taken (its writes then wait for the row's parity page).
  uint64_t parity_stages = 0, stage_slot_waits = 0;
  // Controller-side relocation: sectors and pages moved by copy, and copy pages that
  // failed or could not be sent (their sectors then went through host memory).
  uint64_t gc_copy_sectors = 0, copy_pages = 0, copy_fallbacks = 0;
  // Reads the groomer issued to learn what to copy: a victim page's metadata, or a page
  // of the victim's summary (format 1.6, which names every page's sectors and CRCs).
  uint64_t gc_meta_reads = 0;
  // Victims' summaries read ahead (while the victim before them was groomed) and used,
  // and read ahead for a LEB that was then not the next victim.
  uint64_t summary_prefetch_hits = 0, summary_prefetch_misses = 0;
  // Victims read through and set aside to drain (their last pages landing) beside the
  // next one (Relocation::Drain).
  uint64_t victims_overlapped = 0;
  // The most relocated pages ever queued ahead of the controller's buffer, with the
  // groomer's reads in flight (GroomStep's bound, MaxQueuedRelocation).
  uint32_t gc_queued_max = 0;
  double Waf() const {
    return host_write_sectors ? static_cast<double>(host_write_sectors + gc_write_sectors +
                                                    pad_sectors) / host_write_sectors
                              : 0;
  }
};

struct AttachInfo {
  bool from_checkpoint = false;  // clean: the checkpoint alone
  // Unclean after a checkpoint: the checkpoint plus a scan of the LEBs written since.
  bool checkpoint_plus_scan = false;
  uint32_t lebs_scanned = 0;
  uint64_t pages_scanned = 0;
  uint64_t torn_pages = 0;
  uint32_t summaries_used = 0;  // closed LEBs read through their summary, not page by page
  uint64_t pages_read = 0;      // page (spare or data) reads the attach issued
  DurNs attach_ns = 0;
};

class Ftl {
 public:
  using Done = Function<void(Status)>;

  // Formats the pipe: discovers geometry, scans factory bad-block markers, writes the
  // metadata record. All data becomes unreachable (LEBs are erased lazily on reuse).
  static void Format(nand::FlashPipe& pipe, Clock& clock, const FormatOptions& opts, Done done);
  // Attaches a formatted pipe: from the checkpoint after a clean shutdown, otherwise by
  // scanning. `done` receives the FTL or why it could not attach (NotFound: never
  // formatted; Corruption: metadata gc_skip).
  static void Open(nand::FlashPipe& pipe, Clock& clock, const FtlOptions& opts,
                   Function<void(Result<std::unique_ptr<Ftl>>)> done);
  ~Ftl();

  // Logical capacity in sectors and the sector size.
  uint64_t sectors() const { return map_.sectors(); }
  uint32_t sector_bytes() const { return sector_bytes_; }

  // `data` must stay valid until `done`. InvalidArgument for a range outside the device;
  // NoSpace when a sparse device has no physical room; IOError if the data cannot be
  // stored. `fua`: complete only when on flash.
  void Write(uint64_t lba, uint32_t count, const uint8_t* data, bool fua, Done done);
  // Unmapped sectors read as zeroes. IOError when a sector cannot be read back intact
  // (never stale or foreign data).
  void Read(uint64_t lba, uint32_t count, uint8_t* out, Done done);
  void Trim(uint64_t lba, uint64_t count, Done done);
  // Atomic batch: writes and trims applied all or nothing, also across power cuts (and
  // crashes of the host process: it holds nothing a recovery needs). Within a batch trims
  // apply before writes; of two writes of one sector the later op wins; a sector both
  // written and trimmed in one batch is refused. Readers see the batch whole or not at
  // all (the map changes in one engine step). Completes when durable as Write does
  // (`fua`: on flash). InvalidArgument (nothing applied) for an empty or oversize batch
  // (atomic_limits), a range outside the device or a write without data; NoSpace and
  // FailedPrecondition as Write; IOError if its pages kept failing or the device was lost
  // (then none of it is applied, after any number of power cuts).
  void WriteAtomic(std::vector<AtomicOp> ops, bool fua, Done done);
  AtomicLimits atomic_limits() const;
  void Flush(Done done);
  // Completes outstanding work and writes a checkpoint. The Ftl accepts nothing after.
  void Shutdown(Done done);

  // True when `lba` is mapped (the SDK's "exists").
  bool Exists(uint64_t lba) const { return lba < sectors() && map_.Get(lba) != kUnmapped; }
  // Mapped sectors in [lba, lba + count) (clipped to the device); cheap over unmapped
  // stretches of a sparse space.
  uint64_t MappedIn(uint64_t lba, uint64_t count) const;
  // Runs of mapped sectors (first, length) in [lba, lba + count), in order, at most
  // `max_runs` of them; `*next` (if given) gets where to continue (lba + count when done).
  std::vector<std::pair<uint64_t, uint64_t>> MappedRuns(uint64_t lba, uint64_t count,
                                                        std::size_t max_runs,
                                                        uint64_t* next = nullptr) const;
  const FtlStats& stats() const { return stats_; }
  // Reads issued again after an uncorrectable result, and how they ended.
  const nand::ReadRetryPipe::Stats& read_retry_stats() const { return retry_->stats(); }
  const AttachInfo& attach_info() const { return attach_; }
  uint64_t mapped_sectors() const { return map_.mapped(); }
  bool sparse() const { return sparse_; }
  // Flash room for user data, in sectors (a sparse device's physical limit).
  uint64_t physical_user_sectors() const { return PhysicalUserSectors(); }
  // Host RAM of the map and LEB table, in bytes.
  uint64_t memory_bytes() const;
  uint32_t free_lebs() const { return lebs_.free_count(); }
  // Lowest and highest erase count over the data LEBs.
  std::pair<uint32_t, uint32_t> EraseCountRange() const;
  const nand::Geometry& geometry() const { return geo_; }
  // Sectors of user data a LEB with every die good holds (its last page positions hold
  // the LEB summary).
  uint64_t leb_data_sectors() const;
  uint32_t epoch() const { return epoch_; }
  // LEBs per metadata slot (docs/formats/ftl.md): 1, or as many as a full map's
  // checkpoint needs.
  uint32_t metadata_slot_lebs() const { return slot_lebs_; }
  bool idle() const;
  // No task of this FTL is scheduled on its clock. With no flash command of its pipe
  // outstanding either, nothing refers to the FTL any more: it may then be destroyed
  // without Shutdown (what a crash of its LUN leaves; recovery is the next attach).
  bool Quiescent() const;
  // Gives the FTL up without a shutdown (its LUN's host side crashed, after its pipe was
  // cut): every request not yet acknowledged fails at once or when its command returns;
  // nothing more is written. Then wait for Quiescent() and destroy it.
  void Abandon();
  FlashBackStatus flashback_status() const;
  ReserveStatus reserve_status() const;
  HealthMode health_mode() const;

  // Test hooks.
  void TEST_ForceGroom(Done done);
  // One line on what the FTL is waiting for (queued work, free LEBs, the victim), for a
  // test that finds a request unanswered.
  std::string TEST_DebugState() const;
  // Tests: the LBAs of sectors copied into a groomer page not yet submitted (their data
  // is still only at their source).
  std::vector<uint64_t> TEST_OpenCopyLbas() const;

 private:
  struct PageBufFields;
  struct PageBuf;
  struct AppendPoint;
  struct WriteCtx;
  struct AtomicGroup;
  struct Impl;
  // `slot_lebs`: LEBs per metadata slot (the format's; the metadata area is LEBs
  // 0 .. 2 * slot_lebs - 1).
  Ftl(nand::FlashPipe& pipe, Clock& clock, const FtlOptions& opts, const nand::Geometry& g,
      uint64_t sectors, uint32_t sector_bytes, uint32_t slot_lebs = 1);
  // Writes a metadata record (mount or checkpoint) to the metadata slot not holding the
  // newest one, its pages in copies on distinct dies across the slot's LEBs. NoSpace when
  // the record does not fit the slot with two copies of every page.
  void WriteMetaRecord(uint32_t kind, Done done);
  // Writes checkpoint record `kind` (clean or dirty). The format sizes the metadata slots
  // for the checkpoint of a full map; one that still does not fit (trim lists or a sparse
  // map far beyond that allowance, or a card formatted before format 1.5 with a map
  // beyond one LEB) is replaced by a mount record: nothing is lost, the next attach scans
  // the LEBs. `done` gets the status and whether the checkpoint itself was written.
  void WriteCheckpointRecord(uint32_t kind, Function<void(Status, bool)> done);
  // OK, or why a host request must be refused: FailedPrecondition after Shutdown,
  // InvalidArgument for a missing buffer or a range outside the device.
  Status CheckRequest(const char* what, uint64_t lba, uint64_t count, const void* buf,
                      bool needs_buf) const;
  // Completes `done` with `s` on the engine, never inside the caller.
  void Reject(Done done, Status s);
  std::vector<uint8_t> BuildMetaPayload(uint32_t kind, uint64_t record_seq) const;
  Status LoadMetaPayload(const std::vector<uint8_t>& payload, bool with_map);
  // Rebuilds state from page headers. With `after_seq` > 0 (a checkpoint of that seq is
  // already loaded), only LEBs whose first row was written after it are read.
  void Scan(uint64_t after_seq, Function<void(Status)> done);
  // Read of a checked request (also a read retried after its sector moved: counted once).
  // `start`: a host Read's call time, whose latency is recorded (kTimeNever: none).
  void ReadMapped(uint64_t lba, uint32_t count, uint8_t* out, Done done, TimeNs start = kTimeNever);
  // What recovery (recovery.h) needs of this format to judge a spare.
  ScanFormat ScanFmt() const;
  // Counts and reports the stripes two failed dies left unnamed (UnnamedLostStripes).
  void NoteUnnamedLosses(const ScanImage& img, uint64_t after_seq);
  // Reads the summary of closed LEB `leb`: `done` gets its grid (one entry per page
  // position, see ftl_format.h) and the spares of its pages by position, or an empty
  // grid when the LEB has no complete, valid summary.
  using SummaryDone = Function<void(std::vector<uint64_t>,
                                    std::vector<std::pair<uint64_t, std::vector<uint8_t>>>)>;
  void ReadSummary(uint32_t leb, SummaryDone done);
  // Physical room for user data, in sectors (the limit of a sparse device).
  uint64_t PhysicalUserSectors() const;
  // What a sparse (or reduced-write) device may still map: PhysicalUserSectors, cached.
  uint64_t WriteRoom();
  uint64_t room_cache_ = 0;
  TimeNs room_at_ = 0;
  bool room_valid_ = false;

  // Every read of the FTL goes through read-retry (vsl/nand/read_retry.h): an
  // uncorrectable page is read again before it counts as lost or torn.
  std::unique_ptr<nand::ReadRetryPipe> retry_;
  nand::FlashPipe& pipe_;
  Clock& clock_;
  FtlOptions opts_;
  nand::Geometry geo_;
  uint32_t sector_bytes_ = 4096;
  uint32_t spp_ = 2;  // sectors per page
  uint32_t epoch_ = 0;
  bool sparse_ = false;
  uint32_t reserve_ppm_ = 0;
  uint64_t next_seq_ = 1;
  // Metadata area: two slots of slot_lebs_ LEBs each (LEBs 0 .. meta_lebs_ - 1), written
  // alternately, so the newest complete record survives a cut while the other is written.
  uint32_t slot_lebs_ = 1;
  uint32_t meta_lebs_ = 2;
  ForwardMap map_;
  LebTable lebs_;
  FtlStats stats_;
  AttachInfo attach_;
  uint32_t meta_leb_ = 1;  // the metadata slot (0 or 1) holding the newest record
  // The checkpoint a recovery would start from (0: none), and its metadata slot. While it
  // is on flash its map is a source of old mappings: trim records newer than it are kept.
  uint64_t base_ckpt_seq_ = 0;
  uint32_t base_ckpt_leb_ = 0;
  std::unique_ptr<Impl> impl_;
};

}  // namespace vsl::ftl
