// Static wear levelling (vsl/ftl/wear.h) on its own.
#include <memory>

#include <gtest/gtest.h>

#include "vsl/ftl/wear.h"

namespace vsl::ftl {
namespace {

std::unique_ptr<LebTable> Table(std::vector<uint32_t> erase_counts) {
  auto t = std::make_unique<LebTable>(static_cast<uint32_t>(erase_counts.size()), 2, 64, 64);
  for (uint32_t i = 0; i < t->size(); ++i) {
    Leb& l = t->leb(i);
    l.erase_count = erase_counts[i];
    l.capacity = 64;
    t->SetState(l, i < 2 ? LebState::kMeta : LebState::kClosed);
  }
  return t;
}

TEST(WearTest, ColdLebLaggingPastTheSpreadIsTheVictim) {
  auto t = Table({900, 900, 100, 40, 170, 160});  // LEBs 0 and 1: metadata, not counted
  EXPECT_EQ(PickWearVictim(*t, 2, 200), nullptr);   // spread 130: within the bound
  Leb* v = PickWearVictim(*t, 2, 100);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->index, 3u);
  EXPECT_EQ(PickWearVictim(*t, 2, 0), nullptr);  // disabled
}

TEST(WearTest, OnlyClosedIdleUnpinnedLebsQualify) {
  auto t = Table({0, 0, 500, 10, 20, 30});
  t->leb(3).inflight = 1;
  t->leb(4).atomic_pins = 1;
  EXPECT_EQ(PickWearVictim(*t, 2, 100)->index, 5u);
  t->leb(5).gc_skip = true;
  EXPECT_EQ(PickWearVictim(*t, 2, 100), nullptr);
}

TEST(WearTest, EraseCountRangeSkipsLebsWithNoUsableBlock) {
  auto t = Table({1, 1, 7, 3, 12, 5});
  EXPECT_EQ(EraseCountRange(*t, 2), (std::pair<uint32_t, uint32_t>{3, 12}));
  t->leb(3).good = {0, 0};
  EXPECT_EQ(EraseCountRange(*t, 2), (std::pair<uint32_t, uint32_t>{5, 12}));
}

}  // namespace
}  // namespace vsl::ftl
