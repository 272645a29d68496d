// ForwardMap (vsl/ftl/map.h): sparse allocation, counts and walks.
#include <gtest/gtest.h>

#include "vsl/ftl/map.h"

namespace vsl::ftl {
namespace {

TEST(ForwardMapTest, UnmappedUntilSetAndChunksAllocatedOnFirstUse) {
  ForwardMap m(uint64_t{1} << 32);  // a sparse 16 TiB (4 KiB sectors) space
  EXPECT_EQ(m.Get(123456789), kUnmapped);
  EXPECT_EQ(m.allocated_chunks(), 0u);
  EXPECT_EQ(m.Set(7, kUnmapped), kUnmapped);  // unmapping nothing allocates nothing
  EXPECT_EQ(m.allocated_chunks(), 0u);
  EXPECT_EQ(m.Set(7, 100), kUnmapped);
  EXPECT_EQ(m.Set(7, 200), 100u);  // returns the old PSA
  EXPECT_EQ(m.Set(uint64_t{3} << 30, 300), kUnmapped);
  EXPECT_EQ(m.mapped(), 2u);
  EXPECT_EQ(m.allocated_chunks(), 2u);
  EXPECT_EQ(m.Set(7, kUnmapped), 200u);
  EXPECT_EQ(m.mapped(), 1u);
}

TEST(ForwardMapTest, WalksVisitOnlyMappedSectorsInOrder) {
  ForwardMap m(1 << 20);
  for (uint64_t l : {5u, 6u, 70000u, 900000u}) m.Set(l, static_cast<Psa>(l * 2));
  std::vector<uint64_t> seen;
  m.ForEachMappedIn(0, 1 << 20, [&](uint64_t l, Psa p) {
    EXPECT_EQ(p, l * 2);
    seen.push_back(l);
  });
  EXPECT_EQ(seen, (std::vector<uint64_t>{5, 6, 70000, 900000}));
  seen.clear();
  m.ForEachMappedIn(6, 70000 - 6, [&](uint64_t l, Psa) { seen.push_back(l); });
  EXPECT_EQ(seen, (std::vector<uint64_t>{6}));
  std::vector<uint64_t> chunks;
  m.ForEachChunk([&](uint64_t first) { chunks.push_back(first); });
  EXPECT_EQ(chunks, (std::vector<uint64_t>{0, 69632, 897024}));
}

}  // namespace
}  // namespace vsl::ftl
