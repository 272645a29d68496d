// The FTL on the co-simulated controller, both pipes: the harness of
// tests/rtl/ftl_harness.h (seeds of concurrent writes, trims, reads and flushes, model
// checks, clean restarts and host crashes, a die failure in the last seed). The dies are
// the C++ pin-level targets with the ONFI timing checker; they keep their pages in a
// simulated-card image with the card's error and fault model
// (testbench/cosim/image_store.h). VSL_COSIM_SEEDS sets the seed count (default 2).
#include <cstdlib>
#include <memory>

#include <gtest/gtest.h>

#include "tests/rtl/cosim_pipes.h"
#include "tests/rtl/ftl_harness.h"
#include "testbench/cosim/cosim_card.h"
#include "testbench/cosim/image_store.h"
#include "tests/testutil/temp_dir.h"
#include "vsl/simcard/image.h"
#include "vsl/simcard/profile.h"
#include "vsl/core/clock.h"
#include "vsl/ftl/ftl.h"
#include "vsl/hw/ctrl_pipe.h"
#include "vsl/hw/regmap.h"

namespace vsl::testing {
namespace {

TEST(CosimFtlTest, FtlHarnessDualPipe) {
  VirtualClock clock(1);
  // The dies' pages in a simulated-card image of the co-simulated card's shape, with the
  // card's error model at a raw bit error rate that makes the RTL's ECC correct bits on
  // most reads (VSL_COSIM_RBER, default 1e-4), and 5% factory bad blocks.
  TempDir tmp;
  auto profile = simcard::FindProfile("test-small");
  ASSERT_TRUE(profile.ok());
  auto& g = profile->geometry;
  const tb::CosimOptions dflt;
  g.pipes_per_controller = 2;
  g.channels_per_pipe = 1;
  g.luns_per_channel = dflt.luns;
  g.blocks_per_lun = dflt.blocks;
  g.pages_per_block = dflt.pages_per_block;
  g.page_data_bytes = dflt.page_data_bytes;
  g.page_spare_bytes = dflt.page_spare_bytes;
  profile->reliability.factory_bad_fraction = 0.05;
  const char* rber = std::getenv("VSL_COSIM_RBER");
  profile->reliability.rber_base = rber ? std::atof(rber) : 1e-4;
  auto image = simcard::ControllerImage::Create(tmp.Sub("cosim.img"), *profile, 0, 1, "COSIM-0001", 7);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  uint32_t factory_bad = 0;
  for (uint32_t d = 0; d < g.dies_per_controller(); ++d) {
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
      factory_bad += ((*image)->block(d, b).flags & simcard::format::kBlockFactoryBad) != 0;
    }
  }
  tb::ImageStore store0(**image, profile->reliability, 0, 11), store1(**image, profile->reliability, 4, 12);
  tb::CosimOptions co = CosimTestOptions();
  co.stores[0] = &store0;
  co.stores[1] = &store1;
  auto card = tb::CosimCard::Create(co);
  ASSERT_TRUE(card);
  // A dead die is reported after 2.5 ms busy (above tBERS), not the board's 20 ms.
  for (uint32_t p = 0; p < 2; ++p) {
    ASSERT_TRUE(card->Write32(hw::regs::chan::At(p, hw::regs::chan::kRbTimeout), 500000));
  }
  std::unique_ptr<hw::ControllerPipe> pipes[2];
  OpenCosimPipes(*card, clock, pipes);
  if (HasFatalFailure()) return;
  HarnessCard hc{*card, {card->region_base(0), card->region_base(1)}, card->region_bytes(),
                 [&](uint32_t p, uint32_t l) { card->KillLun(p, l); }};
  HarnessTotals t;
  const int seeds = HarnessSeeds();
  RunFtlHarness(hc, clock, pipes, seeds, &t);
  if (HasFatalFailure()) return;
  const uint64_t corrected = pipes[0]->stats().corrected_bits + pipes[1]->stats().corrected_bits;
  const uint64_t flipped = store0.stats().bits_flipped + store1.stats().bits_flipped;
  std::printf("%d seeds: %llu writes acknowledged, %llu sector checks; pipe 0: %llu commands, %llu ticks; "
              "%llu cycles co-simulated (%.1f ms of device time); checker violations %d; %u factory bad "
              "blocks; %llu pages sensed with %llu raw bit errors, %llu bits corrected by the RTL's ECC (as counted by the hosts alive at the end), "
              "%llu uncorrectable reads; die failure: %s, %llu pages rebuilt from parity, %llu commands timed out; "
              "%llu host crashes\n",
              seeds, static_cast<unsigned long long>(t.acked), static_cast<unsigned long long>(t.checked),
              static_cast<unsigned long long>(pipes[0]->stats().commands),
              static_cast<unsigned long long>(pipes[0]->stats().ticks),
              static_cast<unsigned long long>(card->cycles()), static_cast<double>(card->now_ns()) / 1e6,
              card->timing_violations(), factory_bad,
              static_cast<unsigned long long>(store0.stats().pages_sensed + store1.stats().pages_sensed),
              static_cast<unsigned long long>(flipped), static_cast<unsigned long long>(corrected),
              static_cast<unsigned long long>(pipes[0]->stats().uncorrectable + pipes[1]->stats().uncorrectable),
              t.die_failed ? "yes" : "no", static_cast<unsigned long long>(t.rebuilt),
              static_cast<unsigned long long>(pipes[0]->stats().timeouts), static_cast<unsigned long long>(t.host_crashes));
  for (const auto& [what, n] : card->violations()) std::printf("checker: %s x%d\n", what.c_str(), n);
  EXPECT_EQ(card->timing_violations(), 0);
  EXPECT_GT(t.checked, 50u);
  if (profile->reliability.rber_base >= 1e-5) {
    EXPECT_GT(corrected, 0u);
  }
}

}  // namespace
}  // namespace vsl::testing
