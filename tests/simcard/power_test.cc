// Power cuts at random instants: with power-loss protection healthy, every program the
// controller accepted reaches flash; without it, only completed programs are safe. Torn
// pages never read back as the data that was being written unless ECC flags them.
#include <gtest/gtest.h>

#include <filesystem>

#include <cstdlib>
#include <map>

#include "tests/simcard/card_fixture.h"

namespace vsl::testing {
namespace {

struct PageRecord {
  std::vector<uint8_t> data;
  bool accepted = false;
  bool done_ok = false;
};

struct CutOutcome {
  uint64_t accepted_not_done = 0;  // accepted before the cut, not yet on flash
  uint64_t lost_accepted = 0;      // accepted pages that did not read back intact
  uint64_t lost_done = 0;          // completed pages that did not read back intact
  uint64_t unaccepted_not_erased = 0;
  uint64_t programs = 0;
};

int SeedCount(int dflt) {
  const char* env = std::getenv("VSL_SEEDS");
  return env != nullptr ? std::atoi(env) : dflt;
}

// Small capacitors and a large buffer: the hold-up budget, not the buffer size, is what
// limits how much the controller may accept.
simcard::SimCardOptions CutOptions(uint64_t seed) {
  simcard::Plp plp;
  plp.holdup_ns = 1 * kMs;
  plp.buffer_bytes_per_pipe = 4 << 20;
  return {.null_timing = false, .seed = seed, .plp = plp, .reliability = {}, .pipe_clocks = {}, .power = {}, .environment = {}, .copy_accumulators = {}};
}

CutOutcome RunCut(uint64_t seed, bool plp_healthy) {
  TempDir tmp;
  VirtualClock clock(seed);
  auto profile = simcard::FindProfile("test-small").value();
  EXPECT_TRUE(simcard::SimCard::Create(tmp.Sub("c"), profile, {.serial = "", .seed = seed}).ok());
  CutOutcome out;
  std::map<std::tuple<uint32_t, uint32_t, uint32_t, uint32_t>, PageRecord> pages;
  Rng rng(seed * 7919 + 1);
  {
    auto card = simcard::SimCard::Open(tmp.Sub("c"), clock, CutOptions(seed)).value();
    if (!plp_healthy) card->SetPlpState(nand::PlpState::kFailed);
    const auto& g = card->geometry();
    // Erase one good block per die on both pipes.
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> block_of;
    int erasing = 0;
    for (uint32_t p = 0; p < card->pipe_count(); ++p) {
      for (uint32_t die = 0; die < g.dies_per_pipe(); ++die) {
        uint32_t b = 1 + static_cast<uint32_t>(rng.Below(g.blocks_per_lun - 1));
        while (card->block_info(p, die, b).factory_bad) b = (b + 1) % g.blocks_per_lun;
        block_of[{p, die}] = b;
        ++erasing;
        card->pipe(p).Erase(die, b, [&](const Completion& c) { EXPECT_TRUE(c.ok()); --erasing; });
      }
    }
    clock.RunUntilIdle();
    EXPECT_EQ(erasing, 0);
    // Burst of programs over all dies, in page order per block, plus some reads.
    for (uint32_t p = 0; p < card->pipe_count(); ++p) {
      for (uint32_t die = 0; die < g.dies_per_pipe(); ++die) {
        const uint32_t b = block_of[{p, die}];
        const auto n = static_cast<uint32_t>(rng.Range(1, g.pages_per_block));
        for (uint32_t pg = 0; pg < n; ++pg) {
          auto& rec = pages[{p, die, b, pg}];
          rec.data.resize(g.page_data_bytes);
          rng.Fill(rec.data.data(), rec.data.size());
          ++out.programs;
          card->pipe(p).Program({{die, b, pg}, rec.data.data(), nullptr},
                                [&rec](const Completion&) { rec.accepted = true; },
                                [&rec](const Completion& c) { rec.done_ok = c.ok(); });
          if (rng.Bernoulli(0.2)) {
            static std::vector<uint8_t> sink(g.page_data_bytes);
            card->pipe(p).Read({{die, b, 0}, 0, 0, sink.data(), nullptr}, [](const Completion&) {});
          }
        }
      }
    }
    // Cut at a random instant inside the burst (which lasts up to ~16 x 225 us per die).
    clock.RunFor(rng.Range(0, 4 * kMs));
    for (auto& [k, rec] : pages) out.accepted_not_done += rec.accepted && !rec.done_ok;
    card->PowerCut();
    clock.RunUntilIdle();
  }
  auto card = simcard::SimCard::Open(tmp.Sub("c"), clock, CutOptions(seed)).value();
  EXPECT_EQ(card->Health(0).unsafe_power_offs, 1u);
  std::vector<uint8_t> got(card->geometry().page_data_bytes);
  for (auto& [k, rec] : pages) {
    auto [p, die, b, pg] = k;
    std::optional<Completion> c;
    card->pipe(p).Read({{die, b, pg}, 0, 0, got.data(), nullptr}, [&](const Completion& x) { c = x; });
    clock.RunUntilTrue([&] { return c.has_value(); });
    const bool intact = c.has_value() && c->ok() && got == rec.data;
    if (rec.done_ok && !intact) ++out.lost_done;
    if (rec.accepted && !intact) ++out.lost_accepted;
    if (!rec.accepted) {
      const bool erased = c->ok() && got == std::vector<uint8_t>(got.size(), 0xFF);
      if (!erased) ++out.unaccepted_not_erased;
    }
  }
  return out;
}

TEST(PowerCutTest, WithPlpEveryAcceptedProgramSurvivesRandomCuts) {
  CutOutcome total;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(SeedCount(300)); ++seed) {
    CutOutcome o = RunCut(seed, true);
    EXPECT_EQ(o.lost_accepted, 0u) << "seed " << seed;
    EXPECT_EQ(o.lost_done, 0u) << "seed " << seed;
    EXPECT_EQ(o.unaccepted_not_erased, 0u) << "seed " << seed;
    total.accepted_not_done += o.accepted_not_done;
    total.programs += o.programs;
  }
  // The campaign must actually catch pages in the protected buffer at the cut.
  EXPECT_GT(total.accepted_not_done, 100u);
}

TEST(PowerCutTest, WithoutPlpOnlyCompletedProgramsAreSafe) {
  CutOutcome total;
  for (uint64_t seed = 1; seed <= static_cast<uint64_t>(SeedCount(100)); ++seed) {
    CutOutcome o = RunCut(seed, false);
    EXPECT_EQ(o.lost_done, 0u) << "seed " << seed;
    EXPECT_EQ(o.unaccepted_not_erased, 0u) << "seed " << seed;
    total.lost_accepted += o.lost_accepted;
  }
  EXPECT_GT(total.lost_accepted, 0u) << "a failed PLP must lose acknowledged-but-unflushed data";
}

class PowerCutFixture : public CardFixture {};

TEST_F(PowerCutFixture, InterruptedEraseLeavesTheBlockUnusableUntilErasedAgain) {
  Make("test-small");
  card_->SetPlpState(nand::PlpState::kFailed);
  const uint32_t b = GoodBlock(0, 0, 1);
  std::optional<Completion> c;
  pipe(0).Erase(0, b, [&](const Completion& x) { c = x; });
  clock_.RunFor(500 * kUs);  // inside tBERS
  card_->PowerCut();
  clock_.RunUntilIdle();
  EXPECT_EQ(c->status, FlashStatus::kAborted);
  Reopen();
  std::vector<uint8_t> d;
  EXPECT_EQ(Read(0, {0, b, 0}, &d).status, FlashStatus::kUncorrectable);
  EXPECT_EQ(Program(0, {0, b, 0}, Pattern(1, page_bytes())).status, FlashStatus::kRuleViolation);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  EXPECT_TRUE(Program(0, {0, b, 0}, Pattern(1, page_bytes())).ok());
}

TEST_F(PowerCutFixture, CutBeforeAcceptanceLosesNothingAcknowledged) {
  Make("test-small");
  const uint32_t b = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b).ok());
  auto d = Pattern(1, page_bytes());
  bool accepted = false;
  std::optional<Completion> done;
  pipe(0).Program({{0, b, 0}, d.data(), nullptr}, [&](const Completion&) { accepted = true; },
                  [&](const Completion& c) { done = c; });
  card_->PowerCut();  // before the DMA lands
  clock_.RunUntilIdle();
  EXPECT_FALSE(accepted);
  EXPECT_EQ(done->status, FlashStatus::kAborted);
  Reopen();
  std::vector<uint8_t> got;
  ASSERT_TRUE(Read(0, {0, b, 0}, &got).ok());
  EXPECT_EQ(got, std::vector<uint8_t>(page_bytes(), 0xFF));
}

// A program whose die waits for its channel (another die's data is on the bus) has been
// accepted but has not reached its die: a power cut flushes it like any buffered page,
// and a reset of its LUN aborts it with the page untouched (erased, not torn).
TEST_F(PowerCutFixture, AProgramWaitingForItsChannelIsFlushedAtACutAndUntouchedByAReset) {
  for (const bool cut : {true, false}) {
    SCOPED_TRACE(cut ? "power cut" : "LUN reset");
    card_.reset();
    std::filesystem::remove_all(dir());
    Make("duo-slc-small");
    const uint32_t b0 = GoodBlock(0, 0, 1), b1 = GoodBlock(0, 1, 1);
    ASSERT_TRUE(Erase(0, 0, b0).ok());
    ASSERT_TRUE(Erase(0, 1, b1).ok());
    const auto d0 = Pattern(1, page_bytes()), d1 = Pattern(2, page_bytes());
    int accepted = 0;
    std::optional<Completion> done1;
    pipe(0).Program({{0, b0, 0}, d0.data(), nullptr}, [&](const Completion&) { ++accepted; },
                    [](const Completion&) {});
    pipe(0).Program({{1, b1, 0}, d1.data(), nullptr}, [&](const Completion&) { ++accepted; },
                    [&](const Completion& c) { done1 = c; });
    // Both land over the link (about 5 us each); die 0's data then holds the channel
    // for about 44 us, and die 1 waits for it.
    clock_.RunFor(15 * kUs);
    ASSERT_EQ(accepted, 2);
    ASSERT_EQ(card_->stats(0).die_bus_wait_ns, 0u);  // die 1 has not had the bus yet
    if (cut) {
      card_->PowerCut();
      clock_.RunUntilIdle();
      Reopen();
      std::vector<uint8_t> got;
      ASSERT_TRUE(Read(0, {1, b1, 0}, &got).ok());
      EXPECT_EQ(got, d1);
      ASSERT_TRUE(Read(0, {0, b0, 0}, &got).ok());
      EXPECT_EQ(got, d0);
    } else {
      std::optional<Completion> reset;
      pipe(0).Reset(1, [&](const Completion& c) { reset = c; });
      clock_.RunUntilIdle();
      ASSERT_TRUE(reset.has_value() && reset->ok());
      ASSERT_TRUE(done1.has_value());
      EXPECT_EQ(done1->status, FlashStatus::kAborted);
      std::vector<uint8_t> got;
      ASSERT_TRUE(Read(0, {1, b1, 0}, &got).ok()) << "the page was torn";
      EXPECT_EQ(got, std::vector<uint8_t>(page_bytes(), 0xFF));
      EXPECT_TRUE(Program(0, {1, b1, 0}, d1).ok());
    }
  }
}

}  // namespace
}  // namespace vsl::testing
