// C-simulation testbench of the BCH codec (hls/bch.h) and its HLS tops (hls/kernels.h):
// the generator and parity against an independent bit-serial reference; every single-bit
// error position and every double-bit pair corrected; random patterns up to t corrected;
// t+1 errors flagged or, rarely, miscorrected (the rate is measured and bounded); erased
// and all-zero codewords; the tops against the C++ API.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "hls/bch.h"
#include "hls/kernels.h"
#include "tests/hls/bch_reference.h"
#include "vsl/core/random.h"

namespace vsl::testing {
namespace {

using vslhls::BchResult;
using vslhls::BchStatus;

constexpr int kSector = 512;

std::vector<uint8_t> RandomBytes(Rng& rng, size_t n) {
  std::vector<uint8_t> v(n);
  rng.Fill(v.data(), n);
  return v;
}

// A received word: message and parity, with helpers to flip codeword bit i (0 = MSB of
// message byte 0; message bits first, then parity bits).
struct Word {
  std::vector<uint8_t> msg, parity;
  int t;
  int bits() const { return 8 * static_cast<int>(msg.size()) + vslhls::BchParityBits(t); }
  void Flip(int i) {
    const int mb = 8 * static_cast<int>(msg.size());
    if (i < mb) {
      msg[i / 8] ^= static_cast<uint8_t>(0x80u >> (i % 8));
    } else {
      parity[(i - mb) / 8] ^= static_cast<uint8_t>(0x80u >> ((i - mb) % 8));
    }
  }
  BchResult Decode() { return vslhls::BchDecode(t, msg.data(), static_cast<int>(msg.size()), parity.data()); }
  bool operator==(const Word& o) const { return msg == o.msg && parity == o.parity; }
};

Word Encoded(int t, std::vector<uint8_t> msg) {
  Word w{std::move(msg), std::vector<uint8_t>(vslhls::BchParityBytes(t)), t};
  EXPECT_TRUE(vslhls::BchEncode(t, w.msg.data(), static_cast<int>(w.msg.size()), w.parity.data()));
  return w;
}

class BchTest : public ::testing::TestWithParam<int> {};

// The codec's GF(2^13) tables against the table-free reference: x^13+x^4+x^3+x+1 is
// primitive (alpha's powers run through all 8191 nonzero elements before repeating), and
// the table multiply and logarithm agree with shift-and-add.
TEST(BchFieldTest, TablesMatchTheReferenceField) {
  std::vector<bool> seen(8192, false);
  uint16_t ref = 1;  // alpha^i by the reference's shift-and-add, one step at a time
  for (int i = 0; i < 8191; ++i, ref = bchref::Mul(ref, 2)) {
    const uint16_t a = vslhls::GfExp(i);
    ASSERT_NE(a, 0);
    ASSERT_FALSE(seen[a]) << "alpha^" << i << " repeats: not primitive";
    seen[a] = true;
    ASSERT_EQ(a, ref);
    ASSERT_EQ(vslhls::GfLog(a), i);
  }
  EXPECT_EQ(vslhls::GfExp(8191), 1);
  Rng rng(3);
  for (int k = 0; k < 20000; ++k) {
    const auto a = static_cast<uint16_t>(rng.Below(8192)), b = static_cast<uint16_t>(rng.Below(8192));
    ASSERT_EQ(vslhls::GfMul(a, b), bchref::Mul(a, b)) << a << " * " << b;
  }
}

TEST_P(BchTest, GeneratorHasTheDesignedRootsAndDegree) {
  const int t = GetParam();
  const auto ref = bchref::Generator(t);
  ASSERT_EQ(static_cast<int>(ref.size()) - 1, 13 * t);
  for (int j = 1; j <= 2 * t; ++j) EXPECT_EQ(bchref::Eval(ref, j), 0) << "g(alpha^" << j << ")";
  uint64_t words[4];
  switch (t) {
    case 4: vslhls::Bch<4>::Generator(words); break;
    case 8: vslhls::Bch<8>::Generator(words); break;
    default: vslhls::Bch<16>::Generator(words); break;
  }
  for (int i = 0; i < 256; ++i) {
    const int coef = (words[i / 64] >> (i % 64)) & 1;
    EXPECT_EQ(coef, i < static_cast<int>(ref.size()) ? ref[i] : 0) << "x^" << i;
  }
}

TEST_P(BchTest, ParityMatchesTheBitSerialReference) {
  const int t = GetParam();
  const auto g = bchref::Generator(t);
  Rng rng(100 + t);
  // Known answers: a single 1 as the last message bit gives p(x) = x^R mod g(x), the low
  // coefficients of g; a zero message gives zero parity.
  {
    std::vector<uint8_t> msg(kSector, 0);
    msg.back() = 1;
    Word w = Encoded(t, msg);
    const int r = 13 * t;
    for (int j = 0; j < r; ++j) {
      const int bit = (w.parity[j / 8] >> (7 - j % 8)) & 1;
      ASSERT_EQ(bit, g[r - 1 - j]) << "parity bit " << j;
    }
    Word z = Encoded(t, std::vector<uint8_t>(kSector, 0));
    EXPECT_EQ(z.parity, std::vector<uint8_t>(vslhls::BchParityBytes(t), 0));
  }
  const int lengths[] = {1, 7, 64, kSector, kSector + 120, kSector + 240, vslhls::BchMaxMessageBytes(t)};
  for (int len : lengths) {
    for (int trial = 0; trial < 20; ++trial) {
      auto msg = RandomBytes(rng, len);
      Word w = Encoded(t, msg);
      ASSERT_EQ(w.parity, bchref::Encode(g, msg.data(), len)) << "len " << len << " trial " << trial;
    }
  }
  EXPECT_FALSE(vslhls::BchEncode(t, nullptr, vslhls::BchMaxMessageBytes(t) + 1, nullptr));
  EXPECT_FALSE(vslhls::BchEncode(t, nullptr, 0, nullptr));
  EXPECT_FALSE(vslhls::BchEncode(5, nullptr, 512, nullptr));
}

TEST_P(BchTest, EverySingleBitErrorIsCorrected) {
  const int t = GetParam();
  Rng rng(7 + t);
  const Word good = Encoded(t, RandomBytes(rng, kSector));
  const int pad = 8 * vslhls::BchParityBytes(t) - 13 * t;  // padding bits are not coded
  for (int i = 0; i < good.bits(); ++i) {
    Word w = good;
    w.Flip(i);
    const BchResult r = w.Decode();
    ASSERT_EQ(r.status, BchStatus::kCorrected) << "bit " << i;
    ASSERT_EQ(r.bits, 1) << "bit " << i;
    ASSERT_TRUE(w == good) << "bit " << i;
  }
  for (int i = good.bits(); i < good.bits() + pad; ++i) {  // a padding bit: ignored
    Word w = good;
    w.Flip(i);
    EXPECT_EQ(w.Decode().status, BchStatus::kClean);
  }
}

// Every pair of positions, sharded by the first error position. For t = 8 (the card's)
// every pair, in the suite; for t = 4 and 16 the suite takes the first positions in a
// stride of 16 with every partner, and VSL_BCH_ALL_PAIRS=1 (the slow target
// hls_bch_all_pairs) every pair.
class BchPairs : public ::testing::TestWithParam<std::tuple<int, int>> {};
constexpr int kPairShards = 4;

TEST_P(BchPairs, EveryDoubleBitErrorIsCorrected) {
  const auto [t, shard] = GetParam();
  const char* all = std::getenv("VSL_BCH_ALL_PAIRS");
  const bool every = t == 8 || (all != nullptr && std::string(all) == "1");
  Rng rng(11 + t);
  const Word good = Encoded(t, RandomBytes(rng, kSector));
  const int n = good.bits();
  uint64_t pairs = 0;
  // Shard by first position, balanced by work (positions i have n - i - 1 partners).
  for (int i = 0; i < n; ++i) {
    if ((i % (2 * kPairShards)) != shard && (i % (2 * kPairShards)) != 2 * kPairShards - 1 - shard) continue;
    if (!every && (i / (2 * kPairShards)) % 16 != 0) continue;
    Word wi = good;
    wi.Flip(i);
    for (int j = i + 1; j < n; ++j) {
      Word w = wi;
      w.Flip(j);
      const BchResult r = w.Decode();
      if (r.status != BchStatus::kCorrected || r.bits != 2 || !(w == good)) {
        FAIL() << "bits " << i << "," << j << ": " << vslhls::BchStatusName(r.status) << " " << r.bits;
      }
      ++pairs;
    }
  }
  std::printf("t=%d shard %d: %llu pairs corrected (%s)\n", t, shard, static_cast<unsigned long long>(pairs),
              every ? "every pair of this shard" : "first positions sampled 1 in 16");
}

TEST_P(BchTest, RandomPatternsUpToTAreCorrected) {
  const int t = GetParam();
  Rng rng(23 + t);
  for (int trial = 0; trial < 3000; ++trial) {
    const int len = trial % 3 == 0 ? kSector + static_cast<int>(rng.Below(241)) : kSector;
    const Word good = Encoded(t, RandomBytes(rng, len));
    Word w = good;
    const int k = 1 + static_cast<int>(rng.Below(t));
    std::set<int> pos;
    while (static_cast<int>(pos.size()) < k) pos.insert(static_cast<int>(rng.Below(w.bits())));
    for (int p : pos) w.Flip(p);
    const BchResult r = w.Decode();
    ASSERT_EQ(r.status, BchStatus::kCorrected) << "trial " << trial << " k " << k;
    ASSERT_EQ(r.bits, k);
    ASSERT_TRUE(w == good) << "trial " << trial;
  }
}

// t+1 errors: beyond the code. The decoder must never claim the original back; it flags
// the word uncorrectable (data left as received) or lands on another codeword within t
// of what it received (a miscorrection; the rate is printed and bounded).
TEST_P(BchTest, TPlusOneErrorsAreFlaggedAndMiscorrectionsAreRare) {
  const int t = GetParam();
  Rng rng(31 + t);
  const int trials = t == 16 ? 20000 : 50000;
  int flagged = 0, miscorrected = 0;
  const Word good = Encoded(t, RandomBytes(rng, kSector));
  for (int trial = 0; trial < trials; ++trial) {
    Word w = good;
    std::set<int> pos;
    while (static_cast<int>(pos.size()) < t + 1) pos.insert(static_cast<int>(rng.Below(13 * t + 8 * kSector)));
    for (int p : pos) w.Flip(p);
    const Word received = w;
    const BchResult r = w.Decode();
    if (r.status == BchStatus::kUncorrectable) {
      ASSERT_TRUE(w == received) << "an uncorrectable word must come back as received";
      ++flagged;
      continue;
    }
    ASSERT_EQ(r.status, BchStatus::kCorrected) << "trial " << trial;
    ASSERT_FALSE(w == good) << "t+1 errors cannot decode to the original";
    // A miscorrection is still a valid decoding: a codeword, at most t flips away.
    Word check = Encoded(t, w.msg);
    ASSERT_EQ(check.parity, w.parity) << "decoder output is not a codeword";
    ASSERT_LE(r.bits, t);
    ++miscorrected;
  }
  const double rate = static_cast<double>(miscorrected) / trials;
  // The classical estimate: a word beyond the code decodes when its syndrome is one of
  // the sum_{i<=t} C(n, i) a correctable pattern gives, out of 2^(13t) (n = 4096 + 13t).
  const int n = 8 * kSector + 13 * t;
  double patterns = 0;
  for (int i = 0; i <= t; ++i) patterns += std::exp(std::lgamma(n + 1.0) - std::lgamma(i + 1.0) - std::lgamma(n - i + 1.0));
  const double predicted = patterns / std::ldexp(1.0, 13 * t);
  std::printf("t=%d, 512 B, t+1 errors: %d trials, %d flagged, %d miscorrected (rate %.2e, predicted %.2e)\n", t,
              trials, flagged, miscorrected, rate, predicted);
  if (t == 4) {
    // 2.7e-3: ~137 of 50,000, so +-25% is over 3 standard deviations.
    EXPECT_NEAR(rate, predicted, 0.25 * predicted);
  } else {
    EXPECT_LE(miscorrected, 2) << "predicted " << predicted;  // 1.2e-7 (t=8), 1.6e-18 (t=16)
  }
}

TEST_P(BchTest, ErasedCodewordsReadClean) {
  const int t = GetParam();
  const int pb = vslhls::BchParityBytes(t);
  Rng rng(41 + t);
  for (int zeros = 0; zeros <= t + 1; ++zeros) {
    Word w{std::vector<uint8_t>(kSector, 0xFF), std::vector<uint8_t>(pb, 0xFF), t};
    std::set<int> pos;
    while (static_cast<int>(pos.size()) < zeros) pos.insert(static_cast<int>(rng.Below(8 * kSector + 13 * t)));
    for (int p : pos) w.Flip(p);
    const BchResult r = w.Decode();
    if (zeros <= t) {
      ASSERT_EQ(r.status, BchStatus::kErased) << zeros << " zero bits";
      EXPECT_EQ(r.bits, zeros);
      EXPECT_EQ(w.msg, std::vector<uint8_t>(kSector, 0xFF));
      EXPECT_EQ(w.parity, std::vector<uint8_t>(pb, 0xFF));
    } else {
      EXPECT_NE(r.status, BchStatus::kErased) << "t+1 zero bits is not an erased page";
    }
  }
}

TEST_P(BchTest, AllZeroCodewordsDecodeAndCorrect) {
  const int t = GetParam();
  Word good = Encoded(t, std::vector<uint8_t>(kSector, 0));
  Word w = good;
  EXPECT_EQ(w.Decode().status, BchStatus::kClean);
  for (int k = 0; k < t; ++k) w.Flip(97 * k + 3);
  const BchResult r = w.Decode();
  EXPECT_EQ(r.status, BchStatus::kCorrected);
  EXPECT_EQ(r.bits, t);
  EXPECT_TRUE(w == good);
}

TEST_P(BchTest, BadLengthsAreUncorrectableNotACrash) {
  const int t = GetParam();
  std::vector<uint8_t> msg(vslhls::BchMaxMessageBytes(t) + 8, 0), parity(26, 0);
  EXPECT_EQ(vslhls::BchDecode(t, msg.data(), 0, parity.data()).status, BchStatus::kUncorrectable);
  EXPECT_EQ(vslhls::BchDecode(t, msg.data(), vslhls::BchMaxMessageBytes(t) + 1, parity.data()).status,
            BchStatus::kUncorrectable);
  EXPECT_EQ(vslhls::BchDecode(3, msg.data(), 512, parity.data()).status, BchStatus::kUncorrectable);
}

INSTANTIATE_TEST_SUITE_P(T, BchTest, ::testing::Values(4, 8, 16),
                         [](const auto& i) { return "t" + std::to_string(i.param); });
INSTANTIATE_TEST_SUITE_P(T, BchPairs,
                         ::testing::Combine(::testing::Values(4, 8, 16), ::testing::Range(0, kPairShards)),
                         [](const auto& i) {
                           return "t" + std::to_string(std::get<0>(i.param)) + "_shard" +
                                  std::to_string(std::get<1>(i.param));
                         });

// ---- the HLS tops, on a page of 16 codewords (8 KiB + 240 B metadata on the last) ----

template <typename Enc, typename Dec>
void CheckTops(int t, Enc enc, Dec dec) {
  constexpr int kWords = 16;
  const int msg_bytes = 752;  // every codeword as long as the card's last one
  const int pb = vslhls::BchParityBytes(t);
  Rng rng(51 + t);
  std::vector<ap_uint<64>> data(kWords * msg_bytes / 8);
  std::vector<uint8_t> bytes(kWords * msg_bytes);
  rng.Fill(bytes.data(), bytes.size());
  for (size_t i = 0; i < data.size(); ++i) {
    uint64_t v;
    std::memcpy(&v, &bytes[8 * i], 8);  // little-endian words, as in memory
    data[i] = ap_uint<64>(static_cast<unsigned long long>(v));
  }
  std::vector<ap_uint<8>> parity(kWords * pb);
  enc(data.data(), parity.data(), msg_bytes, kWords);
  for (int c = 0; c < kWords; ++c) {
    std::vector<uint8_t> p(pb);
    vslhls::BchEncode(t, &bytes[c * msg_bytes], msg_bytes, p.data());
    for (int j = 0; j < pb; ++j) ASSERT_EQ(parity[c * pb + j].to_uint(), p[j]) << "codeword " << c;
  }
  // Codeword c gets c % (t + 2) errors: 0..t corrected, t+1 flagged (or miscorrected).
  const auto original = data;
  for (int c = 0; c < kWords; ++c) {
    std::set<int> pos;
    while (static_cast<int>(pos.size()) < c % (t + 2)) pos.insert(static_cast<int>(rng.Below(8 * msg_bytes)));
    for (int p : pos) {
      const int word = (c * msg_bytes + p / 8) / 8, byte = (c * msg_bytes + p / 8) % 8;
      const int bit = 8 * byte + (7 - p % 8);
      data[word].set_bit(bit, !data[word].test(bit));
    }
  }
  std::vector<ap_uint<32>> result(kWords);
  dec(data.data(), parity.data(), result.data(), msg_bytes, kWords);
  for (int c = 0; c < kWords; ++c) {
    const int k = c % (t + 2);
    const auto status = static_cast<BchStatus>(result[c].to_uint() >> vslhls::kTopStatusShift);
    const unsigned bits = result[c].to_uint() & 0xFFFF;
    if (k <= t) {
      EXPECT_EQ(status, k == 0 ? BchStatus::kClean : BchStatus::kCorrected) << "codeword " << c;
      EXPECT_EQ(bits, static_cast<unsigned>(k));
      for (int i = c * msg_bytes / 8; i < (c + 1) * msg_bytes / 8; ++i) ASSERT_TRUE(data[i] == original[i]);
    } else {
      EXPECT_NE(status, BchStatus::kClean) << "codeword " << c;
    }
  }
  // A length the tops do not take: every result uncorrectable, nothing written.
  dec(data.data(), parity.data(), result.data(), 12, kWords);
  for (int c = 0; c < kWords; ++c) {
    EXPECT_EQ(static_cast<BchStatus>(result[c].to_uint() >> vslhls::kTopStatusShift), BchStatus::kUncorrectable);
  }
}

TEST(BchTopTest, TopsMatchTheApiAndCorrect) {
  CheckTops(4, vsl_bch4_encode, vsl_bch4_decode);
  CheckTops(8, vsl_bch8_encode, vsl_bch8_decode);
  CheckTops(16, vsl_bch16_encode, vsl_bch16_decode);
}

}  // namespace
}  // namespace vsl::testing
