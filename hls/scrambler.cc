#include "hls/scrambler.h"

#include "hls/hls_types.h"

namespace vslhls {

uint32_t ScramblerSeed(uint32_t row_address) {
  // A fixed odd multiplier spreads neighbouring pages over the sequence; zero is the one
  // state an LFSR never leaves, so it maps to a constant.
  const uint32_t s = ((row_address * 0x9E3779B1u) ^ (row_address >> 9)) & kScramblerMask;
  return s != 0 ? s : 0x5A5A5Au & kScramblerMask;
}

uint32_t Scramble(uint8_t* data, int len, uint32_t seed) {
  ap_uint<kScramblerBits> s = seed & kScramblerMask;
scramble_bytes:
  for (int i = 0; i < len; ++i) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT min=512 max=16384
    unsigned key = 0;
  scramble_bits:
    for (int b = 0; b < 8; ++b) {
#pragma HLS UNROLL
      const bool out = s.test(kScramblerTapA) ^ s.test(kScramblerTapB);
      s <<= 1;
      s.set_bit(0, out);
      key = (key << 1) | (out ? 1u : 0u);
    }
    data[i] = static_cast<uint8_t>(data[i] ^ key);
  }
  return static_cast<uint32_t>(s.to_uint64());
}

}  // namespace vslhls
