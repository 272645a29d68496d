// PlpJournal (vsl/simcard/plp_journal.h), the mirror of the controller's protected buffer
// that a killed process leaves behind: a record is present only once committed, what is
// present survives the object (a kill), a journal of another shape is not replayed, and
// a full journal refuses the next record, counting it, until one is removed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "tests/testutil/temp_dir.h"
#include "vsl/simcard/plp_journal.h"

namespace vsl::simcard {
namespace {

constexpr uint32_t kSlot = 40;  // not a multiple of 64: records are padded to their stride

std::vector<uint8_t> Bytes(uint8_t v) { return std::vector<uint8_t>(kSlot, v); }

TEST(PlpJournalTest, AFullJournalRefusesAndCountsUntilARecordLeaves) {
  testing::TempDir tmp;
  auto j = PlpJournal::Open(tmp.Sub("plp.bin"), 3, kSlot).value();
  std::vector<int> ids;
  for (uint8_t k = 0; k < 3; ++k) {
    const auto b = Bytes(static_cast<uint8_t>(0x10 + k));
    ids.push_back(j->Add(PlpJournal::Kind::kProgram, 100 + k, k, 7, k, 0, b.data()));
    ASSERT_GE(ids.back(), 0);
  }
  EXPECT_EQ(j->overflows(), 0u);
  const auto b = Bytes(0x77);
  EXPECT_EQ(j->Add(PlpJournal::Kind::kProgram, 200, 0, 8, 0, 0, b.data()), -1);
  int idx = 5;
  EXPECT_EQ(j->Reserve(&idx), nullptr);
  EXPECT_EQ(idx, -1);
  EXPECT_EQ(j->overflows(), 2u);  // every refused record counts
  EXPECT_EQ(j->Pending().size(), 3u);

  j->Remove(ids[1]);
  uint8_t* d = j->Reserve(&idx);
  ASSERT_NE(d, nullptr);
  EXPECT_EQ(idx, ids[1]);  // the freed record
  std::memset(d, 0x55, kSlot);
  j->Commit(idx, PlpJournal::Kind::kStage, 300, 2, 9, 4, 0);
  const auto p = j->Pending();
  ASSERT_EQ(p.size(), 3u);
  bool found = false;
  for (const auto& r : p) {
    if (r.seq != 300) continue;
    found = true;
    EXPECT_EQ(r.kind, PlpJournal::Kind::kStage);
    EXPECT_EQ(r.die, 2u);
    EXPECT_EQ(r.block, 9u);
    EXPECT_EQ(r.page, 4u);
    EXPECT_EQ(std::memcmp(r.data, Bytes(0x55).data(), kSlot), 0);
  }
  EXPECT_TRUE(found);
  EXPECT_EQ(j->overflows(), 2u);
}

TEST(PlpJournalTest, CommittedRecordsSurviveAKillAndReservedOnesDoNot) {
  testing::TempDir tmp;
  const std::string path = tmp.Sub("plp.bin");
  {
    auto j = PlpJournal::Open(path, 4, kSlot).value();
    const auto a = Bytes(0xA1), e = Bytes(0);
    ASSERT_GE(j->Add(PlpJournal::Kind::kProgram, 1, 0, 3, 0, 0, a.data()), 0);
    ASSERT_GE(j->Add(PlpJournal::Kind::kErase, 2, 1, 5, 0, 12, nullptr), 0);
    int idx = -1;
    uint8_t* d = j->Reserve(&idx);  // built in place, never committed: the kill came first
    ASSERT_NE(d, nullptr);
    std::memset(d, 0xEE, kSlot);
    const int gone = j->Add(PlpJournal::Kind::kProgram, 3, 2, 3, 1, 0, a.data());
    ASSERT_GE(gone, 0);
    j->Remove(gone);  // completed before the kill
    // The object goes away without Clear: what a SIGKILL of the process leaves.
  }
  auto j = PlpJournal::Open(path, 4, kSlot).value();
  auto p = j->Pending();
  ASSERT_EQ(p.size(), 2u);
  std::sort(p.begin(), p.end(), [](const auto& x, const auto& y) { return x.seq < y.seq; });
  EXPECT_EQ(p[0].kind, PlpJournal::Kind::kProgram);
  EXPECT_EQ(p[0].block, 3u);
  EXPECT_EQ(std::memcmp(p[0].data, Bytes(0xA1).data(), kSlot), 0);
  EXPECT_EQ(p[1].kind, PlpJournal::Kind::kErase);
  EXPECT_EQ(p[1].erase_count_after, 12u);
  // The two free records are usable, the live ones are not handed out again.
  int a = -1, b = -1, c = -1;
  EXPECT_NE(j->Reserve(&a), nullptr);
  EXPECT_NE(j->Reserve(&b), nullptr);
  EXPECT_EQ(j->Reserve(&c), nullptr);
  j->Clear();
  EXPECT_TRUE(j->Pending().empty());
  j.reset();
  EXPECT_TRUE(PlpJournal::Open(path, 4, kSlot).value()->Pending().empty());
}

TEST(PlpJournalTest, AJournalOfAnotherShapeIsNotReplayed) {
  testing::TempDir tmp;
  const std::string path = tmp.Sub("plp.bin");
  {
    auto j = PlpJournal::Open(path, 4, kSlot).value();
    const auto a = Bytes(0xA1);
    ASSERT_GE(j->Add(PlpJournal::Kind::kProgram, 1, 0, 3, 0, 0, a.data()), 0);
  }
  EXPECT_TRUE(PlpJournal::Open(path, 5, kSlot).value()->Pending().empty());  // other record count
  {
    auto j = PlpJournal::Open(path, 4, kSlot).value();
    const auto a = Bytes(0xA1);
    ASSERT_GE(j->Add(PlpJournal::Kind::kProgram, 1, 0, 3, 0, 0, a.data()), 0);
  }
  EXPECT_TRUE(PlpJournal::Open(path, 4, kSlot + 8).value()->Pending().empty());  // other slot size
}

}  // namespace
}  // namespace vsl::simcard
