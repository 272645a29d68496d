// XorInto (xor.h): vectorised where the CPU allows.
#include "vsl/core/xor.h"

#include <cstring>

namespace vsl {

namespace {
// XORs `src` into `dst` four vectors of `Bytes` bytes a step, for as long as whole steps
// fit; returns the bytes done. Inlined into each caller, so it takes the caller's target.
template <std::size_t Bytes>
__attribute__((always_inline)) inline std::size_t XorVectors(uint8_t* dst, const uint8_t* src, std::size_t n) {
  typedef uint64_t V __attribute__((vector_size(Bytes)));
  std::size_t i = 0;
  for (; i + 4 * Bytes <= n; i += 4 * Bytes) {
    V a[4], b[4];
    std::memcpy(a, dst + i, 4 * Bytes);
    std::memcpy(b, src + i, 4 * Bytes);
    for (int k = 0; k < 4; ++k) a[k] ^= b[k];
    std::memcpy(dst + i, a, 4 * Bytes);
  }
  return i;
}
#if defined(__x86_64__)
__attribute__((target("avx2"))) std::size_t XorAvx2(uint8_t* dst, const uint8_t* src, std::size_t n) {
  return XorVectors<32>(dst, src, n);
}
__attribute__((target("avx512f"))) std::size_t XorAvx512(uint8_t* dst, const uint8_t* src, std::size_t n) {
  return XorVectors<64>(dst, src, n);
}
// Chosen once, at start-up.
const bool kHaveAvx2 = __builtin_cpu_supports("avx2"), kHaveAvx512 = __builtin_cpu_supports("avx512f");
#endif
}  // namespace

void XorInto(uint8_t* dst, const uint8_t* src, std::size_t n) {
  // 256 bytes a step with AVX-512 where the CPU has it, else 128 with AVX2, then 64
  // bytes a step in 16-byte vectors (SSE2 on x86-64, NEON on ARM); then words, bytes.
  std::size_t i = 0;
#if defined(__x86_64__)
  if (kHaveAvx512) {
    i = XorAvx512(dst, src, n);
  } else if (kHaveAvx2) {
    i = XorAvx2(dst, src, n);
  }
#endif
  i += XorVectors<16>(dst + i, src + i, n - i);
  for (; i + 8 <= n; i += 8) {
    uint64_t a, b;
    std::memcpy(&a, dst + i, 8);
    std::memcpy(&b, src + i, 8);
    a ^= b;
    std::memcpy(dst + i, &a, 8);
  }
  for (; i < n; ++i) dst[i] ^= src[i];
}

}  // namespace vsl
