// A slow, independent reference for the BCH codec: GF(2^13) arithmetic by shift-and-add
// (no tables), the generator polynomial as the product of minimal polynomials built here,
// and a bit-serial encoder that divides m(x) * x^(13t) by g(x) one bit at a time. Shares
// nothing with hls/ but the code's definition (bch.h: field polynomial, bit order).
#pragma once

#include <cstdint>
#include <set>
#include <vector>

namespace vsl::testing::bchref {

constexpr int kM = 13;
constexpr int kN = (1 << kM) - 1;
constexpr uint32_t kPoly = 0x201B;

inline uint16_t Mul(uint16_t a, uint16_t b) {
  uint32_t r = 0, x = a;
  for (int i = 0; i < kM; ++i) {
    if ((b >> i) & 1) r ^= x;
    x <<= 1;
    if (x & (1u << kM)) x ^= kPoly;
  }
  return static_cast<uint16_t>(r);
}
inline uint16_t Pow(uint16_t a, int e) {
  uint16_t r = 1;
  for (int i = 0; i < e; ++i) r = Mul(r, a);
  return r;
}
inline uint16_t Alpha(int e) { return Pow(2, ((e % kN) + kN) % kN); }

// g(x) as coefficients, index = degree.
inline std::vector<uint8_t> Generator(int t) {
  std::vector<uint8_t> g{1};
  std::set<int> done;
  for (int j = 1; j < 2 * t; j += 2) {
    if (done.count(j)) continue;
    std::vector<uint16_t> m{1};  // over GF(2^13)
    int c = j;
    do {
      done.insert(c);
      const uint16_t root = Alpha(c);
      std::vector<uint16_t> next(m.size() + 1, 0);
      for (size_t k = 0; k < m.size(); ++k) {
        next[k + 1] ^= m[k];
        next[k] ^= Mul(m[k], root);
      }
      m = next;
      c = (2 * c) % kN;
    } while (c != j);
    std::vector<uint8_t> r(g.size() + m.size() - 1, 0);
    for (size_t a = 0; a < g.size(); ++a) {
      for (size_t b = 0; b < m.size(); ++b) {
        if (g[a] && m[b] == 1) r[a + b] ^= 1;
      }
    }
    g = r;
  }
  return g;
}

// p(x) = m(x) x^R mod g(x), bit by bit; parity bytes with x^(R-1) in the MSB of byte 0.
inline std::vector<uint8_t> Encode(const std::vector<uint8_t>& g, const uint8_t* msg, int len) {
  const int r = static_cast<int>(g.size()) - 1;
  std::vector<uint8_t> rem(r, 0);  // rem[i] = coefficient of x^i
  for (int i = 0; i < 8 * len; ++i) {
    const int bit = (msg[i / 8] >> (7 - i % 8)) & 1;
    const int fb = rem[r - 1] ^ bit;
    for (int k = r - 1; k >= 1; --k) rem[k] = rem[k - 1];
    rem[0] = 0;
    if (fb) {
      for (int k = 0; k < r; ++k) rem[k] ^= g[k];
    }
  }
  std::vector<uint8_t> parity((r + 7) / 8, 0);
  for (int j = 0; j < r; ++j) {
    if (rem[r - 1 - j]) parity[j / 8] |= static_cast<uint8_t>(0x80u >> (j % 8));
  }
  return parity;
}

// Evaluates a binary polynomial (index = degree) at alpha^e.
inline uint16_t Eval(const std::vector<uint8_t>& p, int e) {
  uint16_t acc = 0;
  for (size_t i = p.size(); i-- > 0;) acc = static_cast<uint16_t>(Mul(acc, Alpha(e)) ^ p[i]);
  return acc;
}

}  // namespace vsl::testing::bchref
