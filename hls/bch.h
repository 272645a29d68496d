// Binary BCH codec over GF(2^13) for the controller's ECC: t = 4, 8 or 16 bits corrected
// per codeword, 13*t parity bits (7, 13 or 26 bytes). A codeword protects a message of up
// to BchMaxMessageBytes(t) bytes (the card uses 512 B of sector data, plus the page's host
// metadata on the last codeword of a page): a shortened code of the length-8191 BCH code.
//
// Codeword layout (docs/hls.md): bit i of the message (MSB of byte 0 first) is the
// coefficient of x^(n-1-i), n = 8*len + 13t; the parity p(x) = m(x)*x^(13t) mod g(x)
// follows with its x^(13t-1) coefficient in the MSB of parity byte 0. When 13t is not a
// multiple of 8 (t = 4) the low bits of the last parity byte are padding: written zero,
// ignored on decode. An all-zero message has all-zero parity.
//
// Decoding: the remainder of the received word mod g(x) (the encoder's LFSR run over the
// message, XORed with the received parity) is zero for a clean codeword - the common case
// costs one LFSR pass. Otherwise: an erased-page check (at most t zero bits in message and
// parity: a page the controller never programmed, returned as all 0xFF), then the 2t
// syndromes, Berlekamp-Massey for the error locator, and a Chien search over the
// shortened code's positions. A locator whose roots are not all distinct positions inside
// the codeword makes the result uncorrectable, and the data is left as received. A
// received word within t of another codeword is "corrected" to it (miscorrection); the
// rate is measured in tests/hls and documented in docs/hls.md.
//
// The same code runs in C-simulation, in the software card (bit-exact ECC mode) and in
// RTL co-simulation through DPI-C; the HLS top functions are in bch_kernels.cc.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>

namespace vslhls {

inline constexpr int kBchM = 13;                 // GF(2^13)
inline constexpr int kBchN = (1 << kBchM) - 1;   // 8191: the full code length in bits
inline constexpr uint32_t kBchPrimitivePoly = 0x201B;  // x^13 + x^4 + x^3 + x + 1
inline constexpr int kBchMaxT = 16;

constexpr int BchParityBits(int t) { return kBchM * t; }
constexpr int BchParityBytes(int t) { return (kBchM * t + 7) / 8; }
// Longest message (whole bytes) a shortened codeword can carry.
constexpr int BchMaxMessageBytes(int t) { return (kBchN - kBchM * t) / 8; }
constexpr bool BchSupportedT(int t) { return t == 4 || t == 8 || t == 16; }

enum class BchStatus : uint8_t {
  kClean = 0,          // no error
  kCorrected = 1,      // `bits` errors corrected
  kErased = 2,         // an erased codeword (<= t zero bits): returned as all 0xFF
  kUncorrectable = 3,  // more errors than the code can correct: data left as received
};
const char* BchStatusName(BchStatus s);

struct BchResult {
  BchStatus status = BchStatus::kClean;
  uint16_t bits = 0;  // bits corrected (or zero bits of an erased codeword set back to 1)
};

template <int T>
struct Bch {
  static_assert(BchSupportedT(T), "BCH t must be 4, 8 or 16");
  static constexpr int kT = T;
  static constexpr int kParityBits = BchParityBits(T);
  static constexpr int kParityBytes = BchParityBytes(T);
  static constexpr int kMaxMessageBytes = BchMaxMessageBytes(T);

  // Parity of msg[0, len) into parity[0, kParityBytes). 1 <= len <= kMaxMessageBytes.
  static void Encode(const uint8_t* msg, int len, uint8_t* parity);
  // Checks and corrects msg[0, len) and parity[0, kParityBytes) in place.
  static BchResult Decode(uint8_t* msg, int len, uint8_t* parity);
  // The generator polynomial g(x), degree kParityBits: bit i of word i/64 is the
  // coefficient of x^i (kParityBits + 1 bits; for tests and docs).
  static void Generator(uint64_t words[4]);
};

// Runtime choice of t (the card's geometry carries it). False for an unsupported t or
// length; Decode then reports kUncorrectable.
bool BchEncode(int t, const uint8_t* msg, int len, uint8_t* parity);
BchResult BchDecode(int t, uint8_t* msg, int len, uint8_t* parity);

// GF(2^13) arithmetic of the codec (alpha = x, modulo kBchPrimitivePoly), for tests.
uint16_t GfExp(int i);   // alpha^i, any i >= 0
int GfLog(uint16_t a);   // a != 0
uint16_t GfMul(uint16_t a, uint16_t b);

}  // namespace vslhls
