// NAND rules, addressing and data paths of the simulated card.
#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"

namespace vsl::testing {
namespace {

class RulesTest : public CardFixture {
 protected:
  void SetUp() override { Make("test-small"); }
};

// A completion the card has posted but the clock has not delivered yet is still delivered
// after the card closes (the pipe's delivery pool outlives it; under ASan a task that
// reached into the closed pipe would fail here).
TEST_F(RulesTest, ACompletionPostedBeforeTheCardClosesIsStillDelivered) {
  const uint32_t b = GoodBlock(0, 0, 1);
  std::optional<Completion> c;
  pipe(0).Erase(0, b, [&](const Completion& x) { c = x; });
  while (card_->stats(0).erases == 0 && clock_.Step()) {
  }
  ASSERT_EQ(card_->stats(0).erases, 1u);
  ASSERT_FALSE(c.has_value());  // posted, not yet run
  card_.reset();
  clock_.RunUntilIdle();
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->ok());
}

TEST_F(RulesTest, ErasedPageReadsAllOnes) {
  const uint32_t b = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  std::vector<uint8_t> data, meta;
  Completion c = Read(0, {0, b, 3}, &data, &meta);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c.corrected_bits, 0u);
  EXPECT_EQ(data, std::vector<uint8_t>(page_bytes(), 0xFF));
  EXPECT_EQ(meta, std::vector<uint8_t>(meta_bytes(), 0xFF));
}

TEST_F(RulesTest, ProgramThenReadReturnsDataAndMetadata) {
  const uint32_t b = GoodBlock(0, 2, 1);
  ASSERT_TRUE(Erase(0, 2, b).ok());
  for (uint32_t pg = 0; pg < g().pages_per_block; ++pg) {
    auto d = Pattern(pg, page_bytes());
    auto m = Meta(pg);
    ASSERT_TRUE(Program(0, {2, b, pg}, d, &m).ok()) << pg;
  }
  for (uint32_t pg = 0; pg < g().pages_per_block; ++pg) {
    std::vector<uint8_t> d, m;
    ASSERT_TRUE(Read(0, {2, b, pg}, &d, &m).ok());
    EXPECT_EQ(d, Pattern(pg, page_bytes()));
    EXPECT_EQ(m, Meta(pg));
  }
  EXPECT_EQ(card_->stats(0).programs, g().pages_per_block);
}

TEST_F(RulesTest, ProgramWithoutMetadataStoresOnes) {
  const uint32_t b = GoodBlock(0, 1, 1);
  ASSERT_TRUE(Erase(0, 1, b).ok());
  ASSERT_TRUE(Program(0, {1, b, 0}, Pattern(1, page_bytes())).ok());
  std::vector<uint8_t> m;
  ASSERT_TRUE(Read(0, {1, b, 0}, nullptr, &m).ok());
  EXPECT_EQ(m, std::vector<uint8_t>(meta_bytes(), 0xFF));
}

TEST_F(RulesTest, SectorRangeReadReturnsJustThoseCodewords) {
  const uint32_t b = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  auto d = Pattern(77, page_bytes());
  ASSERT_TRUE(Program(0, {0, b, 0}, d).ok());
  std::vector<uint8_t> part;
  ASSERT_TRUE(Read(0, {0, b, 0}, &part, nullptr, 3, 2).ok());
  ASSERT_EQ(part.size(), 2u * 512);
  EXPECT_TRUE(std::equal(part.begin(), part.end(), d.begin() + 3 * 512));
  ASSERT_TRUE(Read(0, {0, b, 0}, &part, nullptr, 7, 1).ok());  // last codeword
  EXPECT_TRUE(std::equal(part.begin(), part.end(), d.begin() + 7 * 512));
}

TEST_F(RulesTest, ReprogrammingAPageIsARuleViolationAndCounted) {
  const uint32_t b = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  auto d1 = Pattern(1, page_bytes());
  ASSERT_TRUE(Program(0, {0, b, 0}, d1).ok());
  EXPECT_EQ(Program(0, {0, b, 0}, Pattern(2, page_bytes())).status, FlashStatus::kRuleViolation);
  EXPECT_EQ(card_->stats(0).violation_not_erased, 1u);
  std::vector<uint8_t> got;
  ASSERT_TRUE(Read(0, {0, b, 0}, &got).ok());
  EXPECT_EQ(got, d1);  // the refused program changed nothing
}

TEST_F(RulesTest, SkippingPagesIsARuleViolation) {
  const uint32_t b = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  EXPECT_EQ(Program(0, {0, b, 2}, Pattern(1, page_bytes())).status, FlashStatus::kRuleViolation);
  EXPECT_EQ(card_->stats(0).violation_out_of_order, 1u);
  EXPECT_TRUE(Program(0, {0, b, 0}, Pattern(1, page_bytes())).ok());
  EXPECT_TRUE(Program(0, {0, b, 1}, Pattern(2, page_bytes())).ok());
  EXPECT_TRUE(Program(0, {0, b, 2}, Pattern(3, page_bytes())).ok());
}

TEST_F(RulesTest, EraseMakesTheWholeBlockProgrammableAgain) {
  const uint32_t b = GoodBlock(0, 3, 1);
  ASSERT_TRUE(Erase(0, 3, b).ok());
  for (uint32_t pg = 0; pg < 4; ++pg) ASSERT_TRUE(Program(0, {3, b, pg}, Pattern(pg, page_bytes())).ok());
  ASSERT_TRUE(Erase(0, 3, b).ok());
  EXPECT_EQ(card_->block_info(0, 3, b).erase_count, 2u);
  EXPECT_EQ(card_->block_info(0, 3, b).next_page, 0u);
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {3, b, 1}, &d).ok());
  EXPECT_EQ(d, std::vector<uint8_t>(page_bytes(), 0xFF));
  EXPECT_TRUE(Program(0, {3, b, 0}, Pattern(9, page_bytes())).ok());
}

TEST_F(RulesTest, OutOfRangeAddressesAreRejectedAndCounted) {
  auto d = Pattern(1, page_bytes());
  const uint32_t dies = g().dies_per_pipe();
  EXPECT_EQ(Erase(0, dies, 0).status, FlashStatus::kInvalidAddress);
  EXPECT_EQ(Erase(0, 0, g().blocks_per_lun).status, FlashStatus::kInvalidAddress);
  EXPECT_EQ(Program(0, {0, 1, g().pages_per_block}, d).status, FlashStatus::kInvalidAddress);
  std::vector<uint8_t> buf;
  EXPECT_EQ(Read(0, {0, 1, 0}, &buf, nullptr, 8, 1).status, FlashStatus::kInvalidAddress);
  EXPECT_EQ(Read(0, {0, 1, 0}, &buf, nullptr, 6, 3).status, FlashStatus::kInvalidAddress);
  std::optional<Completion> c;
  pipe(0).Program({{0, 1, 0}, nullptr, nullptr}, nullptr, [&](const Completion& x) { c = x; });
  RunUntil(c);
  EXPECT_EQ(c->status, FlashStatus::kInvalidAddress);
  EXPECT_EQ(card_->stats(0).invalid_address, 6u);
}

TEST_F(RulesTest, CallbacksNeverRunInsideTheSubmittingCall) {
  bool inside = true, ran = false;
  pipe(0).Erase(99, 0, [&](const Completion&) { ran = true; EXPECT_FALSE(inside); });
  inside = false;
  clock_.RunUntilIdle();
  EXPECT_TRUE(ran);
}

TEST_F(RulesTest, CommandsToOneDieExecuteInSubmissionOrder) {
  const uint32_t b = GoodBlock(0, 0, 1);
  auto d = Pattern(3, page_bytes());
  std::vector<uint8_t> got(page_bytes());
  std::vector<std::string> order;
  pipe(0).Erase(0, b, [&](const Completion& c) { EXPECT_TRUE(c.ok()); order.push_back("erase"); });
  pipe(0).Program({{0, b, 0}, d.data(), nullptr}, nullptr,
                  [&](const Completion& c) { EXPECT_TRUE(c.ok()); order.push_back("program"); });
  pipe(0).Read({{0, b, 0}, 0, 0, got.data(), nullptr},
               [&](const Completion& c) { EXPECT_TRUE(c.ok()); order.push_back("read"); });
  clock_.RunUntilIdle();
  EXPECT_EQ(order, (std::vector<std::string>{"erase", "program", "read"}));
  EXPECT_EQ(got, d);
}

TEST_F(RulesTest, ProgramBufferMayBeReusedAfterAccepted) {
  const uint32_t b = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  auto buf = Pattern(10, page_bytes());
  const auto original = buf;
  std::optional<Completion> acc, done;
  pipe(0).Program({{0, b, 0}, buf.data(), nullptr},
                  [&](const Completion& c) {
                    acc = c;
                    std::fill(buf.begin(), buf.end(), 0);  // host reuses its buffer
                  },
                  [&](const Completion& c) { done = c; });
  RunUntil(done);
  ASSERT_TRUE(acc.has_value());
  EXPECT_LE(acc->complete_ns, done->complete_ns);
  std::vector<uint8_t> got;
  ASSERT_TRUE(Read(0, {0, b, 0}, &got).ok());
  EXPECT_EQ(got, original);
}

TEST_F(RulesTest, PoweredOffCardAbortsEverything) {
  card_->PowerCut();
  EXPECT_EQ(Erase(0, 0, 1).status, FlashStatus::kAborted);
  std::vector<uint8_t> d;
  EXPECT_EQ(Read(0, {0, 1, 0}, &d).status, FlashStatus::kAborted);
  card_->PowerOn();
  EXPECT_TRUE(Erase(0, 0, GoodBlock(0, 0, 1)).ok());
}

}  // namespace
}  // namespace vsl::testing

namespace vsl::testing {
namespace {

class BufferTest : public CardFixture {};

// A program waiting only for write-buffer room must be admitted when room is freed by
// dies on another channel, even if its own channel is idle.
TEST_F(BufferTest, BufferRoomFreedOnOneChannelAdmitsWaitersOnAnother) {
  simcard::Plp plp;
  plp.holdup_ns = 1 * kSec;                  // the budget never limits here
  plp.buffer_bytes_per_pipe = 8 * (4096 + 224);  // eight pages
  Make("test-small", {}, {.null_timing = false, .seed = 1, .plp = plp, .reliability = {}, .pipe_clocks = {}, .power = {}, .environment = {}, .copy_accumulators = {}});
  const uint32_t b2 = GoodBlock(0, 2, 1), b0 = GoodBlock(0, 0, 1);  // die 2: channel 1
  ASSERT_TRUE(Erase(0, 2, b2).ok());
  ASSERT_TRUE(Erase(0, 0, b0).ok());
  auto d = Pattern(1, page_bytes());
  int done = 0;
  for (uint32_t pg = 0; pg < 16; ++pg) {
    pipe(0).Program({{2, b2, pg}, d.data(), nullptr}, nullptr,
                    [&](const Completion& c) { EXPECT_TRUE(c.ok()); ++done; });
  }
  std::optional<Completion> c0;
  pipe(0).Program({{0, b0, 0}, d.data(), nullptr}, nullptr, [&](const Completion& c) { c0 = c; });
  clock_.RunUntilIdle();
  EXPECT_EQ(done, 16);
  ASSERT_TRUE(c0.has_value()) << "the channel-0 program stalled";
  EXPECT_TRUE(c0->ok());
  EXPECT_GT(card_->stats(0).admission_waits, 0u);
}

}  // namespace
}  // namespace vsl::testing
