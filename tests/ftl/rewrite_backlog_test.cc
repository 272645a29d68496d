// What must be written again, as bookkeeping (vsl/ftl/rewrite_backlog.h): a job pins the
// LEB it can go back to until it is released, a reverted page moves that pin, requests
// take one hold per job or deferred trim they wait on, and the failed-trim window closes
// only once every page older than its records is done.
#include <gtest/gtest.h>

#include <map>

#include "vsl/ftl/rewrite_backlog.h"

namespace vsl::ftl {
namespace {

struct Req {
  uint32_t remaining = 1;
};

struct Fixture {
  PsaLayout addr{4, 8, 2};  // 64 slots per LEB
  std::map<uint32_t, int> pins;
  RewriteBacklog<Req> rw{addr, [this](uint32_t l) { ++pins[l]; }, [this](uint32_t l) { --pins[l]; }};
  RewriteBacklog<Req>::Job Job(uint64_t lba, Psa from, Psa prev) {
    RewriteBacklog<Req>::Job j;
    j.lba = lba;
    j.from = from;
    j.prev = prev;
    j.data.assign(16, static_cast<uint8_t>(lba));
    return j;
  }
};

format::TrimRecord Trim(uint64_t lba, uint64_t count, uint64_t seq) {
  format::TrimRecord t{};
  t.lba = lba;
  t.count = count;
  t.seq = seq;
  return t;
}

TEST(RewriteBacklogTest, AJobPinsTheLebItCanGoBackToUntilReleased) {
  Fixture x;
  const Psa failed = x.addr.Make(9, 1, 2, 0);
  x.rw.Add(x.Job(100, failed, x.addr.Make(3, 0, 0, 1)));
  x.rw.Add(x.Job(101, failed + 1, kKeepMapping));  // nowhere to go back to: no pin
  x.rw.Add(x.Job(102, failed + 2, kUnmapped));     // back to unmapped: no pin either
  EXPECT_EQ(x.rw.size(), 3u);
  EXPECT_EQ(x.pins[3], 1);
  EXPECT_EQ(x.rw.PinsOn(3), 1u);
  EXPECT_EQ(x.rw.PinsOn(9), 0u);
  // Taken out, the oldest still holds its pin until the caller releases it.
  auto j = x.rw.TakeFront();
  EXPECT_EQ(j.lba, 100u);
  EXPECT_EQ(x.pins[3], 1);
  EXPECT_EQ(x.rw.PinsOn(3), 0u);
  x.rw.Release(j);
  EXPECT_EQ(x.pins[3], 0);
  x.rw.Release(j);  // once only
  EXPECT_EQ(x.pins[3], 0);
  auto rest = x.rw.TakeAll();
  ASSERT_EQ(rest.size(), 2u);
  EXPECT_EQ(rest[0].lba, 101u);
  EXPECT_TRUE(x.rw.empty());
}

TEST(RewriteBacklogTest, ARevertedPageMovesTheJobsThatWouldGoBackToIt) {
  Fixture x;
  const Psa here = x.addr.Make(5, 2, 1, 0);   // a page that will never be stored
  const Psa older = x.addr.Make(2, 0, 3, 1);  // where its sector was before it
  x.rw.Add(x.Job(7, x.addr.Make(8, 0, 0, 0), here));
  x.rw.Add(x.Job(8, x.addr.Make(8, 0, 0, 1), x.addr.Make(6, 0, 0, 0)));
  EXPECT_EQ(x.pins[5], 1);
  x.rw.Retarget(here, older);
  EXPECT_EQ(x.pins[5], 0);
  EXPECT_EQ(x.pins[2], 1);
  EXPECT_EQ(x.pins[6], 1);  // the other job keeps its own
  EXPECT_EQ(x.rw.jobs().front().prev, older);
  // Back to "unmapped": the pin goes and none replaces it.
  x.rw.Retarget(older, kUnmapped);
  EXPECT_EQ(x.pins[2], 0);
  EXPECT_EQ(x.rw.jobs().front().pinned, RewriteBacklog<Req>::kNoPin);
}

TEST(RewriteBacklogTest, RequestsJoinOnlyJobsStillCurrentAndDeferredTrimsCoveringTheSector) {
  Fixture x;
  const Psa from = x.addr.Make(4, 0, 0, 0);
  x.rw.Add(x.Job(50, from, kKeepMapping));
  x.rw.Add(x.Job(51, from + 1, kKeepMapping));
  Req a, b;
  // The map no longer points at the job's slot: nothing to wait for there.
  x.rw.JoinJobsOf(50, from + 9, {&a});
  EXPECT_EQ(a.remaining, 1u);
  x.rw.JoinJobsOf(50, from, {&a, &b});
  EXPECT_EQ(a.remaining, 2u);
  EXPECT_EQ(b.remaining, 2u);
  EXPECT_EQ(x.rw.front().waiters.size(), 2u);

  x.rw.Defer({Trim(100, 10, 5)}, {});
  x.rw.Defer({Trim(200, 1, 6)}, {});
  x.rw.JoinDeferredCovering(105, {&a});
  x.rw.JoinDeferredCovering(105, {&a});  // once per trim page
  x.rw.JoinDeferredCovering(110, {&b});  // just past the record
  EXPECT_EQ(a.remaining, 3u);
  EXPECT_EQ(b.remaining, 2u);
  // A commit record names members, not a range: it covers nothing.
  format::TrimRecord commit = Trim(300, 4, 7);
  commit.count |= format::kCommitFlag;
  x.rw.Defer({commit}, {});
  x.rw.JoinDeferredCovering(301, {&b});
  EXPECT_EQ(b.remaining, 2u);
  auto d = x.rw.TakeDeferred();
  ASSERT_EQ(d.size(), 3u);
  EXPECT_EQ(d[0].waiters, std::vector<Req*>{&a});
  EXPECT_EQ(x.rw.deferred(), 0u);
}

TEST(RewriteBacklogTest, TheFailedTrimWindowClosesOnceEveryOlderPageIsDone) {
  Fixture x;
  x.rw.NoteFailedTrims({Trim(10, 5, 40), Trim(30, 1, 42)});
  EXPECT_TRUE(x.rw.InFailedTrim(12, 39));   // a write older than the trim
  EXPECT_FALSE(x.rw.InFailedTrim(12, 40));  // not older
  EXPECT_FALSE(x.rw.InFailedTrim(15, 1));   // outside every record
  EXPECT_TRUE(x.rw.InFailedTrim(30, 41));
  // A page older than the newest record is still in flight: the window stays.
  x.rw.SettleFailedTrims(true, 42);
  EXPECT_EQ(x.rw.failed_trims(), 2u);
  x.rw.SettleFailedTrims(true, 43);
  EXPECT_EQ(x.rw.failed_trims(), 0u);
  x.rw.NoteFailedTrims({Trim(10, 5, 50)});
  x.rw.SettleFailedTrims(false, 0);  // nothing in flight
  EXPECT_FALSE(x.rw.InFailedTrim(12, 1));
}

TEST(RewriteBacklogTest, DrainWaitersAndReprotectPagesAreTakenOnce) {
  Fixture x;
  int ran = 0;
  x.rw.WhenDrained([&ran] { ++ran; });
  EXPECT_TRUE(x.rw.has_drain_waiters());
  auto w = x.rw.TakeDrainWaiters();
  EXPECT_FALSE(x.rw.has_drain_waiters());
  for (auto& fn : w) fn();
  EXPECT_EQ(ran, 1);
  x.rw.reprotect().push_back({3, 1, 7});
  EXPECT_EQ(x.rw.TakeReprotect().size(), 1u);
  EXPECT_TRUE(x.rw.reprotect().empty());
}

}  // namespace
}  // namespace vsl::ftl
