// The groomer under a power budget (docs/ftl.md, "Groomer and wear"): at steady state of
// random writes, relocation keeps only a few programs queued ahead of the controller, so
// host pages are not held behind a victim's worth of them. The FTL runs on the pipe of a
// bench-waf card (4 dies, 64-page blocks; 32 blocks) through the real power governor (vsl/card/power.h) with a budget tight
// enough that writes are held there, which is where the pile-up used to form.
#include <algorithm>
#include <cstdio>
#include <cstdint>
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

}  // namespace
}  // namespace vsl::testing
