// The FTL on the co-simulated controller, both pipes: the harness of
// tests/rtl/ftl_harness.h (seeds of concurrent writes, trims, reads and flushes, model
// checks, clean restarts and host crashes, a die failure in the last seed). The dies are
// the C++ pin-level targets with the ONFI timing checker; they keep their pages in a
// simulated-card image with the card's error and fault model
// (testbench/cosim/image_store.h). VSL_COSIM_SEEDS sets the seed count (default 2).
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "tests/rtl/cosim_pipes.h"
#include "tests/rtl/ftl_harness.h"
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

// A simulated-card image of the co-simulated card's shape (test-small's reliability,
// `rber` raw bit errors, `bad` factory bad blocks) behind both pipes' dies: the card's
// error and fault model on every page the RTL senses.
struct ImageCard {
  TempDir tmp;
  simcard::Profile profile;
  std::unique_ptr<simcard::ControllerImage> image;
  std::unique_ptr<tb::ImageStore> stores[2];
  std::unique_ptr<tb::CosimCard> card;
  uint32_t factory_bad = 0;
};
void MakeImageCard(ImageCard& c, double rber, double bad, const char* serial, uint64_t seed) {
  auto profile = simcard::FindProfile("test-small");
  ASSERT_TRUE(profile.ok());
  c.profile = *profile;
  auto& g = c.profile.geometry;
  const tb::CosimOptions dflt;
  g.pipes_per_controller = 2;
  g.channels_per_pipe = 1;
  g.luns_per_channel = dflt.luns;
  g.blocks_per_lun = dflt.blocks;
  g.pages_per_block = dflt.pages_per_block;
  g.page_data_bytes = dflt.page_data_bytes;
  g.page_spare_bytes = dflt.page_spare_bytes;
  c.profile.reliability.factory_bad_fraction = bad;
  c.profile.reliability.rber_base = rber;
  auto image = simcard::ControllerImage::Create(c.tmp.Sub("cosim.img"), c.profile, 0, 1, serial, seed);
  ASSERT_TRUE(image.ok()) << image.status().ToString();
  c.image = std::move(image).value();
  for (uint32_t d = 0; d < g.dies_per_controller(); ++d) {
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
      c.factory_bad += (c.image->block(d, b).flags & simcard::format::kBlockFactoryBad) != 0;
    }
  }
  tb::CosimOptions co = CosimTestOptions();
  for (uint32_t p = 0; p < 2; ++p) {
    c.stores[p] = std::make_unique<tb::ImageStore>(*c.image, c.profile.reliability, 4 * p, seed + 4 + p);
    co.stores[p] = c.stores[p].get();
  }
  c.card = tb::CosimCard::Create(co);
  ASSERT_TRUE(c.card);
}

TEST(CosimFtlTest, FtlHarnessDualPipe) {
  VirtualClock clock(1);
  // The dies' pages in a simulated-card image with the card's error model at a raw bit
  // error rate that makes the RTL's ECC correct bits on most reads (VSL_COSIM_RBER,
  // default 1e-4), and 5% factory bad blocks.
  const char* rber = std::getenv("VSL_COSIM_RBER");
  ImageCard ic;
  MakeImageCard(ic, rber ? std::atof(rber) : 1e-4, 0.05, "COSIM-0001", 7);
  if (HasFatalFailure()) return;
  auto& card = ic.card;
  auto* profile = &ic.profile;
  const uint32_t factory_bad = ic.factory_bad;
  tb::ImageStore& store0 = *ic.stores[0];
  tb::ImageStore& store1 = *ic.stores[1];
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

// The groomer relocating by copy through the Verilated controller (issue 30): pipe 0 of
// the co-simulated card, FlashBack parity formed in the controller's accumulators, a cold
// set written once and a hot set rewritten until the groomer has copied several LEBs'
// live sectors inside the card (the sources sensed with the error model's raw bit errors
// and corrected by the RTL's ECC on the way). Every sector is checked against the model
// live, after a clean restart (checkpoint) and after a host crash (scan: the copied
// pages' metadata must say what they hold).
TEST(CosimFtlTest, GroomerRelocatesByCopy) {
  VirtualClock clock(1);
  ImageCard ic;
  MakeImageCard(ic, 1e-4, 0, "COSIM-0002", 17);
  if (HasFatalFailure()) return;
  auto& card = ic.card;
  std::unique_ptr<hw::ControllerPipe> pipes[2];
  OpenCosimPipes(*card, clock, pipes);
  if (HasFatalFailure()) return;
  ASSERT_GE(pipes[0]->copy_accumulators(), 4u);
  std::optional<Status> fs;
  ftl::FormatOptions fo;
  fo.sector_bytes = 4096;
  ftl::Ftl::Format(*pipes[0], clock, fo, [&](Status x) { fs = x; });
  clock.RunUntilTrue([&] { return fs.has_value(); }, kMaxEvents);
  ASSERT_TRUE(fs && fs->ok()) << (fs ? fs->ToString() : "format never finished");
  std::unique_ptr<ftl::Ftl> f;
  auto attach = [&] {
    f.reset();
    std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
    ftl::Ftl::Open(*pipes[0], clock, {}, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
    clock.RunUntilTrue([&] { return r.has_value(); }, kMaxEvents);
    ASSERT_TRUE(r.has_value() && r->ok()) << (r ? r->status().ToString() : "open never finished");
    f = std::move(*r).value();
  };
  attach();
  if (HasFatalFailure()) return;
  const uint32_t sb = f->sector_bytes();
  std::map<uint64_t, uint64_t> model;  // lba -> version
  auto content = [&](uint64_t lba, uint64_t v) {
    std::vector<uint8_t> d(sb);
    Rng((lba * 1000003) ^ (v << 20)).Fill(d.data(), sb);
    return d;
  };
  // Writes of distinct sectors, all in flight together (the dies overlap).
  auto write = [&](const std::vector<uint64_t>& lbas, uint64_t* version) {
    int pending = 0;
    for (uint64_t lba : lbas) {
      const uint64_t v = ++*version;
      auto buf = std::make_shared<std::vector<uint8_t>>(content(lba, v));
      ++pending;
      f->Write(lba, 1, buf->data(), false, [&pending, buf, lba](Status x) {
        --pending;
        ASSERT_TRUE(x.ok()) << "write " << lba << ": " << x.ToString();
      });
      model[lba] = v;
    }
    clock.RunUntilTrue([&] { return pending == 0; }, kMaxEvents);
    ASSERT_EQ(pending, 0) << "writes never completed";
  };
  auto check = [&](const char* when) {
    for (const auto& [lba, v] : model) {
      std::vector<uint8_t> out(sb, 0xAA);
      std::optional<Status> s;
      f->Read(lba, 1, out.data(), [&](Status x) { s = x; });
      clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
      ASSERT_TRUE(s && s->ok()) << when << ": read " << lba;
      ASSERT_EQ(out, content(lba, v)) << when << ": sector " << lba;
    }
  };
  // A cold third of the sectors once, then the hot ones over and over: the victims the
  // groomer picks hold cold sectors, which it must move.
  Rng rng(5);
  const uint64_t cold = f->sectors() / 3, hot = 24;
  uint64_t version = 0;
  std::vector<uint64_t> batch;
  int writes = 0;
  // Cold sectors interleaved with hot ones (two in eight), so the LEBs they land in
  // become the groomer's victims once the hot ones are overwritten.
  for (uint64_t lba = hot; lba < hot + cold; lba += 2) {
    batch.assign({lba, std::min(lba + 1, hot + cold - 1)});
    const uint64_t first = rng.Below(hot);
    for (uint64_t i = 0; i < 6; ++i) batch.push_back((first + i * 5) % hot);
    write(batch, &version);
    if (HasFatalFailure()) return;
  }
  while (f->stats().gc_copy_sectors < cold / 2 && writes < 4000) {
    batch.clear();
    const uint64_t first = rng.Below(hot);
    for (uint64_t i = 0; i < 8; ++i) batch.push_back((first + i * 3) % hot);
    write(batch, &version);
    if (HasFatalFailure()) return;
    writes += 8;
  }
  const ftl::FtlStats st = f->stats();
  const hw::ControllerPipe::Stats& ps = pipes[0]->stats();
  std::printf("%d more hot writes after %llu cold: %llu victims, %llu sectors relocated (%llu by copy in %llu copy "
              "pages, %llu fallbacks); controller: %llu copies (%llu failed), %llu parity takes, %llu bits "
              "corrected, %.1f ms of device time\n",
              writes, static_cast<unsigned long long>(cold), static_cast<unsigned long long>(st.victims),
              static_cast<unsigned long long>(st.gc_write_sectors), static_cast<unsigned long long>(st.gc_copy_sectors),
              static_cast<unsigned long long>(st.copy_pages), static_cast<unsigned long long>(st.copy_fallbacks),
              static_cast<unsigned long long>(ps.copies), static_cast<unsigned long long>(ps.copy_fails),
              static_cast<unsigned long long>(ps.acc_takes), static_cast<unsigned long long>(ps.corrected_bits),
              static_cast<double>(card->now_ns()) / 1e6);
  EXPECT_GE(st.gc_copy_sectors, cold / 2) << "the groomer did not relocate by copy";
  EXPECT_GT(ps.acc_takes, 0u) << "no parity page formed in the controller";
  check("live");
  if (HasFatalFailure()) return;
  std::optional<Status> s;
  f->Shutdown([&](Status x) { s = x; });
  clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
  ASSERT_TRUE(s && s->ok());
  // Quiesced: every copy page the groomer sent was one copy in the controller.
  EXPECT_EQ(f->stats().copy_pages, pipes[0]->stats().copies);
  EXPECT_LE(pipes[0]->stats().copy_fails, f->stats().copy_fallbacks);
  attach();
  if (HasFatalFailure()) return;
  ASSERT_TRUE(f->attach_info().from_checkpoint);
  check("after a clean restart");
  if (HasFatalFailure()) return;
  // A host crash with writes still in flight, then a scanning attach.
  for (int i = 0; i < 8; ++i) {
    auto buf = std::make_shared<std::vector<uint8_t>>(content(1000 + i, 1));
    f->Write(hot + cold + i, 1, buf->data(), false, [buf](Status) {});
  }
  clock.RunFor(30 * kUs);
  // The host side crashes as the FTL's contract has it (Abandon, then destroy once nothing
  // of it is scheduled): a destroyed FTL's pad timer fired into freed memory (ASan).
  f->Abandon();
  clock.RunUntilTrue([&] { return f->Quiescent(); }, kMaxEvents);
  ASSERT_TRUE(f->Quiescent());
  f.reset();
  pipes[0].reset();
  auto np = hw::ControllerPipe::Create(*card, clock, 0, card->region_base(0), card->region_bytes());
  ASSERT_TRUE(np.ok()) << np.status().ToString();
  pipes[0] = std::move(np).value();
  std::optional<Status> is;
  pipes[0]->Init([&](Status x) { is = x; });
  clock.RunUntilTrue([&] { return is.has_value(); }, kMaxEvents);
  ASSERT_TRUE(is && is->ok());
  attach();
  if (HasFatalFailure()) return;
  ASSERT_FALSE(f->attach_info().from_checkpoint);
  check("after a host crash");
  EXPECT_EQ(card->timing_violations(), 0);
}

}  // namespace
}  // namespace vsl::testing
