// The card's bit-exact ECC mode (SimCardOptions::ecc = kBitExact): programs store BCH
// parity in the spare area (layout in docs/formats/card-image.md), reads flip raw bit
// errors into the stored codewords and run the hls/ decoder. Checked: the parity on the
// image, exact data back with corrections counted at a raised error rate, erased pages,
// uncorrectable codewords at the rate the binomial tail predicts (and the statistical mode
// agreeing with it), pages written in statistical mode, the PLP journal's replay, and
// geometries the codec cannot serve.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include <gtest/gtest.h>

#include "hls/bch.h"
#include "tests/simcard/card_fixture.h"
#include "vsl/nand/read_retry.h"
#include "vsl/simcard/ecc.h"
#include "vsl/simcard/image.h"

namespace vsl::testing {
namespace {

using simcard::EccMode;

// P(Binomial(n, p) > t).
double TailAbove(uint32_t n, double p, uint32_t t) {
  double below = 0;
  for (uint32_t k = 0; k <= t; ++k) {
    below += std::exp(std::lgamma(n + 1.0) - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) + k * std::log(p) +
                      (n - k) * std::log1p(-p));
  }
  return 1.0 - below;
}

class EccTest : public CardFixture {
 protected:
  void MakeBitExact(double rber, EccMode mode = EccMode::kBitExact, const std::string& profile = "test-small") {
    auto p = simcard::FindProfile(profile);
    ASSERT_TRUE(p.ok());
    simcard::SimCardOptions o;
    o.ecc = mode;
    o.seed = 77;
    simcard::Reliability rel = p->reliability;
    rel.rber_base = rber;
    rel.rber_wear = 0;
    rel.rber_read_disturb = 0;
    rel.fail_base = rel.fail_wear = 0;
    o.reliability = rel;
    Make(profile, {}, o);
  }
  std::vector<uint8_t> Slot(uint32_t die, uint32_t block, uint32_t page) {
    std::vector<uint8_t> s(g().page_data_bytes + g().page_spare_bytes);
    EXPECT_TRUE(card_->image(0).ReadSlot(die, block, page, s.data()).ok());
    return s;
  }
  uint8_t BlockFlags(uint32_t die, uint32_t block) { return card_->image(0).block(die, block).flags; }
};

TEST_F(EccTest, ProgramsStoreParityInTheSpareArea) {
  MakeBitExact(0);
  const uint32_t b = GoodBlock(0, 0);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  const auto data = Pattern(1, page_bytes());
  const auto meta = Meta(1);
  ASSERT_TRUE(Program(0, {0, b, 0}, data, &meta).ok());
  const auto slot = Slot(0, b, 0);
  ASSERT_EQ(std::memcmp(slot.data(), data.data(), data.size()), 0);
  ASSERT_EQ(std::memcmp(slot.data() + page_bytes(), meta.data(), meta.size()), 0);
  for (uint32_t i = 0; i < g().codewords_per_page(); ++i) {
    const auto span = simcard::Codeword(g(), i);
    std::vector<uint8_t> parity(g().ecc_parity_bytes);
    ASSERT_TRUE(vslhls::BchEncode(static_cast<int>(g().ecc_t), slot.data() + span.msg_offset,
                                  static_cast<int>(span.msg_bytes), parity.data()));
    EXPECT_EQ(std::memcmp(slot.data() + span.parity_offset, parity.data(), parity.size()), 0) << "codeword " << i;
    EXPECT_EQ(span.msg_bytes, g().ecc_codeword_bytes + (i + 1 == g().codewords_per_page() ? meta_bytes() : 0));
  }
  EXPECT_TRUE(BlockFlags(0, b) & simcard::format::kBlockParity);
  // The parity fields sit after the metadata, back to back.
  EXPECT_EQ(simcard::Codeword(g(), 0).parity_offset, page_bytes() + meta_bytes());
  EXPECT_EQ(simcard::Codeword(g(), 1).parity_offset, page_bytes() + meta_bytes() + g().ecc_parity_bytes);
}

TEST_F(EccTest, RawErrorsAreCorrectedByTheDecoder) {
  // 1e-4: about 0.4 raw errors per 512 B codeword, almost never more than t = 8.
  MakeBitExact(1e-4);
  const uint32_t b = GoodBlock(0, 1);
  ASSERT_TRUE(Erase(0, 1, b).ok());
  std::vector<std::vector<uint8_t>> pages;
  for (uint32_t pg = 0; pg < g().pages_per_block; ++pg) {
    pages.push_back(Pattern(100 + pg, page_bytes()));
    const auto meta = Meta(100 + pg);
    ASSERT_TRUE(Program(0, {1, b, pg}, pages.back(), &meta).ok());
  }
  uint64_t corrected = 0;
  for (int round = 0; round < 20; ++round) {
    for (uint32_t pg = 0; pg < g().pages_per_block; ++pg) {
      std::vector<uint8_t> data, meta;
      const auto c = Read(0, {1, b, pg}, &data, &meta);
      ASSERT_EQ(c.status, FlashStatus::kOk) << "round " << round << " page " << pg;
      ASSERT_EQ(data, pages[pg]);
      ASSERT_EQ(meta, Meta(100 + pg));
      corrected += c.corrected_bits;
      // A partial read (one sector) decodes that codeword, and the last for metadata.
      std::vector<uint8_t> one, m1;
      ASSERT_EQ(Read(0, {1, b, pg}, &one, &m1, 1, 1).status, FlashStatus::kOk);
      ASSERT_EQ(std::memcmp(one.data(), pages[pg].data() + g().ecc_codeword_bytes, one.size()), 0);
      ASSERT_EQ(m1, Meta(100 + pg));
    }
  }
  const auto& st = card_->stats(0);
  EXPECT_GT(corrected, 100u);
  EXPECT_GE(st.corrected_bits, corrected);  // the partial reads add theirs
  EXPECT_EQ(st.uncorrectable_reads, 0u);
  EXPECT_EQ(st.miscorrected_reads, 0u);
  EXPECT_GT(st.ecc_codewords_decoded, 20u * g().pages_per_block * g().codewords_per_page());
  std::printf("%llu bits corrected over %llu codewords decoded\n", static_cast<unsigned long long>(st.corrected_bits),
              static_cast<unsigned long long>(st.ecc_codewords_decoded));
}

TEST_F(EccTest, ErasedPagesReadCleanThroughTheDecoder) {
  MakeBitExact(2e-4);
  const uint32_t b = GoodBlock(0, 2);
  ASSERT_TRUE(Erase(0, 2, b).ok());
  uint64_t corrected = 0;
  for (int i = 0; i < 50; ++i) {
    std::vector<uint8_t> data, meta;
    const auto c = Read(0, {2, b, static_cast<uint32_t>(i) % g().pages_per_block}, &data, &meta);
    ASSERT_EQ(c.status, FlashStatus::kOk);
    ASSERT_EQ(data, std::vector<uint8_t>(data.size(), 0xFF));
    ASSERT_EQ(meta, std::vector<uint8_t>(meta.size(), 0xFF));
    corrected += c.corrected_bits;  // zero bits of an erased codeword read back as ones
  }
  EXPECT_GT(corrected, 0u);
}

// The share of codewords the decoder cannot correct follows P(Binomial(bits, rber) > t);
// the statistical mode draws from the same distribution, so the two agree.
TEST_F(EccTest, UncorrectableRateMatchesTheBinomialTailInBothModes) {
  const double rber = 1.5e-3;  // ~6.5 raw errors per 4296-bit codeword (512 B + 13 B)
  double measured[2] = {0, 0};
  for (int m = 0; m < 2; ++m) {
    card_.reset();
    std::filesystem::remove_all(dir());
    MakeBitExact(rber, m == 0 ? EccMode::kBitExact : EccMode::kStatistical);
    const uint32_t b = GoodBlock(0, 3);
    ASSERT_TRUE(Erase(0, 3, b).ok());
    const auto data = Pattern(9, page_bytes());
    ASSERT_TRUE(Program(0, {3, b, 0}, data).ok());
    uint64_t bad = 0, total = 0;
    for (int i = 0; i < 400; ++i) {
      for (uint32_t cw = 0; cw + 1 < g().codewords_per_page(); ++cw) {  // not the last (metadata)
        std::vector<uint8_t> one;
        const auto c = Read(0, {3, b, 0}, &one, nullptr, cw, 1);
        ++total;
        if (c.status == FlashStatus::kUncorrectable) {
          ++bad;
        } else {
          ASSERT_EQ(c.status, FlashStatus::kOk);
          if (m == 0 && card_->stats(0).miscorrected_reads == 0) {
            ASSERT_EQ(std::memcmp(one.data(), data.data() + uint64_t{cw} * g().ecc_codeword_bytes, one.size()), 0);
          }
        }
      }
    }
    measured[m] = static_cast<double>(bad) / static_cast<double>(total);
    if (m == 0) std::printf("bit-exact: %llu miscorrected reads\n", static_cast<unsigned long long>(card_->stats(0).miscorrected_reads));
  }
  const double expect = TailAbove(8 * (512 + 13), rber, 8);
  std::printf("uncorrectable codewords: bit-exact %.4f, statistical %.4f, binomial tail %.4f\n", measured[0],
              measured[1], expect);
  // ~2800 codewords per mode: a binomial share's standard deviation is ~0.007 here.
  EXPECT_NEAR(measured[0], expect, 0.03);
  EXPECT_NEAR(measured[1], expect, 0.03);
}

TEST_F(EccTest, PagesWrittenInStatisticalModeReadBitExact) {
  MakeBitExact(1e-4, EccMode::kStatistical);
  const uint32_t b = GoodBlock(0, 0, 2);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  const auto d0 = Pattern(20, page_bytes());
  ASSERT_TRUE(Program(0, {0, b, 0}, d0).ok());
  EXPECT_FALSE(BlockFlags(0, b) & simcard::format::kBlockParity);
  // Same card, now bit-exact: the parity is computed from the stored data on read.
  sopts_.ecc = EccMode::kBitExact;
  Reopen();
  std::vector<uint8_t> out;
  ASSERT_EQ(Read(0, {0, b, 0}, &out).status, FlashStatus::kOk);
  EXPECT_EQ(out, d0);
  const auto d1 = Pattern(21, page_bytes());
  ASSERT_TRUE(Program(0, {0, b, 1}, d1).ok());
  EXPECT_FALSE(BlockFlags(0, b) & simcard::format::kBlockParity) << "block holds a page without parity";
  ASSERT_EQ(Read(0, {0, b, 1}, &out).status, FlashStatus::kOk);
  EXPECT_EQ(out, d1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  ASSERT_TRUE(Program(0, {0, b, 0}, d1).ok());
  EXPECT_TRUE(BlockFlags(0, b) & simcard::format::kBlockParity);
  // And back to statistical: a page programmed there clears the flag again.
  sopts_.ecc = EccMode::kStatistical;
  Reopen();
  ASSERT_TRUE(Program(0, {0, b, 1}, d0).ok());
  EXPECT_FALSE(BlockFlags(0, b) & simcard::format::kBlockParity);
}

TEST_F(EccTest, JournalReplayStoresParity) {
  MakeBitExact(1e-4);
  const uint32_t b = GoodBlock(0, 1, 3);
  ASSERT_TRUE(Erase(0, 1, b).ok());
  // Accepted by the controller, then the host process dies before the program lands.
  const auto d = Pattern(30, page_bytes());
  std::optional<Completion> acc;
  nand::ProgramRequest req{{1, b, 0}, d.data(), nullptr};
  pipe(0).Program(req, [&](const Completion& x) { acc = x; }, [](const Completion&) {});
  ASSERT_TRUE(clock_.RunUntilTrue([&] { return acc.has_value(); }));
  card_->TEST_Abandon();
  card_.reset();
  clock_ = VirtualClock(2);
  Reopen();  // finishes the journal
  EXPECT_TRUE(BlockFlags(1, b) & simcard::format::kBlockParity);
  std::vector<uint8_t> out;
  ASSERT_EQ(Read(0, {1, b, 0}, &out).status, FlashStatus::kOk);
  EXPECT_EQ(out, d);
}

// Read-retry (vsl/nand/read_retry.h, used by the FTL for every read): with errors drawn
// afresh on every sensing, a page the decoder could not correct usually reads clean on a
// second try. At rber 1e-3 about a quarter of whole-page reads fail once; with three
// retries almost none do, and what comes back is exact.
TEST_F(EccTest, ReadRetryRecoversTransientUncorrectables) {
  MakeBitExact(1e-3);
  const uint32_t b = GoodBlock(0, 2, 4);
  ASSERT_TRUE(Erase(0, 2, b).ok());
  const auto data = Pattern(40, page_bytes());
  ASSERT_TRUE(Program(0, {2, b, 0}, data).ok());
  nand::ReadRetryPipe retry(pipe(0));
  int plain_fail = 0, retry_fail = 0;
  constexpr int kReads = 400;
  for (int i = 0; i < kReads; ++i) {
    std::vector<uint8_t> out;
    if (Read(0, {2, b, 0}, &out).status == FlashStatus::kUncorrectable) ++plain_fail;
    std::optional<Completion> c;
    out.assign(page_bytes(), 0);
    retry.Read({{2, b, 0}, 0, 0, out.data(), nullptr}, [&](const Completion& x) { c = x; });
    RunUntil(c);
    if (c->status == FlashStatus::kUncorrectable) {
      ++retry_fail;
    } else {
      ASSERT_EQ(c->status, FlashStatus::kOk);
      ASSERT_EQ(out, data);
    }
  }
  const auto& st = retry.stats();
  std::printf("%d reads: %d uncorrectable without retry, %d with up to 3 retries (%llu retries, %llu recovered)\n",
              kReads, plain_fail, retry_fail, static_cast<unsigned long long>(st.retries),
              static_cast<unsigned long long>(st.recovered));
  EXPECT_GT(plain_fail, kReads / 10);
  EXPECT_LT(retry_fail, 5);
  EXPECT_EQ(st.exhausted, static_cast<uint64_t>(retry_fail));
  EXPECT_GT(st.recovered, 0u);
  // Other failures pass through without a retry: a dead die's timeout.
  card_->InjectDieFailure(0, 2);
  std::optional<Completion> c;
  std::vector<uint8_t> out(page_bytes());
  const uint64_t before = st.retries;
  retry.Read({{2, b, 0}, 0, 0, out.data(), nullptr}, [&](const Completion& x) { c = x; });
  RunUntil(c);
  EXPECT_EQ(c->status, FlashStatus::kDieTimeout);
  EXPECT_EQ(st.retries, before);
}

TEST_F(EccTest, GeometriesTheCodecCannotServeAreRefused) {
  nand::Geometry g = simcard::FindProfile("test-small")->geometry;
  EXPECT_TRUE(simcard::CheckBitExactGeometry(g).ok());
  nand::Geometry bad = g;
  bad.ecc_t = 6;
  EXPECT_EQ(simcard::CheckBitExactGeometry(bad).code(), StatusCode::kInvalidArgument);
  bad = g;
  bad.ecc_parity_bytes = 14;
  EXPECT_NE(simcard::CheckBitExactGeometry(bad).ToString().find("13 parity bytes"), std::string::npos);
  bad = g;
  bad.page_spare_bytes = 8 * 13 + 600;  // 600 B of metadata: the last codeword is too long
  EXPECT_NE(simcard::CheckBitExactGeometry(bad).ToString().find("longer than"), std::string::npos);
  EXPECT_TRUE(simcard::CheckBitExactGeometry(simcard::FindProfile("duo-slc")->geometry).ok());
  EXPECT_EQ(simcard::ParseEccMode("bit-exact").value(), EccMode::kBitExact);
  EXPECT_FALSE(simcard::ParseEccMode("exact").ok());
}

}  // namespace
}  // namespace vsl::testing
