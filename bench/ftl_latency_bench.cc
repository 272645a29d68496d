// Steady-state 4 KiB random-write IOPS and latency of one pipe, in virtual time on the
// duo-slc timing model, with a fixed number of writes outstanding (closed loop).
//
// usage: ftl_latency_bench [--qd N] [--blocks N] [--rounds R] [--quick] [--out FILE.md]
//                          [--check-max-ms MS] [--partial-parity-us N]
// --check-max-ms: exit 1 if any write of any round (after preconditioning) took longer
// than MS of card time: the groomer's pacing must keep latency bounded on a full, busy
// device (virtual time, so the check is deterministic, not a wall-clock timing).
// Preconditions by writing the device sequentially, then runs random writes in rounds
// of one device capacity each and reports, per round, IOPS, average, p99, p99.9 and
// maximum latency, and WAF; the SNIA steady-state test (over the last 5 rounds, range
// within 20% of the mean and the fitted slope's excursion within 10%) is evaluated.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "bench/ftl_bench_pipe.h"
#include "bench/latency_summary.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace vsl {
namespace {

struct Round {
  double iops, avg_us, p99_us, p999_us, max_us, waf;
};

}  // namespace
}  // namespace vsl

int main(int argc, char** argv) {
  using namespace vsl;
  uint32_t qd = 16, blocks = 64, rounds = 8;
  bool quick = false;
  double check_max_ms = 0;
  int partial_parity_us = -1;  // FlashBack partial parity delay (0: off); default: FTL's
  std::string out;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--qd") && i + 1 < argc) qd = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else if (!std::strcmp(argv[i], "--check-max-ms") && i + 1 < argc) check_max_ms = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--partial-parity-us") && i + 1 < argc) partial_parity_us = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--qd N] [--blocks N] [--rounds R] [--quick] [--out F] [--check-max-ms MS] [--partial-parity-us N]\n", argv[0]);
      return 2;
    }
  }
  if (quick) {
    blocks = 24;
    rounds = 2;
  }
  ftl::FtlOptions fopts;
  if (partial_parity_us >= 0) fopts.partial_parity_delay_ns = static_cast<DurNs>(partial_parity_us) * kUs;
  bench::FtlBenchPipe pipe;
  if (!pipe.Start("lat", "duo-slc", blocks, fopts)) return 3;
  VirtualClock& clock = pipe.clock;
  auto& f = pipe.ftl;
  const uint64_t n = f->sectors();
  std::vector<uint8_t> data(4096, 0x3C);
  Rng rng(7);
  // Closed loop: keep `qd` writes outstanding.
  auto run = [&](uint64_t count, bool sequential, std::vector<uint64_t>* lat) {
    uint64_t issued = 0, completed = 0, next_seq = 0;
    std::function<void()> issue = [&]() {
      if (issued >= count) return;
      ++issued;
      const uint64_t lba = sequential ? next_seq++ % n : rng.Below(n);
      const TimeNs t0 = clock.Now();
      f->Write(lba, 1, data.data(), false, [&, t0](Status s) {
        if (!s.ok()) std::abort();
        if (lat) lat->push_back(clock.Now() - t0);
        ++completed;
        issue();
      });
    };
    for (uint32_t i = 0; i < qd; ++i) issue();
    clock.RunUntilTrue([&] { return completed == count; });
  };
  run(n, true, nullptr);  // precondition
  std::vector<Round> rs;
  bench::Report report;
  auto line = [&](const std::string& s) { report.Line(s); };
  char buf[256];
  std::snprintf(buf, sizeof(buf), "## 4 KiB random writes, QD %u, one duo-slc pipe (%u blocks/die, %llu user sectors), virtual time", qd, blocks,
                static_cast<unsigned long long>(n));
  line(buf);
  line("");
  line("| round | IOPS | avg us | p99 us | p99.9 us | max us | WAF (round) |");
  line("|---|---|---|---|---|---|---|");
  for (uint32_t r = 0; r < rounds; ++r) {
    std::vector<uint64_t> lat;
    lat.reserve(n);
    const auto s0 = f->stats();
    const TimeNs t0 = clock.Now();
    run(n, false, &lat);
    const double secs = static_cast<double>(clock.Now() - t0) / 1e9;
    const auto& s1 = f->stats();
    const double host = static_cast<double>(s1.host_write_sectors - s0.host_write_sectors);
    const double flash = static_cast<double>((s1.host_write_sectors + s1.gc_write_sectors + s1.pad_sectors) -
                                             (s0.host_write_sectors + s0.gc_write_sectors + s0.pad_sectors));
    const bench::LatencySummary l = bench::SummarizeLatency(lat);
    Round rd{static_cast<double>(l.count) / secs, l.avg_us, l.p99_us, l.p999_us, l.max_us, flash / host};
    rs.push_back(rd);
    std::snprintf(buf, sizeof(buf), "| %u | %.0f | %.1f | %.1f | %.1f | %.1f | %.2f |", r + 1, rd.iops, rd.avg_us,
                  rd.p99_us, rd.p999_us, rd.max_us, rd.waf);
    line(buf);
  }
  if (rs.size() >= 5) {
    // SNIA PTS steady state over the last 5 rounds, on IOPS.
    const std::size_t k = rs.size() - 5;
    double mean = 0, lo = 1e300, hi = 0;
    for (std::size_t i = k; i < rs.size(); ++i) {
      mean += rs[i].iops / 5;
      lo = std::min(lo, rs[i].iops);
      hi = std::max(hi, rs[i].iops);
    }
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (std::size_t i = 0; i < 5; ++i) {
      sx += i;
      sy += rs[k + i].iops;
      sxx += static_cast<double>(i * i);
      sxy += static_cast<double>(i) * rs[k + i].iops;
    }
    const double slope = (5 * sxy - sx * sy) / (5 * sxx - sx * sx);
    const bool steady = (hi - lo) <= 0.2 * mean && std::fabs(slope * 4) <= 0.1 * mean;
    std::snprintf(buf, sizeof(buf), "\nsteady state (SNIA, last 5 rounds): %s (range %.1f%% of mean, slope excursion %.1f%%)",
                  steady ? "yes" : "no", 100 * (hi - lo) / mean, 100 * std::fabs(slope * 4) / mean);
    line(buf);
  }
  if (!report.WriteTo(out)) std::fprintf(stderr, "cannot write %s\n", out.c_str());
  if (check_max_ms > 0) {
    for (std::size_t i = 0; i < rs.size(); ++i) {
      if (rs[i].max_us > check_max_ms * 1000 || !(rs[i].iops > 0)) {
        std::fprintf(stderr, "round %zu: max latency %.1f us exceeds %.1f ms (IOPS %.0f)\n", i + 1,
                     rs[i].max_us, check_max_ms, rs[i].iops);
        return 1;
      }
    }
  }
  return 0;
}
