#include "vsl/core/fifo.h"
#include "vsl/core/free_list.h"
#include "vsl/core/random.h"
#include "vsl/core/ring.h"

#include <atomic>
#include <deque>
#include <memory>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace vsl {
namespace {

TEST(SpscRingTest, FifoFullAndEmpty) {
  SpscRing<int> r(3);
  EXPECT_EQ(r.capacity(), 4u);
  int v = 0;
  EXPECT_FALSE(r.TryPop(v));
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(r.TryPush(i));
  EXPECT_FALSE(r.TryPush(99));
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(r.TryPop(v));
    EXPECT_EQ(v, i);
  }
  EXPECT_FALSE(r.TryPop(v));
}

TEST(SpscRingTest, TwoThreadsPassEveryItemInOrder) {
  SpscRing<uint64_t> r(64);
  constexpr uint64_t kN = 200000;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kN; ++i) {
      while (!r.TryPush(i)) std::this_thread::yield();
    }
  });
  uint64_t expect = 0, v = 0;
  while (expect < kN) {
    if (r.TryPop(v)) {
      ASSERT_EQ(v, expect);
      ++expect;
    }
  }
  producer.join();
}

TEST(MpscRingTest, ManyProducersNoLossNoDuplicatesPerProducerOrder) {
  MpscRing<uint64_t> r(128);
  constexpr int kProducers = 4;
  constexpr uint64_t kPer = 50000;
  std::vector<std::thread> ts;
  for (int p = 0; p < kProducers; ++p) {
    ts.emplace_back([&r, p] {
      for (uint64_t i = 0; i < kPer; ++i) {
        uint64_t v = (uint64_t(p) << 32) | i;
        while (!r.TryPush(v)) std::this_thread::yield();
      }
    });
  }
  std::vector<uint64_t> next(kProducers, 0);
  uint64_t got = 0, v = 0;
  while (got < kProducers * kPer) {
    if (!r.TryPop(v)) continue;
    const auto p = static_cast<std::size_t>(v >> 32);
    ASSERT_LT(p, next.size());
    ASSERT_EQ(v & 0xFFFFFFFF, next[p]) << "per-producer order broken";
    ++next[p];
    ++got;
  }
  for (auto& t : ts) t.join();
  EXPECT_FALSE(r.TryPop(v));
}

TEST(MpscRingTest, FullRingRefusesAndKeepsValue) {
  MpscRing<std::unique_ptr<int>> r(2);
  EXPECT_TRUE(r.TryPush(std::make_unique<int>(1)));
  EXPECT_TRUE(r.TryPush(std::make_unique<int>(2)));
  auto third = std::make_unique<int>(3);
  EXPECT_FALSE(r.TryPush(third));
  ASSERT_NE(third, nullptr);  // not consumed on failure
  std::unique_ptr<int> out;
  ASSERT_TRUE(r.TryPop(out));
  EXPECT_EQ(*out, 1);
}


// Fifo: order across growth and wrap-around at both ends, and release of what a popped
// element owned.
TEST(FifoTest, KeepsOrderAcrossGrowthAndWrap) {
  Fifo<std::unique_ptr<int>> q;
  std::deque<int> model;
  int next = 0;
  Rng rng(7);
  for (int step = 0; step < 20000; ++step) {
    const uint64_t r = rng.Below(10);
    if (r < 4) {
      q.push_back(std::make_unique<int>(next));
      model.push_back(next++);
    } else if (r < 5) {
      q.push_front(std::make_unique<int>(next));
      model.push_front(next++);
    } else if (!model.empty()) {
      ASSERT_EQ(*q.front(), model.front());
      ASSERT_EQ(*q.back(), model.back());
      q.pop_front();
      model.pop_front();
    }
    ASSERT_EQ(q.size(), model.size());
    if (!model.empty()) {
      ASSERT_EQ(*q[model.size() / 2], model[model.size() / 2]);
    }
  }
  EXPECT_GE(q.capacity(), q.size());
}

TEST(FifoTest, PopReleasesAndSteadyStateDoesNotGrow) {
  auto shared = std::make_shared<int>(1);
  Fifo<std::shared_ptr<int>> q;
  for (int i = 0; i < 10; ++i) q.push_back(shared);
  EXPECT_EQ(shared.use_count(), 11);
  q.pop_front();
  EXPECT_EQ(shared.use_count(), 10);  // released as it left, not when overwritten later
  while (!q.empty()) q.pop_front();
  const std::size_t cap = q.capacity();
  for (int round = 0; round < 1000; ++round) {
    for (int i = 0; i < 12; ++i) q.push_back(shared);
    for (int i = 0; i < 12; ++i) q.pop_front();
  }
  EXPECT_EQ(q.capacity(), cap);  // a steady depth reuses the ring
}

// A record with storage of its own: Recycle must reset the fields and may keep capacity.
struct Rec {
  static inline int live = 0;
  int value = 0;
  std::vector<int> keep;
  Rec() { ++live; }
  ~Rec() { --live; }
  void Recycle() {
    value = 0;
    keep.clear();
  }
};

TEST(FreeListTest, ReusesGivenBackRecordsRecycledAndDeletesBeyondKeep) {
  {
    FreeList<Rec> fl(2);
    Rec* a = fl.Take();
    a->value = 7;
    a->keep.assign(100, 1);
    const std::size_t cap = a->keep.capacity();
    fl.Give(a);
    EXPECT_EQ(fl.kept(), 1u);
    Rec* b = fl.Take();
    EXPECT_EQ(b, a);  // the record given back is the one handed out next
    EXPECT_EQ(b->value, 0);
    EXPECT_TRUE(b->keep.empty());
    EXPECT_EQ(b->keep.capacity(), cap);  // storage kept across reuse
    Rec* c = fl.Take();
    Rec* d = fl.Take();
    EXPECT_EQ(Rec::live, 3);
    fl.Give(b);
    fl.Give(c);
    fl.Give(d);  // beyond keep: deleted
    EXPECT_EQ(fl.kept(), 2u);
    EXPECT_EQ(Rec::live, 2);
    Rec* out = fl.Take();  // still out when the list goes: the holder's to free
    EXPECT_EQ(Rec::live, 2);
    delete out;
  }
  EXPECT_EQ(Rec::live, 0);
}

TEST(RecordPoolTest, FreesEveryRecordItMadeOutOrNot) {
  {
    RecordPool<Rec> pool;
    Rec* a = pool.Take();
    Rec* b = pool.Take();
    pool.Give(a);
    EXPECT_EQ(pool.Take(), a);
    pool.Give(b);
    EXPECT_EQ(pool.made(), 2u);
    EXPECT_EQ(pool.kept(), 1u);
    EXPECT_EQ(Rec::live, 2);
    // `a` is still out: the pool frees it too.
  }
  EXPECT_EQ(Rec::live, 0);
}

}  // namespace
}  // namespace vsl
