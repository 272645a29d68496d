// The groomer under a power budget (docs/ftl.md, "Groomer and wear"): at steady state of
// random writes, relocation keeps only a few programs queued ahead of the controller, so
// host pages are not held behind a victim's worth of them. The FTL runs on the pipe of a
// bench-waf card (4 dies, 64-page blocks; 32 blocks) through the real power governor (vsl/card/power.h) with a budget tight
// enough that writes are held there, which is where the pile-up used to form.
#include <algorithm>
#include <cstdio>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "tests/ftl/ftl_fixture.h"
#include "vsl/card/power.h"

namespace vsl::testing {
namespace {

class GroomPacingTest : public FtlFixture {};

TEST_F(GroomPacingTest, RelocationKeepsFewProgramsQueuedAheadOfTheController) {
  MakeCard("bench-waf", 32);
  ASSERT_TRUE(Format().ok());
  const simcard::Profile& prof = card_->profile();
  card::PowerPolicy pol;
  // The controllers' static draw plus a NAND budget of about 0.2 W: a few thousand page
  // programs per second, far below the dies' pace, so writes queue in the governor.
  const double static_w = prof.power.static_w * card_->geometry().controllers;
  pol.slot_limit_w = static_w + 0.2;
  pol.slot_capability_w = pol.slot_limit_w;
  card::PowerGovernor gov(prof.power, card_->geometry(), prof.timing, pol);
  card::GovernedPipe pipe(card_->pipe(0), gov, clock_);

  std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
  ftl::Ftl::Open(pipe, clock_, {}, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
  clock_.RunUntilTrue([&] { return r.has_value(); });
  ASSERT_TRUE(r.has_value() && r->ok());
  ftl_ = std::move(*r).value();
  const uint64_t sectors = ftl_->sectors();
  const uint32_t dies = card_->geometry().dies_per_pipe();

  // Writes at queue depth 16: sequential over the whole device, then random over it
  // three times, sampling what the governor holds every 100 us of card time.
  constexpr uint32_t kQd = 16;
  std::vector<uint8_t> buf(ftl_->sector_bytes(), 0x5A);
  Rng rng(7);
  uint64_t issued = 0, done = 0, failed = 0, seq = 0;
  const uint64_t total = sectors * 4;
  std::function<void()> next = [&] {
    if (issued == total) return;
    const uint64_t lba = issued < sectors ? seq++ : rng.Below(sectors);
    ++issued;
    ftl_->Write(lba, 1, buf.data(), false, [&](Status s) {
      ++done;
      failed += !s.ok();
      next();
    });
  };
  for (uint32_t i = 0; i < kQd; ++i) next();
  int64_t max_held = 0;
  while (done < total) {
    clock_.RunFor(100 * kUs);
    if (issued > sectors + sectors / 2) max_held = std::max(max_held, gov.held());
  }
  EXPECT_EQ(failed, 0u);
  EXPECT_GT(ftl_->stats().gc_write_sectors, sectors / 2) << "the groomer must have been at work";
  EXPECT_GT(gov.stats().write_waits, 1000u) << "the budget must hold writes back for this test";
  // The groomer's share: two pages (or reads) per die (MaxQueuedRelocation); the host's:
  // its queue depth in pages at most; a third more for parity (a page per row of three
  // data pages here), and summaries and erases beside. Twice that is the bound (64): 47
  // measured, and 189 with the groomer unbounded (a victim's worth of programs queued).
  const int64_t bound = 2 * (2 * dies + kQd) * 4 / 3;
  std::printf("held at most %lld operations (bound %lld)\n", static_cast<long long>(max_held),
              static_cast<long long>(bound));
  EXPECT_LE(max_held, bound);
}

// The free-LEB reserve is the groomer's, so it can always move a victim. When the victim
// fits in what the groomer's open LEB has left, it needs none of the reserve, and the host
// may take one reserve LEB instead of stopping until the whole victim is moved (the steady
// state bench's slowest writes, 15 ms on the high-performance format with the override,
// were such stops). Same workload both ways: 24 dies, 4 KiB random writes at QD16.
TEST_F(GroomPacingTest, TheHostTakesAReserveLebWhenTheVictimFitsTheGroomersOpenLeb) {
  struct Run {
    uint64_t room_waits = 0, failed = 0, copied = 0, takes = 0;
    DurNs max_latency = 0;
    std::vector<uint64_t> version;
  };
  auto run = [&](bool may_take) {
    Run out;
    ftl_.reset();
    card_.reset();
    std::filesystem::remove_all(tmp_.Sub("card"));
    MakeCard("duo-slc-small", 24);
    ftl::FormatOptions fo;
    fo.reserve = ftl::ReserveMode::kHighPerformance;
    EXPECT_TRUE(Format(fo).ok());
    ftl::FtlOptions o;
    o.host_may_take_reserve = may_take;
    // Grooming starts at the reserve: the pacer has no room to act in, so the host meets
    // the reserve at every victim (as the bench's high-performance override run did while
    // its pacing settled after the fill: 3,516 stops in its second round).
    o.gc_start_free_lebs = o.gc_reserve_lebs;
    EXPECT_TRUE(Attach(o).ok());
    const uint64_t sectors = ftl_->sectors();
    out.version.assign(sectors, 0);
    constexpr uint32_t kQd = 128;
    std::vector<std::vector<uint8_t>> bufs(kQd);
    Rng rng(3);
    uint64_t issued = 0, done = 0;
    const uint64_t total = sectors * 3;
    std::function<void(uint32_t)> next = [&](uint32_t slot) {
      if (issued == total) return;
      const uint64_t lba = rng.Below(sectors);
      const uint64_t v = ++issued;
      bufs[slot] = Sector(lba, v);
      out.version[lba] = v;
      const TimeNs t0 = clock_.Now();
      ftl_->Write(lba, 1, bufs[slot].data(), false, [&, slot, t0](Status st) {
        ++done;
        out.failed += !st.ok();
        out.max_latency = std::max<DurNs>(out.max_latency, clock_.Now() - t0);
        next(slot);
      });
    };
    for (uint32_t i = 0; i < kQd; ++i) next(i);
    clock_.RunUntilTrue([&] { return done == total; });
    clock_.RunUntilIdle();
    out.room_waits = ftl_->stats().room_waits;
    out.takes = ftl_->stats().reserve_takes;
    out.copied = ftl_->stats().gc_copy_sectors;
    std::vector<uint8_t> got;
    for (uint64_t lba = 0; lba < sectors; lba += 7) {
      EXPECT_TRUE(Read(lba, 1, &got).ok()) << lba;
      const auto want = out.version[lba] == 0 ? std::vector<uint8_t>(got.size(), 0) : Sector(lba, out.version[lba]);
      EXPECT_EQ(got, want) << (may_take ? "taking" : "strict") << " lba " << lba;
      if (HasFailure()) break;
    }
    return out;
  };
  const Run strict = run(false);
  const Run taking = run(true);
  std::printf("room stops %llu -> %llu (reserve LEBs taken %llu); slowest write %lld -> %lld us\n",
              static_cast<unsigned long long>(strict.room_waits), static_cast<unsigned long long>(taking.room_waits),
              static_cast<unsigned long long>(taking.takes),
              static_cast<long long>(strict.max_latency / kUs), static_cast<long long>(taking.max_latency / kUs));
  EXPECT_EQ(strict.failed + taking.failed, 0u);
  ASSERT_GT(taking.copied, 0u) << "the groomer must have been at work";
  ASSERT_GT(strict.room_waits, 0u) << "the strict reserve never stopped the host: the test shows nothing";
  EXPECT_LT(taking.room_waits * 2, strict.room_waits);
  // Since victims overlap (relocation.h) a stop at the reserve lasts less than the slowest
  // write the fill already had (measured: 783 stops and 9.4 ms strict before, 226 stops
  // now, 6.9 ms both ways, the same write): taking the reserve may not make it worse.
  EXPECT_LE(taking.max_latency, strict.max_latency);
}

// A power cut while the host writes into a LEB it took from the reserve (the victim not
// yet released, so fewer free LEBs than the reserve): the attach finds every
// acknowledged write, and the pipe goes on writing and grooming.
TEST_F(GroomPacingTest, APowerCutWhileTheHostHoldsAReserveLebLosesNothing) {
  MakeCard("duo-slc-small", 24);
  ftl::FormatOptions fo;
  fo.reserve = ftl::ReserveMode::kHighPerformance;
  ASSERT_TRUE(Format(fo).ok());
  ftl::FtlOptions o;
  o.gc_start_free_lebs = o.gc_reserve_lebs;  // as above: the host meets the reserve
  ASSERT_TRUE(Attach(o).ok());
  const uint64_t sectors = ftl_->sectors();
  std::vector<uint64_t> acked(sectors, 0);
  constexpr uint32_t kQd = 128;
  std::vector<std::vector<uint8_t>> bufs(kQd);
  Rng rng(5);
  uint64_t issued = 0, failed = 0;
  bool cut = false;
  std::function<void(uint32_t)> next = [&](uint32_t slot) {
    if (cut || issued == 3 * sectors) return;
    const uint64_t lba = rng.Below(sectors), v = ++issued;
    bufs[slot] = Sector(lba, v);
    ftl_->Write(lba, 1, bufs[slot].data(), false, [&, slot, lba, v](Status st) {
      if (cut) return;  // answered by the cut: not acknowledged
      failed += !st.ok();
      if (st.ok()) acked[lba] = std::max(acked[lba], v);
      next(slot);
    });
  };
  for (uint32_t i = 0; i < kQd; ++i) next(i);
  // Cut a while after the first take (its LEB part written, the victim still moving).
  clock_.RunUntilTrue([&] { return ftl_->stats().reserve_takes > 0; });
  ASSERT_GT(ftl_->stats().reserve_takes, 0u) << "the host never took a reserve LEB: the test shows nothing";
  const uint64_t victims = ftl_->stats().victims;
  clock_.RunFor(200 * kUs);
  // No new victim since the take: the one that allowed it is still being moved, so the
  // free LEBs are still one below the reserve.
  ASSERT_EQ(ftl_->stats().victims, victims);
  cut = true;
  PowerCycle();
  ASSERT_TRUE(Attach(o).ok());
  EXPECT_EQ(failed, 0u);
  std::vector<uint8_t> got;
  uint64_t checked = 0;
  for (uint64_t lba = 0; lba < sectors; ++lba) {
    if (acked[lba] == 0) continue;
    ASSERT_TRUE(Read(lba, 1, &got).ok()) << lba;
    // A later write, in flight at the cut, may have landed too; never an older one.
    bool ok = false;
    for (uint64_t v = acked[lba]; v <= issued && !ok; ++v) ok = got == Sector(lba, v);
    ASSERT_TRUE(ok) << "lba " << lba << " lost acknowledged version " << acked[lba];
    ++checked;
  }
  ASSERT_GT(checked, sectors / 2);
  // And the pipe keeps working from there: more writes, grooming, a clean restart.
  for (uint64_t i = 0; i < sectors / 2; ++i) {
    const uint64_t lba = rng.Below(sectors);
    ASSERT_TRUE(Write(lba, Sector(lba, ++issued)).ok());
    acked[lba] = issued;
  }
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach(o).ok());
  for (uint64_t lba = 0; lba < sectors; lba += 3) {
    if (acked[lba] == 0) continue;
    ASSERT_TRUE(Read(lba, 1, &got).ok());
    bool ok = false;
    for (uint64_t v = acked[lba]; v <= issued && !ok; ++v) ok = got == Sector(lba, v);
    ASSERT_TRUE(ok) << "after the restart, lba " << lba;
  }
}

}  // namespace
}  // namespace vsl::testing
