// FlashBack's acknowledgement rule as bookkeeping (vsl/ftl/parity_cover.h): members wait
// per row until a durable parity names their die, a final cover releases every member and
// the row's stage slot, slots go to one row at a time.
#include <gtest/gtest.h>

#include <algorithm>

#include "vsl/ftl/parity_cover.h"

namespace vsl::ftl {
namespace {

struct Page {
  uint32_t die = 0;
};

std::vector<uint32_t> Dies(const ParityCover<Page>::Covered& ps) {
  std::vector<uint32_t> d;
  ps.ForEach([&](const Page* p) { d.push_back(p->die); });
  std::sort(d.begin(), d.end());
  return d;
}

TEST(ParityCoverTest, PartialParityCoversOnlyTheMembersItNames) {
  ParityCover<Page> c(2);
  Page p0{0}, p1{1}, p2{2};
  c.Wait(5, 3, 3, &p0);
  c.Wait(5, 3, 3, &p1);
  c.Wait(5, 3, 3, &p2);
  ASSERT_NE(c.Find(5, 3), nullptr);
  EXPECT_EQ(c.Find(5, 3)->pd, 3u);
  EXPECT_EQ(c.Find(5, 4), nullptr);
  // A partial parity page (or a staged image) of dies 0 and 2.
  auto got = c.Cover(5, 3, 0b101, false);
  EXPECT_EQ(Dies(got), (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(got.freed_slot, -1);
  ASSERT_EQ(c.Find(5, 3)->waiting.size(), 1u);  // the row stays for its parity page
  // Covering them again covers nothing more.
  EXPECT_TRUE(c.Cover(5, 3, 0b101, false).empty());
  // The row's own parity page: every member, and the row leaves.
  got = c.Cover(5, 3, 0, true);
  EXPECT_EQ(Dies(got), (std::vector<uint32_t>{1}));
  EXPECT_EQ(c.Find(5, 3), nullptr);
  EXPECT_TRUE(c.Cover(5, 3, ~uint64_t{0}, true).empty());  // unknown row: nothing
}

TEST(ParityCoverTest, StageSlotsGoToOneRowUntilItsFinalCover) {
  ParityCover<Page> c(1);
  Page a{0}, b{1};
  c.Wait(1, 0, 2, &a);
  c.Wait(2, 7, 3, &b);
  auto& r1 = *c.Find(1, 0);
  auto& r2 = *c.Find(2, 7);
  EXPECT_TRUE(c.TakeSlot(r1));
  EXPECT_EQ(r1.slot, 0);
  EXPECT_TRUE(c.TakeSlot(r1));   // it keeps the one it has
  EXPECT_FALSE(c.TakeSlot(r2));  // the only slot is taken
  EXPECT_EQ(r2.slot, -1);
  // A partial cover keeps the slot; the final one frees it for the caller to clear.
  EXPECT_EQ(c.Cover(1, 0, 0b1, false).freed_slot, -1);
  EXPECT_EQ(c.Cover(1, 0, 0, true).freed_slot, 0);
  EXPECT_TRUE(c.TakeSlot(*c.Find(2, 7)));
  ParityCover<Page> none;
  EXPECT_EQ(none.stage_slots(), 0u);
}

TEST(ParityCoverTest, RemovedPagesWaitNoMoreAndStagesArePostedOnce) {
  ParityCover<Page> c(0);
  Page a{0}, b{1};
  c.Wait(3, 1, 2, &a);
  c.Wait(3, 1, 2, &b);
  c.Remove(3, 1, &a);
  c.Remove(9, 9, &a);  // unknown row: nothing
  const auto got = c.Cover(3, 1, ~uint64_t{0}, false);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got.at(0), &b);
  EXPECT_EQ(c.rows().size(), 1u);  // still there until its final cover
  EXPECT_TRUE(c.PostStage());
  EXPECT_FALSE(c.PostStage());
  c.StageRan();
  EXPECT_TRUE(c.PostStage());
}


// A row that left hands its node to the next row: the newcomer starts afresh (no slot, no
// staged members, only its own waiting member), and the slot it left is free.
TEST(ParityCoverTest, ARowsReusedPlaceStartsAfresh) {
  ParityCover<Page> c(1);
  Page a{0}, b{1}, n{2};
  c.Wait(1, 0, 3, &a);
  c.Wait(1, 0, 3, &b);
  ASSERT_TRUE(c.TakeSlot(*c.Find(1, 0)));
  c.Find(1, 0)->staged_mask = 0b11;
  const auto gone = c.Cover(1, 0, 0, true);
  EXPECT_EQ(gone.size(), 2u);
  EXPECT_EQ(gone.freed_slot, 0);
  c.Wait(2, 5, 1, &n);
  const auto* r = c.Find(2, 5);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(c.Find(1, 0), nullptr);
  EXPECT_EQ(r->pd, 1u);
  EXPECT_EQ(r->slot, -1);
  EXPECT_EQ(r->staged_mask, 0u);
  ASSERT_EQ(r->waiting.size(), 1u);
  EXPECT_EQ(r->waiting[0], &n);
  EXPECT_TRUE(c.TakeSlot(*c.Find(2, 5)));  // the slot the first row gave back
}

}  // namespace
}  // namespace vsl::ftl
