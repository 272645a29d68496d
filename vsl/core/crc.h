// Checksums used by on-flash and on-wire formats.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vsl {

// CRC-16 as ONFI defines it for the parameter page: polynomial 0x8005 (x^16+x^15+x^2+1),
// initial value 0x4F4E, MSB first, no reflection, no final XOR.
uint16_t Crc16Onfi(const void* data, std::size_t len, uint16_t crc = 0x4F4E);

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the check for every host-written
// on-flash structure. Standard form: initial ~0, final ~0; Crc32c("123456789") = 0xE3069283.
// `crc` chains calls: Crc32c(b, n2, Crc32c(a, n1)) == Crc32c(a||b).
// On x86-64 with SSE4.2 the crc32 instruction computes it (three streams side by side,
// joined by GF(2) multiplication); elsewhere the table-driven Crc32cSoftware. Both give
// the same values.
uint32_t Crc32c(const void* data, std::size_t len, uint32_t crc = 0);
uint32_t Crc32cSoftware(const void* data, std::size_t len, uint32_t crc = 0);
bool Crc32cIsHardware();

}  // namespace vsl
