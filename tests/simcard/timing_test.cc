// The timing model: per-die busy, a shared bus per channel, the host link, and the three
// timing modes (virtual, real-time paced, null).
#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"
#include "vsl/core/clock.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <vector>

namespace vsl::testing {
namespace {

class TimingTest : public CardFixture {
 protected:
  void SetUp() override { Make("duo-slc-small"); }
  const simcard::Timing& t() const { return card_->timing(); }
  DurNs Bus(uint64_t bytes) const { return TransferNs(bytes, t().bus_bytes_per_sec); }
  DurNs Link(uint64_t bytes) const { return TransferNs(bytes, t().link_bytes_per_sec); }
  uint64_t RawPage() const { return g().page_data_bytes + g().page_spare_bytes; }
  uint64_t RawRead() const {
    return uint64_t{g().codewords_per_page()} * (g().ecc_codeword_bytes + g().ecc_parity_bytes);
  }
};

TEST_F(TimingTest, SingleOperationLatenciesFollowTheModel) {
  const uint32_t b = GoodBlock(0, 0, 1);
  TimeNs t0 = clock_.Now();
  Completion e = Erase(0, 0, b);
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e.complete_ns - t0, t().cmd_overhead_ns + t().t_erase_ns);

  std::optional<Completion> acc;
  t0 = clock_.Now();
  Completion p = Program(0, {0, b, 0}, Pattern(1, page_bytes()), nullptr, &acc);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(acc.has_value());
  const DurNs dma = Link(uint64_t{page_bytes()} + meta_bytes());
  EXPECT_EQ(acc->complete_ns - t0, dma);  // acknowledged at DMA time (~5 us)
  EXPECT_EQ(p.complete_ns - t0, dma + t().cmd_overhead_ns + Bus(RawPage()) + t().t_prog_ns);

  t0 = clock_.Now();
  std::vector<uint8_t> d;
  Completion r = Read(0, {0, b, 0}, &d);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.complete_ns - t0,
            t().cmd_overhead_ns + t().t_read_ns + Bus(RawRead()) + Link(page_bytes()));
  // The reference card's published figures: writes ack in ~15 us, reads ~47 us.
  EXPECT_LT(acc->complete_ns - (p.submit_ns), 15 * kUs);
  EXPECT_LT(r.complete_ns - r.submit_ns, 120 * kUs);
}

TEST_F(TimingTest, LunsOfOneChannelOverlapArrayTimeButShareTheBus) {
  // Program page 0 on the 4 LUNs of channel 0 and on 4 LUNs of 4 other channels.
  std::vector<uint32_t> blocks;
  for (uint32_t die = 0; die < g().dies_per_pipe(); ++die) {
    blocks.push_back(GoodBlock(0, die, 1));
    ASSERT_TRUE(Erase(0, die, blocks.back()).ok());
  }
  auto data = Pattern(1, page_bytes());
  auto run = [&](std::vector<uint32_t> dies) {
    const TimeNs t0 = clock_.Now();
    int left = static_cast<int>(dies.size());
    TimeNs last = 0;
    for (uint32_t die : dies) {
      const uint32_t pg = card_->block_info(0, die, blocks[die]).next_page;
      pipe(0).Program({{die, blocks[die], pg}, data.data(), nullptr}, nullptr,
                      [&](const Completion& c) {
                        EXPECT_TRUE(c.ok());
                        last = c.complete_ns;
                        --left;
                      });
    }
    clock_.RunUntilIdle();
    EXPECT_EQ(left, 0);
    return last - t0;
  };
  const DurNs one = run({0});
  const DurNs same_channel = run({0, 1, 2, 3});
  const DurNs four_channels = run({0, 4, 8, 12});
  const DurNs xfer = t().cmd_overhead_ns + Bus(RawPage());
  // Same channel: the 4 transfers serialize on the bus, tPROG overlaps.
  EXPECT_GE(same_channel, one + 3 * xfer);
  EXPECT_LT(same_channel, 2 * one);
  // Different channels: fully parallel except the shared host link.
  EXPECT_LT(four_channels, same_channel);
  EXPECT_LE(four_channels, one + 3 * Link(uint64_t{page_bytes()} + meta_bytes()));
}

// The channel serves waiting dies as the RTL pipe does (docs/rtl.md, "Scheduling"): a
// PROGRAM's command and data before a ready read's data out, even when the read asked
// first, so the programming die starts its tPROG sooner.
TEST_F(TimingTest, TheChannelStartsAProgramBeforeAReadyReadsDataOut) {
  const uint32_t b0 = GoodBlock(0, 0, 1), b1 = GoodBlock(0, 1, 1), b2 = GoodBlock(0, 2, 1);
  for (auto [die, b] : {std::pair{0u, b0}, std::pair{1u, b1}, std::pair{2u, b2}}) ASSERT_TRUE(Erase(0, die, b).ok());
  auto data = Pattern(1, page_bytes());
  ASSERT_TRUE(Program(0, {1, b1, 0}, data).ok());
  clock_.RunUntilIdle();
  // t0: die 1's read takes the bus for its command, then senses for tR; die 0's program
  // lands over the link and holds the bus for its data until well after tR; die 1's data
  // out asks for the bus at t0 + cmd + tR, die 2's program (submitted later) after it.
  const TimeNs t0 = clock_.Now();
  std::vector<uint8_t> out(page_bytes());
  TimeNs read_done = 0, p0_done = 0, p2_done = 0, p2_bus_ask = 0;
  pipe(0).Read({{1, b1, 0}, 0, g().codewords_per_page(), out.data(), nullptr},
               [&](const Completion& c) { EXPECT_TRUE(c.ok()); read_done = c.complete_ns; });
  pipe(0).Program({{0, b0, 0}, data.data(), nullptr}, nullptr, [&](const Completion& c) {
    EXPECT_TRUE(c.ok());
    p0_done = c.complete_ns;
  });
  const DurNs dma = Link(uint64_t{page_bytes()} + meta_bytes());
  const DurNs read_out_ask = t().cmd_overhead_ns + t().t_read_ns;
  ASSERT_GT(dma + t().cmd_overhead_ns + Bus(RawPage()), read_out_ask + dma);  // die 0 still on the bus then
  clock_.At(t0 + read_out_ask + 1, [&] {
    p2_bus_ask = clock_.Now() + dma;
    pipe(0).Program({{2, b2, 0}, data.data(), nullptr}, nullptr, [&](const Completion& c) {
      EXPECT_TRUE(c.ok());
      p2_done = c.complete_ns;
    });
  });
  clock_.RunUntilIdle();
  ASSERT_NE(p0_done, 0);
  ASSERT_NE(p2_done, 0);
  ASSERT_NE(read_done, 0);
  const TimeNs p0_bus_end = p0_done - t().t_prog_ns;
  ASSERT_GT(p0_bus_end, p2_bus_ask);  // both were waiting when die 0's data was in
  // Die 2's program went on the bus as soon as die 0's left it, the read's data after it.
  EXPECT_EQ(p2_done, p0_bus_end + t().cmd_overhead_ns + Bus(RawPage()) + t().t_prog_ns);
  EXPECT_EQ(read_done, p2_done - t().t_prog_ns + Bus(RawRead()) + Link(page_bytes()));
  // The dies' wait for the bus is counted.
  EXPECT_GT(card_->stats(0).die_bus_wait_ns, 0);
}

TEST_F(TimingTest, PipesOfOneControllerShareTheHostLink) {
  const uint32_t b0 = GoodBlock(0, 0, 1), b1 = GoodBlock(1, 0, 1), b2 = GoodBlock(2, 0, 1);
  ASSERT_TRUE(Erase(0, 0, b0).ok());
  ASSERT_TRUE(Erase(1, 0, b1).ok());
  ASSERT_TRUE(Erase(2, 0, b2).ok());
  auto data = Pattern(1, page_bytes());
  std::vector<TimeNs> acc(3);
  const TimeNs t0 = clock_.Now();
  pipe(0).Program({{0, b0, 0}, data.data(), nullptr}, [&](const Completion& c) { acc[0] = c.complete_ns; }, [](const Completion&) {});
  pipe(1).Program({{0, b1, 0}, data.data(), nullptr}, [&](const Completion& c) { acc[1] = c.complete_ns; }, [](const Completion&) {});
  pipe(2).Program({{0, b2, 0}, data.data(), nullptr}, [&](const Completion& c) { acc[2] = c.complete_ns; }, [](const Completion&) {});
  clock_.RunUntilIdle();
  const DurNs dma = Link(uint64_t{page_bytes()} + meta_bytes());
  EXPECT_EQ(acc[0] - t0, dma);
  EXPECT_EQ(acc[1] - t0, 2 * dma);  // same controller: waits for pipe 0's DMA
  EXPECT_EQ(acc[2] - t0, dma);      // pipe 2 is on controller 1
}

TEST(TimingModeTest, NullTimingCompletesEverythingAtOnce) {
  TempDir tmp;
  VirtualClock clock(1);
  auto p = simcard::FindProfile("test-small");
  ASSERT_TRUE(simcard::SimCard::Create(tmp.Sub("c"), *p, {}).ok());
  auto card = simcard::SimCard::Open(tmp.Sub("c"), clock, {.null_timing = true, .seed = 1, .plp = {}, .reliability = {}, .pipe_clocks = {}, .power = {}, .environment = {}, .copy_accumulators = {}});
  ASSERT_TRUE(card.ok());
  std::vector<uint8_t> data(4096, 1);
  int done = 0;
  (*card)->pipe(0).Erase(0, 0, [&](const Completion& c) { EXPECT_TRUE(c.ok()); ++done; });
  for (uint32_t pg = 0; pg < 16; ++pg) {
    (*card)->pipe(0).Program({{0, 0, pg}, data.data(), nullptr}, nullptr,
                             [&](const Completion& c) { EXPECT_TRUE(c.ok()); ++done; });
  }
  clock.RunUntilIdle();
  EXPECT_EQ(done, 17);
  EXPECT_EQ(clock.Now(), 0u);
}

// A clock that is not virtual (as a RealClock is not) but steps like a VirtualClock, and
// moves on by 1 us at every reading, as wall time would: it counts the readings.
class SteppedWallClock final : public Clock {
 public:
  TimeNs Now() const override {
    ++reads_;
    return now_ += kUs;
  }
  bool is_virtual() const override { return false; }
  TimerId At(TimeNs when, Task task) override { return q_.Add(when, std::move(task)); }
  void Post(Task task) override { q_.Post(std::move(task)); }
  bool Cancel(TimerId id) override { return q_.Cancel(id); }
  void RunUntilIdle() {
    for (;;) {
      Task t;
      TimeNs when = 0;
      if (q_.HasReady()) {
        q_.PopReady()();
      } else if (q_.PopDue(kTimeNever - 1, &t, &when)) {
        now_ = std::max(now_, when);
        t();
      } else {
        return;
      }
    }
  }
  uint64_t reads() const { return reads_; }

 private:
  mutable TimeNs now_ = 0;
  mutable uint64_t reads_ = 0;
  TimerQueue q_{1};
};

// On a zero-time card in wall time, a host command's stages all see the one time read
// when it was submitted (SimPipe::CommandTime): the clock is read once per command, and
// the completion's timestamps agree with each other, however long the command's own
// work took in wall time.
TEST(TimingModeTest, AZeroTimeCommandInWallTimeReadsTheClockOnce) {
  TempDir tmp;
  SteppedWallClock clock;
  auto p = simcard::FindProfile("test-small");
  ASSERT_TRUE(simcard::SimCard::Create(tmp.Sub("c"), *p, {}).ok());
  simcard::SimCardOptions so;
  so.null_timing = true;
  auto card = simcard::SimCard::Open(tmp.Sub("c"), clock, so);
  ASSERT_TRUE(card.ok());
  nand::FlashPipe& pipe = (*card)->pipe(0);
  const nand::Geometry& g = (*card)->geometry();
  std::vector<uint8_t> data(g.page_data_bytes, 1), out(g.page_data_bytes), meta(g.meta_bytes_per_page(), 0xFF);
  std::optional<Completion> erased;
  pipe.Erase(0, 1, [&](const Completion& c) { erased = c; });
  clock.RunUntilIdle();
  ASSERT_TRUE(erased.has_value() && erased->ok());
  constexpr uint32_t kPages = 16;
  std::vector<Completion> done;
  const uint64_t before = clock.reads();
  for (uint32_t pg = 0; pg < kPages; ++pg) {
    pipe.Program({{0, 1, pg}, data.data(), meta.data()}, nullptr, [&](const Completion& c) { done.push_back(c); });
    clock.RunUntilIdle();
    pipe.Read({{0, 1, pg}, 0, 0, out.data(), nullptr}, [&](const Completion& c) { done.push_back(c); });
    clock.RunUntilIdle();
  }
  ASSERT_EQ(done.size(), 2u * kPages);
  for (const Completion& c : done) {
    EXPECT_TRUE(c.ok());
    EXPECT_EQ(c.complete_ns, c.submit_ns) << "a zero-time command's stages saw different times";
  }
  EXPECT_EQ(out, data);
  // One reading per command; the power governor's refill may take one more.
  EXPECT_LE(clock.reads() - before, 2u * 2 * kPages);
}

// A test-small card paced in wall time by `clock`.
std::unique_ptr<simcard::SimCard> RealTimeCard(const TempDir& tmp, RealClock& clock) {
  auto p = simcard::FindProfile("test-small");
  if (!p.ok() || !simcard::SimCard::Create(tmp.Sub("c"), *p, {}).ok()) return nullptr;
  auto card = simcard::SimCard::Open(tmp.Sub("c"), clock);
  return card.ok() ? std::move(*card) : nullptr;
}

TEST(TimingModeTest, RealTimePacedOperationsTakeTheirModelledWallTime) {
  TempDir tmp;
  RealClock clock;
  auto card = RealTimeCard(tmp, clock);
  ASSERT_NE(card, nullptr);
  const simcard::Timing& t = card->timing();
  const TimeNs t0 = clock.Now();
  std::optional<Completion> c;
  card->pipe(0).Erase(0, 0, [&](const Completion& x) {
    c = x;
    clock.Stop();
  });
  clock.RunUntil(t0 + 5 * kSec);
  ASSERT_TRUE(c.has_value());
  EXPECT_TRUE(c->ok());
  EXPECT_GE(clock.Now() - t0, t.t_erase_ns);  // never early (may be late under load)
  EXPECT_GE(c->complete_ns - c->submit_ns, t.t_erase_ns);
}

TEST(TimingModeTest, ARealTimeReadRunLateByTheHostKeepsTheModelsDeviceTime) {
  // In real time the engine may run a stage of a flash operation late (here: a task that
  // holds the engine's thread for 300 us once the read's array time is due). The device's
  // timeline goes on from when each stage was due, so the read completes, in the device's
  // time, after exactly the modelled latency; only its delivery to the host is late.
  TempDir tmp;
  RealClock clock;
  auto card = RealTimeCard(tmp, clock);
  ASSERT_NE(card, nullptr);
  auto& pipe = card->pipe(0);
  const nand::Geometry& g = card->geometry();
  const simcard::Timing& t = card->timing();
  auto run = [&](std::optional<Completion>& c) {
    const TimeNs limit = clock.Now() + 5 * kSec;
    while (!c.has_value() && clock.Now() < limit) clock.RunUntil(clock.Now() + 100 * kUs);
  };
  uint32_t block = 0;
  for (;; ++block) {
    ASSERT_LT(block, g.blocks_per_lun);
    std::optional<Completion> e;
    pipe.Erase(0, block, [&](const Completion& x) { e = x; });
    run(e);
    ASSERT_TRUE(e.has_value());
    if (e->ok()) break;
  }
  std::vector<uint8_t> data(g.page_data_bytes, 0x5A);
  std::optional<Completion> w;
  pipe.Program(nand::ProgramRequest{{0, block, 0}, data.data(), nullptr}, nullptr,
               [&](const Completion& x) { w = x; });
  run(w);
  ASSERT_TRUE(w.has_value() && w->ok());

  std::vector<uint8_t> out(g.page_data_bytes);
  std::optional<Completion> r;
  const TimeNs t0 = clock.Now();
  pipe.Read(nand::ReadRequest{{0, block, 0}, 0, 0, out.data(), nullptr}, [&](const Completion& x) { r = x; });
  const DurNs array = t.cmd_overhead_ns + t.t_read_ns;
  clock.At(t0 + array, [] {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(300);
    while (std::chrono::steady_clock::now() < until) {
    }
  });
  run(r);
  ASSERT_TRUE(r.has_value());
  ASSERT_TRUE(r->ok());
  EXPECT_EQ(out, data);
  const uint64_t raw_read = uint64_t{g.codewords_per_page()} * (g.ecc_codeword_bytes + g.ecc_parity_bytes);
  const DurNs model = array + TransferNs(raw_read, t.bus_bytes_per_sec) +
                      TransferNs(g.page_data_bytes, t.link_bytes_per_sec);
  EXPECT_GE(clock.Now() - t0, array + 300 * kUs);  // delivered late to the host
  // In the device's time: the model's latency, give or take the microsecond the first
  // stage (started from the host's submission) may have begun after t0.
  EXPECT_GE(r->complete_ns - r->submit_ns, model);
  EXPECT_LT(r->complete_ns - r->submit_ns, model + 50 * kUs);
}

}  // namespace
}  // namespace vsl::testing
