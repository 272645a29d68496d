// ForwardMap: logical sector -> physical sector address (PSA), in host RAM.
//
// Entries are 4 bytes; the map is split into chunks of kChunkEntries allocated on first
// use, so a sparse address space far larger than the flash costs memory only where it
// is mapped (plus one pointer per chunk). An entry of kUnmapped means "reads as zeroes".
// Not thread-safe: owned by the pipe's engine.
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

  explicit ForwardMap(uint64_t sectors)
      : sectors_(sectors), chunks_((sectors + kChunkEntries - 1) / kChunkEntries) {}

  uint64_t sectors() const { return sectors_; }
  Psa Get(uint64_t lba) const {
    const auto& c = chunks_[lba / kChunkEntries];
    return c ? c[lba % kChunkEntries] : kUnmapped;
  }
  // Returns the previous value.
  Psa Set(uint64_t lba, Psa psa) {
    auto& c = chunks_[lba / kChunkEntries];
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
  // Host RAM the map uses now, in bytes.
  uint64_t memory_bytes() const {
    return chunks_.size() * sizeof(void*) + allocated_chunks_ * kChunkEntries * sizeof(Psa);
  }
  // Calls fn(lba, psa) for every mapped entry in [lba, lba + count), skipping chunks that
  // were never allocated (so trimming a huge sparse range is cheap).
  template <typename Fn>
  void ForEachMappedIn(uint64_t lba, uint64_t count, Fn fn) const {
    const uint64_t end = std::min(sectors_, lba + count);
    uint64_t l = lba;
    while (l < end) {
      const uint64_t ci = l / kChunkEntries;
      const uint64_t chunk_end = std::min(end, (ci + 1) * kChunkEntries);
      if (chunks_[ci]) {
        for (; l < chunk_end; ++l) {
          if (chunks_[ci][l % kChunkEntries] != kUnmapped) fn(l, chunks_[ci][l % kChunkEntries]);
        }
      }
      l = chunk_end;
    }
  }
  // Calls fn(lba, psa) for every mapped entry, in LBA order.
  template <typename Fn>
  void ForEachMapped(Fn fn) const {
    for (uint64_t ci = 0; ci < chunks_.size(); ++ci) {
      if (!chunks_[ci]) continue;
      for (uint64_t i = 0; i < kChunkEntries; ++i) {
        const uint64_t lba = ci * kChunkEntries + i;
        if (lba >= sectors_) break;
        if (chunks_[ci][i] != kUnmapped) fn(lba, chunks_[ci][i]);
      }
    }
  }

 private:
  uint64_t sectors_;
  std::vector<std::unique_ptr<Psa[]>> chunks_;
  uint64_t allocated_chunks_ = 0;
  uint64_t mapped_ = 0;
};

}  // namespace vsl::ftl
