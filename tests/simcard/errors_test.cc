// Bit errors: the raw bit error rate model and the statistical ECC decision.
#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"

namespace vsl::testing {
namespace {

TEST(ReliabilityModelTest, RberRisesWithWearAndReadsAndFailureRiskWithWear) {
  auto p = simcard::FindProfile("duo-slc");
  ASSERT_TRUE(p.ok());
  const auto& r = p->reliability;
  EXPECT_DOUBLE_EQ(r.Rber(0, 0), r.rber_base);
  EXPECT_LT(r.Rber(0, 0), r.Rber(50'000, 0));
  EXPECT_LT(r.Rber(50'000, 0), r.Rber(100'000, 0));
  EXPECT_LT(r.Rber(100'000, 0), r.Rber(100'000, 1'000'000));
  EXPECT_NEAR(r.Rber(100'000, 0), r.rber_base + r.rber_wear, 1e-15);
  EXPECT_LT(r.FailProbability(0), r.FailProbability(100'000));
  // At rated endurance a codeword (about 4200 bits) still sees far fewer than t=8 errors.
  EXPECT_LT(r.Rber(100'000, 0) * 4200, 0.1);
}

class ErrorsTest : public CardFixture {
 protected:
  // Programs `pages` pages of a block whose erase count is set to `pe`, then reads each
  // `reads` times; returns {corrected bits, uncorrectable reads}.
  std::pair<uint64_t, uint64_t> Exercise(uint32_t pe, uint32_t pages, uint32_t reads) {
    const uint32_t b = GoodBlock(0, 0, 1);
    EXPECT_TRUE(Erase(0, 0, b).ok());
    std::vector<std::vector<uint8_t>> want;
    for (uint32_t pg = 0; pg < pages; ++pg) {
      want.push_back(Pattern(pg, page_bytes()));
      Completion c = Program(0, {0, b, pg}, want.back());
      EXPECT_TRUE(c.ok());
    }
    // Age the block after writing so wear-out program failures cannot get in the way.
    card_->TEST_SetEraseCount(0, 0, b, pe);
    uint64_t corrected = 0, uncorrectable = 0;
    for (uint32_t i = 0; i < reads; ++i) {
      for (uint32_t pg = 0; pg < pages; ++pg) {
        std::vector<uint8_t> d;
        Completion c = Read(0, {0, b, pg}, &d);
        if (c.ok()) {
          EXPECT_EQ(d, want[pg]) << "ECC passed data that differs";
          corrected += c.corrected_bits;
        } else {
          EXPECT_EQ(c.status, FlashStatus::kUncorrectable);
          EXPECT_NE(d, want[pg]) << "uncorrectable read must show the damage";
          ++uncorrectable;
        }
      }
    }
    return {corrected, uncorrectable};
  }
};

TEST_F(ErrorsTest, FreshBlocksReadCleanWornBlocksNeedEccThenFail) {
  Make("test-wear");  // endurance 100 cycles
  auto fresh = Exercise(0, 8, 4);
  EXPECT_EQ(fresh.second, 0u);
  EXPECT_LT(fresh.first, 5u);
  auto worn = Exercise(125, 8, 4);  // 1.25x endurance: about 1.6 bit errors per codeword
  EXPECT_GT(worn.first, 100u) << "worn flash must show corrected bits";
  auto dead = Exercise(400, 8, 4);  // 4x endurance: beyond what t=8 corrects
  EXPECT_GT(dead.second, 0u) << "far past endurance some reads must be uncorrectable";
  EXPECT_EQ(card_->stats(0).uncorrectable_reads, dead.second + worn.second);
}

TEST_F(ErrorsTest, ReadsCountTowardsReadDisturbUntilErase) {
  Make("test-small");
  const uint32_t b = GoodBlock(0, 1, 1);
  ASSERT_TRUE(Erase(0, 1, b).ok());
  ASSERT_TRUE(Program(0, {1, b, 0}, Pattern(1, page_bytes())).ok());
  std::vector<uint8_t> d;
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(Read(0, {1, b, 0}, &d).ok());
  EXPECT_EQ(card_->block_info(0, 1, b).reads_since_erase, 5u);
  ASSERT_TRUE(Erase(0, 1, b).ok());
  EXPECT_EQ(card_->block_info(0, 1, b).reads_since_erase, 0u);
}

}  // namespace
}  // namespace vsl::testing
