// LebTable (vsl/ftl/leb.h): the free list and the victim buckets, on their own.
#include <memory>

#include <gtest/gtest.h>

#include "vsl/ftl/leb.h"

namespace vsl::ftl {
namespace {

constexpr uint32_t kLebs = 16, kDies = 4, kSlots = 64;

std::unique_ptr<LebTable> MakeTable() {
  auto p = std::make_unique<LebTable>(kLebs, kDies, kSlots, kSlots);
  LebTable& t = *p;
  for (uint32_t i = 0; i < kLebs; ++i) {
    Leb& l = t.leb(i);
    l.good.assign(kDies, 1);
    l.capacity = kSlots;
    t.SetState(l, LebState::kFree);  // LEBs start on no list: the owner places them
  }
  t.Recount();
  return p;
}

void Close(LebTable& t, uint32_t i, uint32_t valid, uint64_t close_seq) {
  Leb& l = t.leb(i);
  t.SetState(l, LebState::kOpen);
  l.valid = valid;
  l.close_seq = close_seq;
  t.SetState(l, LebState::kClosed);
}

TEST(LebTableTest, PickFreeTakesTheLeastErased) {
  auto tp = MakeTable();
  LebTable& t = *tp;
  EXPECT_EQ(t.free_count(), kLebs);
  for (uint32_t i = 0; i < kLebs; ++i) t.leb(i).erase_count = 100 - i;
  Leb* l = t.PickFree();
  ASSERT_NE(l, nullptr);
  EXPECT_EQ(l->index, kLebs - 1);
  t.SetState(*l, LebState::kOpen);
  EXPECT_EQ(t.free_count(), kLebs - 1);
  EXPECT_EQ(t.PickFree()->index, kLebs - 2);
}

TEST(LebTableTest, GreedyVictimHasFewestValidAndFollowsValidityChanges) {
  auto tp = MakeTable();
  LebTable& t = *tp;
  Close(t, 1, 50, 10);
  Close(t, 2, 20, 11);
  Close(t, 3, 40, 12);
  EXPECT_EQ(t.closed_count(), 3u);
  EXPECT_EQ(t.PickVictim(VictimPolicy::kGreedy, 100)->index, 2u);
  // LEB 3 loses most of its data: an O(1) bucket move makes it the victim.
  t.leb(3).valid = 5;
  t.OnValidChanged(t.leb(3));
  EXPECT_EQ(t.PickVictim(VictimPolicy::kGreedy, 100)->index, 3u);
  // Ruled out by the caller, in flight, or pinned by an atomic batch: not chosen.
  EXPECT_EQ(t.PickVictim(VictimPolicy::kGreedy, 100, [](const Leb& l) { return l.index != 3; })->index, 2u);
  t.leb(2).inflight = 1;
  t.leb(3).atomic_pins = 1;
  EXPECT_EQ(t.PickVictim(VictimPolicy::kGreedy, 100)->index, 1u);
}

TEST(LebTableTest, CostBenefitPrefersOldColdLebsOverSlightlyEmptierYoungOnes) {
  auto tp = MakeTable();
  LebTable& t = *tp;
  Close(t, 1, 32, 10);   // half valid, old
  Close(t, 2, 28, 990);  // a little emptier, just closed
  EXPECT_EQ(t.PickVictim(VictimPolicy::kGreedy, 1000)->index, 2u);
  EXPECT_EQ(t.PickVictim(VictimPolicy::kCostBenefit, 1000)->index, 1u);
}

TEST(LebTableTest, FreeLebsTooNarrowForParityAreNotHandedOut) {
  auto tp = MakeTable();
  LebTable& t = *tp;
  for (uint32_t i = 0; i < kLebs; ++i) t.leb(i).good = {1, 0, 0, 0};
  t.leb(5).good = {1, 1, 0, 0};
  t.set_min_good(2);
  EXPECT_EQ(t.free_count(), 1u);
  EXPECT_EQ(t.PickFree()->index, 5u);
  t.set_min_good(0);
  EXPECT_EQ(t.free_count(), kLebs);
}

}  // namespace
}  // namespace vsl::ftl
