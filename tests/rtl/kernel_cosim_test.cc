// The Alveo kernel (rtl/alveo/vsl_kernel.sv: controller + NAND emulators + register split)
// co-simulated in Verilator with an AXI memory model standing for the card's HBM
// (testbench/cosim/kernel_cosim.h), driven by exactly the host path an Alveo card gets
// through XRT: hw::AttachAlveoKernel (vsl/hw/alveo.h: the board set-up and the controller
// protocol; hw::OpenAlveoCard runs it after opening XRT) over a RegMemPort. Faults are
// injected through the emulators' registers, as a test on a card would. One SystemC
// simulation per process: ctest runs each test in its own (--gtest_filter).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "testbench/cosim/kernel_cosim.h"
#include "tests/rtl/cosim_pipes.h"
#include "tests/rtl/ftl_harness.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/hw/alveo.h"
#include "vsl/hw/board.h"
#include "vsl/hw/ctrl_pipe.h"
#include "vsl/hw/regmap.h"
#include "vsl/nand/discover.h"

namespace vsl::testing {
namespace {

namespace em = hw::regs::emu;

class KernelTest : public ::testing::Test {
 protected:
  // The kernel set up as a host attaches to a card: channels at mode 5 for a 200 MHz
  // kernel clock, a 2.5 ms R/B# timeout (above tBERS), the emulators' stores and times.
  void Build(double rber = 0) {
    tb::KernelCosimOptions o;
    if (const char* f = std::getenv("VSL_COSIM_FST")) o.trace_fst = f;
    k_ = tb::KernelCosim::Create(o);
    ASSERT_TRUE(k_);
    hw::AlveoKernelSetup s;
    s.channels.clock_ns = o.clock_ns;
    s.channels.rb_timeout_ns = 2'500'000;
    s.emulator.clock_ns = o.clock_ns;
    s.emulator.rber = rber;
    s.emulator.seed = 7;
    // The attach an Alveo card gets (hw::OpenAlveoCard runs the same after opening XRT).
    hw::AlveoBuffers b;
    for (uint32_t p = 0; p < 2; ++p) {
      b.region_base[p] = k_->region_base(p);
      b.store_base[p] = k_->store_base(p);
    }
    b.region_bytes = k_->region_bytes();
    std::optional<Result<hw::AlveoPipes>> r;
    hw::AttachAlveoKernel(*k_, b, s, clock_, [&](Result<hw::AlveoPipes> x) { r = std::move(x); });
    clock_.RunUntilTrue([&] { return r.has_value(); }, kMaxEvents);
    ASSERT_TRUE(r.has_value() && r->ok()) << (r ? r->status().ToString() : "attach never finished");
    for (uint32_t p = 0; p < 2; ++p) pipes_[p] = std::move((*r)->pipes[p]);
  }
  nand::Completion Wait(const std::function<void(nand::FlashCallback)>& op) {
    std::optional<nand::Completion> c;
    op([&](const nand::Completion& x) { c = x; });
    clock_.RunUntilTrue([&] { return c.has_value(); }, kMaxEvents);
    EXPECT_TRUE(c.has_value()) << "command never completed";
    return c.value_or(nand::Completion{nand::FlashStatus::kAborted});
  }
  nand::Completion Program(uint32_t p, uint32_t die, uint32_t block, uint32_t page, const std::vector<uint8_t>& data,
                           const uint8_t* meta = nullptr) {
    return Wait([&](auto cb) {
      pipes_[p]->Program(nand::ProgramRequest{{die, block, page}, data.data(), meta, false},
                         [](const nand::Completion&) {}, std::move(cb));
    });
  }
  nand::Completion Read(uint32_t p, uint32_t die, uint32_t block, uint32_t page, std::vector<uint8_t>* data,
                        std::vector<uint8_t>* meta = nullptr) {
    data->assign(db(), 0);
    if (meta != nullptr) meta->assign(mb(), 0);
    return Wait([&](auto cb) {
      pipes_[p]->Read(nand::ReadRequest{{die, block, page}, 0, db() / 512, data->data(),
                                        meta != nullptr ? meta->data() : nullptr},
                      std::move(cb));
    });
  }
  std::vector<uint8_t> Pattern(uint32_t die, uint32_t block, uint32_t page, uint32_t n, uint64_t salt = 0) {
    std::vector<uint8_t> v(n);
    Rng((uint64_t{die} << 40) ^ (uint64_t{block} << 20) ^ page ^ (salt << 50)).Fill(v.data(), n);
    return v;
  }
  uint32_t db() const { return pipes_[0]->parameter_page().data_bytes_per_page; }
  uint32_t mb() const { return pipes_[0]->parameter_page().spare_bytes_per_page - 13 * (db() / 512); }
  hw::EmulatorCounters Counters(uint32_t p) {
    auto c = hw::ReadEmulatorCounters(*k_, p);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? *c : hw::EmulatorCounters{};
  }

  VirtualClock clock_{1};
  std::unique_ptr<tb::KernelCosim> k_;
  std::unique_ptr<hw::ControllerPipe> pipes_[2];
};

// Discovery through the emulators' parameter page; every operation on every LUN of both
// pipes; the NAND rules the emulator enforces; pages really in card memory; injected
// program and erase failures; register errors.
TEST_F(KernelTest, EveryOperationThroughTheEmulators) {
  Build();
  auto geo = hw::ReadEmulatorGeometry(*k_, 0);
  ASSERT_TRUE(geo.ok());
  for (uint32_t p = 0; p < 2; ++p) {
    std::optional<Result<nand::DiscoveredPipe>> d;
    nand::DiscoverPipe(*pipes_[p], [&](Result<nand::DiscoveredPipe> r) { d = std::move(r); });
    clock_.RunUntilTrue([&] { return d.has_value(); }, kMaxEvents);
    ASSERT_TRUE(d.has_value() && d->ok()) << (d ? d->status().ToString() : "discovery never finished");
    EXPECT_EQ((*d)->geometry.luns_per_channel, geo->luns);
    EXPECT_EQ((*d)->geometry.blocks_per_lun, geo->blocks);
    EXPECT_EQ((*d)->geometry.pages_per_block, geo->pages);
    EXPECT_EQ((*d)->geometry.page_data_bytes, 4096u);
    EXPECT_TRUE((*d)->silent_dies.empty());
    EXPECT_EQ(pipes_[p]->parameter_page().model, "ALVEO-EMU");
  }
  for (uint32_t p = 0; p < 2; ++p) {
    auto& pipe = *pipes_[p];
    for (uint32_t die = 0; die < 4; ++die) {
      ASSERT_TRUE(Wait([&](auto cb) { pipe.Erase(die, 3, std::move(cb)); }).ok());
      for (uint32_t page = 0; page < 3; ++page) {
        auto data = Pattern(die, 3, page, db(), p), meta = Pattern(die, 3, page + 100, mb(), p);
        meta[0] = 0xFF;
        ASSERT_TRUE(Program(p, die, 3, page, data, meta.data()).ok()) << "p" << p << " die " << die << " page " << page;
        std::vector<uint8_t> rd, rm;
        auto c = Read(p, die, 3, page, &rd, &rm);
        ASSERT_TRUE(c.ok()) << nand::FlashStatusName(c.status);
        EXPECT_EQ(rd, data) << "p" << p << " die " << die << " page " << page;
        EXPECT_EQ(rm, meta);
        // The page is in card memory, where the emulator's store puts it.
        const uint64_t idx = (uint64_t{die} * geo->blocks + 3) * geo->pages + page;
        std::vector<uint8_t> raw(db());
        k_->ReadMem(k_->store_base(p) + idx * geo->stride, raw.data(), raw.size());
        EXPECT_EQ(raw, data) << "store of p" << p << " die " << die << " page " << page;
      }
      // Two codewords from the middle.
      std::vector<uint8_t> part(1024);
      ASSERT_TRUE(Wait([&](auto cb) {
                    pipe.Read(nand::ReadRequest{{die, 3, 1}, 3, 2, part.data(), nullptr}, std::move(cb));
                  }).ok());
      const auto want = Pattern(die, 3, 1, db(), p);
      EXPECT_TRUE(std::equal(part.begin(), part.end(), want.begin() + 3 * 512));
      // Erased pages read 0xFF; a programmed page cannot be programmed again, nor a page
      // out of order (the next is 3), and the data stays.
      std::vector<uint8_t> er;
      ASSERT_TRUE(Read(p, die, 3, 5, &er).ok());
      EXPECT_EQ(er, std::vector<uint8_t>(db(), 0xFF));
      EXPECT_EQ(Program(p, die, 3, 0, Pattern(die, 3, 0, db(), 99)).status, nand::FlashStatus::kProgramFail);
      EXPECT_EQ(Program(p, die, 3, 5, Pattern(die, 3, 5, db(), 99)).status, nand::FlashStatus::kProgramFail);
      std::vector<uint8_t> rd;
      ASSERT_TRUE(Read(p, die, 3, 0, &rd).ok());
      EXPECT_EQ(rd, Pattern(die, 3, 0, db(), p));
      // Erase makes the block programmable from page 0 again.
      ASSERT_TRUE(Wait([&](auto cb) { pipe.Erase(die, 3, std::move(cb)); }).ok());
      ASSERT_TRUE(Read(p, die, 3, 0, &er).ok());
      EXPECT_EQ(er, std::vector<uint8_t>(db(), 0xFF));
      EXPECT_TRUE(Program(p, die, 3, 0, Pattern(die, 3, 0, db(), 5)).ok());
    }
    EXPECT_EQ(Wait([&](auto cb) { pipe.Erase(4, 0, std::move(cb)); }).status, nand::FlashStatus::kInvalidAddress);
  }
  // Injected failures: the next PROGRAM on pipe 1 LUN 2 and the next ERASE on LUN 1.
  ASSERT_TRUE(hw::SetEmulatorFaults(*k_, 1, {0, 1u << 2, 1u << 1}).ok());
  ASSERT_TRUE(Wait([&](auto cb) { pipes_[1]->Erase(2, 7, std::move(cb)); }).ok());
  EXPECT_EQ(Program(1, 2, 7, 0, Pattern(2, 7, 0, db())).status, nand::FlashStatus::kProgramFail);
  EXPECT_EQ(Wait([&](auto cb) { pipes_[1]->Erase(1, 7, std::move(cb)); }).status, nand::FlashStatus::kEraseFail);
  auto f = hw::ReadEmulatorFaults(*k_, 1);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->fail_program, 0u) << "a one-shot failure stays armed";
  EXPECT_EQ(f->fail_erase, 0u);
  EXPECT_TRUE(Program(1, 2, 7, 0, Pattern(2, 7, 0, db())).ok());  // the page was not consumed
  // A LUN is busy until its page is fetched from card memory, not just for tR: with tR
  // cut to one cycle the reads are paced by the store and still return the right data.
  auto timed_read = [&](uint32_t page) {
    std::vector<uint8_t> rd;
    const TimeNs t0 = clock_.Now();
    EXPECT_TRUE(Read(0, 0, 3, page, &rd).ok());
    EXPECT_EQ(rd, Pattern(0, 3, page, db(), 7)) << "page " << page;
    return clock_.Now() - t0;
  };
  ASSERT_TRUE(Wait([&](auto cb) { pipes_[0]->Erase(0, 3, std::move(cb)); }).ok());
  for (uint32_t page = 0; page < 4; ++page) ASSERT_TRUE(Program(0, 0, 3, page, Pattern(0, 3, page, db(), 7)).ok());
  const TimeNs with_tr = timed_read(0) + timed_read(1);
  uint32_t t_r = 0;
  ASSERT_TRUE(k_->Read32(em::At(0, em::kTR), &t_r));
  ASSERT_TRUE(k_->Write32(em::At(0, em::kTR), 1));
  const TimeNs store_paced = timed_read(2) + timed_read(3);
  ASSERT_TRUE(k_->Write32(em::At(0, em::kTR), t_r));
  EXPECT_LT(store_paced, with_tr);
  std::printf("page read, host view: %.1f us with tR 25 us, %.1f us with tR of one cycle (paced by the page "
              "fetch from card memory)\n",
              static_cast<double>(with_tr) / 2e3, static_cast<double>(store_paced) / 2e3);
  // FORMAT erases the whole emulated NAND: pages read 0xFF and block 3 takes page 0 again.
  ASSERT_TRUE(hw::FormatEmulator(*k_, 0).ok());
  std::vector<uint8_t> fmt;
  ASSERT_TRUE(Read(0, 0, 3, 0, &fmt).ok());
  EXPECT_EQ(fmt, std::vector<uint8_t>(db(), 0xFF));
  EXPECT_TRUE(Program(0, 0, 3, 0, Pattern(0, 3, 0, db(), 8)).ok());
  // Register errors answer SLVERR: past the EMU block's registers, past the last block.
  uint32_t v = 0;
  EXPECT_FALSE(k_->Write32(em::At(0, 0x44), 1));
  EXPECT_FALSE(k_->Read32(em::At(2, 0), &v));
  EXPECT_TRUE(k_->Read32(em::At(1, em::kGeometry0), &v));
  for (uint32_t p = 0; p < 2; ++p) {
    const auto c = Counters(p);
    EXPECT_EQ(c.errors, 0u) << "protocol errors on pipe " << p << "'s pins";
    EXPECT_FALSE(c.store_error);
    EXPECT_GT(c.reads, 20u);
    EXPECT_GT(c.programs, 12u);
    EXPECT_GE(c.erases, 8u);
    std::printf("pipe %u emulator: %u reads, %u programs, %u erases; DMA %llu/%llu beats, store %llu/%llu beats "
                "(read/written)\n",
                p, c.reads, c.programs, c.erases, static_cast<unsigned long long>(k_->read_beats(2 * p)),
                static_cast<unsigned long long>(k_->write_beats(2 * p)),
                static_cast<unsigned long long>(k_->read_beats(2 * p + 1)),
                static_cast<unsigned long long>(k_->write_beats(2 * p + 1)));
  }
  std::printf("co-simulated %llu cycles (%.1f ms of device time)\n", static_cast<unsigned long long>(k_->cycles()),
              static_cast<double>(k_->now_ns()) / 1e6);
}

// Raw bit errors corrected by the controller's ECC; a dead die reported by TIMEOUT while
// the others work, and back after its fault is cleared and it is reset; RESET LUN in the
// middle of a program leaves a torn page; an AXI error from the page store is flagged.
TEST_F(KernelTest, BitErrorsDeadDieTornPageAndStoreErrors) {
  Build(2e-4);  // ~0.8 raw bit errors per 512-byte codeword (t = 8)
  auto& pipe = *pipes_[0];
  for (uint32_t die = 0; die < 4; ++die) ASSERT_TRUE(Wait([&](auto cb) { pipe.Erase(die, 2, std::move(cb)); }).ok());
  uint64_t corrected = 0;
  for (uint32_t page = 0; page < 4; ++page) {
    const auto data = Pattern(0, 2, page, db());
    ASSERT_TRUE(Program(0, 0, 2, page, data).ok());
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<uint8_t> rd;
      const auto c = Read(0, 0, 2, page, &rd);
      ASSERT_TRUE(c.ok()) << nand::FlashStatusName(c.status);
      EXPECT_EQ(rd, data);
      corrected += c.corrected_bits;
    }
  }
  const auto c0 = Counters(0);
  EXPECT_GT(c0.flips, 0u);
  EXPECT_GT(corrected, 0u) << "no raw bit error reached the ECC";
  std::printf("%u bits flipped by the emulator, %llu corrected by the controller's ECC\n", c0.flips,
              static_cast<unsigned long long>(corrected));
  // A dead die: its read times out (RB_TIMEOUT 2.5 ms), LUN 0 still works meanwhile.
  ASSERT_TRUE(Program(0, 3, 2, 0, Pattern(3, 2, 0, db())).ok());
  ASSERT_TRUE(hw::SetEmulatorFaults(*k_, 0, {1u << 3, 0, 0}).ok());
  std::optional<nand::Completion> dead;
  std::vector<uint8_t> rd3(db());
  pipe.Read(nand::ReadRequest{{3, 2, 0}, 0, db() / 512, rd3.data(), nullptr},
            [&](const nand::Completion& x) { dead = x; });
  std::vector<uint8_t> rd;
  EXPECT_TRUE(Read(0, 0, 2, 0, &rd).ok());
  EXPECT_FALSE(dead.has_value());
  clock_.RunUntilTrue([&] { return dead.has_value(); }, kMaxEvents);
  ASSERT_TRUE(dead.has_value());
  EXPECT_EQ(dead->status, nand::FlashStatus::kDieTimeout);
  EXPECT_GE(dead->complete_ns - dead->submit_ns, 2'500'000);
  // The die comes back once the fault is cleared and it is reset.
  ASSERT_TRUE(hw::SetEmulatorFaults(*k_, 0, {}).ok());
  EXPECT_TRUE(Wait([&](auto cb) { pipe.Reset(3, std::move(cb)); }).ok());
  EXPECT_TRUE(Read(0, 3, 2, 0, &rd).ok());
  EXPECT_EQ(rd, Pattern(3, 2, 0, db()));
  // RESET LUN in the middle of a program (tPROG 200 us): kAborted, the page torn, the LUN
  // usable.
  const auto data = Pattern(1, 2, 0, db(), 3);
  std::optional<nand::Completion> prog, reset;
  pipe.Program(nand::ProgramRequest{{1, 2, 0}, data.data(), nullptr, false}, [](const nand::Completion&) {},
               [&](const nand::Completion& x) { prog = x; });
  clock_.RunFor(150 * kUs);
  EXPECT_FALSE(prog.has_value());
  pipe.Reset(1, [&](const nand::Completion& x) { reset = x; });
  clock_.RunUntilTrue([&] { return prog.has_value() && reset.has_value(); }, kMaxEvents);
  ASSERT_TRUE(prog && reset);
  EXPECT_EQ(prog->status, nand::FlashStatus::kAborted);
  EXPECT_TRUE(reset->ok());
  const auto tc = Read(0, 1, 2, 0, &rd);
  EXPECT_TRUE(tc.status == nand::FlashStatus::kUncorrectable || rd != data) << "a torn page read back intact";
  EXPECT_TRUE(Program(0, 1, 2, 1, data).ok());
  // An AXI error from card memory under the page store: flagged (STORE_ERROR), cleared by
  // writing 1.
  auto geo = hw::ReadEmulatorGeometry(*k_, 0);
  ASSERT_TRUE(geo.ok());
  const uint64_t idx = (uint64_t{2} * geo->blocks + 2) * geo->pages + 0;
  ASSERT_TRUE(Program(0, 2, 2, 0, data).ok());
  k_->FailMemory(k_->store_base(0) + idx * geo->stride, 64);
  Read(0, 2, 2, 0, &rd);
  EXPECT_TRUE(Counters(0).store_error);
  ASSERT_TRUE(k_->Write32(em::At(0, em::kCtrl), em::kCtrlStoreError.put(0, 1)));
  EXPECT_FALSE(Counters(0).store_error);
  EXPECT_EQ(Counters(0).errors, 0u);
}

// The FTL harness (tests/rtl/ftl_harness.h) on the kernel: both pipes, seeds of concurrent
// I/O with model checks, clean restarts and host crashes, a die killed through the
// emulator's FAULT register in the last seed; raw bit errors at VSL_COSIM_RBER (1e-4).
TEST_F(KernelTest, FtlHarnessOnTheKernel) {
  const char* rber_env = std::getenv("VSL_COSIM_RBER");
  const double rber = rber_env ? std::atof(rber_env) : 1e-4;
  Build(rber);
  if (HasFatalFailure()) return;
  HarnessCard hc{*k_, {k_->region_base(0), k_->region_base(1)}, k_->region_bytes(), [&](uint32_t p, uint32_t l) {
                   auto f = hw::ReadEmulatorFaults(*k_, p);
                   ASSERT_TRUE(f.ok());
                   f->dead |= 1u << l;
                   ASSERT_TRUE(hw::SetEmulatorFaults(*k_, p, *f).ok());
                 }};
  HarnessTotals t;
  const int seeds = HarnessSeeds();
  RunFtlHarness(hc, clock_, pipes_, seeds, &t);
  if (HasFatalFailure()) return;
  const uint64_t corrected = pipes_[0]->stats().corrected_bits + pipes_[1]->stats().corrected_bits;
  const auto e0 = Counters(0), e1 = Counters(1);
  std::printf("%d seeds on the kernel: %llu writes acknowledged, %llu sector checks; %llu cycles co-simulated "
              "(%.1f ms of device time); emulators: %u reads, %u programs, %u erases, %u bits flipped, %u protocol "
              "errors; %llu bits corrected (hosts alive at the end), %llu uncorrectable reads; die failure: %s, "
              "%llu commands timed out; %llu host crashes\n",
              seeds, static_cast<unsigned long long>(t.acked), static_cast<unsigned long long>(t.checked),
              static_cast<unsigned long long>(k_->cycles()), static_cast<double>(k_->now_ns()) / 1e6,
              e0.reads + e1.reads, e0.programs + e1.programs, e0.erases + e1.erases, e0.flips + e1.flips,
              e0.errors + e1.errors, static_cast<unsigned long long>(corrected),
              static_cast<unsigned long long>(pipes_[0]->stats().uncorrectable + pipes_[1]->stats().uncorrectable),
              t.die_failed ? "yes" : "no", static_cast<unsigned long long>(pipes_[0]->stats().timeouts),
              static_cast<unsigned long long>(t.host_crashes));
  EXPECT_EQ(e0.errors + e1.errors, 0u);
  EXPECT_FALSE(e0.store_error || e1.store_error);
  EXPECT_GT(t.checked, 50u);
  if (rber >= 1e-5) {
    EXPECT_GT(e0.flips + e1.flips, 0u);
  }
}

}  // namespace
}  // namespace vsl::testing
