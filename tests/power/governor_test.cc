// The power governor in virtual time on the duo-slc card's shape (fewer blocks per die):
// the slot limit holds over every window with bandwidth giving way, power override lets
// the card run at the NAND's pace, reads are favoured while writes are throttled, and
// bad policies are refused.
#include <cstdio>

#include <gtest/gtest.h>

#include "tests/power/power_harness.h"
#include "tests/testutil/temp_dir.h"

namespace vsl::testing {
namespace {

using card::Card;
using card::CardOptions;
using card::PowerPolicy;

class GovernorTest : public ::testing::Test {
 protected:
  void Make(uint32_t blocks = 40) { ASSERT_TRUE(MakeDuoSlc(tmp_.Sub("card"), blocks).ok()); }
  void Open(const PowerPolicy& pol, bool format = true) {
    CardOptions o;
    o.power = pol;
    auto c = OpenAttached(tmp_.Sub("card"), clock_, o, format);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    card_ = std::move(c).value();
  }
  static PowerPolicy Override(double w) {
    PowerPolicy p;
    p.slot_capability_w = 75;
    p.override_w = w;
    return p;
  }
  void Remake() {
    card_.reset();
    ASSERT_TRUE(std::filesystem::remove_all(tmp_.Sub("card")) > 0);
    Make();
  }
  TempDir tmp_;
  VirtualClock clock_{1};
  std::unique_ptr<Card> card_;
};

LoadResult Measure(Card& card, VirtualClock& clock, const Load& load, DurNs d) {
  RunLoad(card, clock, load, 50 * kMs);  // warm-up: queues and buckets settle
  return RunLoad(card, clock, load, d);
}

TEST_F(GovernorTest, SlotLimitHoldsAndOverrideRestoresBandwidth) {
  Make();
  Open(PowerPolicy{});
  Load load;
  load.write_qd = 16;
  const LoadResult off = Measure(*card_, clock_, load, 400 * kMs);
  Remake();
  Open(Override(55));
  const LoadResult on = Measure(*card_, clock_, load, 400 * kMs);
  // The NAND's own pace: the same card with no practical limit.
  Remake();
  PowerPolicy unlimited = Override(1000);
  unlimited.slot_capability_w = 1000;
  Open(unlimited);
  const LoadResult free_run = Measure(*card_, clock_, load, 400 * kMs);
  std::printf("no limit: %.0f MB/s, avg %.2f W\n", free_run.WriteMBps(), free_run.AvgW());
  std::printf("slot limit: %.0f MB/s, avg %.2f W, max 100 ms window %.2f W\n", off.WriteMBps(), off.AvgW(),
              off.MaxWindowW(100));
  std::printf("override 55 W: %.0f MB/s, avg %.2f W, max 100 ms window %.2f W\n", on.WriteMBps(), on.AvgW(),
              on.MaxWindowW(100));
  EXPECT_EQ(off.errors + on.errors, 0u);
  EXPECT_LE(off.MaxWindowW(100), card::kSlotLimitW);
  EXPECT_GT(off.AvgW(), card::kSlotLimitW * 0.9) << "the budget is used, not wasted";
  EXPECT_GT(on.AvgW(), 27.0) << "the card's natural draw at full write speed is about 30 W";
  EXPECT_LE(on.MaxWindowW(100), 55.0);
  EXPECT_GT(on.WriteMBps(), off.WriteMBps() * 1.5);
  EXPECT_GE(on.WriteMBps(), free_run.WriteMBps() * 0.97) << "override: the NAND's pace";
  EXPECT_NEAR(on.AvgW(), free_run.AvgW(), free_run.AvgW() * 0.03) << "override: the natural draw";
}

// A zero-time card (a benchmarking mode) opens its governor unmetered: power limits are
// rates in card time, and its NAND spends none (power.h, PowerGovernor's `unmetered`). A card
// with the NAND timing model is metered.
TEST_F(GovernorTest, OnlyAZeroTimeCardIsUnmetered) {
  Make(24);
  for (bool zero : {false, true}) {
    card_.reset();
    CardOptions o;
    o.sim.null_timing = zero;
    auto c = OpenAttached(tmp_.Sub("card"), clock_, o, !zero);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    card_ = std::move(c).value();
    EXPECT_EQ(card_->governor().unmetered(), zero);
  }
}

// Reads go first: under the slot limit, with every LUN writing flat out, reads keep the
// rate they have with no limit at all (the throttled writes even leave the dies freer),
// while the writes give way.
TEST_F(GovernorTest, ReadsFavouredWhileWritesThrottle) {
  Load load;
  load.write_qd = 16;
  load.read_qd = 4;
  load.write_from = 0.5;
  Make();
  PowerPolicy unlimited = Override(1000);
  unlimited.slot_capability_w = 1000;
  Open(unlimited);
  FillQuarter(*card_, clock_);
  const LoadResult free_run = Measure(*card_, clock_, load, 300 * kMs);
  Remake();
  Open(PowerPolicy{});
  FillQuarter(*card_, clock_);
  const auto before = card_->power_status().governor;
  const LoadResult lim = Measure(*card_, clock_, load, 300 * kMs);
  const auto gs = card_->power_status().governor;
  std::printf("no limit: writes %.0f MB/s, reads %.0f IOPS (%.0f us); slot limit: writes %.0f MB/s, reads %.0f IOPS "
              "(%.0f us), %.2f W max window; waits: reads %llu of %llu, writes %llu of %llu\n",
              free_run.WriteMBps(), free_run.ReadIops(), free_run.ReadLatencyUs(), lim.WriteMBps(), lim.ReadIops(),
              lim.ReadLatencyUs(), lim.MaxWindowW(100), static_cast<unsigned long long>(gs.read_waits - before.read_waits),
              static_cast<unsigned long long>(gs.reads - before.reads),
              static_cast<unsigned long long>(gs.write_waits - before.write_waits),
              static_cast<unsigned long long>(gs.writes - before.writes));
  EXPECT_EQ(free_run.errors + lim.errors, 0u);
  EXPECT_LE(lim.MaxWindowW(100), card::kSlotLimitW);
  EXPECT_LT(lim.WriteMBps(), free_run.WriteMBps() * 0.7) << "writes give way";
  EXPECT_GE(lim.ReadIops(), free_run.ReadIops() * 0.95) << "reads do not";
  EXPECT_LT(static_cast<double>(gs.read_waits - before.read_waits), 0.01 * static_cast<double>(gs.reads - before.reads));
}

// An override above what the slot is declared to supply, or a limit under the static
// draw, is refused and changes nothing; a valid change applies at once.
TEST_F(GovernorTest, PolicyRefusals) {
  Make(24);
  Open(PowerPolicy{}, false);
  PowerPolicy p;
  p.override_w = 55;  // slot still declared 25 W
  Status s = card_->SetPowerPolicy(p);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("above what the slot is declared to supply"), std::string::npos) << s.ToString();
  EXPECT_FALSE(card_->power_status().override_on);
  p.slot_capability_w = 75;
  ASSERT_TRUE(card_->SetPowerPolicy(p).ok());
  EXPECT_TRUE(card_->power_status().override_on);
  EXPECT_DOUBLE_EQ(card_->power_status().limit_w, 55);
  p.override_w = 15;  // under the two controllers' 20 W at rest
  EXPECT_EQ(card_->SetPowerPolicy(p).code(), StatusCode::kInvalidArgument);
  EXPECT_DOUBLE_EQ(card_->power_status().limit_w, 55);
  PowerPolicy bad;
  bad.slot_limit_w = -1;
  EXPECT_EQ(card_->SetPowerPolicy(bad).code(), StatusCode::kInvalidArgument);
  // And at open.
  card_.reset();
  CardOptions o;
  o.clock = &clock_;
  o.power.override_w = 80;
  auto c = Card::Open(tmp_.Sub("card"), o);
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vsl::testing
