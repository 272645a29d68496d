// C-simulation testbench of the small kernels and the compat types: CRC-32C against the
// host's vsl::Crc32c and a bit-serial reference; the scrambler against a bit-serial
// PRBS-23 reference (period, balance, round trip); ap_uint<N> against 128-bit arithmetic;
// hls::stream's depth check.
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "hls/crc32c.h"
#include "hls/hls_types.h"
#include "hls/kernels.h"
#include "hls/scrambler.h"
#include "vsl/core/crc.h"
#include "vsl/core/random.h"

namespace vsl::testing {
namespace {

uint32_t Crc32cBitSerial(const uint8_t* d, size_t n, uint32_t crc) {
  uint32_t c = ~crc;
  for (size_t i = 0; i < n; ++i) {
    for (int b = 0; b < 8; ++b) {
      const uint32_t in = (d[i] >> b) & 1u;  // reflected: LSB first
      const uint32_t fb = (c ^ in) & 1u;
      c >>= 1;
      if (fb) c ^= 0x82F63B78u;
    }
  }
  return ~c;
}

std::vector<ap_uint<64>> Words(const std::vector<uint8_t>& bytes) {
  std::vector<ap_uint<64>> w((bytes.size() + 7) / 8);
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int b = static_cast<int>(i % 8);
    w[i / 8].range(8 * b + 7, 8 * b) = bytes[i];
  }
  return w;
}
std::vector<uint8_t> Bytes(const std::vector<ap_uint<64>>& w, size_t n) {
  std::vector<uint8_t> b(n);
  for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>(w[i / 8].range(8 * (i % 8) + 7, 8 * (i % 8)));
  return b;
}

TEST(Crc32cKernelTest, MatchesHostAndBitSerialReference) {
  const char* check = "123456789";
  EXPECT_EQ(vslhls::Crc32cUpdate(reinterpret_cast<const uint8_t*>(check), 9), 0xE3069283u);
  Rng rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<uint8_t> d(rng.Below(5000));
    rng.Fill(d.data(), d.size());
    const uint32_t seed = trial % 2 ? static_cast<uint32_t>(rng.Next()) : 0;
    const auto n = static_cast<int>(d.size());
    const uint32_t k = vslhls::Crc32cUpdate(d.data(), n, seed);
    ASSERT_EQ(k, vsl::Crc32c(d.data(), d.size(), seed));
    ASSERT_EQ(k, Crc32cBitSerial(d.data(), d.size(), seed));
    // Chaining, and the top function (partial last word).
    const int cut = n / 3;
    ASSERT_EQ(vslhls::Crc32cUpdate(d.data() + cut, n - cut, vslhls::Crc32cUpdate(d.data(), cut, seed)), k);
    auto w = Words(d);
    unsigned out = 0;
    vsl_crc32c(w.data(), static_cast<unsigned>(d.size()), seed, &out);
    ASSERT_EQ(out, k) << "len " << d.size();
  }
}

// PRBS-23 one bit at a time, on a register of 23 separate bits.
struct Prbs23 {
  bool r[23];
  explicit Prbs23(uint32_t seed) {
    for (int i = 0; i < 23; ++i) r[i] = (seed >> i) & 1u;
  }
  int Next() {
    const bool out = r[22] != r[17];
    for (int i = 22; i > 0; --i) r[i] = r[i - 1];
    r[0] = out;
    return out ? 1 : 0;
  }
  uint32_t State() const {
    uint32_t s = 0;
    for (int i = 0; i < 23; ++i) s |= uint32_t{r[i]} << i;
    return s;
  }
};

TEST(ScramblerKernelTest, MatchesBitSerialPrbs23AndRoundTrips) {
  Rng rng(9);
  for (int trial = 0; trial < 50; ++trial) {
    const uint32_t seed = vslhls::ScramblerSeed(static_cast<uint32_t>(rng.Next()));
    ASSERT_NE(seed, 0u);
    ASSERT_EQ(seed & ~vslhls::kScramblerMask, 0u);
    std::vector<uint8_t> d(1 + rng.Below(9000));
    rng.Fill(d.data(), d.size());
    auto s = d;
    const uint32_t end = vslhls::Scramble(s.data(), static_cast<int>(s.size()), seed);
    Prbs23 ref(seed);
    for (size_t i = 0; i < d.size(); ++i) {
      int key = 0;
      for (int b = 0; b < 8; ++b) key = (key << 1) | ref.Next();
      ASSERT_EQ(s[i], static_cast<uint8_t>(d[i] ^ key)) << "byte " << i;
    }
    ASSERT_EQ(end, ref.State());
    auto back = s;
    vslhls::Scramble(back.data(), static_cast<int>(back.size()), seed);
    ASSERT_EQ(back, d);
    // In pieces, chained through the returned state; and the top function.
    auto p = d;
    const int cut = static_cast<int>(p.size() / 2);
    vslhls::Scramble(p.data() + cut, static_cast<int>(p.size()) - cut, vslhls::Scramble(p.data(), cut, seed));
    ASSERT_EQ(p, s);
    auto w = Words(d);
    vsl_scramble(w.data(), static_cast<unsigned>(d.size()), seed);
    ASSERT_EQ(Bytes(w, d.size()), s);
  }
}

TEST(ScramblerKernelTest, SequenceHasFullPeriodAndBalancesPages) {
  Prbs23 ref(1);
  uint32_t period = 0;
  do {
    ref.Next();
    ++period;
  } while (ref.State() != 1 && period <= (1u << 23));
  EXPECT_EQ(period, (1u << 23) - 1);
  // An all-zero and an all-ones 8 KiB page come out close to half ones; neighbouring
  // pages get different sequences.
  for (uint8_t fill : {uint8_t{0x00}, uint8_t{0xFF}}) {
    std::vector<uint8_t> page(8192, fill);
    vslhls::Scramble(page.data(), 8192, vslhls::ScramblerSeed(1234));
    uint64_t ones = 0;
    for (uint8_t b : page) ones += static_cast<uint64_t>(__builtin_popcount(b));
    EXPECT_NEAR(static_cast<double>(ones) / (8192 * 8), 0.5, 0.01);
  }
  std::vector<uint8_t> a(512, 0), b(512, 0);
  vslhls::Scramble(a.data(), 512, vslhls::ScramblerSeed(1000));
  vslhls::Scramble(b.data(), 512, vslhls::ScramblerSeed(1001));
  EXPECT_NE(a, b);
}

TEST(ApUintTest, MatchesWideArithmetic) {
  __extension__ typedef unsigned __int128 U;
  Rng rng(3);
  auto to128 = [](const ap_uint<104>& v) {
    return (U{v.range(103, 64)} << 64) | U{v.range(63, 0)};
  };
  const U mask = (U{1} << 104) - 1;
  for (int trial = 0; trial < 10000; ++trial) {
    const U a = ((U{rng.Next()} << 64) | rng.Next()) & mask;
    const U b = ((U{rng.Next()} << 64) | rng.Next()) & mask;
    ap_uint<104> x, y;
    x.range(63, 0) = static_cast<uint64_t>(a);
    x.range(103, 64) = static_cast<uint64_t>(a >> 64);
    y.range(63, 0) = static_cast<uint64_t>(b);
    y.range(103, 64) = static_cast<uint64_t>(b >> 64);
    const int sh = static_cast<int>(rng.Below(104));
    ASSERT_EQ(to128(x ^ y), a ^ b);
    ASSERT_EQ(to128(x & y), a & b);
    ASSERT_EQ(to128(x | y), a | b);
    ASSERT_EQ(to128(x << sh), (a << sh) & mask);
    ASSERT_EQ(to128(x >> sh), a >> sh);
    ASSERT_EQ(to128(~x), ~a & mask);
    const int lo = static_cast<int>(rng.Below(104));
    const int hi = lo + static_cast<int>(rng.Below(std::min(64, 104 - lo)));
    const U field = (a >> lo) & ((U{1} << (hi - lo + 1)) - 1);
    ASSERT_EQ(U{x.range(hi, lo)}, field) << hi << ":" << lo;
    ap_uint<104> z = x;
    z.range(hi, lo) = static_cast<uint64_t>(b);
    const U fmask = ((U{1} << (hi - lo + 1)) - 1) << lo;
    ASSERT_EQ(to128(z), (a & ~fmask) | ((b << lo) & fmask));
    ASSERT_EQ(x[sh], ((a >> sh) & 1) != 0);
    ASSERT_EQ(x == y, a == b);
  }
  ap_uint<13> small = 0x1FFF;
  small <<= 1;
  EXPECT_EQ(small.to_uint(), 0x1FFEu);  // wraps at 13 bits
  EXPECT_EQ(ap_uint<8>(300).to_uint(), 300u & 0xFF);
}

TEST(HlsStreamTest, BoundedAndDepthChecked) {
  hls::stream<int, 4> s("s");
  for (int i = 0; i < 4; ++i) s.write(i);
  EXPECT_TRUE(s.full());
  EXPECT_FALSE(s.write_nb(9));
  EXPECT_EQ(s.read(), 0);
  s << 4;
  int v = 0;
  for (int i = 1; i <= 4; ++i) {
    s >> v;
    EXPECT_EQ(v, i);
  }
  EXPECT_TRUE(s.empty());
  EXPECT_FALSE(s.read_nb(v));
  EXPECT_EQ(s.max_occupancy(), 4u);
  auto overflow = [] {
    hls::stream<int, 2> t("small");
    t.write(1);
    t.write(2);
    t.write(3);
  };
  auto underflow = [] {
    hls::stream<int, 2> t("dry");
    (void)t.read();
  };
  EXPECT_DEATH(overflow(), "'small' \\(depth 2\\): write to a full stream");
  EXPECT_DEATH(underflow(), "'dry' \\(depth 2\\): read from an empty stream");
}

}  // namespace
}  // namespace vsl::testing
