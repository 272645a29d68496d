// The simulated controller's copy (FlashPipe::Copy, docs/raw-flash.md): a page moved from
// die to die inside the controller, corrected there, with the host's new metadata, never
// over the host link; its place in the destination die's order; what a source that
// cannot be read leaves; the XOR accumulators that let a row's parity take in copied
// members; power cuts, resets and dead dies around a copy.
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"

namespace vsl::testing {
namespace {

using nand::CopyRequest;
using nand::kNoAccumulator;

class CopyTest : public CardFixture {
 protected:
  struct Result {
    std::optional<Completion> accepted, done;
  };
  // Submits a copy (the clock is not run).
  void Submit(const CopyRequest& req, Result* r) {
    pipe(0).Copy(req, [r](const Completion& c) { r->accepted = c; },
                 [r](const Completion& c) { r->done = c; });
  }
  Result Copy(Ppa src, Ppa dst, const std::vector<uint8_t>* meta = nullptr,
              const std::vector<uint8_t>* fail_meta = nullptr, uint32_t acc = kNoAccumulator) {
    Result r;
    Submit({src, dst, meta ? meta->data() : nullptr, fail_meta ? fail_meta->data() : nullptr, acc}, &r);
    RunUntil(r.done);
    return r;
  }
  std::vector<uint8_t> Xor(std::vector<uint8_t> a, const std::vector<uint8_t>& b) {
    for (std::size_t i = 0; i < a.size(); ++i) a[i] ^= b[i];
    return a;
  }
  // Programs `at` with an accumulator operation on accumulator 1 (`data` null: the
  // accumulator alone forms the page) and waits for it to be done.
  Completion AccProgram(Ppa at, const uint8_t* data, nand::AccOp op) {
    std::optional<Completion> done;
    pipe(0).Program({at, data, nullptr, false, 1, op}, nullptr, [&](const Completion& x) { done = x; });
    RunUntil(done);
    return done.value_or(Completion{FlashStatus::kAborted});
  }
  // A fresh good block on `die`, erased.
  uint32_t Fresh(uint32_t die, uint32_t from) {
    const uint32_t b = GoodBlock(0, die, from);
    EXPECT_TRUE(Erase(0, die, b).ok());
    return b;
  }
};

TEST_F(CopyTest, MovesThePageWithTheHostsNewMetadataAndNothingOverTheLink) {
  Make("test-small");
  ASSERT_GT(pipe(0).copy_accumulators(), 0u);
  const uint32_t sb = Fresh(0, 1), db = Fresh(1, 1);
  const auto data = Pattern(1, page_bytes());
  const auto old_meta = Meta(1), new_meta = Meta(2);
  ASSERT_TRUE(Program(0, {0, sb, 0}, data, &old_meta).ok());
  const uint64_t link_before = card_->stats(0).link_bytes;
  const Result r = Copy({0, sb, 0}, {1, db, 0}, &new_meta);
  ASSERT_TRUE(r.done && r.done->ok()) << nand::FlashStatusName(r.done->status);
  EXPECT_TRUE(r.accepted && r.accepted->ok());
  EXPECT_LE(r.accepted->complete_ns, r.done->complete_ns);
  EXPECT_EQ(card_->stats(0).link_bytes, link_before) << "a copy moved bytes over the host link";
  EXPECT_EQ(card_->stats(0).copies, 1u);
  std::vector<uint8_t> d, m;
  ASSERT_TRUE(Read(0, {1, db, 0}, &d, &m).ok());
  EXPECT_EQ(d, data);
  EXPECT_EQ(m, new_meta);
  ASSERT_TRUE(Read(0, {0, sb, 0}, &d, &m).ok());
  EXPECT_EQ(m, old_meta) << "the source is left as it was";
  // The same move through the host costs the page twice on the link.
  EXPECT_GE(card_->stats(0).link_bytes - link_before, 2u * page_bytes());
}

// The destination's place among its die's commands is taken at submission: a program of
// the next page submitted right after the copy runs after it, whatever the read costs.
TEST_F(CopyTest, KeepsItsPlaceInTheDestinationDiesOrder) {
  Make("test-small");
  const uint32_t sb = Fresh(0, 1), db = Fresh(1, 1);
  ASSERT_TRUE(Program(0, {0, sb, 0}, Pattern(1, page_bytes())).ok());
  Result r;
  Submit({{0, sb, 0}, {1, db, 0}, nullptr, nullptr, kNoAccumulator}, &r);
  const auto next = Pattern(2, page_bytes());
  const Completion c = Program(0, {1, db, 1}, next);
  RunUntil(r.done);
  EXPECT_TRUE(r.done->ok());
  EXPECT_TRUE(c.ok()) << nand::FlashStatusName(c.status);
  EXPECT_EQ(card_->stats(0).rule_violations(), 0u);
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {1, db, 1}, &d).ok());
  EXPECT_EQ(d, next);
}

TEST_F(CopyTest, WithinOneDie) {
  Make("test-small");
  const uint32_t sb = Fresh(2, 1), db = Fresh(2, sb + 1);
  const auto data = Pattern(3, page_bytes());
  ASSERT_TRUE(Program(0, {2, sb, 0}, data).ok());
  const Result r = Copy({2, sb, 0}, {2, db, 0});
  ASSERT_TRUE(r.done && r.done->ok());
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {2, db, 0}, &d).ok());
  EXPECT_EQ(d, data);
}

// A source that cannot be read: no `accepted`; the destination is programmed all the
// same (zeros and the host's fail_meta), so the die's next page still goes in order;
// `done` reports the read; the accumulator does not take it.
TEST_F(CopyTest, AnUnreadableSourceLeavesAPageHoldingNothing) {
  Make("test-small");
  const uint32_t sb = Fresh(0, 1), db = Fresh(1, 1);
  ASSERT_TRUE(Program(0, {0, sb, 0}, Pattern(1, page_bytes())).ok());
  card_->InjectProgramFail(0, {0, sb, 1});
  ASSERT_EQ(Program(0, {0, sb, 1}, Pattern(2, page_bytes())).status, FlashStatus::kProgramFail);
  const auto meta = Meta(5), fail_meta = Meta(6);
  Result r;
  Submit({{0, sb, 1}, {1, db, 0}, meta.data(), fail_meta.data(), 0}, &r);
  const auto next = Pattern(7, page_bytes());
  const Completion c = Program(0, {1, db, 1}, next);
  RunUntil(r.done);
  EXPECT_EQ(r.done->status, FlashStatus::kUncorrectable);
  EXPECT_FALSE(r.accepted.has_value());
  EXPECT_TRUE(c.ok()) << nand::FlashStatusName(c.status);
  EXPECT_EQ(card_->stats(0).rule_violations(), 0u);
  std::vector<uint8_t> d, m;
  ASSERT_TRUE(Read(0, {1, db, 0}, &d, &m).ok());
  EXPECT_EQ(d, std::vector<uint8_t>(page_bytes(), 0));
  EXPECT_EQ(m, fail_meta);
  // Accumulator 0 took nothing: a program through it is its own data.
  const uint32_t pb = Fresh(3, 1);
  const auto h = Pattern(8, page_bytes());
  std::optional<Completion> pc;
  pipe(0).Program({{3, pb, 0}, h.data(), nullptr, false, 0, nand::AccOp::kTake}, nullptr, [&](const Completion& x) { pc = x; });
  RunUntil(pc);
  ASSERT_TRUE(pc->ok());
  ASSERT_TRUE(Read(0, {3, pb, 0}, &d).ok());
  EXPECT_EQ(d, h);
}

// A gathered copy: the destination's data area assembled from codeword ranges of
// several pages (the groomer packing the live sectors of two victim pages into one),
// the rest zeroed, each segment read in the controller and nothing sent over the link;
// the accumulator takes what was assembled.
TEST_F(CopyTest, GathersCodewordRangesOfSeveralPagesIntoOne) {
  Make("test-small");
  const uint32_t sb = Fresh(0, 1), tb = Fresh(2, 1), db = Fresh(1, 1), pb = Fresh(3, 1);
  const uint32_t cw = g().ecc_codeword_bytes, cws = g().codewords_per_page();
  ASSERT_GE(cws, 4u);
  const auto a = Pattern(1, page_bytes()), b = Pattern(2, page_bytes());
  ASSERT_TRUE(Program(0, {0, sb, 0}, a).ok());
  ASSERT_TRUE(Program(0, {2, tb, 0}, b).ok());
  const uint32_t q = cws / 4;  // a quarter page: the last quarter of a, then the first of b
  CopyRequest req;
  req.dst = {1, db, 0};
  const auto meta = Meta(3);
  req.meta = meta.data();
  req.acc = 2;
  req.segment_count = 2;
  req.segments[0] = {{0, sb, 0}, cws - q, q};
  req.segments[1] = {{2, tb, 0}, 0, q};
  const uint64_t link_before = card_->stats(0).link_bytes;
  const uint64_t reads_before = card_->stats(0).reads;
  Result r;
  Submit(req, &r);
  RunUntil(r.done);
  ASSERT_TRUE(r.done->ok()) << nand::FlashStatusName(r.done->status);
  EXPECT_TRUE(r.accepted.has_value());
  EXPECT_EQ(card_->stats(0).link_bytes, link_before);
  EXPECT_EQ(card_->stats(0).reads - reads_before, 2u) << "one read per segment";
  std::vector<uint8_t> want(page_bytes(), 0);
  std::copy(a.end() - uint64_t{q} * cw, a.end(), want.begin());
  std::copy(b.begin(), b.begin() + uint64_t{q} * cw, want.begin() + uint64_t{q} * cw);
  std::vector<uint8_t> d, m;
  ASSERT_TRUE(Read(0, {1, db, 0}, &d, &m).ok());
  EXPECT_EQ(d, want);
  EXPECT_EQ(m, meta);
  std::optional<Completion> pc;
  pipe(0).Program({{3, pb, 0}, nullptr, nullptr, false, 2, nand::AccOp::kTake}, nullptr,
                  [&](const Completion& x) { pc = x; });
  RunUntil(pc);
  ASSERT_TRUE(pc->ok());
  ASSERT_TRUE(Read(0, {3, pb, 0}, &d).ok());
  EXPECT_EQ(d, want) << "the accumulator holds the assembled page";
}

// One unreadable segment fails the whole gathered copy: the destination holds nothing
// (zeros, fail_meta), no `accepted`, and `done` reports the read.
TEST_F(CopyTest, AGatherWithAnUnreadableSegmentHoldsNothing) {
  Make("test-small");
  const uint32_t sb = Fresh(0, 1), db = Fresh(1, 1);
  const uint32_t cws = g().codewords_per_page();
  ASSERT_TRUE(Program(0, {0, sb, 0}, Pattern(1, page_bytes())).ok());
  card_->InjectProgramFail(0, {0, sb, 1});
  ASSERT_EQ(Program(0, {0, sb, 1}, Pattern(2, page_bytes())).status, FlashStatus::kProgramFail);
  const auto meta = Meta(5), fail_meta = Meta(6);
  CopyRequest req;
  req.dst = {1, db, 0};
  req.meta = meta.data();
  req.fail_meta = fail_meta.data();
  req.segment_count = 2;
  req.segments[0] = {{0, sb, 0}, 0, cws / 2};
  req.segments[1] = {{0, sb, 1}, cws / 2, cws / 2};
  Result r;
  Submit(req, &r);
  RunUntil(r.done);
  EXPECT_EQ(r.done->status, FlashStatus::kUncorrectable);
  EXPECT_FALSE(r.accepted.has_value());
  std::vector<uint8_t> d, m;
  ASSERT_TRUE(Read(0, {1, db, 0}, &d, &m).ok());
  EXPECT_EQ(d, std::vector<uint8_t>(page_bytes(), 0));
  EXPECT_EQ(m, fail_meta);
}

// Segments that do not fit the page, or name nothing, are a host bug: refused whole.
TEST_F(CopyTest, RefusesSegmentsThatDoNotFitThePage) {
  Make("test-small");
  const uint32_t sb = Fresh(0, 1), db = Fresh(1, 1);
  const uint32_t cws = g().codewords_per_page();
  ASSERT_TRUE(Program(0, {0, sb, 0}, Pattern(1, page_bytes())).ok());
  auto refused = [&](const std::vector<nand::CopySegment>& segs) {
    CopyRequest req;
    req.dst = {1, db, 0};
    req.segment_count = static_cast<uint32_t>(segs.size());
    for (std::size_t i = 0; i < segs.size() && i < nand::kMaxCopySegments; ++i) req.segments[i] = segs[i];
    Result r;
    Submit(req, &r);
    RunUntil(r.done);
    return r.done->status == FlashStatus::kInvalidAddress;
  };
  EXPECT_TRUE(refused({{{0, sb, 0}, 0, cws}, {{0, sb, 0}, 0, 1}})) << "more than a page";
  EXPECT_TRUE(refused({{{0, sb, 0}, 0, 0}})) << "an empty segment";
  EXPECT_TRUE(refused({{{0, sb, 0}, cws - 1, 2}})) << "past the page's end";
  EXPECT_TRUE(refused(std::vector<nand::CopySegment>(nand::kMaxCopySegments + 1, {{0, sb, 0}, 0, 1})));
  EXPECT_EQ(card_->stats(0).copies, 0u);
  // The page is untouched: a whole-page copy to it still goes.
  EXPECT_TRUE(Copy({0, sb, 0}, {1, db, 0}).done->ok());
}

// A read with no data buffer (the metadata-only look at a page) sends only the
// metadata over the link.
TEST_F(CopyTest, AMetadataOnlyReadSendsOnlyTheMetadata) {
  Make("test-small");
  const uint32_t sb = Fresh(0, 1);
  const auto meta = Meta(4);
  ASSERT_TRUE(Program(0, {0, sb, 0}, Pattern(1, page_bytes()), &meta).ok());
  const uint64_t before = card_->stats(0).link_bytes;
  std::vector<uint8_t> m;
  ASSERT_TRUE(Read(0, {0, sb, 0}, nullptr, &m, g().codewords_per_page() - 1, 1).ok());
  EXPECT_EQ(m, meta);
  EXPECT_EQ(card_->stats(0).link_bytes - before, meta_bytes());
}

// A row's parity with copied members: the copies go into an accumulator, the parity
// program takes it (its data XOR the copies'), and leaves it zeroed.
TEST_F(CopyTest, AProgramTakesTheAccumulatorOfItsRowsCopies) {
  Make("test-small");
  const uint32_t b0 = Fresh(0, 1), b1 = Fresh(1, 1), b2 = Fresh(2, 1), b3 = Fresh(3, 1);
  const auto a = Pattern(1, page_bytes()), b = Pattern(2, page_bytes()), h = Pattern(3, page_bytes());
  ASSERT_TRUE(Program(0, {0, b0, 0}, a).ok());
  ASSERT_TRUE(Program(0, {0, b0, 1}, b).ok());
  Result r1, r2;
  Submit({{0, b0, 0}, {1, b1, 0}, nullptr, nullptr, 1}, &r1);
  Submit({{0, b0, 1}, {2, b2, 0}, nullptr, nullptr, 1}, &r2);
  RunUntil(r1.accepted);
  RunUntil(r2.accepted);
  std::optional<Completion> pc;
  pipe(0).Program({{3, b3, 0}, h.data(), nullptr, false, 1, nand::AccOp::kTake}, nullptr, [&](const Completion& x) { pc = x; });
  RunUntil(pc);
  ASSERT_TRUE(pc->ok());
  RunUntil(r1.done);
  RunUntil(r2.done);
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {3, b3, 0}, &d).ok());
  EXPECT_EQ(d, Xor(Xor(h, a), b));
  // Taken: the accumulator is zero again.
  pc.reset();
  pipe(0).Program({{3, b3, 1}, h.data(), nullptr, false, 1, nand::AccOp::kTake}, nullptr, [&](const Completion& x) { pc = x; });
  RunUntil(pc);
  ASSERT_TRUE(pc->ok());
  ASSERT_TRUE(Read(0, {3, b3, 1}, &d).ok());
  EXPECT_EQ(d, h);
}

// Accumulator operations take effect in submission order, whatever the dies and reads
// cost: a take submitted right after a copy (still reading its source) includes it; an
// add submitted right after a take lands after it and goes to the next take; host
// programs add like copies; a take of nothing but the accumulator sends no page data.
TEST_F(CopyTest, AccumulatorOperationsTakeEffectInSubmissionOrder) {
  Make("test-small");
  const uint32_t b0 = Fresh(0, 1), b1 = Fresh(1, 1), b2 = Fresh(2, 1), b3 = Fresh(3, 1);
  const auto a = Pattern(1, page_bytes()), h = Pattern(3, page_bytes()), m = Pattern(4, page_bytes());
  ASSERT_TRUE(Program(0, {0, b0, 0}, a).ok());
  Result r;
  Submit({{0, b0, 0}, {1, b1, 0}, nullptr, nullptr, 0}, &r);  // adds a
  std::optional<Completion> take1, add, take2;
  pipe(0).Program({{3, b3, 0}, h.data(), nullptr, false, 0, nand::AccOp::kTake}, nullptr,
                  [&](const Completion& x) { take1 = x; });
  pipe(0).Program({{2, b2, 0}, m.data(), nullptr, false, 0, nand::AccOp::kAdd}, nullptr,
                  [&](const Completion& x) { add = x; });
  const uint64_t link_before = card_->stats(0).link_bytes;
  pipe(0).Program({{3, b3, 1}, nullptr, nullptr, false, 0, nand::AccOp::kTake}, nullptr,
                  [&](const Completion& x) { take2 = x; });
  RunUntil(take1);
  RunUntil(add);
  RunUntil(take2);
  RunUntil(r.done);
  ASSERT_TRUE(take1->ok() && add->ok() && take2->ok() && r.done->ok());
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {3, b3, 0}, &d).ok());
  EXPECT_EQ(d, Xor(h, a)) << "the take missed the copy before it, or took the add after it";
  ASSERT_TRUE(Read(0, {3, b3, 1}, &d).ok());
  EXPECT_EQ(d, m) << "the second take is the add alone";
  ASSERT_TRUE(Read(0, {2, b2, 0}, &d).ok());
  EXPECT_EQ(d, m) << "an add programs its own data";
  EXPECT_GE(card_->stats(0).acc_pages, 2u);
  (void)link_before;
  // Bad accumulators are refused.
  Result bad;
  Submit({{0, b0, 0}, {1, b1, 1}, nullptr, nullptr, pipe(0).copy_accumulators()}, &bad);
  RunUntil(bad.done);
  EXPECT_EQ(bad.done->status, FlashStatus::kInvalidAddress);
  std::optional<Completion> badp;
  pipe(0).Program({{3, b3, 2}, nullptr, nullptr, false, nand::kNoAccumulator, nand::AccOp::kTake}, nullptr,
                  [&](const Completion& x) { badp = x; });
  RunUntil(badp);
  EXPECT_EQ(badp->status, FlashStatus::kInvalidAddress) << "no data and no accumulator";
  Result off;
  Submit({{0, b0, 0}, {1, g().blocks_per_lun, 0}, nullptr, nullptr, kNoAccumulator}, &off);
  RunUntil(off.done);
  EXPECT_EQ(off.done->status, FlashStatus::kInvalidAddress);
  EXPECT_EQ(card_->stats(0).rule_violations(), 0u);
}

// The same order on a card without timing (SimCardOptions::null_timing, vsld --timing
// none): a copy and the take submitted right after it enter the buffer in the same
// instant, and the clock breaks ties between equal times at random, so their landings
// must not depend on it. Row after row, each take holds its row's copy and its own data,
// never the copy of the row before or after. (ftl_cpu_bench found it: rows whose parity
// missed a copied member could not be rebuilt when that member's block went bad.)
TEST_F(CopyTest, AccumulatorOperationsTakeEffectInSubmissionOrderWithoutTiming) {
  simcard::SimCardOptions so;
  so.null_timing = true;
  Make("test-small", {}, so);
  const uint32_t b0 = Fresh(0, 1), b1 = Fresh(1, 1), b3 = Fresh(3, 1);
  const uint32_t rows = g().pages_per_block;
  std::vector<std::vector<uint8_t>> src(rows), own(rows);
  for (uint32_t i = 0; i < rows; ++i) {
    src[i] = Pattern(100 + i, page_bytes());
    own[i] = Pattern(200 + i, page_bytes());
    ASSERT_TRUE(Program(0, {0, b0, i}, src[i]).ok()) << "page " << i;
  }
  std::vector<Result> copies(rows);
  std::vector<std::optional<Completion>> takes(rows);
  for (uint32_t i = 0; i < rows; ++i) {
    Submit({{0, b0, i}, {1, b1, i}, nullptr, nullptr, 0}, &copies[i]);
    pipe(0).Program({{3, b3, i}, own[i].data(), nullptr, false, 0, nand::AccOp::kTake}, nullptr,
                    [&takes, i](const Completion& x) { takes[i] = x; });
  }
  for (uint32_t i = 0; i < rows; ++i) {
    RunUntil(copies[i].done);
    RunUntil(takes[i]);
    ASSERT_TRUE(copies[i].done->ok() && takes[i]->ok()) << "row " << i;
  }
  std::vector<uint8_t> d;
  for (uint32_t i = 0; i < rows; ++i) {
    ASSERT_TRUE(Read(0, {3, b3, i}, &d).ok());
    EXPECT_TRUE(d == Xor(own[i], src[i])) << "row " << i << ": the take missed its copy or took another row's";
  }
  EXPECT_EQ(card_->stats(0).rule_violations(), 0u);
}

// ClearAccumulator zeroes one at once (a host attaching after another left rows
// half-added); an add to a die the controller knows dead still reaches the accumulator.
TEST_F(CopyTest, ClearingAndDeadDieAdds) {
  Make("test-small");
  const uint32_t b1 = Fresh(1, 1), b2 = Fresh(2, 1), b3 = Fresh(3, 1);
  const auto m = Pattern(4, page_bytes()), n = Pattern(5, page_bytes());
  std::optional<Completion> add, take;
  pipe(0).Program({{1, b1, 0}, m.data(), nullptr, false, 2, nand::AccOp::kAdd}, nullptr,
                  [&](const Completion& x) { add = x; });
  RunUntil(add);
  pipe(0).ClearAccumulator(2);
  card_->InjectDieFailure(0, 2);
  std::optional<Completion> dead, dead_acc;
  pipe(0).Program({{2, b2, 0}, n.data(), nullptr, false, 2, nand::AccOp::kAdd},
                  [&](const Completion& x) { dead_acc = x; }, [&](const Completion& x) { dead = x; });
  pipe(0).Program({{3, b3, 0}, nullptr, nullptr, false, 2, nand::AccOp::kTake}, nullptr,
                  [&](const Completion& x) { take = x; });
  RunUntil(take);
  RunUntil(dead);
  ASSERT_TRUE(take->ok());
  EXPECT_EQ(dead->status, FlashStatus::kDieTimeout);
  EXPECT_FALSE(dead_acc.has_value()) << "a program to a dead die was accepted";
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {3, b3, 0}, &d).ok());
  EXPECT_EQ(d, n) << "the take holds the cleared add, or misses the dead die's";
}

// A take of the accumulator alone moves only the metadata over the host link.
TEST_F(CopyTest, ATakeOfTheAccumulatorAloneSendsNoPageData) {
  Make("test-small");
  const uint32_t b1 = Fresh(1, 1), b3 = Fresh(3, 1);
  const auto m = Pattern(4, page_bytes());
  std::optional<Completion> add, take;
  pipe(0).Program({{1, b1, 0}, m.data(), nullptr, false, 1, nand::AccOp::kAdd}, nullptr,
                  [&](const Completion& x) { add = x; });
  RunUntil(add);
  const uint64_t before = card_->stats(0).link_bytes;
  pipe(0).Program({{3, b3, 0}, nullptr, nullptr, false, 1, nand::AccOp::kTake}, nullptr,
                  [&](const Completion& x) { take = x; });
  RunUntil(take);
  ASSERT_TRUE(take->ok());
  EXPECT_EQ(card_->stats(0).link_bytes - before, meta_bytes());
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {3, b3, 0}, &d).ok());
  EXPECT_EQ(d, m);
}

// A take leaves the accumulator empty: the next add starts from zeros (not from the taken
// row), and a take of an empty accumulator alone programs zeros, with a page the host
// sends as it was sent.
TEST_F(CopyTest, ATakeEmptiesTheAccumulatorForTheNextRow) {
  Make("test-small");
  const uint32_t b1 = Fresh(1, 1), b2 = Fresh(2, 1), b3 = Fresh(3, 1);
  const auto m = Pattern(4, page_bytes()), n = Pattern(5, page_bytes()), h = Pattern(6, page_bytes());
  auto program = [&](nand::Ppa at, const uint8_t* data, nand::AccOp op) {
    ASSERT_TRUE(AccProgram(at, data, op).ok());
  };
  program({1, b1, 0}, m.data(), nand::AccOp::kAdd);
  program({3, b3, 0}, nullptr, nand::AccOp::kTake);   // m
  program({2, b2, 0}, n.data(), nand::AccOp::kAdd);
  program({3, b3, 1}, nullptr, nand::AccOp::kTake);   // n alone
  program({3, b3, 2}, nullptr, nand::AccOp::kTake);   // empty: zeros
  program({3, b3, 3}, h.data(), nand::AccOp::kTake);  // empty: h as sent
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {3, b3, 0}, &d).ok());
  EXPECT_EQ(d, m);
  ASSERT_TRUE(Read(0, {3, b3, 1}, &d).ok());
  EXPECT_EQ(d, n) << "the second row's parity holds the first row's";
  ASSERT_TRUE(Read(0, {3, b3, 2}, &d).ok());
  EXPECT_EQ(d, std::vector<uint8_t>(page_bytes(), 0));
  ASSERT_TRUE(Read(0, {3, b3, 3}, &d).ok());
  EXPECT_EQ(d, h);
}

// A staged parity image takes the accumulator (without clearing it): at a power cut the
// flushed image covers the copied members.
TEST_F(CopyTest, AStagedImageTakesTheAccumulatorAndAPowerCutProgramsIt) {
  Make("test-small");
  ASSERT_GT(pipe(0).stage_slots(), 0u);
  const uint32_t b0 = Fresh(0, 1), b1 = Fresh(1, 1), b3 = Fresh(3, 1);
  const auto a = Pattern(1, page_bytes()), h = Pattern(3, page_bytes());
  ASSERT_TRUE(Program(0, {0, b0, 0}, a).ok());
  const Result r = Copy({0, b0, 0}, {1, b1, 0}, nullptr, nullptr, 0);
  ASSERT_TRUE(r.done->ok());
  std::optional<Completion> st;
  pipe(0).Stage(0, {{3, b3, 0}, h.data(), nullptr, false, 0, nand::AccOp::kPeek},
                [&](const Completion& x) { st = x; }, nullptr);
  RunUntil(st);
  card_->PowerCut();
  clock_.RunUntilIdle();
  card_->PowerOn();
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {3, b3, 0}, &d).ok());
  EXPECT_EQ(d, Xor(h, a));
}

// An accumulator a take emptied still holds the row's bytes (it is only marked empty). A
// stage that peeks at it, flushed by a power cut, programs the empty row: zeros when the
// host sent no data, its data as sent otherwise; never the previous row.
TEST_F(CopyTest, AStageOfATakenAccumulatorFlushedAtAPowerCutHoldsNoStaleRow) {
  Make("test-small");
  ASSERT_GE(pipe(0).stage_slots(), 2u);
  const uint32_t b1 = Fresh(1, 1), b2 = Fresh(2, 1), b3 = Fresh(3, 1);
  const auto m = Pattern(7, page_bytes()), h = Pattern(8, page_bytes());
  ASSERT_TRUE(AccProgram({1, b1, 0}, m.data(), nand::AccOp::kAdd).ok());
  ASSERT_TRUE(AccProgram({3, b3, 0}, nullptr, nand::AccOp::kTake).ok());
  std::optional<Completion> s0, s1;
  pipe(0).Stage(0, {{3, b3, 1}, nullptr, nullptr, false, 1, nand::AccOp::kPeek},
                [&](const Completion& x) { s0 = x; }, nullptr);
  pipe(0).Stage(1, {{2, b2, 0}, h.data(), nullptr, false, 1, nand::AccOp::kPeek},
                [&](const Completion& x) { s1 = x; }, nullptr);
  RunUntil(s0);
  RunUntil(s1);
  card_->PowerCut();
  clock_.RunUntilIdle();
  card_->PowerOn();
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {3, b3, 0}, &d).ok());
  EXPECT_EQ(d, m) << "the row's own parity page";
  ASSERT_TRUE(Read(0, {3, b3, 1}, &d).ok());
  EXPECT_EQ(d, std::vector<uint8_t>(page_bytes(), 0)) << "the flushed stage of the empty accumulator";
  ASSERT_TRUE(Read(0, {2, b2, 0}, &d).ok());
  EXPECT_EQ(d, h) << "the flushed stage with the host's data";
}

// A power cut: an accepted copy reaches flash (it is in the protected buffer); one still
// reading its source is aborted and its destination stays erased.
TEST_F(CopyTest, APowerCutKeepsAcceptedCopiesOnly) {
  Make("test-small");
  const uint32_t sb = Fresh(0, 1), db = Fresh(1, 1);
  const auto a = Pattern(1, page_bytes()), b = Pattern(2, page_bytes());
  ASSERT_TRUE(Program(0, {0, sb, 0}, a).ok());
  ASSERT_TRUE(Program(0, {0, sb, 1}, b).ok());
  Result first;
  Submit({{0, sb, 0}, {1, db, 0}, nullptr, nullptr, kNoAccumulator}, &first);
  RunUntil(first.accepted);
  Result second;
  Submit({{0, sb, 1}, {1, db, 1}, nullptr, nullptr, kNoAccumulator}, &second);
  card_->PowerCut();  // the second is still reading
  clock_.RunUntilIdle();
  EXPECT_FALSE(second.accepted.has_value());
  EXPECT_EQ(second.done->status, FlashStatus::kAborted);
  card_->PowerOn();
  std::vector<uint8_t> d;
  ASSERT_TRUE(Read(0, {1, db, 0}, &d).ok());
  EXPECT_EQ(d, a) << "an accepted copy was lost at the power cut";
  ASSERT_TRUE(Read(0, {1, db, 1}, &d).ok());
  EXPECT_EQ(d, std::vector<uint8_t>(page_bytes(), 0xFF));
  EXPECT_EQ(card_->stats(0).rule_violations(), 0u);
}

// A reset of the source's die, or a dead source die, ends the copy like an unreadable
// source; a dead destination die times the copy out. Nothing is left dangling.
TEST_F(CopyTest, ResetsAndDeadDiesEndTheCopyCleanly) {
  Make("test-small");
  const uint32_t sb = Fresh(0, 1), db = Fresh(1, 1), eb = Fresh(2, 1);
  ASSERT_TRUE(Program(0, {0, sb, 0}, Pattern(1, page_bytes())).ok());
  const auto fail_meta = Meta(9);
  Result r;
  Submit({{0, sb, 0}, {1, db, 0}, nullptr, fail_meta.data(), kNoAccumulator}, &r);
  std::optional<Completion> rc;
  pipe(0).Reset(0, [&](const Completion& x) { rc = x; });
  RunUntil(r.done);
  RunUntil(rc);
  EXPECT_EQ(r.done->status, FlashStatus::kAborted);
  std::vector<uint8_t> d, m;
  ASSERT_TRUE(Read(0, {1, db, 0}, &d, &m).ok());
  EXPECT_EQ(m, fail_meta);
  // A reset of the destination's die while the copy waits on it.
  Result r2;
  Submit({{0, sb, 0}, {1, db, 1}, nullptr, nullptr, kNoAccumulator}, &r2);
  std::optional<Completion> rc2;
  pipe(0).Reset(1, [&](const Completion& x) { rc2 = x; });
  RunUntil(r2.done);
  EXPECT_EQ(r2.done->status, FlashStatus::kAborted);
  clock_.RunUntilIdle();
  // Dead dies.
  card_->InjectDieFailure(0, 3);
  const Result to_dead = Copy({0, sb, 0}, {3, 1, 0});
  EXPECT_EQ(to_dead.done->status, FlashStatus::kDieTimeout);
  const Result from_dead = Copy({3, 1, 0}, {2, eb, 0}, nullptr, &fail_meta);
  EXPECT_EQ(from_dead.done->status, FlashStatus::kDieTimeout);
  ASSERT_TRUE(Read(0, {2, eb, 0}, &d, &m).ok());
  EXPECT_EQ(m, fail_meta);
  clock_.RunUntilIdle();
  EXPECT_EQ(card_->stats(0).rule_violations(), 0u);
}

// A controller without copy refuses it: the host relocates through its memory.
TEST_F(CopyTest, AControllerWithoutCopyRefusesIt) {
  simcard::SimCardOptions o;
  o.copy_accumulators = 0;
  Make("test-small", {}, o);
  EXPECT_EQ(pipe(0).copy_accumulators(), 0u);
  const Result r = Copy({0, 1, 0}, {1, 1, 0});
  EXPECT_EQ(r.done->status, FlashStatus::kInvalidAddress);
}

}  // namespace
}  // namespace vsl::testing
