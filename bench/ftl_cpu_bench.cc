// Host CPU cost of the FTL's I/O paths on a zero-time card (null timing: NAND operations
// complete as soon as their data has moved), against baselines measured in the same run:
//   BM_Memcpy4K       copy one 4 KiB buffer, hot in cache
//   BM_CopyCold4K     copy 4 KiB between random places of two 1 GiB buffers: one cold
//                     4 KiB copy, the least a write or read path can do over a working
//                     set larger than the caches
//   BM_CopyCrcCold4K/k  the same copy with its CRC-32C in one pass, per CRC kernel k
//   BM_Crc4K/k        CRC-32C of a 4 KiB buffer in cache, per CRC kernel k
//   BM_CardPage4K     program + read one 4 KiB page straight on the card model
//   BM_FtlWrite4K     4 KiB random writes through the FTL over the whole pipe, filled
//                     and then randomly written twice over first (the groomer at its
//                     steady state: `waf` is the measured window's), 64 in flight
//   BM_FtlRead4K      4 KiB random reads over the whole (filled) pipe, 64 in flight
//
// The FTL's own share: every flash command the FTL issues (from format on) is recorded;
// after the measured loop the same commands, in the same order, are replayed on a fresh
// identical card without the FTL, and the measured window's replay is timed. The FTL's own
// CPU per I/O is the loop's user CPU time minus the replay's, per I/O (counters
// `total_us`, `card_us`, `ftl_us`; `ftl_per_cold_copy` divides by BM_CopyCold4K's figure
// from the same run, which runs first). Report with bench/report.py --baseline BM_CopyCold4K.
// Heap allocations are counted the same way (this binary's operator new counts them):
// `allocs_per_io` over the loop, `ftl_allocs_per_io` minus the replay's.
//
//   ftl_cpu_bench [--blocks=N] [--rounds=R] [benchmark flags]
//     N blocks per die (default 1024: a 1 GiB pipe); R rounds of 64 I/Os measured (400)
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <new>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>  // the measured loops alone: valgrind --tool=callgrind --instr-atstart=no
// (with VSL_CALLGRIND_REPLAY=1 the replays of their windows instead: the loop's
// instructions less the replay's are the FTL's own, counted exactly)
#else
#define CALLGRIND_START_INSTRUMENTATION do {} while (0)
#define CALLGRIND_STOP_INSTRUMENTATION do {} while (0)
#endif

#include "vsl/core/clock.h"
#include "vsl/core/crc.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace vsl {
namespace {
namespace fs = std::filesystem;
uint64_t g_allocs = 0;  // operator new calls (the benchmarks run on one thread)

uint32_t g_blocks = 1024;
int64_t g_rounds = 400;  // rounds of 64 I/Os measured per FTL benchmark
double g_cold_copy_ns = 0;  // BM_CopyCold4K's figure, for the ratio
// Which window callgrind instruments (VSL_CALLGRIND_REPLAY=1: the card replay's).
const bool g_callgrind_replay = [] {
  const char* e = std::getenv("VSL_CALLGRIND_REPLAY");
  return e != nullptr && std::string(e) == "1";
}();
void StartLoopInstrumentation() {
  if (!g_callgrind_replay) CALLGRIND_START_INSTRUMENTATION;
}
void StopLoopInstrumentation() {
  if (!g_callgrind_replay) CALLGRIND_STOP_INSTRUMENTATION;
}

std::string Dir(const char* tag) {
  return (fs::exists("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) +
         "/openvsl-cpu-" + tag + "-" + std::to_string(::getpid());
}

// User CPU of this thread. The system time (page faults of the card image in /dev/shm,
// which differ between a card touched by the fill and a fresh replay card) is left out:
// it is the kernel's work for the card model's storage, not the FTL's.
double ThreadCpuNs() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec) * 1e9 + static_cast<double>(ru.ru_utime.tv_usec) * 1e3;
}
// User and system CPU of this thread: what the whole I/O cost, the kernel's work for the
// card image's storage included (reported beside, as `all_us`).
double ThreadAllCpuNs() {
  rusage ru{};
  getrusage(RUSAGE_THREAD, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e9 +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e3;
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

// Two 1 GiB buffers, touched (no page faults in the loops), shared by the cold loops.
struct ColdBuffers {
  static constexpr uint64_t kBytes = uint64_t{1} << 30, kSlots = kBytes / 4096;
  std::vector<uint8_t> a = std::vector<uint8_t>(kBytes, 1), b = std::vector<uint8_t>(kBytes, 2);
};
ColdBuffers& Cold() {
  static ColdBuffers c;
  return c;
}

void BM_CopyCold4K(benchmark::State& state) {
  ColdBuffers& c = Cold();
  Rng rng(5);
  const double t0 = ThreadCpuNs();
  for (auto _ : state) {
    std::memcpy(c.b.data() + rng.Below(c.kSlots) * 4096, c.a.data() + rng.Below(c.kSlots) * 4096, 4096);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  // The ratio's unit: this loop's own user CPU per copy (the same clock as the FTL's
  // figures), not an assumed length of the run.
  g_cold_copy_ns = state.iterations() ? (ThreadCpuNs() - t0) / static_cast<double>(state.iterations()) : 0;
  state.counters["cpu_ns"] = g_cold_copy_ns;
}
BENCHMARK(BM_CopyCold4K);

// The sector check on the write path, per CRC-32C kernel (vsl/core/crc.h): the same cold
// copy with its CRC taken in the same pass (Crc32cCopy, BM_CopyCrcCold4K/<kernel>), and the
// CRC alone of a 4 KiB buffer in cache (BM_Crc4K/<kernel>, the read path's check of the
// page its DMA has just landed). Arguments index Crc32cKernels(); the label names it.
void BM_CopyCrcCold4K(benchmark::State& state) {
  const Crc32cKernel& k = Crc32cKernels()[static_cast<std::size_t>(state.range(0))];
  ColdBuffers& c = Cold();
  Rng rng(5);
  uint32_t sum = 0;
  const double t0 = ThreadCpuNs();
  for (auto _ : state) {
    sum += k.copy(c.b.data() + rng.Below(c.kSlots) * 4096, c.a.data() + rng.Below(c.kSlots) * 4096, 4096, 0);
    benchmark::ClobberMemory();
  }
  benchmark::DoNotOptimize(sum);
  state.SetItemsProcessed(state.iterations());
  state.SetLabel(k.name);
  const double ns = state.iterations() ? (ThreadCpuNs() - t0) / static_cast<double>(state.iterations()) : 0;
  state.counters["cpu_ns"] = ns;
  if (g_cold_copy_ns > 0) state.counters["per_cold_copy"] = ns / g_cold_copy_ns;
}
BENCHMARK(BM_CopyCrcCold4K)->DenseRange(0, static_cast<int64_t>(Crc32cKernels().size()) - 1);

void BM_Crc4K(benchmark::State& state) {
  const Crc32cKernel& k = Crc32cKernels()[static_cast<std::size_t>(state.range(0))];
  std::vector<uint8_t> a(4096);
  Rng(6).Fill(a.data(), a.size());
  uint32_t sum = 0;
  for (auto _ : state) {
    sum += k.crc(a.data(), a.size(), sum);
    benchmark::DoNotOptimize(sum);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * 4096);
  state.SetLabel(k.name);
}
BENCHMARK(BM_Crc4K)->DenseRange(0, static_cast<int64_t>(Crc32cKernels().size()) - 1);

// Forwards to the card's pipe and records every command that changes or reads flash,
// with what it asks of the controller's accumulators, so that the replay makes the card
// do the same work. Offers the card's copy and accumulators unless `host_path`: then the
// FTL relocates through host memory and forms parity itself (its fallback for a pipe
// without them), as BM_FtlWrite4KHostPath measures.
class TracingPipe final : public nand::FlashPipe {
 public:
  struct Cmd {
    enum Kind : uint8_t { kRead, kProgram, kErase, kStage, kClearStage, kCopy, kClearAcc } kind;
    bool with_data = false;  // a program or stage the host sent data for (not a parity page
                             // its accumulator alone forms)
    uint32_t slot = 0;       // a stage slot, a copy's index in `copies`, an accumulator, a
                             // read's codewords (first << 16 | count)
    // The page addressed (every kind's `ppa`); for programs and stages the whole request
    // (fence, accumulator operation) with its buffers left out: the replay brings its own.
    nand::ProgramRequest req{};
  };
  TracingPipe(nand::FlashPipe& in, bool host_path) : in_(in), host_path_(host_path) {}
  // A copy's request, its gathered segments in `segments` from `first`.
  struct CopyRec {
    nand::Ppa src, dst;
    uint32_t acc, first, count;
  };
  std::vector<Cmd> trace;
  std::vector<CopyRec> copies;
  std::vector<nand::CopySegment> segments;
  // Room for `ios` more I/Os' commands, so that the measured loop's tracing neither
  // reallocates nor copies what it holds, nor takes the page faults of memory it touches
  // first (each would count as the FTL's): the room is written once here, then given back.
  void Reserve(uint64_t ios) {
    Prefault(trace, ios * 8);
    Prefault(copies, ios * 4);
    Prefault(segments, ios * 8);
  }
  template <typename V>
  static void Prefault(V& v, uint64_t more) {
    const std::size_t n = v.size();
    v.resize(n + more);
    v.resize(n);
  }

  const nand::PipeTopology& topology() const override { return in_.topology(); }
  nand::PlpState plp_state() const override { return in_.plp_state(); }
  void Read(const nand::ReadRequest& r, nand::FlashCallback done) override {
    // The range read (codewords; 0 and 0: the whole page) and whether its data is wanted
    // (a metadata-only read's is not): the replay reads the same.
    Cmd c = At(Cmd::kRead, r.ppa, r.first_sector << 16 | (r.sector_count & 0xFFFF));
    c.with_data = r.data != nullptr;
    trace.push_back(c);
    in_.Read(r, std::move(done));
  }
  void Program(const nand::ProgramRequest& r, nand::FlashCallback acc, nand::FlashCallback done) override {
    trace.push_back(Of(Cmd::kProgram, r, 0));
    in_.Program(r, std::move(acc), std::move(done));
  }
  void Erase(uint32_t die, uint32_t block, nand::FlashCallback done) override {
    trace.push_back(At(Cmd::kErase, {die, block, 0}));
    in_.Erase(die, block, std::move(done));
  }
  void Reset(uint32_t die, nand::FlashCallback done) override { in_.Reset(die, std::move(done)); }
  void ReadId(uint32_t die, uint8_t a, uint8_t* out, uint32_t len, nand::FlashCallback done) override {
    in_.ReadId(die, a, out, len, std::move(done));
  }
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, nand::FlashCallback done) override {
    in_.ReadParameterPage(die, out, len, std::move(done));
  }
  uint32_t stage_slots() const override { return in_.stage_slots(); }
  void Stage(uint32_t slot, const nand::ProgramRequest& r, nand::FlashCallback acc, nand::FlashCallback done) override {
    trace.push_back(Of(Cmd::kStage, r, slot));
    in_.Stage(slot, r, std::move(acc), std::move(done));
  }
  void ClearStage(uint32_t slot) override {
    trace.push_back(At(Cmd::kClearStage, {}, slot));
    in_.ClearStage(slot);
  }
  uint32_t copy_accumulators() const override { return host_path_ ? 0 : in_.copy_accumulators(); }
  void ClearAccumulator(uint32_t acc) override {
    trace.push_back(At(Cmd::kClearAcc, {}, acc));
    in_.ClearAccumulator(acc);
  }
  void Copy(const nand::CopyRequest& r, nand::FlashCallback acc, nand::FlashCallback done) override {
    trace.push_back(At(Cmd::kCopy, r.dst, static_cast<uint32_t>(copies.size())));
    copies.push_back({r.src, r.dst, r.acc, static_cast<uint32_t>(segments.size()), r.segment_count});
    segments.insert(segments.end(), r.segments, r.segments + r.segment_count);
    in_.Copy(r, std::move(acc), std::move(done));
  }

 private:
  static Cmd At(Cmd::Kind k, const nand::Ppa& ppa, uint32_t slot = 0) {
    Cmd c{k, false, slot, {}};
    c.req.ppa = ppa;
    return c;
  }
  static Cmd Of(Cmd::Kind k, const nand::ProgramRequest& r, uint32_t slot) {
    Cmd c{k, r.data != nullptr, slot, r};
    c.req.data = c.req.meta = nullptr;
    return c;
  }
  nand::FlashPipe& in_;
  bool host_path_;
};

struct Card {
  std::string dir;
  VirtualClock clock{1};
  std::unique_ptr<simcard::SimCard> card;
  explicit Card(const std::string& d) : dir(d) {
    fs::remove_all(dir);
    simcard::CreateOptions co;
    co.blocks_per_lun = g_blocks;
    auto p = simcard::FindProfile("test-small").value();
    p.geometry.pages_per_block = 64;
    if (!simcard::SimCard::Create(dir, p, co).ok()) std::abort();
    simcard::SimCardOptions so;
    so.null_timing = true;
    card = std::move(simcard::SimCard::Open(dir, clock, so).value());
  }
  ~Card() {
    card.reset();
    fs::remove_all(dir);
  }
};

struct Setup {
  Card c;
  std::unique_ptr<TracingPipe> pipe;
  std::unique_ptr<ftl::Ftl> f;
  explicit Setup(const char* tag, bool host_path = false) : c(Dir(tag)) {
    pipe = std::make_unique<TracingPipe>(c.card->pipe(0), host_path);
    std::optional<Status> st;
    ftl::Ftl::Format(*pipe, c.clock, {}, [&](Status s) { st = s; });
    c.clock.RunUntilTrue([&] { return st.has_value(); });
    ftl::Ftl::Open(*pipe, c.clock, {}, [&](Result<std::unique_ptr<ftl::Ftl>> r) { f = std::move(r).value(); });
    c.clock.RunUntilTrue([&] { return f != nullptr; });
  }
  void Fill() {
    const uint64_t n = f->sectors();
    std::vector<uint8_t> data(uint64_t{64} * 4096, 4);
    for (uint64_t l = 0; l + 64 <= n; l += 64) {
      f->Write(l, 64, data.data(), false, [](Status) {});
      c.clock.RunUntilIdle();
    }
  }
  // Random writes of twice the capacity after the fill: the groomer at its steady state.
  void Precondition(Rng& rng) {
    const uint64_t n = f->sectors();
    std::vector<uint8_t> data(4096, 5);
    for (uint64_t k = 0; k < 2 * n; k += 64) {
      for (int i = 0; i < 64; ++i) f->Write(rng.Below(n), 1, data.data(), false, [](Status) {});
      c.clock.RunUntilIdle();
    }
  }
  ~Setup() {
    f.reset();
    pipe.reset();
  }
};

// Replays trace[0, to) on a fresh card of the same shape; returns the thread CPU ns spent
// on trace[from, to) (and the heap allocations made there in *allocs).
double Replay(const TracingPipe& tp, std::size_t from, std::size_t to, uint64_t* allocs) {
  const std::vector<TracingPipe::Cmd>& trace = tp.trace;
  Card r(Dir("replay"));
  nand::FlashPipe& p = r.card->pipe(0);
  const nand::Geometry& g = r.card->geometry();
  std::vector<uint8_t> data(g.page_data_bytes, 7), meta(g.meta_bytes_per_page(), 0xFF), out(g.page_data_bytes),
      out_meta(g.meta_bytes_per_page());
  auto ignore = [](const nand::Completion&) {};
  auto Req = [&](const TracingPipe::Cmd& c) {
    nand::ProgramRequest q = c.req;
    q.data = c.with_data ? data.data() : nullptr;
    q.meta = meta.data();
    return q;
  };
  double start = 0;
  uint64_t allocs0 = 0;
  for (std::size_t i = 0; i < to; ++i) {
    if (i == from) {
      r.clock.RunUntilIdle();
      start = ThreadCpuNs();
      allocs0 = g_allocs;
      if (g_callgrind_replay) CALLGRIND_START_INSTRUMENTATION;
    }
    const auto& c = trace[i];
    const nand::Ppa& ppa = c.req.ppa;
    switch (c.kind) {
      case TracingPipe::Cmd::kRead:
        p.Read({ppa, c.slot >> 16, c.slot & 0xFFFF, c.with_data ? out.data() : nullptr, out_meta.data()}, ignore);
        break;
      case TracingPipe::Cmd::kProgram:
        p.Program(Req(c), ignore, ignore);
        break;
      case TracingPipe::Cmd::kErase:
        p.Erase(ppa.die, ppa.block, ignore);
        break;
      case TracingPipe::Cmd::kStage:
        p.Stage(c.slot, Req(c), ignore, ignore);
        break;
      case TracingPipe::Cmd::kClearStage:
        p.ClearStage(c.slot);
        break;
      case TracingPipe::Cmd::kCopy: {
        const TracingPipe::CopyRec& rec = tp.copies[c.slot];
        nand::CopyRequest cr;
        cr.src = rec.src;
        cr.dst = rec.dst;
        cr.acc = rec.acc;
        cr.meta = meta.data();
        cr.segment_count = rec.count;
        std::copy_n(tp.segments.begin() + rec.first, rec.count, cr.segments);
        p.Copy(cr, ignore, ignore);
        break;
      }
      case TracingPipe::Cmd::kClearAcc:
        p.ClearAccumulator(c.slot);
        break;
    }
    if (i % 64 == 63) r.clock.RunUntilIdle();
  }
  r.clock.RunUntilIdle();
  if (g_callgrind_replay) CALLGRIND_STOP_INSTRUMENTATION;
  if (allocs != nullptr) *allocs = g_allocs - allocs0;
  return ThreadCpuNs() - start;
}

void Report(benchmark::State& state, const Setup& s, std::size_t from, double loop_ns, double all_ns, uint64_t ios,
            uint64_t loop_allocs) {
  const std::size_t to = s.pipe->trace.size();
  uint64_t programs = 0, reads = 0, copies = 0, stages = 0;
  for (std::size_t i = from; i < to; ++i) {
    stages += s.pipe->trace[i].kind == TracingPipe::Cmd::kStage;
    programs += s.pipe->trace[i].kind == TracingPipe::Cmd::kProgram;
    reads += s.pipe->trace[i].kind == TracingPipe::Cmd::kRead;
    copies += s.pipe->trace[i].kind == TracingPipe::Cmd::kCopy;
  }
  uint64_t card_allocs = 0;
  const double card_ns = Replay(*s.pipe, from, to, &card_allocs);
  const double n = static_cast<double>(ios);
  state.counters["ios"] = n;
  state.counters["allocs_per_io"] = static_cast<double>(loop_allocs) / n;
  state.counters["ftl_allocs_per_io"] = (static_cast<double>(loop_allocs) - static_cast<double>(card_allocs)) / n;
  state.SetItemsProcessed(static_cast<int64_t>(ios));
  state.counters["total_us"] = loop_ns / n / 1e3;
  state.counters["all_us"] = all_ns / n / 1e3;
  state.counters["card_us"] = card_ns / n / 1e3;
  state.counters["ftl_us"] = (loop_ns - card_ns) / n / 1e3;
  state.counters["programs_per_io"] = static_cast<double>(programs) / n;
  state.counters["reads_per_io"] = static_cast<double>(reads) / n;
  state.counters["copies_per_io"] = static_cast<double>(copies) / n;
  state.counters["stages_per_io"] = static_cast<double>(stages) / n;
  // The groomer's reads per controller copy: near 0 when it copies from the victims'
  // summaries (format 1.6), 1 or more when it reads each victim page's metadata first.
  if (copies > 0) state.counters["reads_per_copy"] = static_cast<double>(reads) / static_cast<double>(copies);
  if (g_cold_copy_ns > 0) state.counters["ftl_per_cold_copy"] = (loop_ns - card_ns) / n / g_cold_copy_ns;
}

void BM_CardPage4K(benchmark::State& state) {
  Card s(Dir("card"));
  std::vector<uint8_t> data(4096, 2), out(4096);
  uint32_t block = 1, page = 0;
  s.card->pipe(0).Erase(0, block, [](const nand::Completion&) {});
  for (auto _ : state) {
    if (page == 64) {
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

void FtlWrite4K(benchmark::State& state, bool host_path) {
  Setup s(host_path ? "wh" : "w", host_path);
  s.Fill();
  Rng rng(1);
  s.Precondition(rng);
  const uint64_t n = s.f->sectors();
  std::vector<uint8_t> data(4096, 3);
  const ftl::FtlStats before = s.f->stats();
  uint64_t items = 0;
  s.pipe->Reserve(static_cast<uint64_t>(g_rounds) * 64);
  const std::size_t from = s.pipe->trace.size();
  const uint64_t allocs0 = g_allocs;
  const double t0 = ThreadCpuNs(), a0 = ThreadAllCpuNs();
  StartLoopInstrumentation();
  for (auto _ : state) {
    for (int64_t r = 0; r < g_rounds; ++r) {
      for (int i = 0; i < 64; ++i) s.f->Write(rng.Below(n), 1, data.data(), false, [](Status) {});
      s.c.clock.RunUntilIdle();
      items += 64;
    }
  }
  StopLoopInstrumentation();
  const double loop_ns = ThreadCpuNs() - t0, all_ns = ThreadAllCpuNs() - a0;
  const uint64_t loop_allocs = g_allocs - allocs0;
  const ftl::FtlStats after = s.f->stats();
  const double host = static_cast<double>(after.host_write_sectors - before.host_write_sectors);
  state.counters["waf"] = host > 0 ? static_cast<double>(after.host_write_sectors - before.host_write_sectors +
                                                         after.gc_write_sectors - before.gc_write_sectors) / host
                                   : 0;
  Report(state, s, from, loop_ns, all_ns, items, loop_allocs);
}
void BM_FtlWrite4K(benchmark::State& state) { FtlWrite4K(state, false); }
void BM_FtlWrite4KHostPath(benchmark::State& state) { FtlWrite4K(state, true); }
BENCHMARK(BM_FtlWrite4K)->Unit(benchmark::kMicrosecond)->Iterations(1);
BENCHMARK(BM_FtlWrite4KHostPath)->Unit(benchmark::kMicrosecond)->Iterations(1);

void BM_FtlRead4K(benchmark::State& state) {
  Setup s("r");
  s.Fill();
  const uint64_t n = s.f->sectors();
  Rng rng(2);
  std::vector<uint8_t> out(uint64_t{64} * 4096);
  uint64_t items = 0, errors = 0;
  s.pipe->Reserve(static_cast<uint64_t>(g_rounds) * 64);
  const std::size_t from = s.pipe->trace.size();
  const uint64_t allocs0 = g_allocs;
  const double t0 = ThreadCpuNs(), a0 = ThreadAllCpuNs();
  StartLoopInstrumentation();
  for (auto _ : state) {
    for (int64_t r = 0; r < g_rounds; ++r) {
      for (int i = 0; i < 64; ++i) {
        s.f->Read(rng.Below(n - 1), 1, out.data() + uint64_t(i) * 4096, [&](Status st) { errors += !st.ok(); });
      }
      s.c.clock.RunUntilIdle();
      items += 64;
    }
  }
  StopLoopInstrumentation();
  const double loop_ns = ThreadCpuNs() - t0, all_ns = ThreadAllCpuNs() - a0;
  const uint64_t loop_allocs = g_allocs - allocs0;
  state.counters["failures"] = static_cast<double>(errors);
  Report(state, s, from, loop_ns, all_ns, items, loop_allocs);
}
BENCHMARK(BM_FtlRead4K)->Unit(benchmark::kMicrosecond)->Iterations(1);

}  // namespace
}  // namespace vsl

// Counted allocation for allocs_per_io (the aligned forms are left to the library: the
// paths measured do not use them). GCC cannot tell that these replace the global pair.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void* operator new(std::size_t n) {
  ++vsl::g_allocs;
  if (void* p = std::malloc(n != 0 ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

int main(int argc, char** argv) {
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--blocks=", 9) == 0) {
      vsl::g_blocks = static_cast<uint32_t>(std::strtoul(argv[i] + 9, nullptr, 10));
    } else if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
      vsl::g_rounds = std::strtoll(argv[i] + 9, nullptr, 10);
    } else {
      rest.push_back(argv[i]);
    }
  }
  int n = static_cast<int>(rest.size());
  benchmark::Initialize(&n, rest.data());
  if (benchmark::ReportUnrecognizedArguments(n, rest.data())) return 2;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
