// Recovery's judgement (vsl/ftl/recovery.h) on spares written by the test: the first-row
// verdict, which pages are replayed and in what order, commit records, torn pages, the
// pages FlashBack rebuilds first, summaries, and the coverage and lost-stripe checks.
#include <gtest/gtest.h>

#include <cstring>

#include "vsl/core/crc.h"
#include "vsl/ftl/ftl_format.h"
#include "vsl/ftl/recovery.h"
#include "vsl/simcard/profile.h"

namespace vsl::ftl {
namespace {
namespace f = format;

constexpr uint32_t kEpoch = 7;
constexpr uint32_t kSpp = 2;
constexpr uint32_t kMetaLebs = 2;

// test-small's pipe: 4 dies, 16 pages per block.
nand::Geometry Geo() { return simcard::FindProfile("test-small")->geometry; }

class RecoveryTest : public ::testing::Test {
 protected:
  RecoveryTest() : geo_(Geo()), stripe_(geo_, kSpp), addr_(D(), P(), kSpp), img_(kLebs, D(), P()) {
    stripe_.set_parity(true);
    fmt_ = ScanFormat{kMetaLebs, kEpoch, kSpp, &stripe_};
  }
  static constexpr uint32_t kLebs = 6;
  uint32_t D() const { return geo_.dies_per_pipe(); }
  uint32_t P() const { return geo_.pages_per_block; }

  // A page's spare as the writer leaves it: header, sector entries, CRC.
  std::vector<uint8_t> Spare(f::PageType type, uint64_t seq, std::vector<uint64_t> lbas,
                             uint32_t epoch = kEpoch, uint32_t data_crc = 0) const {
    std::vector<uint8_t> m(geo_.meta_bytes_per_page(), 0xFF);
    const f::PageHeader h{0xFF, static_cast<uint8_t>(type), f::kVersionMajor, kSpp, epoch, seq};
    std::memcpy(m.data(), &h, sizeof(h));
    lbas.resize(kSpp, f::kNoLba);
    for (uint32_t s = 0; s < kSpp; ++s) {
      const f::SectorEntry e{lbas[s], s == 0 ? data_crc : 0};
      std::memcpy(m.data() + sizeof(h) + s * sizeof(e), &e, sizeof(e));
    }
    const std::size_t n = f::MetaBytes(kSpp) - 4;
    const uint32_t crc = Crc32c(m.data(), n);
    std::memcpy(m.data() + n, &crc, 4);
    return m;
  }
  std::vector<uint8_t> ParitySpare(uint64_t seq, uint64_t mask) const {
    std::vector<uint8_t> m(geo_.meta_bytes_per_page(), 0xFF);
    stripe_.FillParityMeta(m.data(), seq, mask, std::vector<uint8_t>(f::MetaBytes(kSpp), 0), kEpoch);
    return m;
  }
  std::vector<uint8_t> Erased() const { return std::vector<uint8_t>(geo_.meta_bytes_per_page(), 0xFF); }
  // A trim page: its records in the data area, their count and CRC in entry 0.
  std::pair<std::vector<uint8_t>, std::vector<uint8_t>> TrimPage(uint64_t seq,
                                                                 const std::vector<f::TrimRecord>& recs) const {
    std::vector<uint8_t> data(geo_.page_data_bytes, 0);
    std::memcpy(data.data(), recs.data(), recs.size() * sizeof(f::TrimRecord));
    return {Spare(f::PageType::kTrim, seq, {recs.size()}, kEpoch, Crc32c(data.data(), data.size())), data};
  }
  void Put(uint32_t leb, uint32_t die, uint32_t page, std::vector<uint8_t> spare, bool ok = true) {
    const uint64_t i = img_.Index(leb, die, page);
    img_.meta[i] = std::move(spare);
    img_.ok[i] = ok;
  }
  std::vector<uint32_t> AllDies() const { return {0, 1, 2, 3}; }

  nand::Geometry geo_;
  StripeLayout stripe_;
  PsaLayout addr_;
  ScanImage img_;
  ScanFormat fmt_;
};

TEST_F(RecoveryTest, FirstRowTellsWrittenUnchangedAndErasedLebs) {
  // No base checkpoint: every LEB is read.
  EXPECT_EQ(JudgeFirstRow(img_, 2, AllDies(), fmt_, 0), ScanImage::kRead);
  // Everything erased: the LEB was being reused when the power went.
  for (uint32_t d = 0; d < 4; ++d) Put(2, d, 0, Erased());
  EXPECT_EQ(JudgeFirstRow(img_, 2, AllDies(), fmt_, 100), ScanImage::kErased);
  // Erased and torn (a failed read, a bad CRC) still count as erased.
  Put(2, 1, 0, Erased(), false);
  auto bad = Spare(f::PageType::kData, 150, {1});
  bad[20] ^= 1;
  Put(2, 2, 0, bad);
  EXPECT_EQ(JudgeFirstRow(img_, 2, AllDies(), fmt_, 100), ScanImage::kErased);
  // A valid page at or before the base: unchanged since, the checkpoint describes it.
  Put(2, 3, 0, Spare(f::PageType::kData, 90, {1}));
  EXPECT_EQ(JudgeFirstRow(img_, 2, AllDies(), fmt_, 100), ScanImage::kUnchanged);
  // A page of another epoch is not newer (a remnant of an older format).
  Put(2, 0, 0, Spare(f::PageType::kData, 500, {1}, kEpoch + 1));
  EXPECT_EQ(JudgeFirstRow(img_, 2, AllDies(), fmt_, 100), ScanImage::kUnchanged);
  // A parity page newer than the base is enough: its data may not have landed.
  Put(2, 0, 0, ParitySpare(101, 0b1110));
  EXPECT_EQ(JudgeFirstRow(img_, 2, AllDies(), fmt_, 100), ScanImage::kRead);
  // Only the dies listed (the LEB's good dies) are looked at.
  EXPECT_EQ(JudgeFirstRow(img_, 2, {3}, fmt_, 100), ScanImage::kUnchanged);
}

TEST_F(RecoveryTest, RowWrittenUnlessEveryDieReadsErased) {
  for (uint32_t d = 0; d < 4; ++d) Put(3, d, 5, Erased());
  EXPECT_FALSE(RowWritten(img_, 3, 5, AllDies()));
  Put(3, 2, 5, Erased(), false);  // unreadable: it may hold something
  EXPECT_TRUE(RowWritten(img_, 3, 5, AllDies()));
  EXPECT_FALSE(RowWritten(img_, 3, 5, {0, 1, 3}));
}

TEST_F(RecoveryTest, SortScanPagesByKindCountingTornAndTheNewestSeq) {
  Put(0, 0, 0, Spare(f::PageType::kData, 999, {1}));  // metadata LEB: never replayed
  Put(2, 0, 0, Spare(f::PageType::kData, 11, {1}));
  Put(2, 1, 0, Spare(f::PageType::kTrim, 12, {1}));
  Put(2, 2, 0, Spare(f::PageType::kAtomicData, 13, {1}));
  Put(2, 3, 0, ParitySpare(30, 0b0111));                   // counts for the seq only
  Put(2, 0, 1, Spare(f::PageType::kData, 4, {2}));         // at or before the base
  Put(2, 1, 1, Spare(f::PageType::kData, 80, {3}, 1));     // another epoch: ignored
  Put(2, 2, 1, Erased());                                  // erased: not torn
  auto bad = Spare(f::PageType::kData, 14, {4});
  bad[30] ^= 0x40;
  Put(2, 3, 1, bad);                                       // bad CRC: torn
  Put(3, 0, 0, Spare(f::PageType::kData, 15, {5}), false); // failed read: torn
  const ScanPages pages = SortScanPages(img_, fmt_, 10, 20);
  ASSERT_EQ(pages.data.size(), 1u);
  EXPECT_EQ(pages.data[0].seq, 11u);
  ASSERT_EQ(pages.trim.size(), 1u);
  EXPECT_EQ(pages.trim[0].die, 1u);
  ASSERT_EQ(pages.atomic.size(), 1u);
  EXPECT_EQ(pages.atomic[0].seq, 13u);
  EXPECT_EQ(pages.max_seq, 30u);  // the parity page's, over the floor of 20
  EXPECT_EQ(pages.scanned, 9u);
  EXPECT_EQ(pages.torn, 2u);
  // The floor stands when nothing is newer; the base's own pages count towards it.
  EXPECT_EQ(SortScanPages(img_, fmt_, 10, 50).max_seq, 50u);
  // Without a base, the page at seq 4 is replayed too.
  EXPECT_EQ(SortScanPages(img_, fmt_, 0, 0).data.size(), 2u);
}

TEST_F(RecoveryTest, PlanReplaysBySeqWithCommitsAfterTheirTrims) {
  // Data: lba 8 at seq 21, lba 9 at seq 23. Atomic member page at seq 22 (lba 8), committed
  // at seq 25 with a trim of lba 9 in the same commit; a stale record (seq 5 <= base 10);
  // commit records naming another seq and no page.
  Put(2, 0, 0, Spare(f::PageType::kData, 21, {8}));
  Put(2, 1, 0, Spare(f::PageType::kAtomicData, 22, {8}));
  Put(2, 2, 0, Spare(f::PageType::kData, 23, {9}));
  const Psa member = addr_.Make(2, 1, 0, 0);
  const auto [trim_spare, td] = TrimPage(25, {
      {9, 1, 25},                             // the batch's trim
      {22, f::kCommitFlag | member, 25},      // its member: lba = the member page's seq
      {0, 4, 5},                              // carried forward from before the base
  });
  Put(2, 3, 1, trim_spare);
  // A second trim page: a commit naming seq 40 at the member's PSA, and one naming a PSA
  // where there is no atomic page.
  const auto [t2_spare, t2_data] = TrimPage(26, {
      {40, f::kCommitFlag | member, 26},
      {22, f::kCommitFlag | addr_.Make(2, 0, 0, 0), 26},
  });
  Put(3, 0, 0, t2_spare);
  // A third whose data does not match its CRC: torn, its records ignored.
  auto [t3_spare, t3_data] = TrimPage(27, {{8, 1, 27}});
  t3_data[0] ^= 1;
  Put(3, 1, 0, t3_spare);

  const ScanPages pages = SortScanPages(img_, fmt_, 10, 0);
  ASSERT_EQ(pages.trim.size(), 3u);
  const ReplayPlan plan = PlanReplay(img_, pages, {td, t2_data, t3_data}, addr_, 10);
  ASSERT_EQ(plan.events.size(), 4u);
  EXPECT_EQ(plan.events[0].seq, 21u);
  EXPECT_EQ(plan.events[0].kind, ReplayEvent::kData);
  EXPECT_EQ(plan.events[1].seq, 23u);
  EXPECT_EQ(plan.events[1].kind, ReplayEvent::kData);
  // At the commit's seq, the batch's trim first, then its member.
  EXPECT_EQ(plan.events[2].seq, 25u);
  EXPECT_EQ(plan.events[2].kind, ReplayEvent::kTrim);
  EXPECT_EQ(plan.events[2].a, 9u);
  EXPECT_EQ(plan.events[2].b, 1u);
  EXPECT_EQ(plan.events[3].seq, 25u);
  EXPECT_EQ(plan.events[3].kind, ReplayEvent::kCommitted);
  EXPECT_EQ(pages.atomic[plan.events[3].a].seq, 22u);
  ASSERT_EQ(plan.unmatched.size(), 2u);
  EXPECT_TRUE(plan.unmatched[0].page_there);
  EXPECT_EQ(plan.unmatched[0].member_seq, 40u);
  EXPECT_FALSE(plan.unmatched[1].page_there);
  EXPECT_EQ(plan.torn, 1u);
  // The two readable trim pages are listed for the LEB table, the torn one is not.
  ASSERT_EQ(plan.trim_pages.size(), 2u);
  EXPECT_EQ(plan.trim_pages[0], std::make_pair(2u, 1u * D() + 3u));
  EXPECT_EQ(plan.trim_pages[1], std::make_pair(3u, 0u));
  // Seq spans per LEB cover every replayable page, trim and atomic ones included.
  EXPECT_TRUE(plan.seen[2]);
  EXPECT_EQ(plan.first[2], 21u);
  EXPECT_EQ(plan.last[2], 25u);
  EXPECT_EQ(plan.first[3], 26u);
  EXPECT_EQ(plan.last[3], 27u);
  EXPECT_FALSE(plan.seen[4]);
  // A trim page whose data could not be read or rebuilt is skipped, not torn.
  const ReplayPlan without = PlanReplay(img_, pages, {{}, t2_data, t3_data}, addr_, 10);
  EXPECT_EQ(without.events.size(), 2u);
  EXPECT_EQ(without.trim_pages.size(), 1u);
}

TEST_F(RecoveryTest, RebuildsMembersTheParityNamesThatCouldNotBeRead) {
  Put(2, 0, 4, ParitySpare(50, 0b0110));
  Put(2, 1, 4, Spare(f::PageType::kData, 48, {1}), false);  // unreadable
  Put(2, 2, 4, Spare(f::PageType::kData, 49, {2}));
  // Die 3 is not a member: not rebuilt, though not read.
  const auto todo = PagesToRebuild(img_, fmt_);
  ASSERT_EQ(todo.size(), 1u);
  EXPECT_EQ(todo[0].first, img_.Index(2, 1, 4));
  EXPECT_EQ(todo[0].second, (std::array<uint32_t, 3>{2, 1, 4}));
  // A parity page of the metadata LEBs is not looked at.
  Put(1, 0, 0, ParitySpare(50, 0b0010));
  EXPECT_EQ(PagesToRebuild(img_, fmt_).size(), 1u);
}

TEST_F(RecoveryTest, SummaryBecomesSparesAndListsTrimPages) {
  std::vector<uint64_t> grid(uint64_t{D()} * P() * (1 + kSpp), 0);
  auto put = [&](uint32_t row, uint32_t die, f::PageType t, uint64_t seq, std::vector<uint64_t> lbas) {
    uint64_t* ent = &grid[(uint64_t{row} * D() + die) * (1 + kSpp)];
    ent[0] = seq | (uint64_t{static_cast<uint8_t>(t)} << f::kSummaryTypeShift);
    for (uint32_t s = 0; s < kSpp; ++s) ent[1 + s] = s < lbas.size() ? lbas[s] : f::kNoLba;
  };
  put(0, 0, f::PageType::kData, 31, {100, 101});
  put(0, 1, f::PageType::kParity, 44, {});
  put(1, 2, f::PageType::kTrim, 35, {});
  put(2, 3, f::PageType::kAtomicData, 36, {7});
  Put(4, 1, 0, Erased());
  const auto trims = ExpandSummary(grid, 4, geo_.meta_bytes_per_page(), fmt_, img_);
  ASSERT_EQ(trims.size(), 1u);
  EXPECT_EQ(trims[0], 1u * D() + 2);
  EXPECT_EQ(img_.summary_max_seq, 44u);
  EXPECT_TRUE(img_.meta[img_.Index(4, 1, 0)].empty());  // parity: dropped
  const uint8_t* m = img_.Spare(img_.Index(4, 0, 0));
  ASSERT_NE(m, nullptr);
  EXPECT_TRUE(fmt_.HeaderValid(m));
  const auto* e = reinterpret_cast<const f::SectorEntry*>(m + sizeof(f::PageHeader));
  EXPECT_EQ(uint64_t{e[0].lba}, 100u);
  EXPECT_EQ(uint64_t{e[1].lba}, 101u);
  // What the summary rebuilt sorts as the pages themselves would.
  const ScanPages pages = SortScanPages(img_, fmt_, 0, 0);
  ASSERT_EQ(pages.data.size(), 1u);
  EXPECT_EQ(pages.data[0].seq, 31u);
  ASSERT_EQ(pages.atomic.size(), 1u);
  EXPECT_EQ(pages.atomic[0].page, 2u);
}

TEST_F(RecoveryTest, MembersAreCoveredOnlyByALaterParityNamingThem) {
  auto d0 = Spare(f::PageType::kData, 10, {1});
  auto d1 = Spare(f::PageType::kData, 11, {2});
  auto d2 = Spare(f::PageType::kData, 13, {3});
  auto par = ParitySpare(12, 0b0011);
  bool has_parity = false;
  EXPECT_EQ(UncoveredMembers({d0.data(), d1.data(), d2.data(), par.data()}, fmt_, &has_parity), 0b0100u);
  EXPECT_TRUE(has_parity);
  // Without the parity page every member is uncovered.
  EXPECT_EQ(UncoveredMembers({d0.data(), d1.data(), d2.data(), nullptr}, fmt_, &has_parity), 0b0111u);
  EXPECT_FALSE(has_parity);
  // A member of another epoch is no member.
  auto old = Spare(f::PageType::kData, 13, {3}, 1);
  EXPECT_EQ(UncoveredMembers({d0.data(), d1.data(), old.data(), par.data()}, fmt_, nullptr), 0u);
}

TEST_F(RecoveryTest, RowsCoveredListsUncoveredDataAndRefusesUncoveredTrims) {
  LebTable lebs(kLebs, D(), addr_.slots_per_leb(), 1000);
  DieHealth dies(D(), 0, 0);
  Leb& l = lebs.leb(2);
  l.good.assign(D(), 1);
  Put(2, 0, 0, Spare(f::PageType::kData, 10, {1}));
  Put(2, 1, 0, Spare(f::PageType::kData, 11, {2}));
  Put(2, 2, 0, ParitySpare(12, 0b0011));
  Put(2, 0, 1, Spare(f::PageType::kData, 13, {3}));  // row 1: no parity yet
  std::vector<std::array<uint32_t, 3>> reprotect;
  EXPECT_TRUE(RowsCovered(img_, 2, l, dies, fmt_, reprotect));
  ASSERT_EQ(reprotect.size(), 1u);
  EXPECT_EQ(reprotect[0], (std::array<uint32_t, 3>{2, 0, 1}));
  Put(2, 1, 1, Spare(f::PageType::kTrim, 14, {0}));
  reprotect.clear();
  EXPECT_FALSE(RowsCovered(img_, 2, l, dies, fmt_, reprotect));
  // A LEB formed with a die since failed: rows without parity are the rebuild's.
  dies.MarkFailed(3);
  reprotect.clear();
  EXPECT_TRUE(RowsCovered(img_, 2, l, dies, fmt_, reprotect));
  EXPECT_TRUE(reprotect.empty());
}

TEST_F(RecoveryTest, UnnamedLostStripesNeedTwoFailedDiesAndAWriteSinceTheBase) {
  LebTable lebs(kLebs, D(), addr_.slots_per_leb(), 1000);
  for (uint32_t i = 0; i < kLebs; ++i) lebs.leb(i).good.assign(D(), 1);
  DieHealth dies(D(), 0, 0);
  // Row 0: parity names die 1, whose page is gone. Row 1: no parity, dies 1 and 2 gone,
  // die 0 holds a page newer than the base.
  Put(2, 0, 0, Spare(f::PageType::kData, 20, {1}));
  Put(2, 3, 0, ParitySpare(21, 0b0011));
  Put(2, 0, 1, Spare(f::PageType::kData, 22, {2}));
  Put(2, 3, 1, Erased());
  dies.MarkFailed(1);
  EXPECT_EQ(UnnamedLostStripes(img_, lebs, dies, fmt_, 10), 0u);  // one failed die: never
  dies.MarkFailed(2);
  EXPECT_EQ(UnnamedLostStripes(img_, lebs, dies, fmt_, 10), 2u);
  // Nothing written since the base in row 1 (and no parity in it): not counted; row 0's
  // parity still names its lost member.
  EXPECT_EQ(UnnamedLostStripes(img_, lebs, dies, fmt_, 30), 1u);
  // A LEB left as the checkpoint had it is not the scan's.
  img_.skipped[2] = ScanImage::kUnchanged;
  EXPECT_EQ(UnnamedLostStripes(img_, lebs, dies, fmt_, 10), 0u);
}

}  // namespace
}  // namespace vsl::ftl
