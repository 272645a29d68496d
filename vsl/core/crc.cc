#include "vsl/core/crc.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
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
// x^e mod P.
constexpr uint32_t XPowBits(uint64_t e) {
  uint32_t result = 1u << 31;  // x^0
  uint32_t sq = 1u << 30;      // x^1, squared per bit of the exponent
  for (; e != 0; e >>= 1) {
    if (e & 1) result = MulModP(sq, result);
    sq = MulModP(sq, sq);
  }
  return result;
}
constexpr uint32_t XPow8n(uint64_t bytes) { return XPowBits(bytes * 8); }

#if defined(__x86_64__)
// Stream lengths of the interleaved loop: the crc32 instruction has a latency of three
// cycles and a throughput of one, so three independent streams keep it busy. A 4 KiB
// sector is 3 x 1360 bytes and 16 more; a 512 B sector 3 x 168 and 8 more.
constexpr std::size_t kLong = 1360, kShort = 168;
constexpr uint32_t kLongX1 = XPow8n(kLong), kLongX2 = XPow8n(2 * kLong);
constexpr uint32_t kShortX1 = XPow8n(kShort), kShortX2 = XPow8n(2 * kShort);

#define VSL_SSE42 __attribute__((target("sse4.2")))
#define VSL_CLMUL __attribute__((target("sse4.2,pclmul")))
#define VSL_CLMUL256 __attribute__((target("sse4.2,pclmul,avx2,vpclmulqdq")))
#define VSL_CLMUL512 __attribute__((target("sse4.2,pclmul,avx512f,avx512vl,vpclmulqdq")))

VSL_SSE42 inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  __builtin_memcpy(&v, p, 8);
  return v;
}

// Three streams of `blk` bytes side by side while the buffer holds them; advances p, len.
VSL_SSE42 uint64_t Three(uint64_t c, const uint8_t*& p, std::size_t& len, std::size_t blk, uint32_t x1,
                         uint32_t x2) {
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

// The crc32 instruction over what is left of the buffer, 8 bytes then 1 at a time; copies
// those bytes to d when d is not null. c is the raw register (not inverted).
VSL_SSE42 __attribute__((always_inline)) inline uint32_t Tail(uint64_t c, uint8_t* d, const uint8_t* p,
                                                               std::size_t len) {
  for (; len >= 8; p += 8, len -= 8) {
    const uint64_t v = Load64(p);
    if (d != nullptr) {
      __builtin_memcpy(d, &v, 8);
      d += 8;
    }
    c = _mm_crc32_u64(c, v);
  }
  uint32_t c32 = static_cast<uint32_t>(c);
  for (; len > 0; --len) {
    if (d != nullptr) *d++ = *p;
    c32 = _mm_crc32_u8(c32, *p++);
  }
  return c32;
}

VSL_SSE42 uint32_t Crc32cHardware(const void* data, std::size_t len, uint32_t crc) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t c = ~crc;
  c = Three(c, p, len, kLong, kLongX1, kLongX2);
  c = Three(c, p, len, kShort, kShortX1, kShortX2);
  return ~Tail(c, nullptr, p, len);
}
uint32_t Crc32cCopyHardware(void* dst, const void* src, std::size_t len, uint32_t crc) {
  if (len != 0) std::memcpy(dst, src, len);
  return Crc32cHardware(src, len, crc);
}

// Folding with carry-less multiplication (PCLMULQDQ). A 16-byte block B, loaded little-endian
// into a vector, is the polynomial H * x^64 + L, where H is its first 8 bytes and L its last
// 8, each read in the reflected order (bit i of the quadword is x^(63-i)). Moving B forward
// by `bits` multiplies it by x^bits; modulo P that is
//   H * (x^(bits+64) mod P) + L * (x^bits mod P),
// a polynomial under 96 bits. The carry-less product of two reflected quadwords comes out as
// the true product times x, so the multipliers kept are x^(bits+63) and x^(bits-1): each
// under 32 bits, held in the top half of its quadword. The folded block is XORed into the
// block that stands `bits` later, and the last one left, X, gives the CRC register as
// X * x^32 mod P: the crc32 instruction over X's two quadwords from a zero register.
struct FoldConst {
  uint64_t h, l;  // multipliers of the block's first and last quadwords
};
constexpr FoldConst FoldBy(uint64_t bits) {
  return {uint64_t{XPowBits(bits + 63)} << 32, uint64_t{XPowBits(bits - 1)} << 32};
}
constexpr FoldConst k128 = FoldBy(128), k256 = FoldBy(256), k384 = FoldBy(384);

VSL_CLMUL inline __m128i K(FoldConst k) {
  return _mm_set_epi64x(static_cast<long long>(k.l), static_cast<long long>(k.h));
}
VSL_CLMUL inline __m128i Fold128(__m128i b, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(b, k, 0x00), _mm_clmulepi64_si128(b, k, 0x11));
}
// Loads 16 bytes and, in the copying variant, stores them to d.
// (d is null in the other; the offset is applied only where it is used.)
template <bool kCopy>
VSL_CLMUL inline __m128i Load128(const uint8_t* p, uint8_t* d, std::size_t off = 0) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + off));
  if constexpr (kCopy) _mm_storeu_si128(reinterpret_cast<__m128i*>(d + off), v);
  return v;
}
// From the last folded block x to the finished CRC: whole 16-byte blocks folded in, then
// the register, then the bytes left through the crc32 instruction.
template <bool kCopy>
VSL_CLMUL uint32_t Finish(__m128i x, uint8_t* d, const uint8_t* p, std::size_t len) {
  const __m128i f128 = K(k128);
  for (; len >= 16; p += 16, d += kCopy ? 16 : 0, len -= 16) x = _mm_xor_si128(Fold128(x, f128), Load128<kCopy>(p, d));
  uint64_t c = _mm_crc32_u64(0, static_cast<uint64_t>(_mm_cvtsi128_si64(x)));
  c = _mm_crc32_u64(c, static_cast<uint64_t>(_mm_extract_epi64(x, 1)));
  return ~Tail(c, kCopy ? d : nullptr, p, len);
}

// Wide folding: four vectors of V::kBytes a step, each 16-byte lane carried 4 x kBytes
// bytes forward; then the four vectors folded into one, and its lanes into one block (V
// knows its lane count). len >= 4 * V::kBytes. V is a vector width's operations (Zmm:
// AVX-512, Ymm: AVX2); the body is inlined into a wrapper with that width's target.
// (Folding 16-byte vectors alone, PCLMULQDQ without either, was measured slower here than
// the crc32 instruction's three streams: 358 against 239 ns per 4 KiB.)
// (GCC warns that a wide vector passed without the width's target changes the ABI: FoldWide
// is always inlined into a wrapper that has it, so no call crosses that boundary.)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"
template <class V, bool kCopy>
__attribute__((always_inline)) inline uint32_t FoldWide(uint8_t* d, const uint8_t* p, std::size_t len, uint32_t crc) {
  constexpr std::size_t B = V::kBytes, kBits = 8 * B;
  constexpr FoldConst kStep = FoldBy(4 * kBits), k3 = FoldBy(3 * kBits), k2 = FoldBy(2 * kBits), k1 = FoldBy(kBits);
  typename V::T v0 = V::Xor(V::template Load<kCopy>(p, d, 0), V::Seed(~crc));
  typename V::T v1 = V::template Load<kCopy>(p, d, B), v2 = V::template Load<kCopy>(p, d, 2 * B);
  typename V::T v3 = V::template Load<kCopy>(p, d, 3 * B);
  for (p += 4 * B, d += kCopy ? 4 * B : 0, len -= 4 * B; len >= 4 * B; p += 4 * B, d += kCopy ? 4 * B : 0, len -= 4 * B) {
    v0 = V::Fold(v0, kStep, V::template Load<kCopy>(p, d, 0));
    v1 = V::Fold(v1, kStep, V::template Load<kCopy>(p, d, B));
    v2 = V::Fold(v2, kStep, V::template Load<kCopy>(p, d, 2 * B));
    v3 = V::Fold(v3, kStep, V::template Load<kCopy>(p, d, 3 * B));
  }
  typename V::T v = V::Fold(v0, k3, V::Fold(v1, k2, V::Fold(v2, k1, v3)));
  for (; len >= B; p += B, d += kCopy ? B : 0, len -= B) v = V::Fold(v, k1, V::template Load<kCopy>(p, d, 0));
  return Finish<kCopy>(V::Lanes(v), d, p, len);
}
#pragma GCC diagnostic pop

struct Zmm {
  using T = __m512i;
  static constexpr std::size_t kBytes = 64;
  template <bool kCopy>
  VSL_CLMUL512 static T Load(const uint8_t* p, uint8_t* d, std::size_t off) {
    const T v = _mm512_loadu_si512(p + off);
    if constexpr (kCopy) _mm512_storeu_si512(d + off, v);
    return v;
  }
  VSL_CLMUL512 static T Xor(T a, T b) { return _mm512_xor_si512(a, b); }
  VSL_CLMUL512 static T Seed(uint32_t c) { return _mm512_zextsi128_si512(_mm_cvtsi32_si128(static_cast<int>(c))); }
  VSL_CLMUL512 static T Fold(T b, FoldConst k, T next) {
    const auto h = static_cast<long long>(k.h), l = static_cast<long long>(k.l);
    const T kk = _mm512_set_epi64(l, h, l, h, l, h, l, h);
    return _mm512_ternarylogic_epi64(_mm512_clmulepi64_epi128(b, kk, 0x00), _mm512_clmulepi64_epi128(b, kk, 0x11),
                                     next, 0x96);
  }
  // Four lanes into one block. (The masked extract: GCC 12's plain one warns of an
  // uninitialised operand.)
  VSL_CLMUL512 static __m128i Lanes(T z) {
    return _mm_xor_si128(_mm_xor_si128(Fold128(_mm512_maskz_extracti32x4_epi32(0xF, z, 0), K(k384)),
                                       Fold128(_mm512_maskz_extracti32x4_epi32(0xF, z, 1), K(k256))),
                         _mm_xor_si128(Fold128(_mm512_maskz_extracti32x4_epi32(0xF, z, 2), K(k128)),
                                       _mm512_maskz_extracti32x4_epi32(0xF, z, 3)));
  }
};
struct Ymm {
  using T = __m256i;
  static constexpr std::size_t kBytes = 32;
  template <bool kCopy>
  VSL_CLMUL256 static T Load(const uint8_t* p, uint8_t* d, std::size_t off) {
    const T v = _mm256_loadu_si256(reinterpret_cast<const T*>(p + off));
    if constexpr (kCopy) _mm256_storeu_si256(reinterpret_cast<T*>(d + off), v);
    return v;
  }
  VSL_CLMUL256 static T Xor(T a, T b) { return _mm256_xor_si256(a, b); }
  VSL_CLMUL256 static T Seed(uint32_t c) { return _mm256_set_epi64x(0, 0, 0, c); }
  VSL_CLMUL256 static T Fold(T b, FoldConst k, T next) {
    const auto h = static_cast<long long>(k.h), l = static_cast<long long>(k.l);
    const T kk = _mm256_set_epi64x(l, h, l, h);
    return _mm256_xor_si256(
        _mm256_xor_si256(_mm256_clmulepi64_epi128(b, kk, 0x00), _mm256_clmulepi64_epi128(b, kk, 0x11)), next);
  }
  // Two lanes into one block.
  VSL_CLMUL256 static __m128i Lanes(T y) {
    return _mm_xor_si128(Fold128(_mm256_castsi256_si128(y), K(k128)), _mm256_extracti128_si256(y, 1));
  }
};
template <bool kCopy>
VSL_CLMUL512 uint32_t FoldAvx512(uint8_t* d, const uint8_t* p, std::size_t len, uint32_t crc) {
  return FoldWide<Zmm, kCopy>(d, p, len, crc);
}
template <bool kCopy>
VSL_CLMUL256 uint32_t FoldAvx2(uint8_t* d, const uint8_t* p, std::size_t len, uint32_t crc) {
  return FoldWide<Ymm, kCopy>(d, p, len, crc);
}

// Short buffers go to the crc32 instruction, which needs no set-up.
uint32_t Crc32cAvx512(const void* data, std::size_t len, uint32_t crc) {
  if (len < 256) return Crc32cHardware(data, len, crc);
  return FoldAvx512<false>(nullptr, static_cast<const uint8_t*>(data), len, crc);
}
uint32_t Crc32cCopyAvx512(void* dst, const void* src, std::size_t len, uint32_t crc) {
  if (len < 256) return Crc32cCopyHardware(dst, src, len, crc);
  return FoldAvx512<true>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), len, crc);
}
uint32_t Crc32cAvx2(const void* data, std::size_t len, uint32_t crc) {
  if (len < 256) return Crc32cHardware(data, len, crc);
  return FoldAvx2<false>(nullptr, static_cast<const uint8_t*>(data), len, crc);
}
uint32_t Crc32cCopyAvx2(void* dst, const void* src, std::size_t len, uint32_t crc) {
  if (len < 256) return Crc32cCopyHardware(dst, src, len, crc);
  return FoldAvx2<true>(static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(src), len, crc);
}
#endif  // __x86_64__

uint32_t Crc32cCopySoftware(void* dst, const void* src, std::size_t len, uint32_t crc) {
  if (len != 0) std::memcpy(dst, src, len);
  return Crc32cSoftware(src, len, crc);
}

std::vector<Crc32cKernel> FindKernels() {
  std::vector<Crc32cKernel> k;
#if defined(__x86_64__)
  const bool sse42 = __builtin_cpu_supports("sse4.2"), clmul = sse42 && __builtin_cpu_supports("pclmul");
  if (clmul && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("vpclmulqdq")) {
    k.push_back({"avx512-vpclmulqdq", Crc32cAvx512, Crc32cCopyAvx512});
  }
  if (clmul && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("vpclmulqdq")) {
    k.push_back({"avx2-vpclmulqdq", Crc32cAvx2, Crc32cCopyAvx2});
  }
  if (sse42) k.push_back({"sse4.2-crc32", Crc32cHardware, Crc32cCopyHardware});
#endif
  k.push_back({"software", Crc32cSoftware, Crc32cCopySoftware});
  return k;
}
// The kernel in use: the first listed, or the one VSL_CRC32C names (to compare kernels in
// one benchmark run). A function-local static, so that callers in other translation units'
// static initialisers find it ready.
const Crc32cKernel& Best() {
  static const Crc32cKernel best = [] {
    const auto& all = Crc32cKernels();
    if (const char* want = std::getenv("VSL_CRC32C"); want != nullptr) {
      for (const auto& k : all) {
        if (std::strcmp(k.name, want) == 0) return k;
      }
    }
    return all.front();
  }();
  return best;
}

// Crc32c and Crc32cCopy call through these pointers: constant-initialised to resolvers
// that pick the kernel on the first call (so callers in other translation units' static
// initialisers are served), then a plain load and an indirect call.
uint32_t ResolveCrc(const void* data, std::size_t len, uint32_t crc);
uint32_t ResolveCopy(void* dst, const void* src, std::size_t len, uint32_t crc);
std::atomic<uint32_t (*)(const void*, std::size_t, uint32_t)> g_crc{ResolveCrc};
std::atomic<uint32_t (*)(void*, const void*, std::size_t, uint32_t)> g_copy{ResolveCopy};
uint32_t ResolveCrc(const void* data, std::size_t len, uint32_t crc) {
  const auto fn = Best().crc;
  g_crc.store(fn, std::memory_order_relaxed);
  return fn(data, len, crc);
}
uint32_t ResolveCopy(void* dst, const void* src, std::size_t len, uint32_t crc) {
  const auto fn = Best().copy;
  g_copy.store(fn, std::memory_order_relaxed);
  return fn(dst, src, len, crc);
}

}  // namespace

const std::vector<Crc32cKernel>& Crc32cKernels() {
  static const std::vector<Crc32cKernel> kernels = FindKernels();
  return kernels;
}

const char* Crc32cKernelName() { return Best().name; }

uint32_t Crc32c(const void* data, std::size_t len, uint32_t crc) {
  return g_crc.load(std::memory_order_relaxed)(data, len, crc);
}

uint32_t Crc32cCopy(void* dst, const void* src, std::size_t len, uint32_t crc) {
  return g_copy.load(std::memory_order_relaxed)(dst, src, len, crc);
}

}  // namespace vsl
