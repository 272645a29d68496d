// The FTL on the co-simulated controller, both pipes (an FTL each, formatted with
// FlashBack over the pipe's four LUNs): a short randomized harness of writes, trims, reads
// and flushes in flight together, checked against a reference model after every round,
// with clean restarts (checkpoint attach) and host crashes (the FTL dropped without a
// shutdown, commands of theirs possibly still in the controller: a new host side takes
// the pipe over and the attach scans). The card keeps running across restarts, as a card
// does when only the host restarts. In the last seed (of two or more) a die of pipe 0 dies
// (it stays busy for ever): the controller reports it by RB_TIMEOUT and FlashBack must
// lose nothing. The first seed formats with 512-byte sectors, the others 4 KiB. The dies keep their pages in a simulated-card image
// with the card's error and fault model (testbench/cosim/image_store.h). VSL_COSIM_SEEDS
// sets the seed count (default 2).
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "tests/rtl/cosim_pipes.h"
#include "testbench/cosim/cosim_card.h"
#include "testbench/cosim/image_store.h"
#include "tests/testutil/temp_dir.h"
#include "vsl/simcard/image.h"
#include "vsl/simcard/profile.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"
#include "vsl/hw/ctrl_pipe.h"
#include "vsl/hw/regmap.h"

namespace vsl::testing {
namespace {

struct Model {
  uint64_t version = 0;  // 0: zeroes
  uint64_t issue = 0;    // issue number of the op that set it
};

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
  const char* e = std::getenv("VSL_COSIM_SEEDS");
  const int seeds = e ? std::atoi(e) : 2;
  uint64_t checked = 0, acked = 0;
  bool die_failed = false;
  uint64_t host_crashes = 0;
  uint64_t rebuilt = 0;
  for (int seed = 1; seed <= seeds; ++seed) {
    Rng rng(static_cast<uint64_t>(seed));
    // In the last seed (of two or more) a die of pipe 0 dies in the middle of round 1:
    // FlashBack must rebuild its data from parity, online, and lose nothing.
    const bool kill = seed == seeds && seeds >= 2;
    const auto kill_lun = static_cast<uint32_t>(rng.Below(4));
    const int kill_op = static_cast<int>(rng.Range(5, 25));
    std::unique_ptr<ftl::Ftl> ftls[2];
    auto attach = [&](uint32_t p) {
      ftls[p].reset();
      std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
      ftl::Ftl::Open(*pipes[p], clock, {}, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
      clock.RunUntilTrue([&] { return r.has_value(); }, kMaxEvents);
      ASSERT_TRUE(r.has_value() && r->ok()) << "seed " << seed << " pipe " << p << ": "
                                            << (r ? r->status().ToString() : "open never finished");
      ftls[p] = std::move(*r).value();
    };
    for (uint32_t p = 0; p < 2; ++p) {
      std::optional<Status> s;
      ftl::FormatOptions fo;
      // 512-byte sectors in the first seed (partial-page reads through the controller),
      // 4 KiB otherwise (the die-failure seed needs them: parity metadata).
      fo.sector_bytes = seed == 1 ? 512 : 4096;
      if (kill && p == 0) {  // room to stay writable on three dies
        fo.reserve = ftl::ReserveMode::kCustom;
        fo.spare_percent = 80;
      }
      ftl::Ftl::Format(*pipes[p], clock, fo, [&](Status x) { s = x; });
      clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
      ASSERT_TRUE(s && s->ok()) << (s ? s->ToString() : "format never finished");
      attach(p);
      if (HasFatalFailure()) return;
    }
    std::map<uint64_t, Model> model[2];
    uint64_t issue = 0, version = 0;
    const uint32_t sb = ftls[0]->sector_bytes();
    auto content = [&](uint32_t p, uint64_t lba, uint64_t v) {
      std::vector<uint8_t> d(sb, 0);
      if (v != 0) Rng((uint64_t{p} << 60) ^ (lba * 1000003) ^ v).Fill(d.data(), sb);
      return d;
    };
    for (int round = 0; round < 4; ++round) {
      std::vector<std::shared_ptr<std::vector<uint8_t>>> bufs;
      int pending = 0;
      const int ops = static_cast<int>(rng.Range(30, 60));
      for (int i = 0; i < ops; ++i) {
        if (kill && round == 1 && i == kill_op) {
          card->KillLun(0, kill_lun);
          die_failed = true;
        }
        const uint32_t p = static_cast<uint32_t>(rng.Below(2));
        auto& f = *ftls[p];
        const uint64_t span = std::max<uint64_t>(8, f.sectors() / 2);
        const uint64_t lba = rng.Below(span);
        const uint64_t kind = rng.Below(100), is = ++issue;
        ++pending;
        if (kind < 70) {
          const uint64_t v = ++version;
          auto buf = std::make_shared<std::vector<uint8_t>>(content(p, lba, v));
          bufs.push_back(buf);
          f.Write(lba, 1, buf->data(), rng.Bernoulli(0.1), [&, p, lba, v, is](Status s) {
            --pending;
            ASSERT_TRUE(s.ok()) << "write " << lba << ": " << s.ToString();
            ++acked;
            if (is > model[p][lba].issue) model[p][lba] = Model{v, is};
          });
        } else if (kind < 80) {
          f.Trim(lba, 1, [&, p, lba, is](Status s) {
            --pending;
            ASSERT_TRUE(s.ok()) << "trim " << lba << ": " << s.ToString();
            if (is > model[p][lba].issue) model[p][lba] = Model{0, is};
          });
        } else if (kind < 95) {
          auto buf = std::make_shared<std::vector<uint8_t>>(sb);
          bufs.push_back(buf);
          f.Read(lba, 1, buf->data(), [&](Status s) {
            --pending;
            EXPECT_TRUE(s.ok()) << s.ToString();
          });
        } else {
          f.Flush([&](Status s) {
            --pending;
            EXPECT_TRUE(s.ok()) << s.ToString();
          });
        }
        if (rng.Bernoulli(0.2)) clock.RunFor(rng.Range(0, 200 * kUs));
      }
      clock.RunUntilTrue([&] { return pending == 0; }, kMaxEvents);
      ASSERT_EQ(pending, 0) << "seed " << seed << " round " << round << ": requests never completed";
      uint64_t action = rng.Below(3);
      // After the die failure only clean restarts and live checks: a scanning attach
      // would read every page of the dead die, each costing RB_TIMEOUT of device time
      // (seconds of co-simulation per page).
      if (die_failed && action == 2) action = 1;
      if (round == 1 && !kill) action = 2;  // every run has a host crash
      for (uint32_t p = 0; p < 2; ++p) {
        if (action == 1) {  // clean restart of the host side
          std::optional<Status> s;
          ftls[p]->Shutdown([&](Status x) { s = x; });
          clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
          ASSERT_TRUE(s && s->ok());
          attach(p);
          ASSERT_TRUE(ftls[p]->attach_info().from_checkpoint);
        } else if (action == 2) {
          // Host crash: the FTL and the host's side of the pipe go without a shutdown,
          // commands of theirs possibly still in the controller (to a dead die, say); a new
          // host takes the rings over and the attach scans.
          ftls[p].reset();
          pipes[p].reset();
          auto np = hw::ControllerPipe::Create(*card, clock, p, card->region_base(p), card->region_bytes());
          ASSERT_TRUE(np.ok()) << np.status().ToString();
          pipes[p] = std::move(np).value();
          std::optional<Status> s;
          pipes[p]->Init([&](Status x) { s = x; });
          clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
          ASSERT_TRUE(s && s->ok()) << (s ? s->ToString() : "Init never finished");
          ++host_crashes;
          attach(p);
          ASSERT_FALSE(ftls[p]->attach_info().from_checkpoint);
        }
        if (HasFatalFailure()) return;
        for (const auto& [lba, m] : model[p]) {
          std::vector<uint8_t> out(sb, 0xAA);
          std::optional<Status> s;
          ftls[p]->Read(lba, 1, out.data(), [&](Status x) { s = x; });
          clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
          ASSERT_TRUE(s && s->ok());
          ASSERT_EQ(out, content(p, lba, m.version))
              << "seed " << seed << " round " << round << " pipe " << p << " sector " << lba << " (action "
              << action << ")";
          ++checked;
        }
      }
    }
    if (kill) {
      const auto st = ftls[0]->flashback_status();
      EXPECT_EQ(st.failed_dies, std::vector<uint32_t>{kill_lun}) << "the dead die was not taken out";
      EXPECT_EQ(st.rebuild_lebs_left, 0u) << "the rebuild did not finish";
      rebuilt = st.rebuilt_pages;
    }
    for (uint32_t p = 0; p < 2; ++p) {
      std::optional<Status> s;
      ftls[p]->Shutdown([&](Status x) { s = x; });
      clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
      ASSERT_TRUE(s && s->ok());
    }
  }
  const uint64_t corrected = pipes[0]->stats().corrected_bits + pipes[1]->stats().corrected_bits;
  const uint64_t flipped = store0.stats().bits_flipped + store1.stats().bits_flipped;
  std::printf("%d seeds: %llu writes acknowledged, %llu sector checks; pipe 0: %llu commands, %llu ticks; "
              "%llu cycles co-simulated (%.1f ms of device time); checker violations %d; %u factory bad "
              "blocks; %llu pages sensed with %llu raw bit errors, %llu bits corrected by the RTL's ECC (as counted by the hosts alive at the end), "
              "%llu uncorrectable reads; die failure: %s, %llu pages rebuilt from parity, %llu commands timed out; "
              "%llu host crashes\n",
              seeds, static_cast<unsigned long long>(acked), static_cast<unsigned long long>(checked),
              static_cast<unsigned long long>(pipes[0]->stats().commands),
              static_cast<unsigned long long>(pipes[0]->stats().ticks),
              static_cast<unsigned long long>(card->cycles()), static_cast<double>(card->now_ns()) / 1e6,
              card->timing_violations(), factory_bad,
              static_cast<unsigned long long>(store0.stats().pages_sensed + store1.stats().pages_sensed),
              static_cast<unsigned long long>(flipped), static_cast<unsigned long long>(corrected),
              static_cast<unsigned long long>(pipes[0]->stats().uncorrectable + pipes[1]->stats().uncorrectable),
              die_failed ? "yes" : "no", static_cast<unsigned long long>(rebuilt),
              static_cast<unsigned long long>(pipes[0]->stats().timeouts), static_cast<unsigned long long>(host_crashes));
  for (const auto& [what, n] : card->violations()) std::printf("checker: %s x%d\n", what.c_str(), n);
  EXPECT_EQ(card->timing_violations(), 0);
  EXPECT_GT(checked, 50u);
  if (profile->reliability.rber_base >= 1e-5) {
    EXPECT_GT(corrected, 0u);
  }
}

}  // namespace
}  // namespace vsl::testing
