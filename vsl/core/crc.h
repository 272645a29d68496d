// Checksums used by on-flash and on-wire formats.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vsl {

// CRC-16 as ONFI defines it for the parameter page: polynomial 0x8005 (x^16+x^15+x^2+1),
// initial value 0x4F4E, MSB first, no reflection, no final XOR.
uint16_t Crc16Onfi(const void* data, std::size_t len, uint16_t crc = 0x4F4E);

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the check for every host-written
// on-flash structure. Standard form: initial ~0, final ~0; Crc32c("123456789") = 0xE3069283.
// `crc` chains calls: Crc32c(b, n2, Crc32c(a, n1)) == Crc32c(a||b).
// The kernel is chosen once, at start-up, the fastest this CPU runs: on x86-64 carry-less
// multiplication folding 64-byte vectors (AVX-512 VPCLMULQDQ) or 32-byte ones (AVX2
// VPCLMULQDQ), then the crc32 instruction (SSE4.2, three streams side by side), else the
// table-driven Crc32cSoftware. All give the same values; buffers under 256 bytes take the
// crc32 instruction where there is one.
// (Valgrind has no AVX-512: under callgrind the crc32 kernel runs.)
uint32_t Crc32c(const void* data, std::size_t len, uint32_t crc = 0);
uint32_t Crc32cSoftware(const void* data, std::size_t len, uint32_t crc = 0);

// Copies len bytes from src to dst (which must not overlap) and returns
// Crc32c(src, len, crc): with a folding kernel, in one pass over the data.
uint32_t Crc32cCopy(void* dst, const void* src, std::size_t len, uint32_t crc = 0);

// The kernels this CPU can run, fastest first (tests and benchmarks run each), and the name
// of the one in use: the first, unless the environment variable VSL_CRC32C names another.
struct Crc32cKernel {
  const char* name;
  uint32_t (*crc)(const void* data, std::size_t len, uint32_t crc);
  uint32_t (*copy)(void* dst, const void* src, std::size_t len, uint32_t crc);
};
const std::vector<Crc32cKernel>& Crc32cKernels();
const char* Crc32cKernelName();

}  // namespace vsl
