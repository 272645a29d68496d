// Rng: the seeded, deterministic random source used by everything that randomizes.
//
// xoshiro256** seeded through splitmix64. The same seed gives the same stream on every
// platform and compiler (no std:: distributions are used, since their algorithms differ
// between standard libraries). Fork(k) derives an independent stream, so that a component
// (a die, a pipe) draws from its own sequence and unrelated activity never perturbs it.
// Not thread-safe: one Rng per owner.
#pragma once

#include <cmath>
#include <cstdint>

#include "vsl/core/time.h"

namespace vsl {

class Rng {
 public:
  explicit Rng(uint64_t seed) { Seed(seed); }

  void Seed(uint64_t seed) {
    seed_ = seed;
    uint64_t x = seed;
    for (auto& w : s_) w = SplitMix64(x);
  }
  uint64_t seed() const { return seed_; }

  // A new generator whose stream depends only on this generator's seed and `stream`.
  Rng Fork(uint64_t stream) const {
    uint64_t x = seed_ ^ (0x9E3779B97F4A7C15ULL * (stream + 1));
    return Rng(SplitMix64(x));
  }

  uint64_t Next() {
    const uint64_t result = Rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return result;
  }
  uint64_t operator()() { return Next(); }

  // Uniform in [0, n), unbiased (Lemire's method). n must be > 0.
  uint64_t Below(uint64_t n) {
    Uint128 m = static_cast<Uint128>(Next()) * n;
    auto low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<Uint128>(Next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Uniform in [lo, hi] inclusive.
  uint64_t Range(uint64_t lo, uint64_t hi) { return lo + Below(hi - lo + 1); }
  // Uniform double in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  bool Bernoulli(double p) { return p > 0 && (p >= 1 || Uniform() < p); }

  // Number of successes in n trials of probability p. Exact inversion for small means,
  // a rounded normal approximation (clamped to [0, n]) when n*p*(1-p) > 50.
  uint64_t Binomial(uint64_t n, double p);

  // Fill `len` bytes with random data.
  void Fill(void* dst, uint64_t len) {
    auto* p = static_cast<unsigned char*>(dst);
    while (len >= 8) {
      const uint64_t v = Next();
      for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
      p += 8;
      len -= 8;
    }
    if (len > 0) {
      uint64_t v = Next();
      while (len-- > 0) {
        *p++ = static_cast<unsigned char>(v);
        v >>= 8;
      }
    }
  }

 private:
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static uint64_t SplitMix64(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  uint64_t seed_ = 0;
  uint64_t s_[4] = {};
};

// Binomial(n, p) for one (n, p), its constants computed once: each call makes exactly the
// draw Rng::Binomial(n, p) would from the same generator state. For many draws with the
// same n and p (a page read draws once per codeword), where the pow() per draw was most
// of the cost.
class BinomialDist {
 public:
  BinomialDist() = default;
  BinomialDist(uint64_t n, double p) : n_(n), p_(p) {
    if (n == 0 || p <= 0 || p >= 1) return;
    mean_ = static_cast<double>(n) * p;
    var_ = mean_ * (1 - p);
    if (var_ > 50) return;
    const double q = 1 - p;
    ratio_ = p / q;
    pmf0_ = std::pow(q, static_cast<double>(n));
  }
  uint64_t n() const { return n_; }
  double p() const { return p_; }

  uint64_t operator()(Rng& rng) const {
    if (n_ == 0 || p_ <= 0) return 0;
    if (p_ >= 1) return n_;
    if (var_ > 50) {
      // Box-Muller from two uniforms.
      const double u1 = 1.0 - rng.Uniform();
      const double u2 = rng.Uniform();
      const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
      const double x = std::round(mean_ + z * std::sqrt(var_));
      if (x <= 0) return 0;
      if (x >= static_cast<double>(n_)) return n_;
      return static_cast<uint64_t>(x);
    }
    // Inversion: walk the CDF from k = 0 using the pmf recurrence.
    double pmf = pmf0_;
    double u = rng.Uniform();
    uint64_t k = 0;
    while (u > pmf && k < n_) {
      u -= pmf;
      pmf *= ratio_ * static_cast<double>(n_ - k) / static_cast<double>(k + 1);
      ++k;
      if (pmf <= 0) break;
    }
    return k;
  }

 private:
  uint64_t n_ = 0;
  double p_ = 0, mean_ = 0, var_ = 0, ratio_ = 0, pmf0_ = 0;
};

inline uint64_t Rng::Binomial(uint64_t n, double p) { return BinomialDist(n, p)(*this); }

}  // namespace vsl
