// The power governor's order across pipes (vsl/card/power.h): writes held by several
// pipes sharing one budget are admitted oldest first, so a pipe whose next write needs
// more energy than the others' (an erase against programs) is not passed over until the
// others run dry. Two GovernedPipes over a controller stand-in that accepts at once, in
// virtual time, on a tight budget.
#include <cstdint>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "vsl/card/power.h"
#include "vsl/core/clock.h"
#include "vsl/simcard/profile.h"

namespace vsl::card {
namespace {

// Accepts and completes every command at once and logs what was issued, in order, to a
// log shared by the pipes: 'P' a program, 'E' an erase, after the pipe's letter.
class InstantPipe final : public nand::FlashPipe {
 public:
  InstantPipe(VirtualClock& clock, char name, std::string& log) : clock_(clock), name_(name), log_(log) {
    topo_.channels = 2;  // test-small's pipe: 2 channels x 2 LUNs
    topo_.luns_per_channel = 2;
    topo_.controllers = 1;
    topo_.pipes_per_controller = 2;
  }
  const nand::PipeTopology& topology() const override { return topo_; }
  nand::PlpState plp_state() const override { return nand::PlpState{}; }
  void Read(const nand::ReadRequest&, nand::FlashCallback done) override { Done(std::move(done)); }
  void Program(const nand::ProgramRequest&, nand::FlashCallback accepted, nand::FlashCallback done) override {
    log_ += name_;
    log_ += 'P';
    Done(std::move(accepted));
    Done(std::move(done));
  }
  void Erase(uint32_t, uint32_t, nand::FlashCallback done) override {
    log_ += name_;
    log_ += 'E';
    Done(std::move(done));
  }
  void Reset(uint32_t, nand::FlashCallback done) override { Done(std::move(done)); }
  void ReadId(uint32_t, uint8_t, uint8_t*, uint32_t, nand::FlashCallback done) override { Done(std::move(done)); }
  void ReadParameterPage(uint32_t, uint8_t*, uint32_t, nand::FlashCallback done) override {
    Done(std::move(done));
  }

 private:
  void Done(nand::FlashCallback cb) {
    clock_.Post([cb = std::move(cb)]() mutable {
      nand::Completion c;
      cb(c);
    });
  }
  VirtualClock& clock_;
  const char name_;
  std::string& log_;
  nand::PipeTopology topo_;
};

// Pipe B keeps far more programs queued than the budget passes at once; then pipe A asks
// for one erase, and B queues as many programs again. The erase goes in its turn: after
// the programs B queued before it, before those B queued after it. (Before the governor
// kept this order, the refill went to whichever pipe's timer fired first: B's programs,
// each needing a seventh of the erase's energy, took every refill and the erase went out
// only when B's queue ran dry.)
TEST(GovernorOrderTest, HeldWritesOfAllPipesGoOldestFirst) {
  VirtualClock clock(1);
  auto prof = simcard::FindProfile("test-small");  // one controller, two pipes of four dies
  ASSERT_TRUE(prof.ok());
  const nand::Geometry& g = prof->geometry;
  model::Power power;
  power.static_w = 0.5;  // the one controller's: a 0.5 W NAND budget under a 1 W limit
  PowerPolicy pol;
  pol.slot_limit_w = 1.0;
  pol.slot_capability_w = 1.0;
  PowerGovernor gov(power, g, model::Timing{}, pol);
  std::string log;
  InstantPipe inner_a(clock, 'A', log), inner_b(clock, 'B', log);
  GovernedPipe a(inner_a, gov, clock), b(inner_b, gov, clock);

  std::vector<uint8_t> page(g.page_data_bytes), meta(g.page_spare_bytes);
  auto program = [&](GovernedPipe& p, uint32_t block, uint32_t n) {
    for (uint32_t i = 0; i < n; ++i) {
      nand::ProgramRequest req{{i % 4, block, i / 4 % g.pages_per_block}, page.data(), meta.data(), false};
      p.Program(req, [](const nand::Completion&) {}, [](const nand::Completion&) {});
    }
  };
  constexpr uint32_t kBatch = 400;  // about 17 ms of programs at this budget (21.5 uJ each)
  program(b, 1, kBatch);
  clock.RunFor(1 * kMs);
  const std::size_t issued_before = log.size() / 2;
  ASSERT_LT(issued_before, kBatch) << "the budget must hold B's programs back for this test";
  bool erased = false;
  a.Erase(0, 2, [&](const nand::Completion& c) { erased = c.ok(); });
  program(b, 3, kBatch);
  clock.RunUntilIdle();
  ASSERT_TRUE(erased);
  ASSERT_EQ(log.size(), 2 * (2 * kBatch + 1));
  const std::size_t at = log.find("AE") / 2;
  EXPECT_EQ(at, kBatch) << "B's programs issued before A's erase: only those queued before it";
  EXPECT_EQ(gov.stats().writes, 2 * kBatch + 1);
}


// A host sharing a card whose LUNs are all released or fenced has no budget share (0):
// writes it still holds must go (the card fences them), not wait for a refill that never
// comes. (Before, they were held for ever and the pipe's engine re-armed its timer every
// microsecond: vsld hung in its stop after losing its LUNs, in ha_system_test.)
TEST(GovernorOrderTest, NoBudgetShareHoldsNothingForEver) {
  VirtualClock clock(1);
  auto prof = simcard::FindProfile("test-small");
  ASSERT_TRUE(prof.ok());
  const nand::Geometry& g = prof->geometry;
  model::Power power;
  power.static_w = 0.5;
  PowerPolicy pol;
  pol.slot_limit_w = 1.0;
  pol.slot_capability_w = 1.0;
  PowerGovernor gov(power, g, model::Timing{}, pol);
  std::string log;
  InstantPipe inner(clock, 'A', log);
  GovernedPipe a(inner, gov, clock);
  std::vector<uint8_t> page(g.page_data_bytes), meta(g.page_spare_bytes);
  constexpr uint32_t kWrites = 400;
  uint32_t done = 0;
  for (uint32_t i = 0; i < kWrites; ++i) {
    nand::ProgramRequest req{{i % 4, 1, i / 4 % g.pages_per_block}, page.data(), meta.data(), false};
    a.Program(req, [](const nand::Completion&) {}, [&](const nand::Completion&) { ++done; });
  }
  clock.RunFor(1 * kMs);
  ASSERT_LT(done, kWrites) << "the budget must hold writes back for this test";
  gov.SetBudgetShare(0);
  clock.RunFor(10 * kMs);
  EXPECT_EQ(done, kWrites);
}

// A zero-time card's governor (unmetered, as Card::Open makes it for a backend
// with no NAND time): the same burst the tight budget holds back goes at once, every
// operation is still charged (count and energy), none is counted as a wait, and an
// operator's policy change later does not turn the metering back on.
TEST(GovernorOrderTest, AnUnmeteredGovernorChargesEveryOperationAndHoldsNone) {
  auto prof = simcard::FindProfile("test-small");
  ASSERT_TRUE(prof.ok());
  const nand::Geometry& g = prof->geometry;
  model::Power power;
  power.static_w = 0.5;
  constexpr uint32_t kWrites = 400;
  struct Run {
    uint32_t done = 0;
    GovernorStats stats;
  };
  auto run = [&](bool unmetered, bool change_policy) {
    VirtualClock clock(1);
    PowerPolicy pol;
    pol.slot_limit_w = 1.0;
    pol.slot_capability_w = 1.0;
    PowerGovernor gov(power, g, model::Timing{}, pol, unmetered);
    if (change_policy) {
      PowerPolicy p2 = pol;
      p2.slot_limit_w = p2.slot_capability_w = 1.6;  // (SetPolicy checks room over the static draw)
      EXPECT_TRUE(gov.SetPolicy(p2).ok());
    }
    std::string log;
    InstantPipe inner(clock, 'A', log);
    GovernedPipe a(inner, gov, clock);
    std::vector<uint8_t> page(g.page_data_bytes), meta(g.page_spare_bytes);
    Run r;
    for (uint32_t i = 0; i < kWrites; ++i) {
      nand::ProgramRequest req{{i % 4, 1, i / 4 % g.pages_per_block}, page.data(), meta.data(), false};
      a.Program(req, [](const nand::Completion&) {}, [&](const nand::Completion&) { ++r.done; });
    }
    clock.RunFor(1 * kMs);
    r.stats = gov.stats();
    return r;
  };
  const Run metered = run(false, false);
  ASSERT_LT(metered.done, kWrites) << "the budget must hold writes back for this test";
  EXPECT_GT(metered.stats.write_waits, 0u);
  for (bool change : {false, true}) {
    const Run free_run = run(true, change);
    EXPECT_EQ(free_run.done, kWrites) << change;
    EXPECT_EQ(free_run.stats.writes, kWrites) << change;
    EXPECT_EQ(free_run.stats.write_waits, 0u) << change;
    EXPECT_NEAR(free_run.stats.write_j, metered.stats.write_j / metered.stats.writes * kWrites,
                free_run.stats.write_j * 1e-9)
        << change;
  }
}

}  // namespace
}  // namespace vsl::card
