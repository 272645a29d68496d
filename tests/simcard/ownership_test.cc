// Ownership of a pipe shared by two hosts (nand::FlashPipe::Claim, docs/raw-flash-
// contract.md "Ownership") on the simulated controller: claims, leases, force, and the
// fencing of a stale generation's commands, with what the controller had accepted still
// reaching flash.
#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"

namespace vsl::testing {
namespace {

class OwnershipTest : public CardFixture {
 protected:
  void SetUp() override {
    simcard::SimCardOptions so;
    model::Plp plp;
    plp.buffer_bytes_per_pipe = 1;  // one page at a time: later programs wait for room
    so.plp = plp;
    Make("test-small", {}, so);
    a_ = card_->NewPort(0);
    b_ = card_->NewPort(0);
  }
  // Commands through a port, run to completion.
  Completion Erase(nand::FlashPipe& p, uint32_t die, uint32_t block) {
    std::optional<Completion> c;
    p.Erase(die, block, [&](const Completion& x) { c = x; });
    RunUntil(c);
    return *c;
  }
  Completion Program(nand::FlashPipe& p, Ppa ppa, uint64_t seed) {
    std::optional<Completion> c;
    const auto d = Pattern(seed, page_bytes());
    nand::ProgramRequest req;
    req.ppa = ppa;
    req.data = d.data();
    p.Program(req, nullptr, [&](const Completion& x) { c = x; });
    RunUntil(c);
    return *c;
  }
  Completion Read(nand::FlashPipe& p, Ppa ppa, std::vector<uint8_t>* out) {
    std::optional<Completion> c;
    out->assign(page_bytes(), 0);
    nand::ReadRequest req;
    req.ppa = ppa;
    req.data = out->data();
    p.Read(req, [&](const Completion& x) { c = x; });
    RunUntil(c);
    return *c;
  }
  std::unique_ptr<nand::FlashPipe> a_, b_;
};

TEST_F(OwnershipTest, OneClaimWinsAndTheOtherIsToldWhoHoldsThePipe) {
  EXPECT_TRUE(a_->offers_ownership());
  EXPECT_EQ(a_->owner().generation, 0u);  // never claimed: commands are not checked
  const nand::ClaimReply ra = a_->Claim(1, false, 1 * kSec);
  ASSERT_TRUE(ra.granted);
  EXPECT_EQ(ra.owner.host, 1u);
  EXPECT_EQ(ra.owner.generation, 1u);
  const nand::ClaimReply rb = b_->Claim(2, false, 1 * kSec);
  EXPECT_FALSE(rb.granted);
  EXPECT_EQ(rb.owner.host, 1u);  // the holder, named
  EXPECT_EQ(b_->owner().generation, 1u);
  EXPECT_FALSE(b_->Claim(0, true, kSec).granted);  // host 0 is nobody
  // B, never granted, may not touch the pipe; A may.
  const uint32_t blk = GoodBlock(0, 0, 1);
  EXPECT_EQ(Erase(*b_, 0, blk).status, FlashStatus::kFenced);
  EXPECT_TRUE(Erase(*a_, 0, blk).ok());
  EXPECT_TRUE(a_->Renew(kSec));
  EXPECT_FALSE(b_->Renew(kSec));
}

TEST_F(OwnershipTest, ALapsedLeaseOrForceHandsThePipeOverAndFencesTheOldOwner) {
  ASSERT_TRUE(a_->Claim(1, false, 10 * kMs).granted);
  const uint32_t blk = GoodBlock(0, 0, 1);
  ASSERT_TRUE(Erase(*a_, 0, blk).ok());
  ASSERT_TRUE(Program(*a_, {0, blk, 0}, 1).ok());
  EXPECT_FALSE(b_->Claim(2, false, kSec).granted);  // A's lease is live
  clock_.RunFor(11 * kMs);
  const nand::ClaimReply rb = b_->Claim(2, false, kSec);
  ASSERT_TRUE(rb.granted);
  EXPECT_EQ(rb.owner.generation, 2u);
  // A is fenced: every command refused, its renewal too; B reads what A had written.
  EXPECT_EQ(Program(*a_, {0, blk, 1}, 2).status, FlashStatus::kFenced);
  std::vector<uint8_t> got;
  EXPECT_EQ(Read(*a_, {0, blk, 0}, &got).status, FlashStatus::kFenced);
  EXPECT_FALSE(a_->Renew(kSec));
  ASSERT_TRUE(Read(*b_, {0, blk, 0}, &got).ok());
  EXPECT_EQ(got, Pattern(1, page_bytes()));
  ASSERT_TRUE(Read(*b_, {0, blk, 1}, &got).ok());
  EXPECT_EQ(got, std::vector<uint8_t>(page_bytes(), 0xFF));  // A's fenced program never landed
  // Force takes a live lease; the same host claiming again fences its old self.
  ASSERT_TRUE(a_->Claim(1, true, kSec).granted);
  EXPECT_EQ(Program(*b_, {0, blk, 1}, 3).status, FlashStatus::kFenced);
  auto a2 = card_->NewPort(0);
  ASSERT_TRUE(a2->Claim(1, false, kSec).granted);  // A restarted: its old port is stale
  EXPECT_EQ(a2->owner().generation, 4u);
  EXPECT_EQ(Program(*a_, {0, blk, 1}, 4).status, FlashStatus::kFenced);
  EXPECT_TRUE(Program(*a2, {0, blk, 1}, 5).ok());
  // Release: the pipe is free, the releasing port fenced, anyone may claim.
  a2->Release();
  EXPECT_EQ(a2->owner().host, 0u);
  EXPECT_EQ(Program(*a2, {0, blk, 2}, 6).status, FlashStatus::kFenced);
  EXPECT_TRUE(b_->Claim(2, false, kSec).granted);
  EXPECT_EQ(card_->stats(0).fenced, 5u);  // five commands refused at submission
  EXPECT_EQ(card_->stats(0).claims, 5u);
}

// The takeover while A has work queued: what the controller accepted into its protected
// buffer is programmed (A may have acknowledged it), what was still waiting for the
// buffer or for its die ends kFenced and never touches the flash, and B's commands run
// after A's accepted programs.
TEST_F(OwnershipTest, ATakeoverFencesWaitingCommandsAndFlushesAcceptedPrograms) {
  ASSERT_TRUE(a_->Claim(1, false, kSec).granted);
  const uint32_t blk = GoodBlock(0, 0, 1), other = GoodBlock(0, 0, blk + 1);
  ASSERT_TRUE(Erase(*a_, 0, blk).ok());
  ASSERT_TRUE(Erase(*a_, 0, other).ok());
  ASSERT_TRUE(Program(*a_, {0, other, 0}, 99).ok());
  constexpr uint32_t kPages = 6;
  std::vector<std::vector<uint8_t>> data;
  for (uint32_t pg = 0; pg < kPages; ++pg) data.push_back(Pattern(10 + pg, page_bytes()));
  std::vector<std::optional<Completion>> accepted(kPages), done(kPages);
  for (uint32_t pg = 0; pg < kPages; ++pg) {
    nand::ProgramRequest req;
    req.ppa = {0, blk, pg};
    req.data = data[pg].data();
    a_->Program(req, [&, pg](const Completion& x) { accepted[pg] = x; },
                [&, pg](const Completion& x) { done[pg] = x; });
  }
  std::optional<Completion> erase_done, read_done;
  std::vector<uint8_t> rd(page_bytes());
  a_->Erase(0, other, [&](const Completion& x) { erase_done = x; });  // queued behind the programs
  nand::ReadRequest rr;
  rr.ppa = {0, other, 0};
  rr.data = rd.data();
  a_->Read(rr, [&](const Completion& x) { read_done = x; });
  // Let the first program into the buffer (the buffer holds one page: the rest wait).
  ASSERT_TRUE(clock_.RunUntilTrue([&] { return accepted[0].has_value(); }));
  uint32_t in_buffer = 0;
  for (uint32_t pg = 0; pg < kPages; ++pg) in_buffer += accepted[pg].has_value();
  ASSERT_LT(in_buffer, kPages);
  ASSERT_TRUE(b_->Claim(2, true, kSec).granted);
  clock_.RunUntilIdle();
  uint32_t flushed = 0, fenced = 0;
  for (uint32_t pg = 0; pg < kPages; ++pg) {
    ASSERT_TRUE(done[pg].has_value()) << pg;
    std::vector<uint8_t> got;
    ASSERT_TRUE(Read(*b_, {0, blk, pg}, &got).ok());
    if (accepted[pg].has_value()) {
      EXPECT_TRUE(done[pg]->ok()) << pg;  // accepted: on flash
      EXPECT_EQ(got, data[pg]) << pg;
      ++flushed;
    } else {
      EXPECT_EQ(done[pg]->status, FlashStatus::kFenced) << pg;
      EXPECT_EQ(got, std::vector<uint8_t>(page_bytes(), 0xFF)) << pg;  // never programmed
      ++fenced;
    }
  }
  EXPECT_GE(flushed, 1u);
  EXPECT_GE(fenced, 1u);
  ASSERT_TRUE(erase_done.has_value() && read_done.has_value());
  EXPECT_EQ(erase_done->status, FlashStatus::kFenced);  // A's queued erase never ran
  EXPECT_EQ(read_done->status, FlashStatus::kFenced);
  std::vector<uint8_t> got;
  ASSERT_TRUE(Read(*b_, {0, other, 0}, &got).ok());
  EXPECT_EQ(got, Pattern(99, page_bytes()));  // the block A would have erased is intact
  // B continues where A's flushed pages end.
  EXPECT_TRUE(Program(*b_, {0, blk, flushed}, 7).ok());
}

// A pipe nobody claimed behaves as before ownership: ports and the pipe itself are
// unchecked; once claimed, the pipe's own interface (a single-host caller) still is.
TEST_F(OwnershipTest, AnUnclaimedPipeIsUnchecked) {
  const uint32_t blk = GoodBlock(0, 0, 1);
  EXPECT_TRUE(Erase(*a_, 0, blk).ok());
  EXPECT_TRUE(Program(*b_, {0, blk, 0}, 1).ok());
  ASSERT_TRUE(b_->Claim(2, false, kSec).granted);
  EXPECT_TRUE(Program(pipe(0), {0, blk, 1}, 2).ok());
  EXPECT_EQ(Program(*a_, {0, blk, 2}, 3).status, FlashStatus::kFenced);
}

}  // namespace
}  // namespace vsl::testing
