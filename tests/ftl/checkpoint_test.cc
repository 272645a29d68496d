// Checkpoints and metadata slots (vsl/ftl/meta_record.cc, checkpoint.cc, open.cc): a map
// too large for one LEB is checkpointed across a slot of several LEBs, atomically (the
// other slot's record stays the newest until the new one is whole), so a clean attach
// reads it and scans nothing; periodic checkpoints bound what an unclean attach scans.
#include <gtest/gtest.h>

#include "tests/ftl/ftl_fixture.h"

namespace vsl::testing {
namespace {

// test-small with 1024 blocks per die: a map of ~34k sectors (136 KiB, 34 pages) does
// not fit one 64-page LEB twice, so the format makes slots of several LEBs.
constexpr uint32_t kBlocks = 1024;

class CheckpointTest : public FtlFixture {
 protected:
  void SetUp() override {
    MakeCard("test-small", kBlocks);
    ASSERT_TRUE(Format().ok());
    ASSERT_TRUE(Attach(Opts()).ok());
  }
  ftl::FtlOptions Opts() const {
    ftl::FtlOptions o;
    o.checkpoint_interval_lebs = interval_;
    return o;
  }
  // Writes sectors [first, first + n) with version v, 16 at a time.
  void Fill(uint64_t first, uint64_t n, uint64_t v) {
    for (uint64_t l = first; l < first + n; l += 16) {
      const auto len = static_cast<uint32_t>(std::min<uint64_t>(16, first + n - l));
      ASSERT_TRUE(Write(l, Sector(l, v, len)).ok());
    }
  }
  void Check(uint64_t first, uint64_t n, uint64_t v) {
    std::vector<uint8_t> out;
    for (uint64_t l = first; l < first + n; l += 16) {
      const auto len = static_cast<uint32_t>(std::min<uint64_t>(16, first + n - l));
      ASSERT_TRUE(Read(l, len, &out).ok());
      ASSERT_EQ(out, Sector(l, v, len)) << "sectors from " << l;
    }
  }
  uint32_t interval_ = 0;
};

TEST_F(CheckpointTest, FullMapSpansSeveralLebsAndACleanAttachScansNothing) {
  const uint32_t k = ftl_->metadata_slot_lebs();
  EXPECT_GE(k, 2u) << "the map should not fit one LEB on this geometry";
  std::printf("slot LEBs %u, sectors %llu\n", k, static_cast<unsigned long long>(ftl_->sectors()));
  const uint64_t n = ftl_->sectors();
  Fill(0, n, 1);  // every sector mapped: the largest dense checkpoint
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach(Opts()).ok());
  const auto& a = ftl_->attach_info();
  EXPECT_TRUE(a.from_checkpoint);
  EXPECT_EQ(a.lebs_scanned, 0u);
  EXPECT_EQ(a.pages_scanned, 0u);
  EXPECT_EQ(ftl_->metadata_slot_lebs(), k);
  EXPECT_EQ(ftl_->mapped_sectors(), n);
  Check(0, n, 1);
  // Again after an unclean stop: the attach's own (dirty) checkpoint is the base, and
  // only what was written since is scanned.
  Fill(0, 256, 2);
  PowerCycle();
  ASSERT_TRUE(Attach(Opts()).ok());
  EXPECT_FALSE(ftl_->attach_info().from_checkpoint);
  EXPECT_TRUE(ftl_->attach_info().checkpoint_plus_scan);
  EXPECT_LE(ftl_->attach_info().lebs_scanned, 16u);
  Check(0, 256, 2);
  Check(256, n - 256, 1);
}

// A metadata record keeps at least two copies of every page on distinct dies: a copy
// whose program fails (a grown bad block, a random failure) costs that copy, not the
// record. Every first copy of the shutdown's record fails here: the shutdown still
// succeeds, and the next attach reads the record from the other copies.
TEST_F(CheckpointTest, AMetadataCopyThatFailsToProgramCostsOnlyThatCopy) {
  const uint64_t n = 4096;
  Fill(0, n, 1);
  // The first position of every LEB of both slots: copy 0 of page 0 goes to one of them.
  const uint32_t k = ftl_->metadata_slot_lebs();
  for (uint32_t leb = 0; leb < 2 * k; ++leb) card_->InjectProgramFail(0, {0, leb, 0});
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach(Opts()).ok());
  EXPECT_TRUE(ftl_->attach_info().from_checkpoint);
  EXPECT_EQ(ftl_->attach_info().lebs_scanned, 0u);
  Check(0, n, 1);
  EXPECT_GE(card_->stats(0).program_fails, 1u) << "the injected failure never hit a metadata copy";
}

// A cut at any instant of the shutdown's checkpoint (the slot's erases, its programs)
// leaves the other slot's record in force: nothing is lost and the next attach works.
TEST_F(CheckpointTest, CutWhileACheckpointIsWrittenLosesNothing) {
  const uint64_t n = ftl_->sectors();
  Fill(0, n, 1);
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach(Opts()).ok());
  uint64_t v = 1;
  int cuts = 0, in_record = 0;
  for (DurNs cut : {DurNs{0}, 1 * kMs, 2 * kMs, 3 * kMs, 4 * kMs, 6 * kMs, 9 * kMs, 14 * kMs, 20 * kMs, 40 * kMs}) {
    ++v;
    Fill(0, 64, v);
    bool done = false;
    const uint64_t meta0 = ftl_->stats().meta_pages;
    ftl_->Shutdown([&](Status) { done = true; });
    clock_.RunFor(cut);
    const bool cut_it = !done;
    cuts += cut_it;
    // The shutdown's record had started (its pages submitted) and was not done.
    in_record += cut_it && ftl_->stats().meta_pages > meta0;
    PowerCycle();
    Status s = Attach(Opts());
    ASSERT_TRUE(s.ok()) << "cut " << cut / kUs << " us into the shutdown: " << s.ToString();
    if (!cut_it) {
      EXPECT_TRUE(ftl_->attach_info().from_checkpoint);
    }
    Check(0, 64, v);
    Check(64, n - 64, 1);
  }
  EXPECT_GE(cuts, 6) << "most cut points should fall inside the shutdown";
  EXPECT_GE(in_record, 2) << "some cuts should fall while the checkpoint record is written";
}

// Slot 0 erased whole (what a cut right after the erase of slot 0, before its first
// page, leaves): LEBs 0 and 1 hold no metadata page, so attach probes the LEBs after them
// for a slot tag, finds slot 1 and loses nothing (from slot 1's record, and a scan if that
// one is the older).
TEST_F(CheckpointTest, SlotZeroErasedAttachFindsSlotOneByItsTags) {
  const uint32_t k = ftl_->metadata_slot_lebs();
  ASSERT_GE(k, 2u);
  const uint64_t n = ftl_->sectors();
  Fill(0, n, 1);
  ASSERT_TRUE(Shutdown().ok());
  const uint32_t dies = card_->geometry().dies_per_pipe();
  int erased = 0;
  for (uint32_t leb = 0; leb < k; ++leb) {
    for (uint32_t d = 0; d < dies; ++d) {
      card_->pipe(0).Erase(d, leb, [&](const nand::Completion&) { ++erased; });
    }
  }
  clock_.RunUntilTrue([&] { return erased == static_cast<int>(k * dies); });
  Status s = Attach(Opts());
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(ftl_->metadata_slot_lebs(), k);
  Check(0, n, 1);
}

// Periodic checkpoints: what an unclean attach scans stays near the interval however
// much was written since the attach.
TEST_F(CheckpointTest, PeriodicCheckpointsBoundTheScanAfterACut) {
  interval_ = 8;
  ASSERT_TRUE(Attach(Opts()).ok());
  const uint64_t n = ftl_->sectors();
  for (uint64_t v = 1; v <= 3; ++v) Fill(0, n / 2, v);  // many more LEBs than the interval
  EXPECT_GT(ftl_->stats().periodic_checkpoints, 10u);
  PowerCycle();
  ASSERT_TRUE(Attach(Opts()).ok());
  EXPECT_TRUE(ftl_->attach_info().checkpoint_plus_scan);
  // The interval, the two open LEBs and the groomer's: never the whole pipe.
  EXPECT_LE(ftl_->attach_info().lebs_scanned, 8u + 4u);
  Check(0, n / 2, 3);
}

// The format keeps one-LEB slots (format 1.4's layout) where the map fits: nothing
// changes for small pipes.
class SmallSlotsTest : public FtlFixture {};
TEST_F(SmallSlotsTest, SmallPipesKeepOneLebSlots) {
  MakeCard("test-small");
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  EXPECT_EQ(ftl_->metadata_slot_lebs(), 1u);
}

}  // namespace
}  // namespace vsl::testing
