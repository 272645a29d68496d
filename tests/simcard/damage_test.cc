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
  }
  return false;
}

class DamageTest : public CardFixture {};

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

}  // namespace
}  // namespace vsl::testing
