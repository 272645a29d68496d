// StripeLayout (vsl/ftl/stripe.h): FlashBack's parity die per row, data positions,
// LEB capacity and the parity page's spare-area format.
#include <gtest/gtest.h>

#include "vsl/core/xor.h"

#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/stripe.h"
#include "vsl/simcard/profile.h"

namespace vsl::ftl {
namespace {

// test-small's pipe: 4 dies, 16 pages per block, 4 KiB pages.
nand::Geometry Geo() { return simcard::FindProfile("test-small")->geometry; }

Leb OpenLeb(std::vector<uint8_t> good, uint32_t pages) {
  Leb l;
  l.good = std::move(good);
  l.par = std::make_unique<RowParity>();
  l.par->pdie.assign(pages, RowParity::kUndecided);
  return l;
}

TEST(StripeLayoutTest, ParityDieRotatesOverTheGoodDiesAndStaysPut) {
  StripeLayout s(Geo(), 1);
  s.set_parity(true);
  Leb l = OpenLeb({1, 1, 0, 1}, 16);
  EXPECT_EQ(s.RowParityDie(l, 0), 0u);
  EXPECT_EQ(s.RowParityDie(l, 1), 1u);
  EXPECT_EQ(s.RowParityDie(l, 2), 3u);
  EXPECT_EQ(s.RowParityDie(l, 3), 0u);
  // Decided at first use: a die lost later does not move a row's parity.
  l.good[1] = 0;
  EXPECT_EQ(s.RowParityDie(l, 1), 1u);
  EXPECT_FALSE(s.DataPos(l, 0, 0));  // parity
  EXPECT_TRUE(s.DataPos(l, 0, 3));
  EXPECT_TRUE(s.IsLastDataPos(l, 0, 3));
  EXPECT_FALSE(s.IsLastDataPos(l, 4, 0));
  // Without parity state (FlashBack off, or no room) there is no parity die.
  Leb plain;
  plain.good = {1, 1, 1, 1};
  EXPECT_EQ(s.RowParityDie(plain, 0), StripeLayout::kNoDie);
}

TEST(StripeLayoutTest, CapacityLeavesOutParityAndSummary) {
  StripeLayout s(Geo(), 1);
  const uint32_t summary = s.summary_pages();
  EXPECT_GT(summary, 0u);
  EXPECT_EQ(s.LebDataSectors(4), uint64_t{4 * 16 - summary});
  s.set_parity(true);
  EXPECT_EQ(s.LebDataSectors(4), uint64_t{3 * 16 - summary});
  EXPECT_EQ(s.LebDataSectors(1), 0u);  // cannot carry parity: not formed
  Leb l = OpenLeb({1, 1, 1, 1}, 16);
  EXPECT_EQ(s.RemainingPositions(l, 0, 0), 3u * 16);
}

TEST(StripeLayoutTest, ParityMetaRoundTripsAndRejectsDamageOrAnotherEpoch) {
  const nand::Geometry g = Geo();
  StripeLayout s(g, 1);
  std::vector<uint8_t> lead(format::MetaBytes(1), 0x5A);
  std::vector<uint8_t> meta(g.meta_bytes_per_page(), 0xFF);
  s.FillParityMeta(meta.data(), 77, 0b1011, lead, 9);
  EXPECT_TRUE(s.ParityValid(meta.data(), 9));
  EXPECT_EQ(StripeLayout::ParityMask(meta.data()), 0b1011u);
  EXPECT_FALSE(s.ParityValid(meta.data(), 10));
  meta[20] ^= 1;
  EXPECT_FALSE(s.ParityValid(meta.data(), 9));
}

TEST(StripeLayoutTest, NoParityWhereTheSpareCannotHoldOne) {
  // 512 B sectors on test-small's 4 KiB page: 8 sector entries leave no room in its 120-byte
  // spare for a parity spare (144 bytes), and format turns FlashBack off. A page whose
  // header claims to be parity (garbage, or a lying header) must not be taken for one, and
  // its check must not read past the spare: here a buffer holding a whole, valid parity
  // spare of that sector count would pass a check that reads 144 bytes.
  const nand::Geometry g = Geo();
  ASSERT_GT(format::ParityMetaBytes(8), g.meta_bytes_per_page());
  nand::Geometry roomy = g;
  roomy.page_spare_bytes += 64;  // the same layout with room for it
  StripeLayout wide(roomy, 8);
  std::vector<uint8_t> meta(format::ParityMetaBytes(8), 0xFF);
  wide.FillParityMeta(meta.data(), 5, 0b11, std::vector<uint8_t>(format::MetaBytes(8), 0), 3);
  ASSERT_TRUE(wide.ParityValid(meta.data(), 3));
  StripeLayout small(g, 8);
  EXPECT_FALSE(small.ParityValid(meta.data(), 3));
}

TEST(StripeLayoutTest, XorIntoIsItsOwnInverse) {
  std::vector<uint8_t> a(1003), b(1003);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i * 7);
    b[i] = static_cast<uint8_t>(i * 13 + 1);
  }
  auto x = a;
  StripeLayout::XorInto(x.data(), b.data(), x.size());
  EXPECT_NE(x, a);
  StripeLayout::XorInto(x.data(), b.data(), x.size());
  EXPECT_EQ(x, a);
}

// Every length and alignment against a byte-wise XOR, for every way XorInto runs on this
// CPU (AVX-512, AVX2, 16-byte vectors and words): the vector steps and the tail must agree
// with the plain loop.
TEST(StripeLayoutTest, XorIntoMatchesByteWiseXorAtEveryLengthAndOffset) {
  std::vector<uint8_t> a(700), b(700);
  for (std::size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<uint8_t>(i * 37 + 11);
    b[i] = static_cast<uint8_t>(i * 101 + 7);
  }
  ASSERT_FALSE(XorKernels().empty());
  for (const XorKernel& k : XorKernels()) {
    SCOPED_TRACE(k.name);
    for (std::size_t off = 0; off < 3; ++off) {
      for (std::size_t n = 0; n + off <= 600; n += (n < 300 ? 1 : 37)) {
        std::vector<uint8_t> x = a, want = a;
        for (std::size_t i = 0; i < n; ++i) want[off + i] ^= b[i + 1];
        k.fn(x.data() + off, b.data() + 1, n);
        ASSERT_EQ(x, want) << "n=" << n << " off=" << off;
      }
    }
  }
  // XorInto itself (the stripe's entry point) is the first of them.
  std::vector<uint8_t> x = a, y = a;
  StripeLayout::XorInto(x.data(), b.data(), 600);
  XorKernels().front().fn(y.data(), b.data(), 600);
  EXPECT_EQ(x, y);
}

}  // namespace
}  // namespace vsl::ftl
