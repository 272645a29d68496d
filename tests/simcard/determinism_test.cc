// A whole run replays exactly from its seeds: the same completions at the same virtual
// instants with the same corrected-bit counts; another card seed draws other errors.
#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"
#include "vsl/core/crc.h"

namespace vsl::testing {
namespace {

uint32_t TraceHash(uint64_t clock_seed, uint64_t card_seed) {
  TempDir tmp;
  VirtualClock clock(clock_seed);
  auto profile = simcard::FindProfile("test-wear").value();
  EXPECT_TRUE(simcard::SimCard::Create(tmp.Sub("c"), profile, {.serial = "", .seed = 5}).ok());
  auto card = simcard::SimCard::Open(tmp.Sub("c"), clock, {.null_timing = false, .seed = card_seed, .plp = {}, .reliability = {}, .pipe_clocks = {}, .power = {}, .environment = {}, .copy_accumulators = {}}).value();
  const auto& g = card->geometry();
  uint32_t h = 0;
  auto record = [&](uint32_t tag, const Completion& c) {
    const uint64_t v[4] = {tag, static_cast<uint64_t>(c.status), c.corrected_bits, c.complete_ns};
    h = Crc32c(v, sizeof(v), h);
  };
  Rng rng(99);
  std::vector<std::vector<uint8_t>> bufs;
  for (uint32_t die = 0; die < g.dies_per_pipe(); ++die) {
    card->TEST_SetEraseCount(0, die, 1, 130);  // worn: reads need ECC
    card->pipe(0).Erase(die, 1, [&, die](const Completion& c) { record(die, c); });
    for (uint32_t pg = 0; pg < g.pages_per_block; ++pg) {
      bufs.emplace_back(g.page_data_bytes);
      rng.Fill(bufs.back().data(), g.page_data_bytes);
      card->pipe(0).Program({{die, 1, pg}, bufs.back().data(), nullptr}, nullptr,
                            [&, pg](const Completion& c) { record(1000 + pg, c); });
      bufs.emplace_back(g.page_data_bytes);
      card->pipe(0).Read({{die, 1, pg}, 0, 0, bufs.back().data(), nullptr},
                         [&, pg](const Completion& c) { record(2000 + pg, c); });
    }
  }
  clock.RunFor(2 * kMs);
  card->PowerCut();
  clock.RunUntilIdle();
  for (auto& b : bufs) h = Crc32c(b.data(), b.size(), h);
  return h;
}

TEST(DeterminismTest, SameSeedsReplayExactly) {
  EXPECT_EQ(TraceHash(1, 1), TraceHash(1, 1));
  EXPECT_EQ(TraceHash(7, 3), TraceHash(7, 3));
}

TEST(DeterminismTest, OtherSeedsGiveOtherRuns) {
  EXPECT_NE(TraceHash(1, 1), TraceHash(1, 2));  // other bit errors
  EXPECT_NE(TraceHash(1, 1), TraceHash(2, 1));  // other interleaving of simultaneous events
}

}  // namespace
}  // namespace vsl::testing
