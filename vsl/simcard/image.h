// ControllerImage: one controller's persistent flash, in a sparse file (image_format.h).
//
// The whole file is mapped shared, so metadata (header, state, die/block/page tables) and
// page slots reach the file through the page cache and survive the process being killed.
// A controller's pipes share the image, each touching only its own dies' records and
// slots; the kept-slot bookkeeping is the one shared part (atomics, and a mutex on the
// path that allocates file space).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vsl/core/random.h"
#include "vsl/core/status.h"
#include "vsl/nand/geometry.h"
#include "vsl/simcard/image_format.h"
#include "vsl/simcard/profile.h"

namespace vsl::simcard {

struct ImageIdentity {
  uint64_t card_id = 0;
  uint32_t controller_index = 0;
  std::string serial;
  std::string profile;
  std::string firmware_version;
  std::string model;
};

class ControllerImage {
 public:
  // Creates `path` (must not exist) for controller `index` of a card of `profile`, draws
  // factory bad blocks from `seed` and writes their markers. Stores null on error.
  static Result<std::unique_ptr<ControllerImage>> Create(const std::string& path,
                                                         const Profile& profile,
                                                         uint32_t index, uint64_t card_id,
                                                         const std::string& serial,
                                                         uint64_t seed);
  // Opens and validates an existing image. Corruption (with the reason) for a foreign,
  // truncated or damaged file, never a crash; NotSupported for another major version.
  static Result<std::unique_ptr<ControllerImage>> Open(const std::string& path);
  ~ControllerImage();
  ControllerImage(const ControllerImage&) = delete;
  ControllerImage& operator=(const ControllerImage&) = delete;

  const nand::Geometry& geometry() const { return geometry_; }
  const ImageIdentity& identity() const { return identity_; }
  const std::string& path() const { return path_; }
  const format::ImageHeader& header() const { return *header_; }
  uint32_t dies() const { return geometry_.dies_per_controller(); }

  format::DieRecord& die(uint32_t d) { return die_table_[d]; }
  format::BlockRecord& block(uint32_t d, uint32_t b) {
    return block_table_[uint64_t{d} * geometry_.blocks_per_lun + b];
  }
  format::PageState page_state(uint32_t d, uint32_t b, uint32_t p) const {
    return static_cast<format::PageState>(page_table_[PageIndex(d, b, p)]);
  }
  void set_page_state(uint32_t d, uint32_t b, uint32_t p, format::PageState s) {
    page_table_[PageIndex(d, b, p)] = static_cast<uint8_t>(s);
  }

  // Whole slot I/O: data (page_data_bytes) then raw spare (page_spare_bytes). The slots
  // are mapped (no system call per page): a block's slots are allocated in the file
  // (fallocate), a chunk of pages at a time, before the programs that write them, so a
  // full filesystem fails a program with a clear error instead of faulting the process;
  // where the filesystem cannot allocate ahead, slots go through pwrite.
  Status WriteSlot(uint32_t d, uint32_t b, uint32_t p, const uint8_t* slot);
  Status ReadSlot(uint32_t d, uint32_t b, uint32_t p, uint8_t* slot) const;
  // Reads `len` bytes at `offset` inside the slot.
  Status ReadSlotRange(uint32_t d, uint32_t b, uint32_t p, uint64_t offset, uint64_t len,
                       uint8_t* out) const;
  static constexpr uint32_t kKeptErasedShare = 8;  // at most 1/8 of the blocks keep slots
  static constexpr uint64_t kKeptMaxBytes = 128ull << 20;  // and at most this much room
  static constexpr uint64_t kAllocChunkBytes = 256u << 10;  // slots allocated at a time
  // Erases a block's pages: page states to kErased. Its slots are punched out of the file
  // unless they are kept for the block's next program: up to KeptLimit() blocks (the free
  // pool a groomer cycles through) keep theirs, so steady writes do not give pages back
  // and fault them in again; beyond that, an image holds only what is programmed plus
  // that room. Kept room is never what fails a program: a program the filesystem has no
  // room for first gives every kept block's room back (ReleaseKept) and tries again.
  void EraseBlockPages(uint32_t d, uint32_t b);
  // How many erased blocks may keep their slots: 1/kKeptErasedShare of the blocks, and
  // no more than kKeptMaxBytes of slots (a full-size card's share would be hundreds of
  // GiB of a host filesystem held for nothing).
  uint64_t KeptLimit() const { return kept_limit_; }
  uint64_t KeptBlocks() const { return kept_.load(std::memory_order_relaxed); }
  // Punches every kept block's slots out of the file; returns how many blocks it freed.
  // Safe from any thread: a pipe programming one of them meanwhile waits for its room.
  uint64_t ReleaseKept();

  format::ImageState& state() { return *state_; }
  // The lifetime counters (zeroed when absent or damaged; see image_format.h). Update
  // them, then SealLifetime (recomputes the CRC).
  format::LifetimeRecord& lifetime() { return *lifetime_; }
  void SealLifetime();
  // Recomputes the state record's CRC and flushes metadata to the file (msync).
  Status SyncState();
  // Flushes all mapped metadata (msync); page data is already in the file.
  Status Sync();
  // Bytes the file occupies on disk (it is sparse).
  uint64_t AllocatedBytes() const;

 private:
  ControllerImage() = default;
  static Result<std::unique_ptr<ControllerImage>> Map(int fd, const std::string& path);
  uint64_t PageIndex(uint32_t d, uint32_t b, uint32_t p) const {
    return (uint64_t{d} * geometry_.blocks_per_lun + b) * geometry_.pages_per_block + p;
  }
  uint64_t SlotOffset(uint32_t d, uint32_t b, uint32_t p) const {
    return header_->data_offset + PageIndex(d, b, p) * header_->page_slot_bytes;
  }

  // Makes sure block (d, b)'s slots from page `p` on are backed by the file.
  Status Allocate(uint32_t d, uint32_t b, uint32_t p);
  uint64_t ReleaseKeptLocked();  // space_mu_ held

  std::string path_;
  int fd_ = -1;
  uint8_t* map_ = nullptr;  // the whole file: header, tables, page slots
  uint64_t map_bytes_ = 0;
  uint64_t meta_bytes_ = 0;  // header .. end of page table (what Sync flushes)
  // Per block: how many of its slots (from page 0) are allocated in the file since the
  // image was opened or the block was punched, and its state in the high bits: none
  // (allocated for programs), kKept (erased, slots kept for its next program), or
  // kReleasing (a kept block being punched by ReleaseKept, under space_mu_).
  // Transitions: the block's own pipe allocates (count up), erases (to kept, or punched
  // to 0) and takes a kept block back; ReleaseKept (any thread, holding space_mu_) moves
  // kept -> releasing -> 0. A pipe that finds its page beyond the count, or the block
  // releasing, allocates under space_mu_, so it never writes slots a release is about to
  // punch. Slots are allocated kAllocChunkBytes at a time: a block left part-written (an
  // open LEB at a crash) holds little more than its written pages.
  static constexpr uint32_t kKeptBit = 1u << 16, kReleasingBit = 1u << 17, kCountMask = kKeptBit - 1;
  std::unique_ptr<std::atomic<uint32_t>[]> allocated_;
  uint64_t blocks_ = 0;
  uint32_t chunk_pages_ = 1;  // pages per allocation
  // Blocks in kKept. The bound may be passed by one block per racing erase, which only
  // keeps a little more room.
  std::atomic<uint64_t> kept_{0};
  uint64_t kept_limit_ = 0;
  std::mutex space_mu_;  // allocating file space; releasing kept blocks
  uint64_t os_page_bytes_ = 4096;  // the mapping's page (MADV_POPULATE_WRITE alignment)
  bool pwrite_slots_ = false;       // the filesystem cannot allocate ahead
  const format::ImageHeader* header_ = nullptr;
  format::ImageState* state_ = nullptr;
  format::LifetimeRecord* lifetime_ = nullptr;
  format::DieRecord* die_table_ = nullptr;
  format::BlockRecord* block_table_ = nullptr;
  uint8_t* page_table_ = nullptr;
  nand::Geometry geometry_;
  ImageIdentity identity_;
};

// Counters over dies `dies` of `img`: failed dies, bad blocks, erase counts, programmed
// and torn pages (read only; the block table belongs to whoever programs those dies).
model::DieCounters CountDies(ControllerImage& img, const std::vector<uint32_t>& dies);
// A controller's health from its image and its pipes' counters (in order): identity,
// wear against `endurance_cycles`, power cycles, PLP state, file sizes. controller and
// firmware_version are the caller's to fill in.
model::ControllerHealth ImageHealth(ControllerImage& img, const std::vector<model::DieCounters>& per_pipe,
                                    uint32_t endurance_cycles);

// The file layout for a controller of `g`: offsets and total size.
struct ImageLayout {
  uint64_t die_table_offset, block_table_offset, page_table_offset, data_offset;
  uint64_t page_slot_bytes, file_bytes;
};
ImageLayout ComputeLayout(const nand::Geometry& g);

}  // namespace vsl::simcard
