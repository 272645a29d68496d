// The simulated card's own cost, so later issues know what the model adds to the host's
// measurements.
//
//   BM_MemcpyPageBaseline   copy one page in and out (what any model of a page must do)
//   BM_VirtualClockEvent    schedule and run one timer on the VirtualClock
//   BM_CardNullTiming       program + read one page per item, ops complete at once
//   BM_CardVirtualTime      the same with the duo-slc timing model, in virtual time
//
// Items are pages (one program and one read each; an erase per block). The card image
// lives in a memory-backed directory (/dev/shm when present) so disk speed does not
// enter. bench/report.py turns the JSON output into ratios against the baseline.
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/simcard/sim_card.h"

namespace vsl {
namespace {

namespace fs = std::filesystem;

std::string BenchDir(const std::string& tag) {
  const std::string base = fs::exists("/dev/shm") ? "/dev/shm" : fs::temp_directory_path().string();
  return base + "/openvsl-bench-" + tag + "-" + std::to_string(::getpid());
}

void BM_MemcpyPageBaseline(benchmark::State& state) {
  const std::size_t page = 8192 + 240;
  std::vector<uint8_t> host(page), card(page), back(page);
  Rng(1).Fill(host.data(), page);
  for (auto _ : state) {
    std::memcpy(card.data(), host.data(), page);
    benchmark::ClobberMemory();
    std::memcpy(back.data(), card.data(), page);
    benchmark::DoNotOptimize(back.data());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_MemcpyPageBaseline);

void BM_VirtualClockEvent(benchmark::State& state) {
  VirtualClock clock(1);
  uint64_t n = 0;
  for (auto _ : state) {
    clock.After(100, [&n] { ++n; });
    clock.Step();
  }
  benchmark::DoNotOptimize(n);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_VirtualClockEvent);

// Writes and reads pages across all 24 dies of pipe 0 of a duo-slc-small card, 24 pages
// in flight (one per die), erasing each die's block when it fills.
void CardLoop(benchmark::State& state, bool null_timing) {
  const std::string dir = BenchDir(null_timing ? "null" : "virt");
  fs::remove_all(dir);
  auto profile = simcard::FindProfile("duo-slc-small").value();
  simcard::CreateOptions co;
  co.blocks_per_lun = 8;
  if (!simcard::SimCard::Create(dir, profile, co).ok()) {
    state.SkipWithError("cannot create card");
    return;
  }
  VirtualClock clock(1);
  simcard::SimCardOptions so;
  so.null_timing = null_timing;
  auto card = std::move(simcard::SimCard::Open(dir, clock, so).value());
  const auto& g = card->geometry();
  const uint32_t dies = g.dies_per_pipe();
  std::vector<uint32_t> block(dies), page(dies, 0);
  for (uint32_t d = 0; d < dies; ++d) {
    uint32_t b = 1;
    while (card->block_info(0, d, b).factory_bad) ++b;
    block[d] = b;
    card->pipe(0).Erase(d, b, [](const nand::Completion&) {});
  }
  clock.RunUntilIdle();
  std::vector<uint8_t> data(g.page_data_bytes), out(uint64_t{g.page_data_bytes} * dies);
  Rng(2).Fill(data.data(), data.size());
  uint64_t pages = 0, failures = 0;
  const TimeNs t0 = clock.Now();
  for (auto _ : state) {
    // One item per die per iteration batch: program then read back, all dies at once.
    for (uint32_t d = 0; d < dies; ++d) {
      if (page[d] == g.pages_per_block) {
        card->pipe(0).Erase(d, block[d], [&](const nand::Completion& c) { failures += !c.ok(); });
        page[d] = 0;
      }
      const nand::Ppa ppa{d, block[d], page[d]++};
      card->pipe(0).Program({ppa, data.data(), nullptr}, nullptr,
                            [&](const nand::Completion& c) { failures += !c.ok(); });
      card->pipe(0).Read({ppa, 0, 0, out.data() + uint64_t{d} * g.page_data_bytes, nullptr},
                         [&](const nand::Completion& c) { failures += !c.ok(); });
    }
    clock.RunUntilIdle();
    pages += dies;
  }
  const double virt_s = static_cast<double>(clock.Now() - t0) / 1e9;
  state.SetItemsProcessed(static_cast<int64_t>(pages));
  state.counters["failures"] = static_cast<double>(failures);
  if (!null_timing && virt_s > 0) {
    // Simulated card throughput (program + read bytes per simulated second) and how much
    // virtual time one wall second simulates.
    state.counters["sim_MBps"] = static_cast<double>(pages) * g.page_data_bytes * 2 / virt_s / 1e6;
    state.counters["virt_per_wall"] =
        benchmark::Counter(virt_s, benchmark::Counter::kIsRate);
  }
  card.reset();
  fs::remove_all(dir);
}

void BM_CardNullTiming(benchmark::State& state) { CardLoop(state, true); }
void BM_CardVirtualTime(benchmark::State& state) { CardLoop(state, false); }
BENCHMARK(BM_CardNullTiming)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CardVirtualTime)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vsl

BENCHMARK_MAIN();
