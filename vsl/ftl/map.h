// ForwardMap: logical sector -> physical sector address (PSA), in host RAM.
//
// Entries are 4 bytes, grouped in chunks of kChunkEntries allocated on first use; chunks
// hang off directories of up to kMaxDirChunks chunk pointers, also allocated on first use. So a
// sparse address space far larger than the flash (2^40 sectors and more) costs memory only
// where it is mapped, plus one pointer per directory (8 B per 2^24 sectors). An entry of
// kUnmapped means "reads as zeroes". Not thread-safe: owned by the pipe's engine.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

namespace vsl::ftl {

using Psa = uint32_t;
inline constexpr Psa kUnmapped = UINT32_MAX;

class ForwardMap {
 public:
  static constexpr uint64_t kChunkEntries = 4096;  // 16 KiB per chunk
  static constexpr uint64_t kMaxDirChunks = 4096;  // up to 32 KiB of pointers per directory

  // A device of few chunks has one directory of just those (no fixed 32 KiB).
  explicit ForwardMap(uint64_t sectors)
      : sectors_(sectors),
        dir_chunks_(std::max<uint64_t>(
            1, std::min(kMaxDirChunks, (sectors + kChunkEntries - 1) / kChunkEntries))),
        dir_entries_(dir_chunks_ * kChunkEntries),
        dirs_((sectors + dir_entries_ - 1) / dir_entries_) {}

  uint64_t sectors() const { return sectors_; }
  Psa Get(uint64_t lba) const {
    const Dir& d = dirs_[lba / dir_entries_];
    if (!d) return kUnmapped;
    const Chunk& c = d[(lba / kChunkEntries) % dir_chunks_];
    return c ? c[lba % kChunkEntries] : kUnmapped;
  }
  // Returns the previous value.
  Psa Set(uint64_t lba, Psa psa) {
    Dir& d = dirs_[lba / dir_entries_];
    if (!d) {
      if (psa == kUnmapped) return kUnmapped;
      d = std::make_unique<Chunk[]>(dir_chunks_);
      ++allocated_dirs_;
    }
    Chunk& c = d[(lba / kChunkEntries) % dir_chunks_];
    if (!c) {
      if (psa == kUnmapped) return kUnmapped;
      c = std::make_unique<Psa[]>(kChunkEntries);
      for (uint64_t i = 0; i < kChunkEntries; ++i) c[i] = kUnmapped;
      ++allocated_chunks_;
    }
    const Psa old = c[lba % kChunkEntries];
    c[lba % kChunkEntries] = psa;
    mapped_ += (psa != kUnmapped) - (old != kUnmapped);
    return old;
  }
  uint64_t mapped() const { return mapped_; }
  uint64_t allocated_chunks() const { return allocated_chunks_; }
  // Host RAM the map uses now, in bytes.
  uint64_t memory_bytes() const {
    return dirs_.size() * sizeof(Dir) + allocated_dirs_ * dir_chunks_ * sizeof(Chunk) +
           allocated_chunks_ * kChunkEntries * sizeof(Psa);
  }
  // Calls fn(lba, psa) for every mapped entry in [lba, lba + count), in LBA order,
  // skipping directories and chunks never allocated (so trimming or iterating a huge
  // sparse range is cheap).
  template <typename Fn>
  void ForEachMappedIn(uint64_t lba, uint64_t count, Fn fn) const {
    ForEachMappedUntil(lba, count, [&](uint64_t l, Psa p) {
      fn(l, p);
      return true;
    });
  }
  // As ForEachMappedIn, but stops at the first entry for which fn returns false; returns
  // that entry's LBA, or the end of the range.
  template <typename Fn>
  uint64_t ForEachMappedUntil(uint64_t lba, uint64_t count, Fn fn) const {
    const uint64_t end = count > sectors_ - std::min(lba, sectors_) ? sectors_ : lba + count;
    uint64_t l = lba;
    while (l < end) {
      const Dir& d = dirs_[l / dir_entries_];
      if (!d) {
        l = (l / dir_entries_ + 1) * dir_entries_;
        continue;
      }
      const uint64_t chunk_end = std::min(end, (l / kChunkEntries + 1) * kChunkEntries);
      const Chunk& c = d[(l / kChunkEntries) % dir_chunks_];
      if (c) {
        for (; l < chunk_end; ++l) {
          if (c[l % kChunkEntries] != kUnmapped && !fn(l, c[l % kChunkEntries])) return l;
        }
      }
      l = chunk_end;
    }
    return std::max(lba, end);
  }
  // Calls fn(lba, psa) for every mapped entry, in LBA order.
  template <typename Fn>
  void ForEachMapped(Fn fn) const {
    ForEachMappedIn(0, sectors_, fn);
  }
  // Calls fn(first_lba) for every allocated chunk, in LBA order (the sparse checkpoint
  // stores the map chunk by chunk).
  template <typename Fn>
  void ForEachChunk(Fn fn) const {
    for (uint64_t di = 0; di < dirs_.size(); ++di) {
      if (!dirs_[di]) continue;
      for (uint64_t ci = 0; ci < dir_chunks_; ++ci) {
        if (dirs_[di][ci]) fn((di * dir_chunks_ + ci) * kChunkEntries);
      }
    }
  }

 private:
  using Chunk = std::unique_ptr<Psa[]>;
  using Dir = std::unique_ptr<Chunk[]>;
  uint64_t sectors_;
  uint64_t dir_chunks_;   // chunk pointers per directory
  uint64_t dir_entries_;  // sectors per directory
  std::vector<Dir> dirs_;
  uint64_t allocated_dirs_ = 0;
  uint64_t allocated_chunks_ = 0;
  uint64_t mapped_ = 0;
};

}  // namespace vsl::ftl
