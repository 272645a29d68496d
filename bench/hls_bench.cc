// Throughput of the HLS kernels as the software card runs them (one core), next to a
// memcpy of the same bytes in the same run: items are 512 B codewords (sectors), so the
// "vs baseline" column is the kernel's speed as a share of memcpy's. Decoding is timed
// clean (the common case: one LFSR pass), with t errors (syndromes, Berlekamp-Massey,
// Chien search) and erased. bench_hls_bench_smoke runs it briefly; docs/hls.md has figures.
#include <cstring>
#include <set>
#include <vector>

#include <benchmark/benchmark.h>

#include "hls/bch.h"
#include "hls/crc32c.h"
#include "hls/scrambler.h"
#include "vsl/core/crc.h"
#include "vsl/core/random.h"

namespace {

constexpr int kBytes = 512;

void BM_Memcpy512Baseline(benchmark::State& state) {
  std::vector<uint8_t> a(kBytes, 1), b(kBytes);
  for (auto _ : state) {
    std::memcpy(b.data(), a.data(), kBytes);
    benchmark::DoNotOptimize(b.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_Memcpy512Baseline);

void BM_BchEncode(benchmark::State& state) {
  const int t = static_cast<int>(state.range(0));
  vsl::Rng rng(1);
  std::vector<uint8_t> msg(kBytes), parity(26);
  rng.Fill(msg.data(), msg.size());
  for (auto _ : state) {
    vslhls::BchEncode(t, msg.data(), kBytes, parity.data());
    benchmark::DoNotOptimize(parity.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_BchEncode)->Arg(4)->Arg(8)->Arg(16);

// errors: 0 (clean), t (the most the code corrects), -1 (an erased codeword, no errors).
void Decode(benchmark::State& state, int errors_arg) {
  const int t = static_cast<int>(state.range(0));
  vsl::Rng rng(2);
  std::vector<uint8_t> msg(kBytes), parity(26);
  rng.Fill(msg.data(), msg.size());
  vslhls::BchEncode(t, msg.data(), kBytes, parity.data());
  if (errors_arg < 0) {
    std::memset(msg.data(), 0xFF, kBytes);
    std::memset(parity.data(), 0xFF, parity.size());
  }
  const int errors = errors_arg > 0 ? t : 0;
  std::set<int> pos;
  while (static_cast<int>(pos.size()) < errors) pos.insert(static_cast<int>(rng.Below(8 * kBytes)));
  std::vector<uint8_t> work(kBytes), wp(26);
  int64_t failures = 0;
  for (auto _ : state) {
    state.PauseTiming();
    std::memcpy(work.data(), msg.data(), kBytes);
    std::memcpy(wp.data(), parity.data(), wp.size());
    for (int p : pos) work[p / 8] ^= static_cast<uint8_t>(0x80u >> (p % 8));
    state.ResumeTiming();
    const auto r = vslhls::BchDecode(t, work.data(), kBytes, wp.data());
    failures += r.status == vslhls::BchStatus::kUncorrectable || r.bits != errors;
    benchmark::DoNotOptimize(r);
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kBytes);
  state.counters["failures"] = static_cast<double>(failures);
}
void BM_BchDecodeClean(benchmark::State& state) { Decode(state, 0); }
void BM_BchDecodeTErrors(benchmark::State& state) { Decode(state, 1); }
void BM_BchDecodeErased(benchmark::State& state) { Decode(state, -1); }
BENCHMARK(BM_BchDecodeClean)->Arg(4)->Arg(8)->Arg(16);
BENCHMARK(BM_BchDecodeTErrors)->Arg(4)->Arg(8)->Arg(16);
BENCHMARK(BM_BchDecodeErased)->Arg(8);

void BM_Crc32cKernel(benchmark::State& state) {
  std::vector<uint8_t> d(kBytes, 7);
  for (auto _ : state) benchmark::DoNotOptimize(vslhls::Crc32cUpdate(d.data(), kBytes));
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_Crc32cKernel);

void BM_Crc32cHost(benchmark::State& state) {  // the host stack's CRC, for comparison
  std::vector<uint8_t> d(kBytes, 7);
  for (auto _ : state) benchmark::DoNotOptimize(vsl::Crc32c(d.data(), kBytes));
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_Crc32cHost);

void BM_Scramble(benchmark::State& state) {
  std::vector<uint8_t> d(kBytes, 7);
  for (auto _ : state) {
    vslhls::Scramble(d.data(), kBytes, 0x1234);
    benchmark::DoNotOptimize(d.data());
  }
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(state.iterations() * kBytes);
}
BENCHMARK(BM_Scramble);

}  // namespace

BENCHMARK_MAIN();
