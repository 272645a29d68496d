#include "vsl/core/crc.h"

#include <array>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

namespace vsl {
namespace {

constexpr std::array<uint16_t, 256> MakeCrc16Table() {
  std::array<uint16_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint16_t c = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) {
      c = static_cast<uint16_t>((c & 0x8000) ? (c << 1) ^ 0x8005 : (c << 1));
    }
    t[i] = c;
  }
  return t;
}

// Slicing-by-8 tables for CRC-32C.
constexpr std::array<std::array<uint32_t, 256>, 8> MakeCrc32cTables() {
  std::array<std::array<uint32_t, 256>, 8> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int b = 0; b < 8; ++b) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : (c >> 1);
    t[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; ++i) {
    for (int s = 1; s < 8; ++s) t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
  }
  return t;
}

constexpr auto kCrc16Table = MakeCrc16Table();
constexpr auto kCrc32cTables = MakeCrc32cTables();

}  // namespace

uint16_t Crc16Onfi(const void* data, std::size_t len, uint16_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (std::size_t i = 0; i < len; ++i) {
    crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ p[i]) & 0xFF]);
  }
  return crc;
}

uint32_t Crc32cSoftware(const void* data, std::size_t len, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = ~crc;
  while (len >= 8) {
    const uint32_t lo = c ^ (uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 |
                             uint32_t{p[3]} << 24);
    c = kCrc32cTables[7][lo & 0xFF] ^ kCrc32cTables[6][(lo >> 8) & 0xFF] ^
        kCrc32cTables[5][(lo >> 16) & 0xFF] ^ kCrc32cTables[4][lo >> 24] ^
        kCrc32cTables[3][p[4]] ^ kCrc32cTables[2][p[5]] ^ kCrc32cTables[1][p[6]] ^
        kCrc32cTables[0][p[7]];
    p += 8;
    len -= 8;
  }
  while (len-- > 0) c = (c >> 8) ^ kCrc32cTables[0][(c ^ *p++) & 0xFF];
  return ~c;
}

namespace {

// GF(2) arithmetic modulo the CRC-32C polynomial, in the reflected bit order of the CRC
// register (bit 31 is x^0). Appending n zero bytes to a message multiplies its raw register
// by x^(8n): that is how three streams computed side by side are joined.
constexpr uint32_t kPolyReflected = 0x82F63B78u;
constexpr uint32_t MulModP(uint32_t a, uint32_t b) {
  uint32_t prod = 0;
  for (uint32_t m = 1u << 31; m != 0; m >>= 1) {
    if (a & m) prod ^= b;
    b = (b & 1) ? (b >> 1) ^ kPolyReflected : b >> 1;
  }
  return prod;
}
// x^(8 * bytes) mod P.
constexpr uint32_t XPow8n(uint64_t bytes) {
  uint32_t result = 1u << 31;  // x^0
  uint32_t sq = 1u << 30;      // x^1, squared per bit of the exponent
  for (uint64_t e = bytes * 8; e != 0; e >>= 1) {
    if (e & 1) result = MulModP(sq, result);
    sq = MulModP(sq, sq);
  }
  return result;
}

#if defined(__x86_64__)
// Stream lengths of the interleaved loop: the crc32 instruction has a latency of three
// cycles and a throughput of one, so three independent streams keep it busy. A 4 KiB
// sector is 3 x 1360 bytes and 16 more; a 512 B sector 3 x 168 and 8 more.
constexpr std::size_t kLong = 1360, kShort = 168;
constexpr uint32_t kLongX1 = XPow8n(kLong), kLongX2 = XPow8n(2 * kLong);
constexpr uint32_t kShortX1 = XPow8n(kShort), kShortX2 = XPow8n(2 * kShort);

__attribute__((target("sse4.2"))) uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return v;
}

// Three streams of `blk` bytes side by side while the buffer holds them; advances p, len.
__attribute__((target("sse4.2"))) uint64_t Three(uint64_t c, const uint8_t*& p, std::size_t& len, std::size_t blk,
                                                 uint32_t x1, uint32_t x2) {
  while (len >= 3 * blk) {
    uint64_t c1 = 0, c2 = 0;
    for (std::size_t i = 0; i < blk; i += 8) {
      c = _mm_crc32_u64(c, Load64(p + i));
      c1 = _mm_crc32_u64(c1, Load64(p + blk + i));
      c2 = _mm_crc32_u64(c2, Load64(p + 2 * blk + i));
    }
    c = MulModP(x2, static_cast<uint32_t>(c)) ^ MulModP(x1, static_cast<uint32_t>(c1)) ^ static_cast<uint32_t>(c2);
    p += 3 * blk;
    len -= 3 * blk;
  }
  return c;
}

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const void* data, std::size_t len, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  c = Three(c, p, len, kLong, kLongX1, kLongX2);
  c = Three(c, p, len, kShort, kShortX1, kShortX2);
  while (len >= 8) {
    c = _mm_crc32_u64(c, Load64(p));
    p += 8;
    len -= 8;
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  while (len-- > 0) c32 = _mm_crc32_u8(c32, *p++);
  return ~c32;
}

using CrcFn = uint32_t (*)(const void*, std::size_t, uint32_t);
CrcFn PickCrc32c() { return __builtin_cpu_supports("sse4.2") ? Crc32cHardware : Crc32cSoftware; }
const CrcFn kCrc32c = PickCrc32c();
#endif

}  // namespace

uint32_t Crc32c(const void* data, std::size_t len, uint32_t crc) {
#if defined(__x86_64__)
  return kCrc32c(data, len, crc);
#else
  return Crc32cSoftware(data, len, crc);
#endif
}

bool Crc32cIsHardware() {
#if defined(__x86_64__)
  return kCrc32c != Crc32cSoftware;
#else
  return false;
#endif
}

}  // namespace vsl
