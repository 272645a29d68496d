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

}  // namespace
}  // namespace vsl::ftl
