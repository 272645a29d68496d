#include "vsl/core/ring.h"

#include <atomic>
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

}  // namespace
}  // namespace vsl
