// CRC-32C kernel (Castagnoli, reflected polynomial 0x82F63B78, initial ~0, final ~0): the
// check every host-written sector header carries. Same function and chaining rule as
// vsl::Crc32c: Crc32cUpdate(b, n2, Crc32cUpdate(a, n1, 0)) == CRC of a||b. One byte per
// cycle through a 256-entry ROM; vsl_crc32c (kernels.cc) is the HLS top.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>

namespace vslhls {

inline constexpr uint32_t kCrc32cPoly = 0x82F63B78;  // reflected

uint32_t Crc32cUpdate(const uint8_t* data, int len, uint32_t crc = 0);

}  // namespace vslhls
