// The thermal model and the governor's thermal control in virtual time, on the duo-slc
// shape. The card's heat capacity is made small (a time constant of a fraction of a
// second instead of ~30 s) so that heating and cooling take seconds of simulated time;
// thresholds, powers and thermal resistances are the card's own.
#include <cstdio>

#include <gtest/gtest.h>

#include "tests/testutil/sim_of.h"
#include "tests/power/power_harness.h"
#include "tests/testutil/temp_dir.h"

namespace vsl::testing {
namespace {

using card::Card;
using card::CardOptions;
using card::LunState;
using card::PowerPolicy;
using card::ThermalState;

class ThermalTest : public ::testing::Test {
 protected:
  void Make(uint32_t blocks = 40) { ASSERT_TRUE(MakeDuoSlc(tmp_.Sub("card"), blocks).ok()); }
  void Open(simcard::Environment env, double heat_capacity) {
    CardOptions o;
    o.power.override_w = 55;  // the power limit stays out of the way: heat alone decides
    o.power.slot_capability_w = 75;
    simcard::Power pw;
    pw.heat_capacity_j_per_c = heat_capacity;
    o.sim.power = pw;
    o.sim.environment = env;
    auto c = OpenAttached(tmp_.Sub("card"), clock_, o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    card_ = std::move(c).value();
  }
  double Temp() {
    double t = -1e9;
    for (uint32_t c = 0; c < card_->controllers(); ++c) t = std::max(t, vsl::testing::SimOf(*card_).ReadPower(c).temperature_c);
    return t;
  }
  TempDir tmp_;
  VirtualClock clock_{1};
  std::unique_ptr<Card> card_;
};

// The model itself: at rest the card settles at ambient + static power x R(airflow), with
// the time constant R x C; NAND work heats it further.
TEST_F(ThermalTest, FirstOrderModel) {
  Make(24);
  simcard::Environment env{30.0, 300.0};
  Open(env, 1.0);
  const simcard::Power pw;
  const double r = pw.ThermalResistance(300);
  const double tau_s = r * 1.0;
  clock_.RunFor(static_cast<DurNs>(10 * tau_s * 1e9));
  EXPECT_NEAR(Temp(), 30.0 + pw.static_w * r, 0.05);
  // One time constant after the air gets 20 C warmer: 63% of the way.
  const double t0 = Temp();
  vsl::testing::SimOf(*card_).SetEnvironment({50.0, 300.0});
  clock_.RunFor(static_cast<DurNs>(tau_s * 1e9));
  // Ambient steps at once; the card's own rise is unchanged (same R): +20 C right away.
  EXPECT_NEAR(Temp(), t0 + 20.0, 0.05);
  // Less airflow: higher R, so the rise heads for static x R(100 LFM).
  vsl::testing::SimOf(*card_).SetEnvironment({50.0, 100.0});
  const double r100 = pw.ThermalResistance(100);
  clock_.RunFor(static_cast<DurNs>(r100 * 1.0 * 1e9));
  const double expect = 50.0 + pw.static_w * r100 + (pw.static_w * r - pw.static_w * r100) * std::exp(-1.0);
  EXPECT_NEAR(Temp(), expect, 0.05);
  std::printf("R(300 LFM) %.2f C/W, R(100 LFM) %.2f C/W; at rest %.1f C\n", r, r100, Temp());
}

// Writes throttle from 78 C: at 50 C ambient and 100 LFM, full-speed writes would take
// the card to about 82 C; the governor cuts write power so it hovers just above 78 C,
// never near 85 C, and write bandwidth drops accordingly.
TEST_F(ThermalTest, WritesThrottleAt78) {
  Make();
  Open({50.0, 100.0}, 0.15);  // tau about 0.34 s
  clock_.RunFor(2 * kSec);    // settled at rest
  Load load;
  load.write_qd = 16;
  const LoadResult cool = RunLoad(*card_, clock_, load, 150 * kMs);  // before it heats up
  const LoadResult hot = RunLoad(*card_, clock_, load, 1500 * kMs);
  const auto st = card_->power_status();
  // The last half: steady throttled state.
  LoadResult tail = RunLoad(*card_, clock_, load, 500 * kMs);
  std::printf("cool: %.0f MB/s; heating: max %.2f C; throttled steady: %.0f MB/s at %.2f C max, write share %.2f, "
              "throttled %.2f s\n",
              cool.WriteMBps(), hot.MaxTempC(), tail.WriteMBps(), tail.MaxTempC(), st.write_share,
              st.throttled_ns / 1e9);
  EXPECT_EQ(cool.errors + hot.errors + tail.errors, 0u);
  EXPECT_GE(st.throttle_events, 1u);
  EXPECT_EQ(st.thermal_shutdowns, 0u);
  EXPECT_EQ(st.thermal, ThermalState::kThrottling);
  EXPECT_GT(hot.MaxTempC(), 78.0);
  EXPECT_LT(std::max(hot.MaxTempC(), tail.MaxTempC()), 80.5) << "held near the threshold";
  EXPECT_LT(tail.WriteMBps(), cool.WriteMBps() * 0.8);
  // The write rate a lifetime prediction extrapolates (the NAND's, over the last hour).
  EXPECT_GT(card_->power_status().nand_write_bps, 1e9);
  EXPECT_GT(tail.WriteMBps(), 0.0);
  // Cooler air: the throttle lets go.
  vsl::testing::SimOf(*card_).SetEnvironment({30.0, 300.0});
  clock_.RunFor(2 * kSec);
  EXPECT_EQ(card_->power_status().thermal, ThermalState::kNormal);
  EXPECT_DOUBLE_EQ(card_->power_status().write_share, 1.0);
}

// A fan fails: with no airflow even the controllers' static power takes the card past
// 85 C, so it shuts down safely — every acknowledged write flushed, a checkpoint written,
// LUNs offline in "thermal-shutdown", controllers in their low-power state — and comes
// back by itself, from the checkpoint, once it is below 70 C. (With the fan still dead
// it would heat up again at rest and cycle; here the fan is fixed first.)
TEST_F(ThermalTest, SafeShutdownAt85AndBack) {
  Make();
  Open({45.0, 300.0}, 0.15);
  // Known data in the lower half of every LUN, checked after the round trip.
  std::vector<uint8_t> pat(64 * 1024);
  Rng(7).Fill(pat.data(), pat.size());
  uint32_t left = 0;
  for (card::Lun* l : card_->luns()) {
    for (uint64_t lba = 0; lba < 64 * 16; lba += 16) {
      ++left;
      l->ftl()->Write(lba, 16, pat.data(), false, [&left](Status s) {
        EXPECT_TRUE(s.ok());
        --left;
      });
    }
  }
  clock_.RunUntilTrue([&] { return left == 0; });
  Load load;
  load.write_qd = 16;
  load.write_from = 0.5;
  RunLoad(*card_, clock_, load, 200 * kMs);
  vsl::testing::SimOf(*card_).SetEnvironment({45.0, 0.0});  // the fan stops
  LoadResult during;
  for (int i = 0; i < 100 && card_->power_status().thermal != ThermalState::kShutdown; ++i) {
    during = RunLoad(*card_, clock_, load, 50 * kMs);
  }
  ASSERT_EQ(card_->power_status().thermal, ThermalState::kShutdown);
  // The flush and checkpoint, then standby: the temperature turns at once.
  double peak = during.MaxTempC();
  for (int i = 0; i < 200; ++i) {
    clock_.RunFor(kMs);
    peak = std::max(peak, Temp());
  }
  auto st = card_->power_status();
  std::printf("fan failure: peak %.2f C, thermal %s, shutdowns %llu, now %.2f C\n", peak,
              std::string(card::ThermalStateName(st.thermal)).c_str(),
              static_cast<unsigned long long>(st.thermal_shutdowns), Temp());
  ASSERT_EQ(st.thermal, ThermalState::kShutdown);
  EXPECT_EQ(st.thermal_shutdowns, 1u);
  EXPECT_LT(peak, 85.5) << "shut down at 85 C, not long after";
  for (card::Lun* l : card_->luns()) {
    EXPECT_EQ(l->state(), LunState::kThermalShutdown) << l->name();
    EXPECT_NE(l->error().find("thermal shutdown"), std::string::npos);
  }
  for (const auto& c : st.controllers) EXPECT_TRUE(c.low_power);
  // The fan is fixed: below 70 C the controllers wake and the LUNs attach again.
  vsl::testing::SimOf(*card_).SetEnvironment({45.0, 300.0});
  for (int i = 0; i < 100 && card_->power_status().thermal == ThermalState::kShutdown; ++i) clock_.RunFor(50 * kMs);
  clock_.RunFor(200 * kMs);
  st = card_->power_status();
  EXPECT_EQ(st.thermal, ThermalState::kNormal);
  EXPECT_EQ(st.thermal_shutdowns, 1u);
  for (card::Lun* l : card_->luns()) {
    ASSERT_EQ(l->state(), LunState::kOnline) << l->name() << ": " << l->error();
    EXPECT_TRUE(l->ftl()->attach_info().from_checkpoint) << "the shutdown wrote a checkpoint";
    std::vector<uint8_t> got(pat.size());
    for (uint64_t lba = 0; lba < 64 * 16; lba += 16) {
      Status rs = Status::Internal("pending");
      l->ftl()->Read(lba, 16, got.data(), [&rs](Status s) { rs = s; });
      clock_.RunUntilTrue([&] { return rs.code() != StatusCode::kInternal; });
      ASSERT_TRUE(rs.ok()) << rs.ToString();
      ASSERT_EQ(got, pat) << l->name() << " lba " << lba;
    }
  }
  for (const auto& c : st.controllers) EXPECT_FALSE(c.low_power);
}

}  // namespace
}  // namespace vsl::testing
