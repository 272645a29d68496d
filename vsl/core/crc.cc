#include "vsl/core/crc.h"

#include <array>

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

uint32_t Crc32c(const void* data, std::size_t len, uint32_t crc) {
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

}  // namespace vsl
