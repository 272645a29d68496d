// The FTL's basic contract: format, write/read, overwrite, trim, flush, checkpoint and
// scan recovery, grooming, and bad input.
#include <gtest/gtest.h>

#include "tests/ftl/ftl_fixture.h"

namespace vsl::testing {
namespace {

class FtlBasicTest : public FtlFixture {
 protected:
  void SetUp() override {
    MakeCard();
    ASSERT_TRUE(Format().ok());
    ASSERT_TRUE(Attach().ok());
  }
};

TEST_F(FtlBasicTest, FreshDeviceReadsZeroesAndHasStockCapacity) {
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(0, 4, &out).ok());
  EXPECT_EQ(out, std::vector<uint8_t>(4 * 4096, 0));
  // test-small pipe: 30 data LEBs x (3 data dies + 1 parity) x 16 pages x 1 sector, less
  // one summary page per LEB; 8 LEBs reserved for the groomer, / 1.28 for stock spare;
  // factory bad blocks take a little off.
  EXPECT_TRUE(ftl_->flashback_status().enabled);
  const auto ideal = static_cast<uint64_t>((30 - 8) * (3 * 16 - 1) / 1.28);
  EXPECT_LE(ftl_->sectors(), ideal);
  EXPECT_GE(ftl_->sectors(), ideal * 95 / 100);
  EXPECT_FALSE(ftl_->attach_info().from_checkpoint);
}

TEST_F(FtlBasicTest, WriteReadOverwrite) {
  ASSERT_TRUE(Write(10, Sector(10, 1, 3)).ok());
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(10, 3, &out).ok());
  EXPECT_EQ(out, Sector(10, 1, 3));
  ASSERT_TRUE(Write(11, Sector(11, 2)).ok());
  ASSERT_TRUE(Read(10, 3, &out).ok());
  auto want = Sector(10, 1, 3);
  auto mid = Sector(11, 2);
  std::copy(mid.begin(), mid.end(), want.begin() + 4096);
  EXPECT_EQ(out, want);
  EXPECT_TRUE(ftl_->Exists(11));
  EXPECT_FALSE(ftl_->Exists(13));
}

TEST_F(FtlBasicTest, TrimReadsZeroesAndSurvivesCheckpointAndScan) {
  ASSERT_TRUE(Write(0, Sector(0, 1, 8)).ok());
  ASSERT_TRUE(Trim(2, 3).ok());
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(2, 3, &out).ok());
  EXPECT_EQ(out, std::vector<uint8_t>(3 * 4096, 0));
  { Status s = Shutdown(); ASSERT_TRUE(s.ok()) << s.ToString(); }
  ASSERT_TRUE(Attach().ok());
  EXPECT_TRUE(ftl_->attach_info().from_checkpoint);
  ASSERT_TRUE(Read(0, 8, &out).ok());
  auto want = Sector(0, 1, 8);
  std::fill(want.begin() + 2 * 4096, want.begin() + 5 * 4096, 0);
  EXPECT_EQ(out, want);
  PowerCycle();  // unclean: checkpoint plus the (empty) scan of LEBs written since
  ASSERT_TRUE(Attach().ok());
  EXPECT_FALSE(ftl_->attach_info().from_checkpoint);
  EXPECT_TRUE(ftl_->attach_info().checkpoint_plus_scan);
  EXPECT_EQ(ftl_->attach_info().lebs_scanned, 0u);
  ASSERT_TRUE(Read(0, 8, &out).ok());
  EXPECT_EQ(out, want);
}

TEST_F(FtlBasicTest, UncleanAfterCheckpointScansOnlyWhatWasWrittenSince) {
  const uint64_t n = ftl_->sectors();
  for (uint64_t lba = 0; lba < n; ++lba) ASSERT_TRUE(Write(lba, Sector(lba, 1)).ok());
  ASSERT_TRUE(Trim(10, 5).ok());
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach().ok());
  ASSERT_TRUE(ftl_->attach_info().from_checkpoint);
  for (uint64_t lba = 100; lba < 140; ++lba) ASSERT_TRUE(Write(lba, Sector(lba, 2)).ok());
  ASSERT_TRUE(Trim(0, 3).ok());
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  EXPECT_TRUE(ftl_->attach_info().checkpoint_plus_scan);
  EXPECT_LE(ftl_->attach_info().lebs_scanned, 2u) << "only LEBs opened since the checkpoint";
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < n; ++lba) {
    ASSERT_TRUE(Read(lba, 1, &out).ok());
    const bool trimmed = lba < 3 || (lba >= 10 && lba < 15);
    const uint64_t v = lba >= 100 && lba < 140 ? 2 : 1;
    ASSERT_EQ(out, trimmed ? std::vector<uint8_t>(4096, 0) : Sector(lba, v)) << lba;
  }
  // A second crash: the attach above wrote a dirty checkpoint, so recovery again starts
  // from a checkpoint and reads only what was written since (nothing).
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  EXPECT_TRUE(ftl_->attach_info().checkpoint_plus_scan);
  EXPECT_EQ(ftl_->attach_info().lebs_scanned, 0u);
  for (uint64_t lba = 0; lba < n; lba += 5) {
    ASSERT_TRUE(Read(lba, 1, &out).ok());
    const bool trimmed = lba < 3 || (lba >= 10 && lba < 15);
    const uint64_t v = lba >= 100 && lba < 140 ? 2 : 1;
    ASSERT_EQ(out, trimmed ? std::vector<uint8_t>(4096, 0) : Sector(lba, v)) << lba;
  }
}

// A crash after much writing: every LEB closed since the checkpoint is read through its
// summary (row 0, the last row, the summary's data) instead of page by page, and the
// data, overwrites and trims come back exactly.
TEST_F(FtlBasicTest, CrashScanReadsClosedLebsThroughTheirSummaries) {
  const uint64_t n = ftl_->sectors();
  for (uint64_t lba = 0; lba < n; ++lba) ASSERT_TRUE(Write(lba, Sector(lba, 1)).ok());
  ASSERT_TRUE(Trim(20, 7).ok());
  for (uint64_t lba = 0; lba < n; lba += 2) ASSERT_TRUE(Write(lba, Sector(lba, 2)).ok());
  ASSERT_TRUE(Trim(41, 2).ok());
  EXPECT_GT(ftl_->stats().summary_pages, 0u);
  const uint64_t programmed = ftl_->stats().pages_programmed;
  clock_.RunUntilIdle();
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  const auto& ai = ftl_->attach_info();
  EXPECT_TRUE(ai.checkpoint_plus_scan);
  EXPECT_GE(ai.lebs_scanned, 4u);
  EXPECT_GE(ai.summaries_used + 2, ai.lebs_scanned) << "all but the open LEBs had a summary";
  // A LEB read page by page costs a spare read per page; through the summary, two rows
  // and one page of data.
  EXPECT_LT(ai.pages_read * 3, programmed) << ai.pages_read << " reads";
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < n; ++lba) {
    ASSERT_TRUE(Read(lba, 1, &out).ok()) << lba;
    const bool trimmed = (lba >= 20 && lba < 27 && lba % 2 == 1) || lba == 41 || lba == 42;
    const uint64_t v = lba % 2 == 0 ? 2 : 1;
    ASSERT_EQ(out, trimmed ? std::vector<uint8_t>(4096, 0) : Sector(lba, v)) << lba;
  }
}

// Summaries that never reached flash (their programs fail) leave their LEBs to the
// page-by-page scan: nothing is lost.
TEST_F(FtlBasicTest, LebsWithoutASummaryAreScannedPageByPage) {
  const auto& g = card_->geometry();
  // With 4 good dies, row 15's parity is on die 3 (rotation) and the one summary page
  // takes the last data position: die 2, page 15. Its program fails on every even LEB.
  for (uint32_t b = 2; b < g.blocks_per_lun; b += 2) {
    card_->InjectProgramFail(0, {2, b, g.pages_per_block - 1});
  }
  const uint64_t n = ftl_->sectors();
  for (uint64_t lba = 0; lba < n; ++lba) ASSERT_TRUE(Write(lba, Sector(lba, 1)).ok());
  for (uint64_t lba = 0; lba < n; lba += 3) {
    Status s = Write(lba, Sector(lba, 2));
    ASSERT_TRUE(s.ok()) << lba << ": " << s.ToString();
  }
  EXPECT_GT(ftl_->stats().program_failures, 0u);
  clock_.RunUntilIdle();
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  const auto& ai = ftl_->attach_info();
  EXPECT_GT(ai.summaries_used, 0u);
  EXPECT_LT(ai.summaries_used + 2, ai.lebs_scanned) << "some LEBs were read page by page";
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < n; ++lba) {
    ASSERT_TRUE(Read(lba, 1, &out).ok()) << lba;
    ASSERT_EQ(out, Sector(lba, lba % 3 == 0 ? 2 : 1)) << lba;
  }
}

TEST_F(FtlBasicTest, OutOfRangeIsInvalidArgument) {
  std::vector<uint8_t> out;
  EXPECT_EQ(Read(ftl_->sectors(), 1, &out).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Write(ftl_->sectors() - 1, Sector(0, 1, 2)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Trim(0, ftl_->sectors() + 1).code(), StatusCode::kInvalidArgument);
}

TEST_F(FtlBasicTest, MissingBuffersAndWorkAfterShutdownAreRefused) {
  EXPECT_EQ(Sync([&](ftl::Ftl::Done d) { ftl_->Write(0, 1, nullptr, false, std::move(d)); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Sync([&](ftl::Ftl::Done d) { ftl_->Read(0, 1, nullptr, std::move(d)); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Trim(0, 0).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(Write(0, Sector(0, 1)).ok()) << "nothing was damaged by the refusals";
  ASSERT_TRUE(Sync([&](ftl::Ftl::Done d) { ftl_->Shutdown(std::move(d)); }).ok());
  auto data = Sector(1, 1);
  std::vector<uint8_t> out(4096);
  EXPECT_EQ(Sync([&](ftl::Ftl::Done d) { ftl_->Write(1, 1, data.data(), false, std::move(d)); }).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(Sync([&](ftl::Ftl::Done d) { ftl_->Read(0, 1, out.data(), std::move(d)); }).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(Trim(0, 1).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Sync([&](ftl::Ftl::Done d) { ftl_->Flush(std::move(d)); }).code(),
            StatusCode::kFailedPrecondition);
  ftl_.reset();
  ASSERT_TRUE(Attach().ok());
  ASSERT_TRUE(Read(0, 1, &out).ok());
  EXPECT_EQ(out, Sector(0, 1));
}

TEST_F(FtlBasicTest, FillingTheDeviceManyTimesGroomsAndKeepsData) {
  const uint64_t n = ftl_->sectors();
  for (uint64_t round = 1; round <= 4; ++round) {
    for (uint64_t lba = 0; lba < n; ++lba) { Status s = Write(lba, Sector(lba, round)); ASSERT_TRUE(s.ok()) << lba << " round " << round << " " << s.ToString(); }
  }
  EXPECT_GT(ftl_->stats().victims, 0u);
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < n; ++lba) {
    ASSERT_TRUE(Read(lba, 1, &out).ok());
    ASSERT_EQ(out, Sector(lba, 4)) << lba;
  }
  { Status s = Shutdown(); ASSERT_TRUE(s.ok()) << s.ToString(); }
  ASSERT_TRUE(Attach().ok());
  for (uint64_t lba = 0; lba < n; lba += 7) {
    ASSERT_TRUE(Read(lba, 1, &out).ok());
    ASSERT_EQ(out, Sector(lba, 4)) << lba;
  }
}

TEST_F(FtlBasicTest, UnformattedPipeIsNotFound) {
  ftl_.reset();
  std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
  ftl::Ftl::Open(card_->pipe(1), clock_, {}, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
  clock_.RunUntilTrue([&] { return r.has_value(); });
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status().code(), StatusCode::kNotFound) << r->status().ToString();
}

}  // namespace
}  // namespace vsl::testing
