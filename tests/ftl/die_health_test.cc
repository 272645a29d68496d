// DieHealth (vsl/ftl/die_health.h): failed dies, the error bound that retires a die,
// lost sectors and the event log.
#include <gtest/gtest.h>

#include "vsl/ftl/die_health.h"

namespace vsl::ftl {
namespace {

TEST(DieHealthTest, ErrorsInDistinctBlocksWithinTheWindowCrossTheBound) {
  DieHealth h(4, 3, 10 * kSec);
  std::size_t n = 0;
  EXPECT_FALSE(h.NoteError(1, 100, 0, &n));
  EXPECT_FALSE(h.NoteError(1, 100, 1 * kSec, &n));  // the same block again: one error
  EXPECT_EQ(n, 1u);
  EXPECT_FALSE(h.NoteError(1, 101, 2 * kSec, &n));
  EXPECT_FALSE(h.NoteError(2, 102, 2 * kSec));  // another die counts apart
  EXPECT_TRUE(h.NoteError(1, 102, 3 * kSec, &n));
  EXPECT_EQ(n, 3u);
}

TEST(DieHealthTest, OldErrorsLeaveTheWindow) {
  DieHealth h(4, 2, 10 * kSec);
  EXPECT_FALSE(h.NoteError(0, 1, 0));
  EXPECT_FALSE(h.NoteError(0, 2, 11 * kSec));  // the first has left the window
  EXPECT_TRUE(h.NoteError(0, 3, 12 * kSec));
}

TEST(DieHealthTest, FailedDiesStayFailedAndCountNoMoreErrors) {
  DieHealth h(4, 1, kSec);
  h.MarkFailed(2);
  EXPECT_TRUE(h.failed(2));
  EXPECT_FALSE(h.failed(3));
  EXPECT_FALSE(h.failed(99));
  EXPECT_EQ(h.alive(), 3u);
  EXPECT_EQ(h.failed_dies(), std::vector<uint32_t>{2});
  EXPECT_FALSE(h.NoteError(2, 5, 0));  // already out
  DieHealth off(4, 0, kSec);           // a limit of 0 never retires
  EXPECT_FALSE(off.NoteError(0, 1, 0));
}

TEST(DieHealthTest, LostSectorsAndEventsAreBounded) {
  DieHealth h(4, 1, kSec);
  h.NoteLost(7);
  h.NoteLost(7);
  EXPECT_EQ(h.lost(), std::vector<uint64_t>{7});
  for (uint64_t i = 0; i < DieHealth::kMaxLost + 10; ++i) h.NoteLost(1000 + i);
  EXPECT_EQ(h.lost().size(), DieHealth::kMaxLost);
  for (int i = 0; i < 100; ++i) h.Event("event " + std::to_string(i));
  EXPECT_EQ(h.events().size(), DieHealth::kMaxEvents);
  EXPECT_EQ(h.events().back(), "event 99");
}

}  // namespace
}  // namespace vsl::ftl
