// Where an append point writes next (vsl/ftl/append_cursor.h): rows in order, data
// positions only (no bad die, no parity die), a row-done step before each new row, and
// the summary's positions left at the end.
#include <gtest/gtest.h>

#include <set>

#include "vsl/ftl/append_cursor.h"
#include "vsl/simcard/profile.h"

namespace vsl::ftl {
namespace {

// test-small's pipe: 4 dies, 16 pages per block.
nand::Geometry Geo() { return simcard::FindProfile("test-small")->geometry; }

Leb MakeLeb(std::vector<uint8_t> good, bool parity, uint32_t pages) {
  Leb l;
  l.good = std::move(good);
  if (parity) {
    l.par = std::make_unique<RowParity>();
    l.par->pdie.assign(pages, RowParity::kUndecided);
  }
  return l;
}

struct Walk {
  std::vector<std::pair<uint32_t, uint32_t>> positions;  // (row, die)
  std::vector<uint32_t> rows_done;
  uint32_t summary_from = 0;
};

// Fills `l` to the end as NextPosition does.
Walk Fill(AppendCursor& c, const StripeLayout& s, Leb& l) {
  Walk w;
  c.Open(&l);
  for (;;) {
    uint32_t die = 0, row = 0;
    const auto step = c.Next(s, &die, &row);
    if (step == AppendCursor::Step::kFull) break;
    if (step == AppendCursor::Step::kRowDone) {
      w.rows_done.push_back(row);
      continue;
    }
    w.positions.emplace_back(row, die);
  }
  w.summary_from = c.SummaryFrom();
  return w;
}

TEST(AppendCursorTest, HandsOutDataPositionsRowByRowAndLeavesTheSummary) {
  const nand::Geometry g = Geo();
  StripeLayout s(g, 1);
  AppendCursor c(g.dies_per_pipe(), g.pages_per_block);
  Leb l = MakeLeb({1, 1, 1, 1}, false, g.pages_per_block);
  const Walk w = Fill(c, s, l);
  // Without parity every die of every row holds data, less the summary's positions.
  const uint32_t total = 4 * g.pages_per_block;
  ASSERT_EQ(w.positions.size(), total - s.summary_pages());
  for (std::size_t i = 0; i < w.positions.size(); ++i) {
    EXPECT_EQ(w.positions[i], std::make_pair(static_cast<uint32_t>(i / 4), static_cast<uint32_t>(i % 4)));
  }
  EXPECT_EQ(w.summary_from, total - s.summary_pages());
  // Every row that was finished said so, in order.
  for (std::size_t i = 0; i < w.rows_done.size(); ++i) EXPECT_EQ(w.rows_done[i], i);
  EXPECT_EQ(c.DataPositionsLeft(s), 0u);
}

TEST(AppendCursorTest, SkipsBadDiesAndEachRowsParityDie) {
  const nand::Geometry g = Geo();
  StripeLayout s(g, 1);
  s.set_parity(true);
  AppendCursor c(g.dies_per_pipe(), g.pages_per_block);
  Leb l = MakeLeb({1, 0, 1, 1}, true, g.pages_per_block);
  EXPECT_EQ(c.DataPositionsLeft(s), 0u);  // nothing open
  const Walk w = Fill(c, s, l);
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const auto& [row, die] : w.positions) {
    EXPECT_NE(die, 1u);  // bad die
    EXPECT_NE(die, s.RowParityDie(l, row));
    EXPECT_TRUE(seen.insert({row, die}).second);  // each position once
  }
  // Two data dies per row (three good, one parity), less the summary.
  EXPECT_EQ(w.positions.size(), 2 * g.pages_per_block - s.summary_pages());
  // Program order: rows never go back.
  for (std::size_t i = 1; i < w.positions.size(); ++i) EXPECT_LE(w.positions[i - 1].first, w.positions[i].first);
  EXPECT_FALSE(w.rows_done.empty());
}

TEST(AppendCursorTest, CountsPositionsLeftForData) {
  const nand::Geometry g = Geo();
  StripeLayout s(g, 1);
  AppendCursor c(g.dies_per_pipe(), g.pages_per_block);
  Leb l = MakeLeb({1, 1, 1, 1}, false, g.pages_per_block);
  c.Open(&l);
  const uint32_t all = 4 * g.pages_per_block - s.summary_pages();
  EXPECT_EQ(c.DataPositionsLeft(s), all);
  uint32_t die = 0, row = 0;
  ASSERT_EQ(c.Next(s, &die, &row), AppendCursor::Step::kPosition);
  ASSERT_EQ(c.Next(s, &die, &row), AppendCursor::Step::kPosition);
  EXPECT_EQ(c.DataPositionsLeft(s), all - 2);
  EXPECT_EQ(c.SummaryFrom(), 2u);  // closed here, the summary would start at (row 0, die 2)
  c.Close();
  EXPECT_EQ(c.leb(), nullptr);
}

}  // namespace
}  // namespace vsl::ftl
