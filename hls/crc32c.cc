#include "hls/crc32c.h"

#include "hls/hls_types.h"

namespace vslhls {
namespace {

struct CrcTable {
  uint32_t e[256];
};
constexpr CrcTable MakeCrcTable() {
  CrcTable t{};
  for (uint32_t v = 0; v < 256; ++v) {
    uint32_t c = v;
    for (int b = 0; b < 8; ++b) c = (c & 1u) ? (c >> 1) ^ kCrc32cPoly : c >> 1;
    t.e[v] = c;
  }
  return t;
}
constexpr CrcTable kCrcTable = MakeCrcTable();

}  // namespace

uint32_t Crc32cUpdate(const uint8_t* data, int len, uint32_t crc) {
  uint32_t c = ~crc;
crc_bytes:
  for (int i = 0; i < len; ++i) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT min=4 max=4096
    c = kCrcTable.e[(c ^ data[i]) & 0xFFu] ^ (c >> 8);
  }
  return ~c;
}

}  // namespace vslhls
