// The writer's buffer bookkeeping (vsl/ftl/page_store.h): PooledStore's release in any
// order, reuse and bound; SeqWindow's oldest-not-done.
#include <gtest/gtest.h>

#include <set>

#include "vsl/ftl/page_store.h"

namespace vsl::ftl {
namespace {

struct Item {
  uint32_t store_index = 0;
  int value = 0;
  std::vector<int> buf;
  int recycled = 0;
  void Recycle() {
    value = 0;
    buf.clear();  // keeps its capacity
    ++recycled;
  }
};

// Every live item's index is its place in live().
void ExpectIndexed(const PooledStore<Item>& s) {
  for (std::size_t i = 0; i < s.live().size(); ++i) EXPECT_EQ(s.live()[i]->store_index, i);
}

TEST(PooledStoreTest, ReleasesInAnyOrderAndReusesRecycledObjects) {
  PooledStore<Item> s;
  EXPECT_TRUE(s.empty());
  Item* a = s.Make();
  Item* b = s.Make();
  Item* c = s.Make();
  EXPECT_EQ(s.size(), 3u);
  b->value = 7;
  b->buf.assign(100, 1);
  s.Release(a);  // from the front: the last one takes its place
  ExpectIndexed(s);
  EXPECT_EQ(s.size(), 2u);
  s.Release(b);
  ExpectIndexed(s);
  EXPECT_EQ(s.live()[0].get(), c);
  EXPECT_EQ(s.kept(), 2u);
  // The newest released comes back first, recycled, with its storage.
  Item* d = s.Make();
  EXPECT_EQ(d, b);
  EXPECT_EQ(d->value, 0);
  EXPECT_TRUE(d->buf.empty());
  EXPECT_GE(d->buf.capacity(), 100u);
  EXPECT_EQ(d->recycled, 1);
  ExpectIndexed(s);
  EXPECT_EQ(s.Make(), a);
  EXPECT_EQ(s.kept(), 0u);
}

TEST(PooledStoreTest, KeepsAtMostABoundedNumberOfReleasedObjects) {
  PooledStore<Item> s;
  std::vector<Item*> items;
  for (std::size_t i = 0; i < PooledStore<Item>::kKeep + 50; ++i) items.push_back(s.Make());
  // Release in a scattered order: odd places first, then even.
  for (std::size_t i = 1; i < items.size(); i += 2) s.Release(items[i]);
  ExpectIndexed(s);
  for (std::size_t i = 0; i < items.size(); i += 2) s.Release(items[i]);
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.kept(), PooledStore<Item>::kKeep);
}

TEST(SeqWindowTest, OldestIsTheFirstNotDone) {
  SeqWindow w;
  EXPECT_TRUE(w.empty());
  for (uint64_t s : {3, 5, 8, 9}) w.Insert(s);
  EXPECT_EQ(w.oldest(), 3u);
  w.Erase(8);  // done out of order: stays until what precedes it is done
  EXPECT_EQ(w.oldest(), 3u);
  w.Erase(4);  // never inserted: no-op
  w.Erase(3);
  EXPECT_EQ(w.oldest(), 5u);
  w.Erase(5);  // 8 was done already: the window moves past it
  EXPECT_EQ(w.oldest(), 9u);
  // Out of order and duplicate inserts.
  w.Insert(7);
  w.Insert(7);
  EXPECT_EQ(w.oldest(), 7u);
  w.Erase(7);
  EXPECT_EQ(w.oldest(), 9u);
  w.Erase(9);
  EXPECT_TRUE(w.empty());
}

// Against a model (std::set of the numbers not done, and the done ones not yet passed)
// over a long run: the ring wraps and grows while out-of-order inserts and out-of-order
// completions land anywhere in it.
TEST(SeqWindowTest, AgreesWithAModelAcrossWrapsAndGrowth) {
  SeqWindow w;
  std::set<uint64_t> open;
  std::vector<uint64_t> live;
  uint64_t next = 1, x = 12345;
  auto rnd = [&] { return (x = x * 6364136223846793005ULL + 1442695040888963407ULL) >> 33; };
  for (int step = 0; step < 20000; ++step) {
    const uint64_t r = rnd() % 10;
    if (r < 5 || live.empty()) {
      uint64_t seq = next++;
      if (r == 0 && next > 3) {
        next += 2;  // leave a hole, and insert into it later
        live.push_back(seq + 1);
      }
      w.Insert(seq);
      open.insert(seq);
      live.push_back(seq);
    } else {
      const std::size_t i = rnd() % live.size();
      const uint64_t seq = live[i];
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(i));
      if (open.count(seq) == 0) {  // the hole's number: inserted late, out of order
        w.Insert(seq);
        open.insert(seq);
        live.push_back(seq);
        continue;
      }
      w.Erase(seq);
      open.erase(seq);
    }
    ASSERT_EQ(w.empty(), open.empty()) << step;
    if (!open.empty()) {
      ASSERT_EQ(w.oldest(), *open.begin()) << step;
    }
  }
}

}  // namespace
}  // namespace vsl::ftl
