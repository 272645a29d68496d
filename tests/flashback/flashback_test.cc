// Adaptive FlashBack: a die dies under the FTL and nothing acknowledged is lost; its data
// is rebuilt from the parity of each stripe row, online and after a power cut; a second
// failure in the same stripes reports exact I/O errors, never wrong data.
#include <gtest/gtest.h>

#include "tests/ftl/ftl_fixture.h"

namespace vsl::testing {
namespace {

class FlashBackTest : public FtlFixture {
 protected:
  // test-small has 4 dies a pipe: losing one takes a third of the data dies of every
  // stripe (3 data + parity -> 2 + parity), more than stock spare covers. With 80% spare
  // the pipe stays writable after one failure (see ReadOnlyWhenSpareCannotCoverADeadDie).
  void SetUp() override {
    MakeCard();
    ftl::FormatOptions fo;
    fo.reserve = ftl::ReserveMode::kCustom;
    fo.spare_percent = 80;
    ASSERT_TRUE(Format(fo).ok());
    ASSERT_TRUE(Attach().ok());
    ASSERT_TRUE(ftl_->flashback_status().enabled);
    n_ = ftl_->sectors();
  }
  void FillTwice() {
    for (uint64_t lba = 0; lba < n_; ++lba) ASSERT_TRUE(Write(lba, Sector(lba, 1)).ok());
    for (uint64_t lba = 0; lba < n_; lba += 2) ASSERT_TRUE(Write(lba, Sector(lba, 2)).ok());
    ASSERT_TRUE(Trim(30, 4).ok());
  }
  std::vector<uint8_t> Want(uint64_t lba) const {
    if (lba >= 30 && lba < 34) return std::vector<uint8_t>(4096, 0);
    return Sector(lba, lba % 2 == 0 ? 2 : 1);
  }
  void ExpectAll(const char* when) {
    std::vector<uint8_t> out;
    for (uint64_t lba = 0; lba < n_; ++lba) {
      Status s = Read(lba, 1, &out);
      ASSERT_TRUE(s.ok()) << when << " lba " << lba << ": " << s.ToString();
      ASSERT_EQ(out, Want(lba)) << when << " lba " << lba;
    }
  }
  uint64_t n_ = 0;
};

TEST_F(FlashBackTest, DeadDieLosesNothingAndIsRebuiltOnline) {
  FillTwice();
  EXPECT_GT(ftl_->stats().parity_pages, 0u);
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 1);
  ExpectAll("with die 1 dead");  // reads of die 1 are rebuilt from parity
  clock_.RunUntilIdle();          // the background rebuild runs to the end
  auto st = ftl_->flashback_status();
  EXPECT_TRUE(st.active);
  ASSERT_EQ(st.failed_dies, std::vector<uint32_t>{1});
  EXPECT_EQ(st.rebuild_lebs_left, 0u);
  EXPECT_GT(st.rebuilt_pages, 0u);
  EXPECT_TRUE(st.lost_lbas.empty());
  bool saw_substitution = false;
  for (const auto& e : st.events) saw_substitution |= e.find("FlashBack substitution active") != std::string::npos;
  EXPECT_TRUE(saw_substitution);
  ExpectAll("after the rebuild");
  // New writes avoid the dead die and keep their own parity; the pipe keeps working.
  for (uint64_t lba = 0; lba < n_; lba += 3) {
    ASSERT_TRUE(Write(lba, Want(lba)).ok());
  }
  ExpectAll("after writing over the rebuild");
  // Through a clean restart (the die stays dead).
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach().ok());
  ExpectAll("after a clean restart");
}

// Once the FTL has declared a die failed, nothing is sent to it any more: a read of a
// sector still there is rebuilt from its row at once instead of waiting out a die
// timeout first, so degraded reads cost a row's reads, not the controller's timeout.
TEST_F(FlashBackTest, ReadsOfADeclaredFailedDieAreRebuiltWithoutWaitingForIt) {
  FillTwice();
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 1);
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < n_ && ftl_->flashback_status().failed_dies.empty(); ++lba) {
    ASSERT_TRUE(Read(lba, 1, &out).ok());
  }
  ASSERT_FALSE(ftl_->flashback_status().failed_dies.empty()) << "no read met the dead die";
  // Commands already queued to the die when it was declared time out; none after.
  clock_.RunFor(8 * card_->timing().die_timeout_ns);
  ASSERT_GT(ftl_->flashback_status().rebuild_lebs_left, 0u) << "the rebuild is over: the test shows nothing";
  const uint64_t timeouts0 = card_->stats(0).die_timeouts, rebuilt0 = ftl_->stats().rebuilt_pages;
  // Every sector, while the background rebuild moves the dead die's data away.
  for (uint64_t k = 0; k < n_; ++k) {
    ASSERT_TRUE(Read(k, 1, &out).ok()) << k;
    ASSERT_EQ(out, Want(k)) << k;
  }
  clock_.RunUntilIdle();
  EXPECT_EQ(ftl_->flashback_status().rebuild_lebs_left, 0u);
  EXPECT_GT(ftl_->stats().rebuilt_pages, rebuilt0) << "nothing was rebuilt: the test shows nothing";
  EXPECT_EQ(card_->stats(0).die_timeouts, timeouts0) << "commands sent to the failed die";
  ExpectAll("after the rebuild");
}

// A die that still answers but keeps failing (media errors) is retired like a dead one
// once its error count crosses the bound, and stays retired across a clean restart.
TEST_F(FlashBackTest, DieWhoseErrorRateCrossesTheBoundIsRetired) {
  ftl::FtlOptions o;
  o.die_error_limit = 4;
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach(o).ok());
  // Every block of die 2 fails its next program of pages 0..3: the first LEBs written
  // lose die-2 pages one after another (each rewritten elsewhere).
  for (uint32_t b = 0; b < card_->geometry().blocks_per_lun; ++b) {
    for (uint32_t p = 0; p < 4; ++p) card_->InjectProgramFail(0, {2, b, p});
  }
  FillTwice();
  clock_.RunUntilIdle();
  auto st = ftl_->flashback_status();
  ASSERT_EQ(st.failed_dies, std::vector<uint32_t>{2});
  bool saw_retired = false;
  for (const auto& e : st.events) saw_retired |= e.find("die 2 retired") != std::string::npos;
  EXPECT_TRUE(saw_retired);
  EXPECT_EQ(st.rebuild_lebs_left, 0u);
  EXPECT_TRUE(st.lost_lbas.empty());
  ExpectAll("after the retirement");
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach(o).ok());
  EXPECT_EQ(ftl_->flashback_status().failed_dies, std::vector<uint32_t>{2});
  ExpectAll("after a clean restart");
}

TEST_F(FlashBackTest, DieDeadAcrossAPowerCutIsRebuiltFromParityAtAttach) {
  FillTwice();
  clock_.RunUntilIdle();
  PowerCycle();
  card_->InjectDieFailure(0, 2);  // dead before attach: its page headers are rebuilt
  ASSERT_TRUE(Attach().ok());
  ExpectAll("after attach with die 2 dead");
  clock_.RunUntilIdle();
  EXPECT_EQ(ftl_->flashback_status().rebuild_lebs_left, 0u);
  // And a crash in the middle of the next session, die still dead.
  for (uint64_t lba = 1; lba < n_; lba += 4) ASSERT_TRUE(Write(lba, Want(lba)).ok());
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  ExpectAll("after a second crash");
}

// Sequential failures: once the first rebuild has formed every stripe without the dead
// die, a second die can die the same way. A 4-die pipe is left with 2 dies: its stripes
// become mirrors (one data page and its parity), and the pipe keeps what fits (here a
// quarter of the device is in use) writable in reduced-write mode. The metadata records
// written before the first failure still have copies after the second: a power cut with
// both dies dead attaches.
TEST_F(FlashBackTest, SequentialFailuresWithARebuildBetweenLoseNothing) {
  const uint64_t used = n_ / 4;
  std::vector<uint64_t> version(used, 1);
  for (uint64_t lba = 0; lba < used; ++lba) ASSERT_TRUE(Write(lba, Sector(lba, 1)).ok());
  for (uint64_t lba = 0; lba < used; lba += 2) {
    ASSERT_TRUE(Write(lba, Sector(lba, 2)).ok());
    version[lba] = 2;
  }
  auto expect_all = [&](const char* when) {
    std::vector<uint8_t> out;
    for (uint64_t lba = 0; lba < used; ++lba) {
      Status s = Read(lba, 1, &out);
      ASSERT_TRUE(s.ok()) << when << " lba " << lba << ": " << s.ToString();
      ASSERT_EQ(out, Sector(lba, version[lba])) << when << " lba " << lba;
    }
  };
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 1);
  expect_all("with die 1 dead");
  clock_.RunUntilIdle();
  auto st = ftl_->flashback_status();
  ASSERT_EQ(st.failed_dies, std::vector<uint32_t>{1});
  ASSERT_EQ(st.rebuild_lebs_left, 0u);
  // Writes between the failures land on 3-die stripes.
  for (uint64_t lba = 1; lba < used; lba += 4) {
    ASSERT_TRUE(Write(lba, Sector(lba, 3)).ok());
    version[lba] = 3;
  }
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 3);
  expect_all("with dies 1 and 3 dead");
  clock_.RunUntilIdle();
  st = ftl_->flashback_status();
  ASSERT_EQ(st.failed_dies, (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(st.rebuild_lebs_left, 0u) << "the second rebuild finishes too";
  EXPECT_TRUE(st.lost_lbas.empty());
  EXPECT_EQ(st.mode, ftl::HealthMode::kReducedWrite) << "2 of 4 dies hold less than the device";
  expect_all("after the second rebuild");
  // Still writable while what is mapped fits: these go to mirrored stripes.
  for (uint64_t lba = 3; lba < used; lba += 8) {
    Status ws = Write(lba, Sector(lba, 4));
    ASSERT_TRUE(ws.ok()) << lba << ": " << ws.ToString();
    version[lba] = 4;
  }
  expect_all("after writes on mirrored stripes");
  PowerCycle();
  ASSERT_TRUE(Attach().ok()) << "the metadata survives two dead dies";
  expect_all("after a power cut with two dies dead");
  clock_.RunUntilIdle();
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach().ok());
  expect_all("after a clean restart");
  EXPECT_EQ(ftl_->flashback_status().failed_dies, (std::vector<uint32_t>{1, 3}));
}

TEST_F(FlashBackTest, TwoDeadDiesInOneStripeGiveExactErrorsNeverWrongData) {
  FillTwice();
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 0);
  card_->InjectDieFailure(0, 3);
  std::vector<uint8_t> out;
  uint64_t errors = 0;
  for (uint64_t lba = 0; lba < n_; ++lba) {
    Status s = Read(lba, 1, &out);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), StatusCode::kIOError);
      ++errors;
      continue;
    }
    ASSERT_EQ(out, Want(lba)) << "lba " << lba << ": a read that succeeds is right";
  }
  EXPECT_GT(errors, 0u);
  const auto st = ftl_->flashback_status();
  EXPECT_EQ(st.failed_dies.size(), 2u);
  EXPECT_EQ(st.lost_lbas.size(), errors) << "every failed sector is listed";
}

// A read outcome allowed after a double failure: an I/O error the status lists, or the
// right data; with `stale_ok` (a recovery that reported stripes it cannot name) also the
// sector's older version or zeroes — never anything else.
class FlashBackDoubleTest : public FlashBackTest {
 protected:
  // Reads every sector; returns how many failed (each checked as listed).
  uint64_t CheckDouble(const char* when, bool stale_ok, uint64_t* stale = nullptr) {
    std::vector<uint8_t> out;
    uint64_t errors = 0;
    for (uint64_t lba = 0; lba < n_; ++lba) {
      Status s = Read(lba, 1, &out);
      if (!s.ok()) {
        EXPECT_EQ(s.code(), StatusCode::kIOError) << when << " lba " << lba;
        const auto st = ftl_->flashback_status();
        EXPECT_NE(std::find(st.lost_lbas.begin(), st.lost_lbas.end(), lba), st.lost_lbas.end())
            << when << " lba " << lba << " failed without being listed";
        ++errors;
        continue;
      }
      if (out == Want(lba)) continue;
      const bool older = out == Sector(lba, 1) || out == std::vector<uint8_t>(4096, 0);
      EXPECT_TRUE(stale_ok && older) << when << " lba " << lba << ": wrong data";
      if (stale != nullptr) ++*stale;
    }
    return errors;
  }
};

// The checkpoint written after the first failure names every sector of the stripes that
// include the dead die, so a second failure before the rebuild ends, followed by a power
// cut, still gives exact I/O errors after recovery, and nothing older.
TEST_F(FlashBackDoubleTest, SecondFailureThenPowerCutGivesExactErrors) {
  FillTwice();
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 0);
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(0, 4, &out).ok());  // die 0's timeout declares it failed
  for (int i = 0; i < 10000 && ftl_->flashback_status().failure_checkpoints == 0; ++i) {
    clock_.RunFor(50 * kUs);
  }
  auto st = ftl_->flashback_status();
  ASSERT_EQ(st.failure_checkpoints, 1u);
  ASSERT_GT(st.rebuild_lebs_left, 2u) << "the rebuild has only begun";
  bool saw = false;
  for (const auto& e : st.events) saw |= e.find("checkpoint written after the die failure") != std::string::npos;
  EXPECT_TRUE(saw);
  card_->InjectDieFailure(0, 3);
  const uint64_t live_errors = CheckDouble("live, dies 0 and 3 dead", false);
  EXPECT_GT(live_errors, 0u);
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  EXPECT_EQ(ftl_->flashback_status().unnamed_lost_stripes, 0u);
  const uint64_t errors = CheckDouble("after a power cut, dies 0 and 3 dead", false);
  EXPECT_GE(errors, live_errors) << "what was lost stays an error (the rebuild may have found more)";
  // The device was full: two dies of four cannot hold it, so it is read-only now.
  EXPECT_EQ(ftl_->flashback_status().mode, ftl::HealthMode::kReadOnly);
}

// Both dies die and the power goes before the failure is even seen: the stripes written
// since the last checkpoint that lost two members cannot be named (their page headers are
// gone), and the recovery says so rather than passing older data off as current.
TEST_F(FlashBackDoubleTest, DoubleFailureCutBeforeTheCheckpointIsReported) {
  FillTwice();
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 0);
  card_->InjectDieFailure(0, 3);
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  const auto st = ftl_->flashback_status();
  EXPECT_GT(st.unnamed_lost_stripes, 0u);
  bool saw = false;
  for (const auto& e : st.events) saw |= e.find("cannot be named") != std::string::npos;
  EXPECT_TRUE(saw);
  uint64_t stale = 0;
  CheckDouble("after attach with dies 0 and 3 dead", true, &stale);
  std::printf("unnamed stripes %llu, sectors read older %llu\n",
              static_cast<unsigned long long>(st.unnamed_lost_stripes), static_cast<unsigned long long>(stale));
}

class FlashBackStockTest : public FtlFixture {};

// Stock spare on a 4-die pipe cannot absorb a dead die: the data stays readable, rebuilt
// onto the surviving dies as far as room allows, and the pipe turns read-only instead of
// losing anything.
TEST_F(FlashBackStockTest, ReadOnlyWhenSpareCannotCoverADeadDie) {
  MakeCard();
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  const uint64_t n = ftl_->sectors();
  for (uint64_t lba = 0; lba < n; ++lba) ASSERT_TRUE(Write(lba, Sector(lba, 1)).ok());
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 2);
  std::vector<uint8_t> out;
  // The first read that meets the dead die declares it; every read is answered.
  for (uint64_t lba = 0; lba < n; ++lba) {
    Status s = Read(lba, 1, &out);
    ASSERT_TRUE(s.ok()) << lba << ": " << s.ToString();
    ASSERT_EQ(out, Sector(lba, 1)) << lba;
  }
  clock_.RunUntilIdle();
  const auto st = ftl_->flashback_status();
  EXPECT_EQ(st.mode, ftl::HealthMode::kReadOnly);
  EXPECT_EQ(Write(5, Sector(5, 2)).code(), StatusCode::kFailedPrecondition);
  for (uint64_t lba = 0; lba < n; ++lba) {
    Status s = Read(lba, 1, &out);
    ASSERT_TRUE(s.ok()) << lba << ": " << s.ToString();
    ASSERT_EQ(out, Sector(lba, 1)) << lba;
  }
}

}  // namespace
}  // namespace vsl::testing
