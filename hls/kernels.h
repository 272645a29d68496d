// The HLS top functions: one per kernel, with the interfaces an Alveo or controller build
// connects (AXI4 masters for data, AXI4-Lite for scalars and control). In C-simulation
// they run on host memory; tests/hls checks them against the C++ API and references.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include "hls/hls_types.h"

// Sizes of the top functions' frames.
namespace vslhls {
inline constexpr int kTopMaxMessageBytes = 1008;  // 512 B sector + metadata; multiple of 8
inline constexpr int kTopMaxMessageWords = kTopMaxMessageBytes / 8;
inline constexpr int kTopMaxParityBytes = 26;     // t = 16
// Result word per codeword from a decode top: status (BchStatus) in bits 31:16, bits
// corrected in bits 15:0.
inline constexpr int kTopStatusShift = 16;
}  // namespace vslhls

extern "C" {

// BCH encoders, t = 4, 8, 16.
//   data       codewords x msg_bytes of messages, back to back (AXI4 master gmem0)
//   parity     codewords x BchParityBytes(t) of parity out, back to back (AXI4 master gmem1)
//   msg_bytes  message bytes per codeword: a multiple of 8, 8..kTopMaxMessageBytes
//   codewords  how many codewords
void vsl_bch4_encode(const ap_uint<64>* data, ap_uint<8>* parity, unsigned msg_bytes, unsigned codewords);
void vsl_bch8_encode(const ap_uint<64>* data, ap_uint<8>* parity, unsigned msg_bytes, unsigned codewords);
void vsl_bch16_encode(const ap_uint<64>* data, ap_uint<8>* parity, unsigned msg_bytes, unsigned codewords);

// BCH decoders, t = 4, 8, 16: correct data and parity in place.
//   data       codewords x msg_bytes as read from NAND, corrected in place (gmem0)
//   parity     codewords x BchParityBytes(t) as read, corrected in place (gmem1)
//   result     one word per codeword: status << 16 | bits corrected (gmem2)
//   msg_bytes  as for the encoder
//   codewords  how many codewords
void vsl_bch4_decode(ap_uint<64>* data, ap_uint<8>* parity, ap_uint<32>* result, unsigned msg_bytes,
                     unsigned codewords);
void vsl_bch8_decode(ap_uint<64>* data, ap_uint<8>* parity, ap_uint<32>* result, unsigned msg_bytes,
                     unsigned codewords);
void vsl_bch16_decode(ap_uint<64>* data, ap_uint<8>* parity, ap_uint<32>* result, unsigned msg_bytes,
                      unsigned codewords);

// CRC-32C of data[0, bytes) chained from `crc_in` (0 to start), into *crc_out.
//   data     the bytes, little-endian within each 64-bit word (gmem0)
//   bytes    how many bytes (any count; the last word may be partial)
//   crc_in   the CRC of what came before (0: none)
//   crc_out  the result (AXI4-Lite)
void vsl_crc32c(const ap_uint<64>* data, unsigned bytes, unsigned crc_in, unsigned* crc_out);

// Scrambles (or descrambles: the same operation) data[0, bytes) in place.
//   data   little-endian bytes in 64-bit words (gmem0)
//   bytes  how many bytes
//   seed   the page's scrambler state (ScramblerSeed), nonzero
void vsl_scramble(ap_uint<64>* data, unsigned bytes, unsigned seed);

}  // extern "C"
