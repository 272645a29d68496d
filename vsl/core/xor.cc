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
// From byte i on: 64 bytes a step in 16-byte vectors (SSE2 on x86-64, NEON on ARM), then
// words, then bytes.
void XorRest(uint8_t* dst, const uint8_t* src, std::size_t n, std::size_t i) {
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
void XorPlain(uint8_t* dst, const uint8_t* src, std::size_t n) { XorRest(dst, src, n, 0); }
#if defined(__x86_64__)
// 128 bytes a step with AVX2, 256 with AVX-512, then the rest.
__attribute__((target("avx2"))) void XorAvx2(uint8_t* dst, const uint8_t* src, std::size_t n) {
  XorRest(dst, src, n, XorVectors<32>(dst, src, n));
}
__attribute__((target("avx512f"))) void XorAvx512(uint8_t* dst, const uint8_t* src, std::size_t n) {
  XorRest(dst, src, n, XorVectors<64>(dst, src, n));
}
// Chosen once, at start-up.
const bool kHaveAvx2 = __builtin_cpu_supports("avx2"), kHaveAvx512 = __builtin_cpu_supports("avx512f");
#endif
}  // namespace

void XorInto(uint8_t* dst, const uint8_t* src, std::size_t n) {
#if defined(__x86_64__)
  if (kHaveAvx512) return XorAvx512(dst, src, n);
  if (kHaveAvx2) return XorAvx2(dst, src, n);
#endif
  XorPlain(dst, src, n);
}

const std::vector<XorKernel>& XorKernels() {
  static const std::vector<XorKernel> kernels = [] {
    std::vector<XorKernel> k;
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx512f")) k.push_back({"avx512", XorAvx512});
    if (__builtin_cpu_supports("avx2")) k.push_back({"avx2", XorAvx2});
#endif
    k.push_back({"plain", XorPlain});
    return k;
  }();
  return kernels;
}

}  // namespace vsl
