// One atomic batch's bookkeeping (vsl/ftl/atomic_batch.h) without flash: the append
// cursor, the commit page's records, the attempt rules and the pins.
#include <gtest/gtest.h>

#include "vsl/ftl/atomic_batch.h"

namespace vsl::ftl {
namespace {
namespace f = format;

constexpr uint32_t kSector = 512;

std::vector<AtomicOp> Ops(const std::vector<uint8_t>& buf) {
  return {
      {AtomicOp::kWrite, 10, 3, buf.data()},
      {AtomicOp::kTrim, 100, 5, nullptr},
      {AtomicOp::kWrite, 30, 0, buf.data()},  // empty: nothing to place
      {AtomicOp::kWrite, 20, 1, buf.data() + 3 * kSector},
  };
}

// Places every sector left, at PSAs from `first` up; returns the LBAs in order.
std::vector<uint64_t> PlaceAll(AtomicBatch& b, Psa first) {
  std::vector<uint64_t> lbas;
  while (const auto s = b.Next(kSector)) {
    lbas.push_back(s->lba);
    b.Placed(s->lba, first++);
  }
  return lbas;
}

TEST(AtomicBatchTest, CursorPlacesWrittenSectorsInOperationOrder) {
  std::vector<uint8_t> buf(4 * kSector);
  AtomicBatch b(Ops(buf), true);
  EXPECT_TRUE(b.fua());
  auto s = b.Next(kSector);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->lba, 10u);
  EXPECT_EQ(s->src, buf.data());
  // Not placed (no page could be had): the same sector again.
  EXPECT_EQ(b.Next(kSector)->lba, 10u);
  b.Placed(10, 500);
  EXPECT_EQ(b.Next(kSector)->src, buf.data() + kSector);
  EXPECT_EQ(PlaceAll(b, 501), (std::vector<uint64_t>{11, 12, 20}));
  EXPECT_FALSE(b.Next(kSector).has_value());
  ASSERT_EQ(b.placed().size(), 4u);
  EXPECT_EQ(b.placed()[3], std::make_pair(uint64_t{20}, Psa{503}));
}

TEST(AtomicBatchTest, CommitNamesTrimsThenEveryMemberAtTheCommitSeq) {
  std::vector<uint8_t> buf(4 * kSector);
  AtomicBatch b(Ops(buf), false);
  PlaceAll(b, 0);
  b.AddMember(41, 0);
  b.AddMember(42, 8);
  EXPECT_EQ(b.CommitRecordCount(), 3u);
  const auto recs = b.CommitRecords(50);
  ASSERT_EQ(recs.size(), 3u);
  EXPECT_FALSE(f::IsCommitRecord(recs[0]));
  EXPECT_EQ(recs[0].lba, 100u);
  EXPECT_EQ(recs[0].count, 5u);
  EXPECT_TRUE(f::IsCommitRecord(recs[1]));
  EXPECT_EQ(recs[1].lba, 41u);
  EXPECT_EQ(recs[1].count & ~f::kCommitFlag, 0u);
  EXPECT_EQ(recs[2].lba, 42u);
  EXPECT_EQ(recs[2].count & ~f::kCommitFlag, 8u);
  for (const auto& r : recs) EXPECT_EQ(r.seq, 50u);
  EXPECT_FALSE(b.committed());
  b.MarkCommitted();
  EXPECT_TRUE(b.committed());
}

TEST(AtomicBatchTest, AFailedAttemptIsForgottenAndRetriedABoundedNumberOfTimes) {
  std::vector<uint8_t> buf(4 * kSector);
  AtomicBatch b(Ops(buf), false);
  PlaceAll(b, 0);
  const uint32_t first = b.attempt();
  b.AddMember(7, 0);
  b.Fail();
  EXPECT_TRUE(b.failed());
  b.NewAttempt();
  EXPECT_FALSE(b.failed());
  EXPECT_TRUE(b.members().empty());
  EXPECT_TRUE(b.placed().empty());
  EXPECT_EQ(b.Next(kSector)->lba, 10u);  // from the start again
  EXPECT_TRUE(b.MayRetry());
  // A page of the voided attempt no longer counts.
  EXPECT_FALSE(b.IsCurrent(first));
  EXPECT_TRUE(b.IsCurrent(b.attempt()));
  EXPECT_TRUE(b.MayRetry());
  EXPECT_TRUE(b.MayRetry());
  EXPECT_FALSE(b.MayRetry());  // the fourth failure ends it
  EXPECT_EQ(b.attempt(), AtomicBatch::kAttempts);
  EXPECT_TRUE(b.Finish());
  EXPECT_FALSE(b.Finish());  // answered once
}

TEST(AtomicBatchTest, PinsEachLebOnceUntilTaken) {
  AtomicBatch b({}, false);
  EXPECT_FALSE(b.Next(kSector).has_value());
  EXPECT_TRUE(b.Pin(4));
  EXPECT_FALSE(b.Pin(4));
  EXPECT_TRUE(b.Pin(9));
  EXPECT_EQ(b.TakePins(), (std::vector<uint32_t>{4, 9}));
  EXPECT_TRUE(b.TakePins().empty());
  EXPECT_TRUE(b.Pin(4));  // pinned again by a later attempt
}

}  // namespace
}  // namespace vsl::ftl
