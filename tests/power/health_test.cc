// Health and wear-out states: bad blocks eat the reserve space until the LUN walks
// Healthy -> (warning at 10%) -> Reduced-write -> Read-only, and every acknowledged write
// reads back at every step. Virtual time, test-small card, one LUN.
#include <algorithm>
#include <cstdio>
#include <map>

#include <gtest/gtest.h>

#include "tests/testutil/sim_of.h"
#include "tests/power/power_harness.h"
#include "tests/testutil/campaign.h"
#include "tests/testutil/temp_dir.h"

namespace vsl::testing {
namespace {

using card::Card;
using card::CardOptions;
using ftl::HealthMode;

std::vector<uint8_t> Data(uint64_t lba, uint32_t version, uint32_t bytes) {
  std::vector<uint8_t> v(bytes);
  Rng(lba * 1000003 + version).Fill(v.data(), bytes);
  return v;
}

// VSL_SEED=<n> runs another card and failure sequence (scripts/campaign runs several);
// VSL_CAMPAIGN_OUT receives the counts (tests/testutil/campaign.h).
TEST(HealthTest, ReserveExhaustionWalksTheStatesAndLosesNothing) {
  const char* env_seed = std::getenv("VSL_SEED");
  const uint64_t seed = env_seed ? std::strtoull(env_seed, nullptr, 10) : 0;
  FailureCounts fc;
  struct Report {
    FailureCounts* fc;
    ~Report() { fc->Append("health_exhaustion"); }
  } report{&fc};
  fc.exposures["runs"] = 1;
  TempDir tmp;
  VirtualClock clock(3 + seed);
  auto prof = simcard::FindProfile("test-small");
  ASSERT_TRUE(prof.ok());
  simcard::CreateOptions co;
  co.seed = 5 + seed;
  ASSERT_TRUE(simcard::SimCard::Create(tmp.Sub("card"), *prof, co).ok());
  CardOptions o;
  // Bad blocks one at a time: the error-rate bound would retire a whole die after 16 of
  // them (a die failure is FlashBack's test); no random wear failures either.
  o.ftl.die_error_limit = 0;
  simcard::Reliability rel;
  rel.fail_base = rel.fail_wear = 0;
  o.sim.reliability = rel;
  auto opened = OpenAttached(tmp.Sub("card"), clock, o);
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  std::unique_ptr<Card> card = std::move(opened).value();
  card::Lun* lun = card->lun(0);
  ftl::Ftl* f = lun->ftl();
  const uint32_t sb = f->sector_bytes();
  const uint64_t span = f->sectors() * 3 / 10;  // data kept: 30% of the capacity
  ASSERT_EQ(f->reserve_status().percent, 100.0);
  ASSERT_EQ(f->reserve_status().mode, HealthMode::kNormal);

  std::map<uint64_t, uint32_t> model;  // lba -> version acknowledged
  auto sync = [&](auto op) {
    Status r = Status::Internal("pending");
    op([&r](Status s) { r = s; });
    clock.RunUntilTrue([&] { return r.code() != StatusCode::kInternal || r.ok(); });
    return r;
  };
  auto verify = [&](const char* when) {
    for (const auto& [lba, ver] : model) {
      std::vector<uint8_t> got(sb);
      Status s = sync([&](ftl::Ftl::Done d) { f->Read(lba, 1, got.data(), std::move(d)); });
      ++fc.exposures["sector_checks"];
      if (!s.ok()) fc.Add(FailureClass::kReadError);
      ASSERT_TRUE(s.ok()) << when << ": lba " << lba << ": " << s.ToString();
      if (got != Data(lba, ver, sb)) {
        std::vector<std::vector<uint8_t>> older{std::vector<uint8_t>(sb, 0)};
        for (uint32_t v = 1; v < ver; ++v) older.push_back(Data(lba, v, sb));
        fc.Add(ClassifySector(got, {Data(lba, ver, sb)}, older, nullptr));
      }
      ASSERT_EQ(got, Data(lba, ver, sb)) << when << ": lba " << lba << " lost its acknowledged data";
    }
  };
  Rng rng(11 + seed);
  uint32_t version = 0;
  std::vector<HealthMode> walk{HealthMode::kNormal};
  bool warned_before_reduced = false, cap_applied = false;
  double last_percent = 100.0;
  const auto& g = vsl::testing::SimOf(*card).geometry();
  uint32_t round = 0;
  uint64_t refused = 0;
  for (; round < 400 && walk.back() != HealthMode::kReadOnly; ++round) {
    // One more block of the pipe will fail its next erase.
    for (int k = 0; k < 1; ++k) {
      ++fc.exposures["erase_failures_injected"];
      vsl::testing::SimOf(*card).InjectEraseFail(0, static_cast<uint32_t>(rng.Below(g.dies_per_pipe())),
                                  2 + static_cast<uint32_t>(rng.Below(g.blocks_per_lun - 2)));
    }
    ++version;
    for (uint64_t lba = 0; lba < span; ++lba) {
      auto data = Data(lba, version, sb);
      Status s = sync([&](ftl::Ftl::Done d) { f->Write(lba, 1, data.data(), false, std::move(d)); });
      if (s.ok()) {
        model[lba] = version;
      } else {
        // Only the health modes may refuse, and they say why.
        ASSERT_TRUE(s.code() == StatusCode::kNoSpace || s.code() == StatusCode::kFailedPrecondition) << s.ToString();
        ASSERT_NE(f->health_mode(), HealthMode::kNormal) << s.ToString();
        if (refused++ == 0) std::printf("first refusal: %s\n", s.ToString().c_str());
      }
    }
    const auto rs = f->reserve_status();
    if (round % 10 == 0) {
      std::printf("round %u: refused %llu, erased %llu, erase failures %llu; reserve %.1f%%, usable %llu, mapped %llu, capacity %llu\n", round,
                  static_cast<unsigned long long>(refused), static_cast<unsigned long long>(f->stats().lebs_erased),
                  static_cast<unsigned long long>(f->stats().erase_failures), rs.percent,
                  static_cast<unsigned long long>(rs.usable_sectors), static_cast<unsigned long long>(f->mapped_sectors()),
                  static_cast<unsigned long long>(f->sectors()));
    }
    EXPECT_LE(rs.percent, last_percent + 1e-9) << "bad blocks only ever eat the reserve";
    last_percent = rs.percent;
    if (rs.mode == HealthMode::kNormal && rs.warning && rs.percent > 0) {
      if (!warned_before_reduced) std::printf("round %u: healthy with the warning: reserve %.1f%%\n", round, rs.percent);
      warned_before_reduced = true;
    }
    // Rounds are coarse: on a card this small one round's bad blocks can take the reserve
    // from above 10% to below 2% at once. Then the order is read from the pipe's events:
    // the warning's must come before the reduced-write one.
    if (rs.mode == HealthMode::kReducedWrite && walk.back() == HealthMode::kNormal && !warned_before_reduced) {
      const auto events = f->flashback_status().events;
      auto find = [&](const char* what) {
        return std::find_if(events.begin(), events.end(),
                            [&](const std::string& e) { return e.find(what) != std::string::npos; });
      };
      const auto warning = find("warning level"), reduced = find("pipe health: reduced-write");
      ASSERT_NE(reduced, events.end()) << "reduced-write is announced as an event";
      warned_before_reduced = warning < reduced;
      std::printf("round %u: the warning and reduced-write in one round, warning event %s\n", round,
                  warned_before_reduced ? "first" : "NOT first");
    }
    if (rs.mode != walk.back()) {
      std::printf("round %u: %s, reserve %.1f%% (%llu of %llu sectors)\n", round,
                  std::string(ftl::HealthModeName(rs.mode)).c_str(), rs.percent,
                  static_cast<unsigned long long>(rs.sectors), static_cast<unsigned long long>(rs.full_sectors));
      walk.push_back(rs.mode);
    }
    if (rs.mode == HealthMode::kReducedWrite) {
      // The monitor applies the cap within a few ticks.
      clock.RunFor(200 * kMs);
      cap_applied = cap_applied || card->governed(0).write_share() < 1.0;
    }
    verify("after a round");
  }
  ASSERT_EQ(walk.back(), HealthMode::kReadOnly) << "after " << round << " rounds";
  EXPECT_EQ(walk.size(), 3u) << "healthy, reduced-write, read-only in that order";
  if (walk.size() == 3u) {
    EXPECT_EQ(walk[1], HealthMode::kReducedWrite);
  }
  EXPECT_TRUE(warned_before_reduced) << "the 10% warning comes before reduced-write";
  EXPECT_TRUE(cap_applied) << "reduced-write caps the pipe's write power";
  EXPECT_TRUE(f->reserve_status().warning);
  // Read-only: writes are refused with the reason, every acknowledged sector still reads.
  auto data = Data(0, 9999, sb);
  Status s = sync([&](ftl::Ftl::Done d) { f->Write(0, 1, data.data(), false, std::move(d)); });
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("read-only"), std::string::npos) << s.ToString();
  verify("read-only");
  std::printf("%u rounds, %llu writes refused; %zu sectors checked\n", round,
              static_cast<unsigned long long>(refused), model.size());
  // Lifetime counters: the host's writes reach the controller's record (reported while
  // the card is busy and at detach) and survive a restart with it.
  const uint64_t host_written = uint64_t{sb} * (static_cast<uint64_t>(version) * span - refused);
  const simcard::Lifetime before = vsl::testing::SimOf(*card).lifetime(0);
  EXPECT_GT(before.host_write_bytes, 0u);
  EXPECT_GE(before.nand_program_bytes, before.host_write_bytes);
  EXPECT_GT(before.erase_fails, 0u);
  // And across a restart: the state is found again from flash.
  card.reset();
  auto again = OpenAttached(tmp.Sub("card"), clock, o, false);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  card = std::move(again).value();
  lun = card->lun(0);
  f = lun->ftl();
  EXPECT_EQ(f->health_mode(), HealthMode::kReadOnly);
  verify("after a restart");
  const simcard::Lifetime after = vsl::testing::SimOf(*card).lifetime(0);
  EXPECT_GE(after.host_write_bytes, host_written);
  EXPECT_GE(after.host_write_bytes, before.host_write_bytes);
  EXPECT_GE(after.nand_program_bytes, before.nand_program_bytes);
  EXPECT_EQ(after.erase_fails, before.erase_fails);
  EXPECT_GE(after.host_read_bytes, before.host_read_bytes);
}

}  // namespace
}  // namespace vsl::testing
