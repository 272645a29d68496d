// Damaged card metadata and killed processes: never a crash, never silent nonsense.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"

namespace vsl::testing {
namespace {

bool KnownStatus(FlashStatus s) {
  switch (s) {
    case FlashStatus::kOk: case FlashStatus::kUncorrectable: case FlashStatus::kProgramFail:
    case FlashStatus::kEraseFail: case FlashStatus::kDieTimeout: case FlashStatus::kAborted:
    case FlashStatus::kInvalidAddress: case FlashStatus::kRuleViolation: return true;
    case FlashStatus::kFenced: return false;  // nobody claims the pipe here
  }
  return false;
}

class DamageTest : public CardFixture {
 protected:
  void KillWithAcceptedWork(bool cut_mid_apply);
};

// Random bytes over the die, block and page tables (which carry no CRC, like NAND's own
// state): every command still completes with a defined status.
TEST_F(DamageTest, RandomTableDamageNeverCrashesTheModel) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    Make("test-small", {.serial = "", .seed = seed});
    auto& img = card_->image(0);
    Rng rng(seed);
    for (uint32_t d = 0; d < img.dies(); ++d) {
      rng.Fill(&img.die(d), sizeof(simcard::format::DieRecord));
      for (uint32_t b = 0; b < g().blocks_per_lun; ++b) {
        if (rng.Bernoulli(0.5)) rng.Fill(&img.block(d, b), sizeof(simcard::format::BlockRecord));
        for (uint32_t p = 0; p < g().pages_per_block; ++p) {
          if (rng.Bernoulli(0.3)) {
            img.set_page_state(d, b, p, static_cast<simcard::format::PageState>(rng.Below(256)));
          }
        }
      }
    }
    Reopen();
    auto data = Pattern(1, page_bytes());
    for (uint32_t pp = 0; pp < card_->pipe_count(); ++pp) {
      for (uint32_t die = 0; die < g().dies_per_pipe(); ++die) {
        for (uint32_t b = 0; b < g().blocks_per_lun; b += 7) {
          std::vector<uint8_t> d, m;
          EXPECT_TRUE(KnownStatus(Read(pp, {die, b, 3}, &d, &m).status));
          EXPECT_TRUE(KnownStatus(Erase(pp, die, b).status));
          EXPECT_TRUE(KnownStatus(Program(pp, {die, b, 0}, data).status));
        }
      }
    }
    card_.reset();
    std::filesystem::remove_all(dir());
  }
}

// A process killed with SIGKILL in the middle of work: the card reopens, counts an
// unsafe power-off, and holds every page whose program had completed.
TEST_F(DamageTest, KilledProcessLeavesAConsistentCard) {
  Make("test-small");
  const uint32_t b = GoodBlock(0, 1, 1);
  card_.reset();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    VirtualClock clock(1);
    auto card = simcard::SimCard::Open(dir(), clock).value();
    uint32_t done = 0;
    card->pipe(0).Erase(1, b, [](const Completion&) {});
    std::vector<uint8_t> data(4096);
    for (uint32_t p = 0; p < 16; ++p) {
      Rng(p).Fill(data.data(), data.size());
      std::vector<uint8_t> copy = data;
      bool ok = false;
      card->pipe(0).Program({{1, b, p}, copy.data(), nullptr}, nullptr,
                            [&](const Completion& c) { ok = c.ok(); });
      clock.RunUntilIdle();
      if (!ok) ::_exit(3);
      done = p + 1;
      if (::write(pipefd[1], &done, sizeof(done)) != sizeof(done)) ::_exit(4);
      if (p == 9) ::kill(::getpid(), SIGKILL);  // no destructor, no sync
    }
    ::_exit(0);
  }
  ::close(pipefd[1]);
  uint32_t done = 0, v = 0;
  while (::read(pipefd[0], &v, sizeof(v)) == sizeof(v)) done = v;
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_EQ(done, 10u);
  Reopen();
  EXPECT_EQ(card_->Health(0).unsafe_power_offs, 1u);
  for (uint32_t p = 0; p < done; ++p) {
    std::vector<uint8_t> got, want(4096);
    Rng(p).Fill(want.data(), want.size());
    ASSERT_TRUE(Read(0, {1, b, p}, &got).ok()) << p;
    EXPECT_EQ(got, want) << p;
  }
  EXPECT_EQ(card_->block_info(0, 1, b).next_page, done);
}

// A host process killed while the controller holds accepted programs (and an erase queued
// ahead of them, and programs on another die still waiting): the card has not lost power,
// so it finishes them. The next open applies the protected buffer (PlpJournal) and every
// page whose program was accepted reads back; pages never accepted stay erased.
void DamageTest::KillWithAcceptedWork(bool cut_mid_apply) {
  Make("test-small");
  const uint32_t b0 = GoodBlock(0, 0, 2);
  const uint32_t b1 = GoodBlock(0, 1, 3);
  // Block b1 holds a page first, so the kill finds its erase queued, not yet done.
  {
    std::vector<uint8_t> old(4096, 0xEE);
    ASSERT_TRUE(Erase(0, 1, b1).ok());
    ASSERT_TRUE(Program(0, {1, b1, 0}, old).ok());
  }
  card_.reset();
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(pipefd[0]);
    VirtualClock clock(1);
    auto card = simcard::SimCard::Open(dir(), clock).value();
    uint32_t accepted = 0;
    std::vector<std::vector<uint8_t>> bufs;
    card->pipe(0).Erase(0, b0, [](const Completion&) {});
    card->pipe(0).Erase(1, b1, [](const Completion&) {});
    for (uint32_t p = 0; p < 6; ++p) {
      for (uint32_t die : {0u, 1u}) {
        bufs.emplace_back(4096);
        Rng(die * 100 + p).Fill(bufs.back().data(), 4096);
        card->pipe(0).Program({{die, die == 0 ? b0 : b1, p}, bufs.back().data(), nullptr},
                              [&](const Completion& c) { accepted += c.ok(); }, [](const Completion&) {});
      }
    }
    // Until everything is in the controller's buffer; then at most the first program
    // of each die has finished.
    clock.RunUntilTrue([&] {
      // With cut_mid_apply: also until die 0 has programmed a page (its erase is done).
      return accepted == 12 && (!cut_mid_apply || card->block_info(0, 0, b0).next_page >= 1);
    });
    const uint32_t n = accepted;
    if (::write(pipefd[1], &n, sizeof n) != sizeof n) ::_exit(4);
    ::kill(::getpid(), SIGKILL);
    ::_exit(0);
  }
  ::close(pipefd[1]);
  uint32_t n = 0;
  ASSERT_EQ(::read(pipefd[0], &n, sizeof n), static_cast<ssize_t>(sizeof n));
  ::close(pipefd[0]);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  ASSERT_EQ(n, 12u);
  if (cut_mid_apply) {
    // The kill fell inside an apply: the block's next page moved, the page not written
    // (ApplyProgram's first step), and an erase counted but its pages not cleared.
    card_.reset();
    auto img = simcard::ControllerImage::Open(dir() + "/ctrl0.img").value();
    auto& r0 = img->block(0, b0);
    ASSERT_LT(r0.next_page, 6u) << "nothing left in the buffer to cut";
    ++r0.next_page;
    ASSERT_TRUE(img->Sync().ok());
  }
  Reopen();
  EXPECT_EQ(card_->Health(0).unsafe_power_offs, 1u);
  for (uint32_t p = 0; p < 6; ++p) {
    for (uint32_t die : {0u, 1u}) {
      std::vector<uint8_t> got, want(4096);
      Rng(die * 100 + p).Fill(want.data(), 4096);
      ASSERT_TRUE(Read(0, {die, die == 0 ? b0 : b1, p}, &got).ok()) << die << "/" << p;
      EXPECT_EQ(got, want) << die << "/" << p;
    }
  }
  EXPECT_EQ(card_->block_info(0, 0, b0).next_page, 6u);
  EXPECT_EQ(card_->block_info(0, 1, b1).next_page, 6u);
  // A clean close afterwards leaves nothing to finish at the next open.
  Reopen();
  EXPECT_EQ(card_->block_info(0, 1, b1).next_page, 6u);
}

TEST_F(DamageTest, KilledHostLeavesTheControllersAcceptedWorkToFinish) { KillWithAcceptedWork(false); }
TEST_F(DamageTest, KilledHostMidApplyStillFinishesIt) { KillWithAcceptedWork(true); }

}  // namespace
}  // namespace vsl::testing
