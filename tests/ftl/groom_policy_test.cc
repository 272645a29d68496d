// The groomer's policy (vsl/ftl/groom_policy.h) on its own: victim order (rebuild, space,
// wear), the rebuild queue's lifetime rules, the gain check, and host-write pacing.
#include <memory>

#include <gtest/gtest.h>

#include "vsl/ftl/groom_policy.h"
#include "vsl/simcard/profile.h"

namespace vsl::ftl {
namespace {

// test-small's pipe (4 dies, 16 pages per block), one sector per page, FlashBack on:
// a LEB with 4 good dies holds 3 * 16 - summary pages of data.
class GroomPolicyTest : public ::testing::Test {
 protected:
  static constexpr uint32_t kLebs = 10, kSpp = 1;
  GroomPolicyTest()
      : geo_(simcard::FindProfile("test-small")->geometry),
        stripe_(geo_, kSpp),
        lebs_(kLebs, geo_.dies_per_pipe(), geo_.dies_per_pipe() * geo_.pages_per_block * kSpp,
              geo_.dies_per_pipe() * geo_.pages_per_block * kSpp),
        dies_(geo_.dies_per_pipe(), 0, 0),
        policy_(lebs_, dies_, stripe_) {
    stripe_.set_parity(true);
    full_ = static_cast<uint32_t>(stripe_.LebDataSectors(geo_.dies_per_pipe()));
    for (uint32_t i = 0; i < kLebs; ++i) {
      Leb& l = lebs_.leb(i);
      l.capacity = full_;
      lebs_.SetState(l, i < 2 ? LebState::kMeta : LebState::kFree);
    }
  }
  // Closes LEB i holding `valid` live sectors.
  Leb& Close(uint32_t i, uint32_t valid, uint32_t erase_count = 0) {
    Leb& l = lebs_.leb(i);
    l.erase_count = erase_count;
    lebs_.SetState(l, LebState::kClosed);
    l.valid = valid;
    lebs_.OnValidChanged(l);
    return l;
  }
  GroomPolicy::Inputs In(bool need, bool waiting = false) const {
    GroomPolicy::Inputs in;
    in.need = need;
    in.waiting = waiting;
    in.room = 1u << 20;
    in.now_seq = 100;
    in.first_data_leb = 2;
    in.wl_max_spread = 0;
    in.sectors_per_page = kSpp;
    return in;
  }

  nand::Geometry geo_;
  StripeLayout stripe_;
  LebTable lebs_;
  DieHealth dies_;
  GroomPolicy policy_;
  uint32_t full_ = 0;
};

TEST_F(GroomPolicyTest, IdleWithNothingDueChoosesNothing) {
  Close(2, 5);
  const auto ch = policy_.Choose(In(false), nullptr);
  EXPECT_EQ(ch.victim, nullptr);
  EXPECT_EQ(ch.kind, GroomPolicy::Kind::kNone);
}

TEST_F(GroomPolicyTest, SpaceVictimIsTheLeastValidLebThatGains) {
  Close(2, 30);
  Close(3, 7);
  Close(4, full_);  // full: freeing it gains nothing
  auto ch = policy_.Choose(In(true), nullptr);
  ASSERT_NE(ch.victim, nullptr);
  EXPECT_EQ(ch.kind, GroomPolicy::Kind::kSpace);
  EXPECT_EQ(ch.victim->index, 3u);
  lebs_.leb(3).inflight = 1;  // busy LEBs are not victims
  EXPECT_EQ(policy_.Choose(In(true), nullptr).victim->index, 2u);
  lebs_.leb(2).gc_skip = true;
  EXPECT_EQ(policy_.Choose(In(true), nullptr).victim, nullptr);  // only the full one is left
  // Somebody waiting for room takes any victim, even one that gains nothing.
  ch = policy_.Choose(In(false, true), nullptr);
  ASSERT_NE(ch.victim, nullptr);
  EXPECT_EQ(ch.victim->index, 4u);
}

TEST_F(GroomPolicyTest, GainCountsSurvivingDiesAndTrimPagesOnlyAfterAFailure) {
  Leb& l = Close(2, full_ - 2);
  l.trim_pages = {0, 1, 2};
  EXPECT_TRUE(policy_.Gains(l, kSpp));  // all dies: trim pages do not count
  // Die 3 fails: the LEB re-forms with 3 dies, and its trim records would be carried.
  dies_.MarkFailed(3);
  const uint32_t three = static_cast<uint32_t>(stripe_.LebDataSectors(3));
  l.valid = three - 3;
  EXPECT_FALSE(policy_.Gains(l, kSpp));  // its live data and 3 trim pages refill all of it
  l.trim_pages = {0};
  EXPECT_TRUE(policy_.Gains(l, kSpp));
  l.good[0] = 0;  // a bad block as well: 2 dies left
  l.valid = static_cast<uint32_t>(stripe_.LebDataSectors(2));
  EXPECT_FALSE(policy_.Gains(l, kSpp));
}

TEST_F(GroomPolicyTest, RebuildGoesFirstAndAlternatesWithSpaceWhileSpaceIsShort) {
  Leb& r = Close(5, 40);
  r.unprotected = true;
  policy_.rebuild().Add(5);
  policy_.rebuild().Add(5);  // queued once
  EXPECT_EQ(policy_.rebuild().size(), 1u);
  Close(3, 2);
  // Not short of space: rebuild every time.
  for (int i = 0; i < 3; ++i) {
    const auto ch = policy_.Choose(In(false), nullptr);
    EXPECT_EQ(ch.kind, GroomPolicy::Kind::kRebuild);
    EXPECT_EQ(ch.victim, &r);
  }
  // Short of space: rebuild and space victims take turns.
  std::vector<GroomPolicy::Kind> kinds;
  for (int i = 0; i < 4; ++i) kinds.push_back(policy_.Choose(In(true), nullptr).kind);
  using K = GroomPolicy::Kind;
  EXPECT_TRUE((kinds == std::vector<K>{K::kSpace, K::kRebuild, K::kSpace, K::kRebuild}) ||
              (kinds == std::vector<K>{K::kRebuild, K::kSpace, K::kRebuild, K::kSpace}));
}

TEST_F(GroomPolicyTest, RebuildQueueSkipsWhatCannotBeGroomedNowAndRotates) {
  RebuildQueue& q = policy_.rebuild();
  for (uint32_t i : {2u, 3u, 4u}) {
    Close(i, 10 + i).unprotected = true;
    q.Add(i);
  }
  lebs_.leb(2).inflight = 1;
  lebs_.leb(3).atomic_pins = 1;
  EXPECT_EQ(q.Next(lebs_, 1000, nullptr)->index, 4u);
  EXPECT_EQ(q.lebs(), (std::vector<uint32_t>{2, 3, 4}));  // taken ones go to the back
  lebs_.leb(2).inflight = 0;
  EXPECT_EQ(q.Next(lebs_, 1000, nullptr)->index, 2u);
  EXPECT_EQ(q.lebs(), (std::vector<uint32_t>{3, 4, 2}));
  EXPECT_EQ(q.Next(lebs_, 11, nullptr), nullptr);  // nothing fits 11 sectors of room
  EXPECT_EQ(q.Next(lebs_, 14, nullptr)->index, 4u);
  EXPECT_EQ(q.size(), 3u);
}

TEST_F(GroomPolicyTest, RebuildQueueDropsDoneLebsAndReportsWhenItDrains) {
  RebuildQueue& q = policy_.rebuild();
  Leb& a = Close(2, 0);  // moved out already
  a.unprotected = true;
  Leb& b = Close(3, 0);
  b.unprotected = true;
  b.pins = 1;  // a newer copy of something it held is on its way: not done yet
  Leb& c = Close(4, 9);  // protected again by other means (no longer unprotected)
  for (uint32_t i : {2u, 3u, 4u}) q.Add(i);
  int drained = 0;
  auto on_drained = [&] { ++drained; };
  EXPECT_EQ(q.Next(lebs_, 1000, on_drained)->index, 3u);  // valid 0 but pinned: still groomed
  EXPECT_FALSE(a.unprotected);  // left with nothing live: protected again
  EXPECT_EQ(q.lebs(), (std::vector<uint32_t>{4, 3}));  // LEB 4 is not reached yet
  EXPECT_EQ(q.Next(lebs_, 1000, on_drained)->index, 3u);
  EXPECT_EQ(q.lebs(), (std::vector<uint32_t>{3}));  // LEB 4 is done: it left
  EXPECT_EQ(c.valid, 9u);
  EXPECT_EQ(drained, 0);
  b.pins = 0;
  EXPECT_EQ(q.Next(lebs_, 1000, on_drained), nullptr);
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(drained, 1);
  EXPECT_EQ(q.Next(lebs_, 1000, on_drained), nullptr);
  EXPECT_EQ(drained, 1);  // once, when it becomes empty
  // A LEB freed while queued leaves it, even if flagged.
  Leb& d = Close(5, 3);
  d.unprotected = true;
  q.Add(5);
  lebs_.SetState(d, LebState::kFree);
  EXPECT_EQ(q.Next(lebs_, 1000, on_drained), nullptr);
  EXPECT_EQ(drained, 2);
  EXPECT_TRUE(d.unprotected);  // it still held data when freed: the flag is the caller's
}

TEST_F(GroomPolicyTest, WearIsLookedForOnlyAfterAnEraseAndWhenIdle) {
  Close(2, 10, 500);
  Close(3, 10, 3);
  GroomPolicy::Inputs in = In(false);
  in.wl_max_spread = 100;
  auto ch = policy_.Choose(in, nullptr);
  EXPECT_EQ(ch.kind, GroomPolicy::Kind::kWear);
  ASSERT_NE(ch.victim, nullptr);
  EXPECT_EQ(ch.victim->index, 3u);
  // No erase since: not looked for again (it scans every LEB).
  EXPECT_EQ(policy_.Choose(in, nullptr).kind, GroomPolicy::Kind::kNone);
  policy_.NoteErase();
  EXPECT_EQ(policy_.Choose(in, nullptr).kind, GroomPolicy::Kind::kWear);
  // Short of space, the wear victim is not what is wanted: space is.
  policy_.NoteErase();
  in.need = true;
  ch = policy_.Choose(in, nullptr);
  EXPECT_EQ(ch.kind, GroomPolicy::Kind::kSpace);
}

TEST(GroomPacerTest, EachMovedSectorEarnsWhatTheVictimFreesPerSector) {
  GroomPacer p;
  p.Start(/*valid=*/25, /*capacity=*/100, /*cap=*/8);
  EXPECT_DOUBLE_EQ(p.ratio(), 3.0);  // 75 freed for 25 moved
  EXPECT_FALSE(p.CanSpend());
  p.Earn();
  EXPECT_DOUBLE_EQ(p.credits(), 3.0);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(p.CanSpend());
    p.Spend();
  }
  EXPECT_FALSE(p.CanSpend());
  for (int i = 0; i < 10; ++i) p.Earn();
  EXPECT_DOUBLE_EQ(p.credits(), 30.0);
  p.Start(50, 100, 8);  // banked credits are capped at the next victim
  EXPECT_DOUBLE_EQ(p.credits(), 8.0);
  EXPECT_DOUBLE_EQ(p.ratio(), 1.0);
}

TEST(GroomPacerTest, ACreditPaidForASectorThatFoundNoRoomComesBack) {
  GroomPacer p;
  p.Start(/*valid=*/50, /*capacity=*/100, /*cap=*/8);
  p.Earn();
  ASSERT_TRUE(p.CanSpend());
  p.Spend();  // the sector then finds no free LEB at the reserve
  EXPECT_FALSE(p.CanSpend());
  p.Refund();  // it waits for room with its credit, not without it
  EXPECT_TRUE(p.CanSpend());
  EXPECT_DOUBLE_EQ(p.credits(), 1.0);
}

TEST(GroomPacerTest, AppliesOnlyWhileGroomingAFreeingVictimWithFewFreeLebs) {
  GroomPacer p;
  p.Start(10, 100, 8);
  EXPECT_TRUE(p.Applies(true, 3, 4));
  EXPECT_TRUE(p.Applies(true, 4, 4));
  EXPECT_FALSE(p.Applies(true, 5, 4));   // room enough: host writes are not paced
  EXPECT_FALSE(p.Applies(false, 3, 4));  // no victim
  p.Start(0, 100, 8);                    // an empty victim frees room without moving anything
  EXPECT_DOUBLE_EQ(p.ratio(), 0.0);
  EXPECT_FALSE(p.Applies(true, 3, 4));
  p.Start(100, 100, 8);  // a full victim frees nothing: moving it earns nothing, and pacing
  EXPECT_FALSE(p.Applies(true, 3, 4));  // would stall the host for good
}

// The rate a moved sector earns is the ratio averaged over recent victims (weighted by
// what they moved, older ones fading), not the current victim's own: a nearly full victim
// after an emptier one does not cut the host's rate to its own ratio.
TEST(GroomPacerTest, EarnsTheAverageRatioOfRecentVictims) {
  GroomPacer p;
  p.Start(/*valid=*/25, /*capacity=*/100, /*cap=*/1000);
  EXPECT_DOUBLE_EQ(p.average(), 3.0);
  p.Start(75, 100, 1000);  // frees 25 for 75 moved
  EXPECT_DOUBLE_EQ(p.ratio(), 25.0 / 75.0);
  const double avg = (75 * GroomPacer::kDecay + 25) / (25 * GroomPacer::kDecay + 75);
  EXPECT_DOUBLE_EQ(p.average(), avg);
  const double before = p.credits();
  p.Earn();
  EXPECT_DOUBLE_EQ(p.credits() - before, avg);
  // A victim that frees nothing (or moves nothing) does not pace and does not count.
  p.Start(100, 100, 1000);
  EXPECT_DOUBLE_EQ(p.ratio(), 0.0);
  EXPECT_DOUBLE_EQ(p.average(), avg);
  p.Start(0, 100, 1000);
  EXPECT_DOUBLE_EQ(p.average(), avg);
  // Earlier victims fade: after many alike, the average is theirs.
  for (int i = 0; i < 100; ++i) p.Start(50, 100, 1000);
  EXPECT_NEAR(p.average(), 1.0, 1e-9);
}

// The free room's feedback: at the target the average, below it less (down to a floor, so
// the groomer's own progress still lets some host writes through), above it more.
TEST(GroomPacerTest, TheRoomBelowItsTargetSlowsTheHostAndAboveSpeedsIt) {
  GroomPacer p;
  p.Start(50, 100, 1000);  // average 1
  p.SetSlack(0);
  EXPECT_DOUBLE_EQ(p.rate(), 1.0);
  p.SetSlack(-1);
  EXPECT_DOUBLE_EQ(p.rate(), 1.0 - GroomPacer::kGainBelow);
  p.Earn();
  EXPECT_DOUBLE_EQ(p.credits(), 1.0 - GroomPacer::kGainBelow);
  p.SetSlack(-100);
  EXPECT_DOUBLE_EQ(p.feedback(), GroomPacer::kMinFeedback);
  p.SetSlack(1);
  EXPECT_DOUBLE_EQ(p.rate(), 1.0 + GroomPacer::kGain);
  p.SetSlack(100);
  EXPECT_DOUBLE_EQ(p.feedback(), GroomPacer::kMaxFeedback);
  EXPECT_LT(p.feedback() * GroomPacer::kMinFeedback, 1.0);
}

TEST(GroomPacerTest, AHostBacklogAboveItsAverageSpeedsTheHostAndBelowSlowsIt) {
  GroomPacer p;
  p.Start(50, 100, 1000);  // average 1
  p.SetSlack(0);
  // The first sample is the average: no change.
  p.SetBacklog(60);
  EXPECT_DOUBLE_EQ(p.backlog_factor(), 1.0);
  EXPECT_DOUBLE_EQ(p.rate(), 1.0);
  // A queue twice the average (and a little: the average moves by 1/4096 a sample).
  p.SetBacklog(124);
  EXPECT_NEAR(p.backlog_factor(), 128.0 / (60 + 64.0 / 4096 + 4), 1e-9);
  EXPECT_NEAR(p.rate(), p.backlog_factor(), 1e-12);
  // Bounded both ways.
  p.SetBacklog(10000);
  EXPECT_DOUBLE_EQ(p.backlog_factor(), GroomPacer::kMaxBacklogFactor);
  p.SetBacklog(0);
  EXPECT_DOUBLE_EQ(p.backlog_factor(), GroomPacer::kMinBacklogFactor);
  EXPECT_DOUBLE_EQ(p.rate(), GroomPacer::kMinBacklogFactor);
  // Below the room's target a long queue gets no more than the room allows.
  p.SetSlack(-1);
  p.SetBacklog(10000);
  EXPECT_DOUBLE_EQ(p.backlog_factor(), 1.0);
  EXPECT_DOUBLE_EQ(p.rate(), 1.0 - GroomPacer::kGainBelow);
  // The average follows a lasting backlog: after many samples a steady queue is average.
  p.SetSlack(0);
  for (int i = 0; i < 100000; ++i) p.SetBacklog(200);
  EXPECT_NEAR(p.backlog_factor(), 1.0, 1e-6);
}

}  // namespace
}  // namespace vsl::ftl
