// Host CPU cost of the FTL's I/O paths in null timing (the card completes everything at
// once), against baselines measured in the same run:
//   BM_Memcpy4K         copy one 4 KiB sector (the least any write path does)
//   BM_CardPage4K       program + read one 4 KiB page straight on the card model
//   BM_FtlWrite4K       one 4 KiB random write through the FTL (64 in flight)
//   BM_FtlRead4K        one 4 KiB random read through the FTL (64 in flight)
// The FTL figures include the card model's cost; subtract BM_CardPage4K's share to see
// the FTL's own. Report with bench/report.py --baseline BM_Memcpy4K.
#include <benchmark/benchmark.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace vsl {
namespace {
namespace fs = std::filesystem;

std::string Dir(const char* tag) {
  return (fs::exists("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) +
         "/openvsl-cpu-" + tag + "-" + std::to_string(::getpid());
}

void BM_Memcpy4K(benchmark::State& state) {
  std::vector<uint8_t> a(4096, 1), b(4096);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), 4096);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Memcpy4K);

struct Setup {
  std::string dir;
  VirtualClock clock{1};
  std::unique_ptr<simcard::SimCard> card;
  std::unique_ptr<ftl::Ftl> f;
  explicit Setup(const char* tag, bool with_ftl) : dir(Dir(tag)) {
    fs::remove_all(dir);
    simcard::CreateOptions co;
    co.blocks_per_lun = 32;
    auto p = simcard::FindProfile("test-small").value();
    p.geometry.blocks_per_lun = 256;
    p.geometry.pages_per_block = 64;
    if (!simcard::SimCard::Create(dir, p, co).ok()) std::abort();
    simcard::SimCardOptions so;
    so.null_timing = true;
    card = std::move(simcard::SimCard::Open(dir, clock, so).value());
    if (!with_ftl) return;
    std::optional<Status> st;
    ftl::Ftl::Format(card->pipe(0), clock, {}, [&](Status s) { st = s; });
    clock.RunUntilTrue([&] { return st.has_value(); });
    ftl::Ftl::Open(card->pipe(0), clock, {}, [&](Result<std::unique_ptr<ftl::Ftl>> r) { f = std::move(r).value(); });
    clock.RunUntilTrue([&] { return f != nullptr; });
  }
  ~Setup() {
    f.reset();
    card.reset();
    fs::remove_all(dir);
  }
};

void BM_CardPage4K(benchmark::State& state) {
  Setup s("card", false);
  std::vector<uint8_t> data(4096, 2), out(4096);
  uint32_t block = 1, page = 0;
  s.card->pipe(0).Erase(0, block, [](const nand::Completion&) {});
  for (auto _ : state) {
    if (page == 16) {
      page = 0;
      s.card->pipe(0).Erase(0, block, [](const nand::Completion&) {});
    }
    s.card->pipe(0).Program({{0, block, page}, data.data(), nullptr}, nullptr, [](const nand::Completion&) {});
    s.card->pipe(0).Read({{0, block, page}, 0, 0, out.data(), nullptr}, [](const nand::Completion&) {});
    ++page;
    s.clock.RunUntilIdle();
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CardPage4K);

void BM_FtlWrite4K(benchmark::State& state) {
  Setup s("w", true);
  const uint64_t n = s.f->sectors();
  std::vector<uint8_t> data(4096, 3);
  Rng rng(1);
  uint64_t items = 0;
  for (auto _ : state) {
    for (int i = 0; i < 64; ++i) s.f->Write(rng.Below(n), 1, data.data(), false, [](Status) {});
    s.clock.RunUntilIdle();
    items += 64;
  }
  state.SetItemsProcessed(static_cast<int64_t>(items));
  state.counters["waf"] = s.f->stats().Waf();
}
BENCHMARK(BM_FtlWrite4K)->Unit(benchmark::kMicrosecond);

void BM_FtlRead4K(benchmark::State& state) {
  Setup s("r", true);
  const uint64_t n = s.f->sectors();
  std::vector<uint8_t> data(uint64_t{64} * 4096, 4);
  for (uint64_t l = 0; l + 64 <= n; l += 64) s.f->Write(l, 64, data.data(), false, [](Status) {});
  s.clock.RunUntilIdle();
  Rng rng(2);
  std::vector<uint8_t> out(uint64_t{64} * 4096);
  uint64_t items = 0, errors = 0;
  for (auto _ : state) {
    for (int i = 0; i < 64; ++i) {
      s.f->Read(rng.Below(n - 1), 1, out.data() + uint64_t(i) * 4096, [&](Status st) { errors += !st.ok(); });
    }
    s.clock.RunUntilIdle();
    items += 64;
  }
  state.SetItemsProcessed(static_cast<int64_t>(items));
  state.counters["failures"] = static_cast<double>(errors);
}
BENCHMARK(BM_FtlRead4K)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace vsl

BENCHMARK_MAIN();
