// Data scrambler: XOR with the PRBS-23 sequence (x^23 + x^18 + 1, a maximal-length LFSR,
// period 2^23 - 1) so that the bits programmed into NAND cells are balanced whatever the
// host writes (long runs of one value worsen program disturb and read margins). The
// sequence restarts for every page from a seed derived from the page's row address, so a
// page descrambles on its own; scrambling twice restores the data. Eight bits per cycle:
// the LFSR steps eight times per byte, the first output bit going to the byte's MSB.
// vsl_scramble (kernels.cc) is the HLS top.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>

namespace vslhls {

inline constexpr int kScramblerBits = 23;
inline constexpr uint32_t kScramblerMask = (1u << kScramblerBits) - 1;
inline constexpr int kScramblerTapA = 22;  // output = s[22] ^ s[17], shifted in at bit 0
inline constexpr int kScramblerTapB = 17;

// A nonzero 23-bit LFSR state for the page at `row_address` (LUN, block, page).
uint32_t ScramblerSeed(uint32_t row_address);
// XORs data[0, len) with the sequence from `seed` (nonzero). Returns the LFSR state after
// the last byte, so a page can be processed in pieces.
uint32_t Scramble(uint8_t* data, int len, uint32_t seed);

}  // namespace vslhls
