// ImageStore: an OnfiTarget's pages in the simulated card's image (vsl/simcard), with the
// card's error and fault model (vsl/simcard/profile.h, Reliability): every sensing flips
// Binomial(bits, rber) distinct bits of the page (rber from the block's wear and reads
// since erase), programs and erases fail with the card's probability, factory bad blocks
// carry their markers, a torn page (RESET LUN mid-program) reads uncorrectable. The
// controller in the RTL, not this store, computes and checks ECC parity: pages hold what
// the controller sent, parity included (blocks whose parity the controller never wrote,
// the factory markers, get it computed on sensing, as the card's bit-exact mode does).
// C++20 (host side: it uses the simulated card's image code).
#pragma once

#include <cstdint>
#include <vector>

#include "testbench/onfi/target_store.h"
#include "vsl/core/random.h"
#include "vsl/simcard/image.h"
#include "vsl/simcard/profile.h"

namespace vsl::tb {

class ImageStore final : public TargetStore {
 public:
  // The LUNs of one target are dies [first_die, first_die + luns) of `image`.
  ImageStore(simcard::ControllerImage& image, const simcard::Reliability& rel, uint32_t first_die, uint64_t seed);

  void ReadPage(uint32_t lun, uint32_t block, uint32_t page, uint8_t* out) override;
  bool ProgramPage(uint32_t lun, uint32_t block, uint32_t page, const uint8_t* data) override;
  bool EraseBlock(uint32_t lun, uint32_t block) override;
  void TearPage(uint32_t lun, uint32_t block, uint32_t page) override;

  struct Stats {
    uint64_t pages_sensed = 0, bits_flipped = 0, program_failures = 0, erase_failures = 0, refused = 0;
  };
  const Stats& stats() const { return stats_; }

 private:
  simcard::ControllerImage& image_;
  simcard::Reliability rel_;
  uint32_t first_die_;
  Rng rng_;
  Stats stats_;
  std::vector<uint32_t> pos_;
};

}  // namespace vsl::tb
