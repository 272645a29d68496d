// Internals of the BCH codec shared by bch.cc (the C++ API) and bch_kernels.cc (the HLS
// top functions): GF(2^13) tables, the generator polynomial, the 32-bit parallel LFSR and
// the decoder, as templates on t. Not part of the API. Loops are labelled and carry their
// HLS pragmas; g++ builds these files with -Wno-unknown-pragmas for that reason alone.
// The tables are constexpr, so an HLS build sees them as ROM contents.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>

#include "hls/bch.h"
#include "hls/hls_types.h"

namespace vslhls::detail {

// ---- GF(2^13) ----

struct GfTables {
  uint16_t exp[2 * kBchN + 2];  // doubled: exp[a + b] needs no reduction for a, b < N
  uint16_t log[kBchN + 1];      // log[0] unused
};

constexpr GfTables MakeGf() {
  GfTables g{};
  uint32_t x = 1;
  for (int i = 0; i < kBchN; ++i) {
    g.exp[i] = static_cast<uint16_t>(x);
    g.exp[i + kBchN] = static_cast<uint16_t>(x);
    g.log[x] = static_cast<uint16_t>(i);
    x <<= 1;
    if (x & (1u << kBchM)) x ^= kBchPrimitivePoly;
  }
  g.exp[2 * kBchN] = g.exp[0];
  g.exp[2 * kBchN + 1] = g.exp[1];
  return g;
}
inline constexpr GfTables kGf = MakeGf();

constexpr uint16_t Mul(uint16_t a, uint16_t b) {
  return (a == 0 || b == 0) ? 0 : kGf.exp[kGf.log[a] + kGf.log[b]];
}
constexpr uint16_t Inv(uint16_t a) { return kGf.exp[kBchN - kGf.log[a]]; }

// ---- generator polynomial: product of the minimal polynomials of alpha^j, j odd < 2t ----

struct BinPoly {
  uint64_t w[4] = {0, 0, 0, 0};  // bit i = coefficient of x^i (degree <= 255)
  int degree = 0;
  constexpr bool bit(int i) const { return (w[i / 64] >> (i % 64)) & 1u; }
  constexpr void flip(int i) { w[i / 64] ^= uint64_t{1} << (i % 64); }
};

constexpr BinPoly MakeGenerator(int t) {
  BinPoly g;
  g.flip(0);
  bool covered[2 * kBchMaxT + 1] = {};
  for (int j = 1; j < 2 * t; j += 2) {
    if (covered[j]) continue;
    // Minimal polynomial of alpha^j: prod over its cyclotomic coset of (x + alpha^c).
    uint16_t m[kBchM + 2] = {1};
    int md = 0;
    int c = j;
    do {
      if (c <= 2 * t) covered[c] = true;
      const uint16_t a = kGf.exp[c];
      for (int k = md + 1; k >= 1; --k) m[k] = static_cast<uint16_t>(m[k - 1] ^ Mul(m[k], a));
      m[0] = Mul(m[0], a);
      ++md;
      c = (c * 2) % kBchN;
    } while (c != j);
    // Its coefficients are 0 or 1; multiply g by it.
    BinPoly r;
    for (int k = 0; k <= md; ++k) {
      if (m[k] == 0) continue;
      for (int i = 0; i <= g.degree; ++i) {
        if (g.bit(i)) r.flip(i + k);
      }
    }
    r.degree = g.degree + md;
    g = r;
  }
  return g;
}

template <int T>
struct Code {
  static constexpr int R = BchParityBits(T);
  static constexpr int kWords = (R + 63) / 64;
  static constexpr BinPoly kGen = MakeGenerator(T);
  static_assert(kGen.degree == R, "g(x) has degree 13t for GF(2^13)");

  // The parallel LFSR takes kLanes bytes (32 bits) per cycle: lane j's table holds
  // v(x) * x^(R + 8j) mod g(x), so the four lookups of a step are independent and XOR
  // together. Lane 0 alone is the 8-bit step (for a message's last 0-3 bytes).
  static constexpr int kLanes = 4;
  struct Table {
    uint64_t e[kLanes][256][kWords];
  };
  static constexpr Table MakeTable() {
    Table tab{};
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int v = 0; v < 256; ++v) {
        uint64_t rem[4] = {0, 0, 0, 0};
        for (int b = 7 + 8 * lane; b >= 0; --b) {  // v's bits, then 8 * lane zero bits
          const bool top = (rem[(R - 1) / 64] >> ((R - 1) % 64)) & 1u;
          const bool in = b >= 8 * lane && ((v >> (b - 8 * lane)) & 1) != 0;
          for (int w = 3; w >= 1; --w) rem[w] = (rem[w] << 1) | (rem[w - 1] >> 63);
          rem[0] <<= 1;
          if (R % 64 != 0) rem[(R - 1) / 64] &= (uint64_t{1} << (R % 64)) - 1;
          if (top != in) {
            for (int w = 0; w < 4; ++w) rem[w] ^= kGen.w[w];  // g(x) - x^R: drop bit R
            rem[R / 64] ^= uint64_t{1} << (R % 64);
          }
        }
        for (int w = 0; w < kWords; ++w) tab.e[lane][v][w] = rem[w];
      }
    }
    return tab;
  }
  static constexpr Table kLfsr = MakeTable();

  using State = ap_uint<R>;

  // The same tables as ap_uint<R> values (the ROMs the LFSR reads each cycle).
  struct StateTable {
    State e[kLanes][256];
  };
  static constexpr StateTable MakeStateTable() {
    StateTable tab{};
    for (int lane = 0; lane < kLanes; ++lane) {
      for (int v = 0; v < 256; ++v) {
        for (int w = 0; w < kWords; ++w) {
          const int hi = (64 * w + 63 < R) ? 64 * w + 63 : R - 1;
          tab.e[lane][v].range(hi, 64 * w) = kLfsr.e[lane][v][w];
        }
      }
    }
    return tab;
  }
  static constexpr StateTable kLfsrState = MakeStateTable();

  // The LFSR over msg: s <- s * x^(8n) + bytes * x^R mod g(x), 32 bits per cycle.
  static State Run(const uint8_t* msg, int len) {
    State s = 0;
    int i = 0;
  lfsr_words:
    for (; i + kLanes <= len; i += kLanes) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT min=128 max=252
      Step4(s, msg + i);
    }
  lfsr_tail:
    for (; i < len; ++i) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT min=0 max=3
      Step(s, msg[i]);
    }
    return s;
  }
  static void Step4(State& s, const uint8_t* bytes) {
#pragma HLS INLINE
    const uint64_t top = s.range(R - 1, R - 32);
    const unsigned u0 = static_cast<unsigned>((top >> 24) & 0xFF) ^ bytes[0];
    const unsigned u1 = static_cast<unsigned>((top >> 16) & 0xFF) ^ bytes[1];
    const unsigned u2 = static_cast<unsigned>((top >> 8) & 0xFF) ^ bytes[2];
    const unsigned u3 = static_cast<unsigned>(top & 0xFF) ^ bytes[3];
    s <<= 32;
    s ^= kLfsrState.e[3][u0] ^ kLfsrState.e[2][u1] ^ kLfsrState.e[1][u2] ^ kLfsrState.e[0][u3];
  }
  static void Step(State& s, unsigned byte) {
#pragma HLS INLINE
    const unsigned idx = static_cast<unsigned>(s.range(R - 1, R - 8)) ^ byte;
    s <<= 8;
    s ^= kLfsrState.e[0][idx];
  }

  static void StoreParity(const State& s, uint8_t* parity) {
  store_parity:
    for (int j = 0; j < BchParityBytes(T); ++j) {
#pragma HLS UNROLL
      const int hi = R - 1 - 8 * j;
      const int lo = hi - 7 >= 0 ? hi - 7 : 0;
      parity[j] = static_cast<uint8_t>(s.range(hi, lo) << (7 - (hi - lo)));
    }
  }
  static State LoadParity(const uint8_t* parity) {
    State p = 0;
  load_parity:
    for (int j = 0; j < BchParityBytes(T); ++j) {
#pragma HLS UNROLL
      const int hi = R - 1 - 8 * j;
      const int lo = hi - 7 >= 0 ? hi - 7 : 0;
      p.range(hi, lo) = static_cast<uint64_t>(parity[j] >> (7 - (hi - lo)));
    }
    return p;
  }

  static BchResult Decode(uint8_t* msg, int len, uint8_t* parity) {
    BchResult res;
    if (len < 1 || len > BchMaxMessageBytes(T)) {
      res.status = BchStatus::kUncorrectable;
      return res;
    }
    const State rem = Run(msg, len) ^ LoadParity(parity);
    if (!rem.or_reduce()) return res;  // a codeword: clean

    // Erased page: at most t zero bits among message and parity (padding excluded).
    int zeros = 0;
  count_zeros:
    for (int i = 0; i < len && zeros <= T; ++i) {
#pragma HLS PIPELINE II=1
      zeros += 8 - __builtin_popcount(msg[i]);
    }
    const State p = LoadParity(parity);
  count_parity_zeros:
    for (int i = 0; i < R; ++i) {
#pragma HLS UNROLL factor=8
      zeros += p.test(i) ? 0 : 1;
    }
    if (zeros <= T) {
    fill_erased:
      for (int i = 0; i < len; ++i) {
#pragma HLS PIPELINE II=1
        msg[i] = 0xFF;
      }
      for (int j = 0; j < BchParityBytes(T); ++j) parity[j] = 0xFF;
      res.status = BchStatus::kErased;
      res.bits = static_cast<uint16_t>(zeros);
      return res;
    }

    // Syndromes S_j = rem(alpha^j), j = 1..2t (even ones by squaring: binary code).
    uint16_t syn[2 * T + 1] = {};
  syndromes_odd:
    for (int i = 0; i < R; ++i) {
#pragma HLS PIPELINE II=1
      if (!rem.test(i)) continue;
    syndromes_per_bit:
      for (int j = 1; j < 2 * T; j += 2) {
#pragma HLS UNROLL
        syn[j] ^= kGf.exp[(i * j) % kBchN];
      }
    }
  syndromes_even:
    for (int j = 2; j <= 2 * T; j += 2) {
#pragma HLS PIPELINE II=1
      syn[j] = Mul(syn[j / 2], syn[j / 2]);
    }

    // Berlekamp-Massey: the shortest LFSR (error locator lambda) generating S_1..S_2t.
    uint16_t lambda[2 * T + 2] = {1};
    uint16_t prev[2 * T + 2] = {1};
    int l = 0, shift = 1;
    uint16_t b = 1;
  berlekamp_massey:
    for (int n = 0; n < 2 * T; ++n) {
#pragma HLS PIPELINE II=4
      uint16_t d = syn[n + 1];
    bm_discrepancy:
      for (int i = 1; i <= l; ++i) d ^= Mul(lambda[i], syn[n + 1 - i]);
      if (d == 0) {
        ++shift;
        continue;
      }
      const uint16_t coef = Mul(d, Inv(b));
      uint16_t saved[2 * T + 2];
    bm_save:
      for (int i = 0; i < 2 * T + 2; ++i) saved[i] = lambda[i];
    bm_update:
      for (int i = 0; i + shift < 2 * T + 2; ++i) lambda[i + shift] ^= Mul(coef, prev[i]);
      if (2 * l <= n) {
        l = n + 1 - l;
      bm_keep:
        for (int i = 0; i < 2 * T + 2; ++i) prev[i] = saved[i];
        b = d;
        shift = 1;
      } else {
        ++shift;
      }
    }
    if (l > T) {
      res.status = BchStatus::kUncorrectable;
      return res;
    }

    // Chien search over the shortened code's degrees 0..n-1: an error at degree d makes
    // lambda(alpha^-d) zero. Terms are kept as logarithms, each step multiplying term k
    // by alpha^-k.
    const int n = 8 * len + R;
    int lg[T + 1] = {};
    bool nz[T + 1] = {};
  chien_init:
    for (int k = 1; k <= l; ++k) {
      nz[k] = lambda[k] != 0;
      lg[k] = nz[k] ? kGf.log[lambda[k]] : 0;
    }
    int found = 0;
    int where[T] = {};
  chien_search:
    // A locator of degree l has at most l roots: the search ends at the l-th.
    for (int d = 0; d < n && found < l; ++d) {
#pragma HLS PIPELINE II=1
#pragma HLS LOOP_TRIPCOUNT min=4200 max=8191
      uint16_t sum = 1;
    chien_terms:
      for (int k = 1; k <= l; ++k) {
#pragma HLS UNROLL
        if (nz[k]) {
          sum ^= kGf.exp[lg[k]];
          lg[k] -= k;
          if (lg[k] < 0) lg[k] += kBchN;
        }
      }
      if (sum == 0) where[found++] = d;
    }
    if (found != l) {
      res.status = BchStatus::kUncorrectable;
      return res;
    }
  correct:
    for (int e = 0; e < l; ++e) {
      const int d = where[e];
      if (d < R) {
        const int pbit = R - 1 - d;  // parity bit index from the MSB of byte 0
        parity[pbit / 8] ^= static_cast<uint8_t>(0x80u >> (pbit % 8));
      } else {
        const int mbit = n - 1 - d;
        msg[mbit / 8] ^= static_cast<uint8_t>(0x80u >> (mbit % 8));
      }
    }
    res.status = BchStatus::kCorrected;
    res.bits = static_cast<uint16_t>(l);
    return res;
  }
};

}  // namespace vslhls::detail
