// The writer's half of the page format (vsl/ftl/page_codec.h) against recovery's half
// (format::HeaderValid, vsl/ftl/recovery.h): what SealPage and SummaryEntry write is what
// a scan reads back.
#include <gtest/gtest.h>

#include <cstring>

#include "vsl/core/crc.h"
#include "vsl/ftl/page_codec.h"
#include "vsl/ftl/recovery.h"
#include "vsl/simcard/profile.h"

namespace vsl::ftl {
namespace {
namespace f = format;

constexpr uint32_t kSpp = 4, kSector = 512, kEpoch = 11;

class PageCodecTest : public ::testing::Test {
 protected:
  PageCodecTest()
      : geo_(simcard::FindProfile("test-small")->geometry),
        stripe_(geo_, kSpp),
        addr_(geo_.dies_per_pipe(), geo_.pages_per_block, kSpp),
        img_(4, geo_.dies_per_pipe(), geo_.pages_per_block),
        fmt_{2, kEpoch, kSpp, &stripe_} {}
  PageContent Content(f::PageType t, uint64_t seq) const {
    PageContent c;
    c.type = t;
    c.seq = seq;
    c.epoch = kEpoch;
    c.spp = kSpp;
    c.sector_bytes = kSector;
    return c;
  }
  std::vector<uint8_t> Meta() const { return std::vector<uint8_t>(geo_.meta_bytes_per_page(), 0xFF); }

  nand::Geometry geo_;
  StripeLayout stripe_;
  PsaLayout addr_;
  ScanImage img_;
  ScanFormat fmt_;
};

TEST_F(PageCodecTest, DataPageEntriesNameEachSlotAndCheckItsSector) {
  std::vector<uint8_t> data(kSpp * kSector, 0xAB);  // stale bytes past `used`
  for (uint32_t i = 0; i < 2 * kSector; ++i) data[i] = static_cast<uint8_t>(i * 7);
  const std::vector<uint64_t> lbas = {40, 41, f::kNoLba, f::kNoLba};
  PageContent c = Content(f::PageType::kData, 77);
  c.used = 2;
  c.lbas = lbas.data();
  auto meta = Meta();
  SealPage(c, data, meta.data());
  ASSERT_TRUE(f::HeaderValid(meta.data(), kSpp));
  EXPECT_FALSE(f::HeaderValid(meta.data(), kSpp + 1));
  // Padding slots are zeroed, not left with stale bytes.
  EXPECT_TRUE(std::all_of(data.begin() + 2 * kSector, data.end(), [](uint8_t b) { return b == 0; }));
  const auto* e = reinterpret_cast<const f::SectorEntry*>(meta.data() + sizeof(f::PageHeader));
  for (uint32_t s = 0; s < kSpp; ++s) {
    EXPECT_EQ(uint64_t{e[s].lba}, lbas[s]);
    EXPECT_EQ(e[s].crc, Crc32c(data.data() + s * kSector, kSector));
  }
  // A scan takes it as a data page of its seq.
  img_.meta[img_.Index(2, 1, 0)] = meta;
  img_.ok[img_.Index(2, 1, 0)] = 1;
  const ScanPages pages = SortScanPages(img_, fmt_, 0, 0);
  ASSERT_EQ(pages.data.size(), 1u);
  EXPECT_EQ(pages.data[0].seq, 77u);
  // Any flipped bit of the spare is caught.
  meta[sizeof(f::PageHeader) + 3] ^= 0x10;
  EXPECT_FALSE(f::HeaderValid(meta.data(), kSpp));
}

TEST_F(PageCodecTest, TrimPageRecordsReplayAsWritten) {
  const std::vector<f::TrimRecord> recs = {{100, 8, 90}, {500, 1, 90}};
  std::vector<uint8_t> data(geo_.page_data_bytes, 0xEE);
  PageContent c = Content(f::PageType::kTrim, 90);
  c.trims = &recs;
  auto meta = Meta();
  SealPage(c, data, meta.data());
  ASSERT_TRUE(f::HeaderValid(meta.data(), kSpp));
  img_.meta[img_.Index(3, 0, 2)] = meta;
  img_.ok[img_.Index(3, 0, 2)] = 1;
  const ScanPages pages = SortScanPages(img_, fmt_, 0, 0);
  ASSERT_EQ(pages.trim.size(), 1u);
  const ReplayPlan plan = PlanReplay(img_, pages, {data}, addr_, 0);
  ASSERT_EQ(plan.events.size(), 2u);
  EXPECT_EQ(plan.events[0].kind, ReplayEvent::kTrim);
  EXPECT_EQ(plan.events[0].a, 100u);
  EXPECT_EQ(plan.events[0].b, 8u);
  EXPECT_EQ(plan.events[1].a, 500u);
  EXPECT_EQ(plan.torn, 0u);
  // A byte of the records changed after sealing: the page is torn, its records ignored.
  data[5] ^= 1;
  EXPECT_EQ(PlanReplay(img_, pages, {data}, addr_, 0).torn, 1u);
}

TEST_F(PageCodecTest, ALyingRecordCountIsBoundedByThePage) {
  // Entry 0 claims far more records than a page holds, with a CRC that checks: only what
  // the data area can hold is read.
  std::vector<uint8_t> data(geo_.page_data_bytes, 0);
  auto meta = Meta();
  WriteSpareHeader(meta.data(), f::PageType::kTrim, 9, kEpoch, kSpp);
  const f::SectorEntry e{uint64_t{1} << 40, Crc32c(data.data(), data.size())};
  std::memcpy(meta.data() + sizeof(f::PageHeader), &e, sizeof(e));
  SealSpareCrc(meta.data(), kSpp);
  ASSERT_TRUE(f::HeaderValid(meta.data(), kSpp));
  uint64_t n = 0;
  ASSERT_NE(TrimPageRecords(meta.data(), data, &n), nullptr);
  EXPECT_EQ(n, geo_.page_data_bytes / sizeof(f::TrimRecord));
  data[0] ^= 1;  // and a data area that fails its CRC gives none
  EXPECT_EQ(TrimPageRecords(meta.data(), data, &n), nullptr);
}

TEST_F(PageCodecTest, FiveTwelveByteSectorsFillTheSpareAndReadBack) {
  // 512 B sectors on the 4 KiB page: 8 entries, the most this 120-byte spare holds.
  constexpr uint32_t kSpp8 = 8;
  ASSERT_LE(f::MetaBytes(kSpp8), geo_.meta_bytes_per_page());
  StripeLayout stripe8(geo_, kSpp8);
  const ScanFormat fmt8{2, kEpoch, kSpp8, &stripe8};
  std::vector<uint64_t> lbas(kSpp8);
  for (uint32_t s = 0; s < kSpp8; ++s) lbas[s] = 1000 + s;
  lbas[7] = f::kNoLba;
  std::vector<uint8_t> data(kSpp8 * kSector, 0x3C);
  PageContent c = Content(f::PageType::kData, 61);
  c.spp = kSpp8;
  c.used = 7;
  c.lbas = lbas.data();
  auto meta = Meta();
  SealPage(c, data, meta.data());
  ASSERT_TRUE(f::HeaderValid(meta.data(), kSpp8));
  EXPECT_FALSE(stripe8.ParityValid(meta.data(), kEpoch));
  ScanImage img(4, geo_.dies_per_pipe(), geo_.pages_per_block);
  img.meta[img.Index(3, 2, 1)] = meta;
  img.ok[img.Index(3, 2, 1)] = 1;
  const ScanPages pages = SortScanPages(img, fmt8, 0, 0);
  ASSERT_EQ(pages.data.size(), 1u);
  const auto* e = reinterpret_cast<const f::SectorEntry*>(img.Spare(img.Index(3, 2, 1)) + sizeof(f::PageHeader));
  for (uint32_t s = 0; s < kSpp8; ++s) EXPECT_EQ(uint64_t{e[s].lba}, lbas[s]);
  EXPECT_EQ(e[7].crc, Crc32c(data.data() + 7 * kSector, kSector));  // the zeroed padding's
}

TEST_F(PageCodecTest, SummaryEntryRebuildsTheSpareRecoveryWouldRead) {
  const std::vector<uint64_t> lbas = {7, 8, 9, f::kNoLba};
  PageContent c = Content(f::PageType::kAtomicData, 55);
  c.used = 3;
  c.lbas = lbas.data();
  std::vector<uint64_t> grid(uint64_t{geo_.dies_per_pipe()} * geo_.pages_per_block * (1 + kSpp), 0);
  const uint32_t die = 2, row = 5;
  SummaryEntry(c, &grid[(uint64_t{row} * geo_.dies_per_pipe() + die) * (1 + kSpp)]);
  PageContent t = Content(f::PageType::kTrim, 56);
  t.lbas = lbas.data();  // ignored for a trim page
  SummaryEntry(t, &grid[(uint64_t{row} * geo_.dies_per_pipe() + 3) * (1 + kSpp)]);
  const auto trims = ExpandSummary(grid, 2, geo_.meta_bytes_per_page(), fmt_, img_);
  EXPECT_EQ(trims, (std::vector<uint64_t>{uint64_t{row} * geo_.dies_per_pipe() + 3}));
  const uint8_t* m = img_.Spare(img_.Index(2, die, row));
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(f::HeaderValid(m, kSpp));
  const auto* h = reinterpret_cast<const f::PageHeader*>(m);
  EXPECT_EQ(h->type, static_cast<uint8_t>(f::PageType::kAtomicData));
  EXPECT_EQ(h->seq, 55u);
  EXPECT_EQ(h->epoch, kEpoch);
  const auto* e = reinterpret_cast<const f::SectorEntry*>(m + sizeof(f::PageHeader));
  for (uint32_t s = 0; s < kSpp; ++s) EXPECT_EQ(uint64_t{e[s].lba}, lbas[s]);
}

}  // namespace
}  // namespace vsl::ftl
