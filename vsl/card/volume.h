// CardVolume: one block device striped across LUNs (RAID 0), what the reference card
// needed software RAID for.
//
// Layout: the volume's sectors are cut into chunks of `chunk_bytes` (default 128 KiB);
// chunk k lives on LUN k mod N at that LUN's chunk k / N. A request is split at chunk
// boundaries and its parts run on their LUNs' engines in parallel, so bandwidth adds up
// across LUNs (and controllers) as in RAID 0. Capacity is N times the smallest LUN,
// rounded down to whole chunks. The LUNs must be online with the same sector size.
//
// Semantics: a request completes when all its parts have; its status is the first error
// of a part (the other parts may have been applied: like a disk, a failed multi-chunk
// write leaves its range indeterminate, never another range touched). Flush flushes every
// LUN. The volume holds no state of its own on flash: the same LUNs, in the same order,
// with the same chunk size always give the same volume (vsld keeps that in its config).
//
// Threads: any thread may submit; `done` runs on the engine of the LUN whose part ends
// last (on the caller's thread for a shared virtual clock).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "vsl/card/card.h"

namespace vsl::card {

class CardVolume {
 public:
  using Done = Function<void(vsl::Status)>;
  static constexpr uint32_t kDefaultChunkBytes = 128 * 1024;

  // InvalidArgument for no LUN, a LUN offline, mixed sector sizes, or a chunk that is not
  // a multiple of the sector size.
  static Result<std::unique_ptr<CardVolume>> Create(std::vector<Lun*> luns,
                                                    uint32_t chunk_bytes = kDefaultChunkBytes);

  uint64_t sectors() const { return sectors_; }
  uint32_t sector_bytes() const { return sector_bytes_; }
  uint32_t chunk_sectors() const { return chunk_sectors_; }
  std::size_t lun_count() const { return luns_.size(); }

  // As Ftl::Read/Write/Trim/Flush, over the volume's sectors.
  void Read(uint64_t lba, uint32_t count, uint8_t* out, Done done);
  void Write(uint64_t lba, uint32_t count, const uint8_t* data, bool fua, Done done);
  void Trim(uint64_t lba, uint64_t count, Done done);
  void Flush(Done done);

  // Where volume sector `lba` lives: (LUN position in the volume, sector on that LUN).
  std::pair<uint32_t, uint64_t> Locate(uint64_t lba) const;

 private:
  CardVolume() = default;
  struct Part {
    uint32_t lun;
    uint64_t lba;   // on the LUN
    uint64_t count;
    uint64_t offset;  // sectors into the request's buffer
  };
  std::vector<Part> Split(uint64_t lba, uint64_t count) const;
  // Runs `op(ftl, part)` for every part on its LUN's engine; `done` once all are done.
  template <typename Op>
  void Fan(std::vector<Part> parts, Done done, Op op);

  std::vector<Lun*> luns_;
  uint64_t lun_sectors_ = 0;  // used of each LUN (whole chunks)
  uint64_t sectors_ = 0;
  uint32_t sector_bytes_ = 0;
  uint32_t chunk_sectors_ = 0;
};

}  // namespace vsl::card
