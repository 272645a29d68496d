// TargetStore: where an OnfiTarget's LUNs keep their pages, and what the array does to
// them (bit errors on sensing, program and erase failures). MemoryStore keeps pages in
// memory and never fails unless told; testbench/cosim/image_store.h puts them in the
// simulated card's image with the card's error and fault model.
// C++17 (testbench).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace vsl::tb {

class TargetStore {
 public:
  virtual ~TargetStore() = default;
  // Senses page (lun, block, page) into `out` (data + spare): an erased page reads as
  // 0xFF; raw bit errors may be in it (the controller's ECC deals with them).
  virtual void ReadPage(uint32_t lun, uint32_t block, uint32_t page, uint8_t* out) = 0;
  // Programs the page; false when the die answers FAIL (not erased, out of order, or a
  // program failure of the array).
  virtual bool ProgramPage(uint32_t lun, uint32_t block, uint32_t page, const uint8_t* data) = 0;
  // False when the erase fails (the block goes bad).
  virtual bool EraseBlock(uint32_t lun, uint32_t block) = 0;
  // A program cut short by RESET LUN: the page is left half-programmed.
  virtual void TearPage(uint32_t lun, uint32_t block, uint32_t page) = 0;
};

class MemoryStore final : public TargetStore {
 public:
  MemoryStore(uint32_t luns, uint32_t blocks, uint32_t page_bytes)
      : blocks_(blocks), page_bytes_(page_bytes), next_(uint64_t{luns} * blocks, 0) {}
  void ReadPage(uint32_t lun, uint32_t block, uint32_t page, uint8_t* out) override {
    auto it = pages_.find(Key(lun, block, page));
    for (uint32_t i = 0; i < page_bytes_; ++i) out[i] = it != pages_.end() ? it->second[i] : 0xFF;
  }
  bool ProgramPage(uint32_t lun, uint32_t block, uint32_t page, const uint8_t* data) override {
    uint32_t& next = next_[uint64_t{lun} * blocks_ + block];
    if (page != next) return false;
    pages_[Key(lun, block, page)].assign(data, data + page_bytes_);
    ++next;
    return true;
  }
  bool EraseBlock(uint32_t lun, uint32_t block) override {
    pages_.erase(pages_.lower_bound(Key(lun, block, 0)), pages_.lower_bound(Key(lun, block + 1, 0)));
    next_[uint64_t{lun} * blocks_ + block] = 0;
    return true;
  }
  void TearPage(uint32_t lun, uint32_t block, uint32_t page) override {
    auto it = pages_.find(Key(lun, block, page));
    if (it == pages_.end()) return;
    for (std::size_t i = it->second.size() / 2; i < it->second.size(); ++i) it->second[i] ^= 0x5A;
  }

 private:
  static uint64_t Key(uint32_t lun, uint32_t block, uint32_t page) {
    return (uint64_t{lun} << 40) | (uint64_t{block} << 20) | page;
  }
  uint32_t blocks_, page_bytes_;
  std::map<uint64_t, std::vector<uint8_t>> pages_;
  std::vector<uint32_t> next_;  // per (lun, block): pages programmed since the erase
};

}  // namespace vsl::tb
