// Bad blocks (factory and grown), dead dies, resets and attach-time discovery.
#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"
#include "vsl/nand/discover.h"

namespace vsl::testing {
namespace {

class FaultsTest : public CardFixture {};

TEST_F(FaultsTest, FactoryBadBlocksAreMarkedInTheSpareAsVendorsDo) {
  // A high bad fraction so that every die has some.
  Make("duo-slc-small", {.serial = "", .seed = 3, .blocks_per_lun = 64});
  uint32_t found = 0;
  for (uint32_t p = 0; p < card_->pipe_count(); ++p) {
    for (uint32_t die = 0; die < g().dies_per_pipe(); ++die) {
      EXPECT_FALSE(card_->block_info(p, die, 0).factory_bad) << "block 0 is guaranteed good";
      for (uint32_t b = 0; b < g().blocks_per_lun; ++b) {
        // The host's scan: byte 0 of the first page's spare is not 0xFF on a bad block.
        std::vector<uint8_t> meta;
        ASSERT_TRUE(Read(p, {die, b, 0}, nullptr, &meta).ok());
        const bool marked = meta[0] != 0xFF;
        EXPECT_EQ(marked, card_->block_info(p, die, b).factory_bad) << p << "/" << die << "/" << b;
        found += marked;
      }
    }
  }
  const auto h0 = card_->Health(0), h1 = card_->Health(1);
  EXPECT_EQ(found, h0.factory_bad_blocks + h1.factory_bad_blocks);
  // 0.5% of 6144 blocks: expect a handful, never more than the parameter page's maximum.
  EXPECT_GT(found, 5u);
  EXPECT_LT(found, 100u);
}

TEST_F(FaultsTest, ProgramAndEraseOfAFactoryBadBlockFail) {
  Make("duo-slc-small", {.serial = "", .seed = 3, .blocks_per_lun = 64});
  for (uint32_t die = 0; die < g().dies_per_pipe(); ++die) {
    for (uint32_t b = 0; b < g().blocks_per_lun; ++b) {
      if (!card_->block_info(0, die, b).factory_bad) continue;
      EXPECT_EQ(Erase(0, die, b).status, FlashStatus::kEraseFail);
      EXPECT_EQ(Program(0, {die, b, 1}, Pattern(1, page_bytes())).status, FlashStatus::kProgramFail);
      std::vector<uint8_t> meta;
      ASSERT_TRUE(Read(0, {die, b, 0}, nullptr, &meta).ok());
      EXPECT_NE(meta[0], 0xFF) << "the marker survives";
      return;
    }
  }
  FAIL() << "no factory bad block on pipe 0";
}

TEST_F(FaultsTest, ProgramFailureGrowsABadBlockThatStaysBad) {
  Make("test-small");
  const uint32_t b = GoodBlock(0, 1, 1);
  ASSERT_TRUE(Erase(0, 1, b).ok());
  auto d0 = Pattern(0, page_bytes());
  ASSERT_TRUE(Program(0, {1, b, 0}, d0).ok());
  card_->InjectProgramFail(0, {1, b, 1});
  std::optional<Completion> acc;
  Completion c = Program(0, {1, b, 1}, Pattern(1, page_bytes()), nullptr, &acc);
  EXPECT_TRUE(acc.has_value() && acc->ok()) << "the controller accepted it before the die failed";
  EXPECT_EQ(c.status, FlashStatus::kProgramFail);
  EXPECT_TRUE(card_->block_info(0, 1, b).grown_bad);
  std::vector<uint8_t> d;
  EXPECT_EQ(Read(0, {1, b, 1}, &d).status, FlashStatus::kUncorrectable);
  ASSERT_TRUE(Read(0, {1, b, 0}, &d).ok()) << "earlier pages stay readable for relocation";
  EXPECT_EQ(d, d0);
  EXPECT_EQ(Program(0, {1, b, 2}, Pattern(2, page_bytes())).status, FlashStatus::kProgramFail);
  EXPECT_EQ(Erase(0, 1, b).status, FlashStatus::kEraseFail);
  Reopen();
  EXPECT_TRUE(card_->block_info(0, 1, b).grown_bad);
  EXPECT_EQ(Erase(0, 1, b).status, FlashStatus::kEraseFail);
  EXPECT_EQ(card_->Health(0).grown_bad_blocks, 1u);
}

TEST_F(FaultsTest, EraseFailureGrowsABadBlock) {
  Make("test-small");
  const uint32_t b = GoodBlock(1, 2, 1);
  card_->InjectEraseFail(1, 2, b);
  EXPECT_EQ(Erase(1, 2, b).status, FlashStatus::kEraseFail);
  EXPECT_TRUE(card_->block_info(1, 2, b).grown_bad);
  EXPECT_EQ(card_->stats(1).erase_fails, 1u);
}

TEST_F(FaultsTest, WearOutFailuresAppearFarPastEndurance) {
  Make("test-wear");
  uint32_t fails = 0;
  for (uint32_t b = 1; b < g().blocks_per_lun; ++b) {
    if (card_->block_info(0, 0, b).factory_bad) continue;
    card_->TEST_SetEraseCount(0, 0, b, 600);  // 6x endurance: p_fail about 1.3
    fails += Erase(0, 0, b).status == FlashStatus::kEraseFail;
  }
  EXPECT_GT(fails, 20u);
}

TEST_F(FaultsTest, DeadDieTimesOutAndStaysDeadOthersUnaffected) {
  Make("test-small");
  const uint32_t b = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  card_->InjectDieFailure(0, 3);
  const TimeNs t0 = clock_.Now();
  Completion c = Erase(0, 3, 1);
  EXPECT_EQ(c.status, FlashStatus::kDieTimeout);
  EXPECT_EQ(c.complete_ns - t0, card_->timing().die_timeout_ns);
  std::vector<uint8_t> d;
  EXPECT_EQ(Read(0, {3, 1, 0}, &d).status, FlashStatus::kDieTimeout);
  EXPECT_TRUE(Program(0, {0, b, 0}, Pattern(1, page_bytes())).ok());
  Reopen();
  EXPECT_TRUE(card_->die_failed(0, 3));
  EXPECT_EQ(Read(0, {3, 1, 0}, &d).status, FlashStatus::kDieTimeout);
  EXPECT_EQ(card_->Health(0).failed_dies, 1u);
}

TEST_F(FaultsTest, DieDyingMidProgramTearsThePageAndTimesOutTheQueue) {
  Make("test-small");
  const uint32_t b = GoodBlock(0, 1, 1);
  ASSERT_TRUE(Erase(0, 1, b).ok());
  auto d = Pattern(1, page_bytes());
  std::vector<Completion> done;
  for (uint32_t pg = 0; pg < 3; ++pg) {
    pipe(0).Program({{1, b, pg}, d.data(), nullptr}, nullptr,
                    [&](const Completion& c) { done.push_back(c); });
  }
  clock_.RunFor(100 * kUs);  // first program is in tPROG
  card_->InjectDieFailure(0, 1);
  clock_.RunUntilIdle();
  ASSERT_EQ(done.size(), 3u);
  for (auto& c : done) EXPECT_EQ(c.status, FlashStatus::kDieTimeout);
  EXPECT_EQ(card_->Health(0).torn_pages, 1u);
}

TEST_F(FaultsTest, ResetAbortsQueuedWorkAndTearsTheRunningProgram) {
  Make("test-small");
  const uint32_t b = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  auto d = Pattern(1, page_bytes());
  std::vector<FlashStatus> st;
  for (uint32_t pg = 0; pg < 3; ++pg) {
    pipe(0).Program({{0, b, pg}, d.data(), nullptr}, nullptr,
                    [&](const Completion& c) { st.push_back(c.status); });
  }
  clock_.RunFor(100 * kUs);
  std::optional<Completion> r;
  pipe(0).Reset(0, [&](const Completion& c) { r = c; });
  RunUntil(r);
  clock_.RunUntilIdle();
  EXPECT_TRUE(r->ok());
  EXPECT_EQ(st, (std::vector<FlashStatus>(3, FlashStatus::kAborted)));
  std::vector<uint8_t> got;
  const auto first = Read(0, {0, b, 0}, &got).status;
  EXPECT_TRUE(first == FlashStatus::kUncorrectable || got != d) << "page 0 was torn";
  EXPECT_EQ(card_->block_info(0, 0, b).next_page, 1u);
  EXPECT_TRUE(Program(0, {0, b, 1}, d).ok()) << "the die works after reset";
}

class DiscoverTest : public CardFixture {
 protected:
  Result<nand::DiscoveredPipe> Discover(uint32_t p) {
    std::optional<Result<nand::DiscoveredPipe>> out;
    nand::DiscoverPipe(pipe(p), [&](Result<nand::DiscoveredPipe> r) { out = std::move(r); });
    EXPECT_TRUE(clock_.RunUntilTrue([&] { return out.has_value(); }));
    return out.has_value() ? std::move(*out) : Result<nand::DiscoveredPipe>(Status::Internal("none"));
  }
};

TEST_F(DiscoverTest, GeometryComesFromReadIdAndParameterPage) {
  Make("duo-slc-small");
  for (uint32_t p = 0; p < 4; ++p) {
    auto r = Discover(p);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->geometry, g());
    EXPECT_EQ(r->param.manufacturer, "OPENVSL");
    EXPECT_EQ(r->param.tr_max_us, 25);
    EXPECT_EQ(r->param.tprog_max_us, 200);
    EXPECT_EQ(r->param.endurance_cycles, 100'000u);
    EXPECT_TRUE(r->silent_dies.empty());
  }
}

TEST_F(DiscoverTest, DamagedFirstCopyFallsBackDeadDieIsReported) {
  Make("test-small");
  card_->CorruptParameterPage(0, 1, 0b001);
  card_->CorruptParameterPage(0, 2, 0b011);
  card_->InjectDieFailure(0, 3);
  auto r = Discover(0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->geometry, g());
  EXPECT_EQ(r->dies_on_backup_copy, (std::vector<uint32_t>{1, 2}));
  EXPECT_EQ(r->silent_dies, (std::vector<uint32_t>{3}));
}

TEST_F(DiscoverTest, NoValidCopyIsAClearCorruptionError) {
  Make("test-small");
  card_->CorruptParameterPage(0, 2, 0b111);
  auto r = Discover(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCorruption);
  EXPECT_NE(r.status().message().find("die 2"), std::string::npos) << r.status().ToString();
  EXPECT_NE(r.status().message().find("no valid parameter page"), std::string::npos)
      << r.status().ToString();
}

TEST_F(DiscoverTest, AllDiesDeadIsAnError) {
  Make("test-tiny");
  card_->InjectDieFailure(0, 0);
  card_->InjectDieFailure(0, 1);
  auto r = Discover(0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kIOError) << r.status().ToString();
}

}  // namespace
}  // namespace vsl::testing
