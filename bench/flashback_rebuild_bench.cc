// FlashBack rebuild: how long moving a dead die's data off takes, and what host writes
// get meanwhile, in virtual time on one duo-slc pipe (24 dies).
//
// usage: flashback_rebuild_bench [--blocks N] [--fill F] [--quick] [--out FILE.md]
// Formats with stock spare, writes the given share of the capacity sequentially, then
// runs 4 KiB random writes at queue depth 16 for a measuring window, kills die 5, and
// keeps the same load running until the rebuild queue is empty. Reports host IOPS and
// latency before and during the rebuild, the rebuild time, the data rebuilt (sectors
// that were on the dead die) and the rebuild rate per GiB.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "bench/ftl_bench_pipe.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace vsl {
namespace {
struct Window {
  uint64_t writes = 0;
  DurNs span = 0;
  std::vector<uint64_t> lat;
  double Iops() const { return span ? static_cast<double>(writes) * 1e9 / static_cast<double>(span) : 0; }
  double Pct(double q) {
    if (lat.empty()) return 0;
    std::sort(lat.begin(), lat.end());
    return static_cast<double>(lat[std::min(lat.size() - 1, static_cast<std::size_t>(q * static_cast<double>(lat.size())))]) / 1000.0;
  }
};

}  // namespace
}  // namespace vsl

int main(int argc, char** argv) {
  using namespace vsl;
  uint32_t blocks = 48;
  double fill = 0.8;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--fill") && i + 1 < argc) fill = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) blocks = 20;
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--blocks N] [--fill F] [--quick] [--out F]\n", argv[0]);
      return 2;
    }
  }
  bench::FtlBenchPipe pipe;
  if (!pipe.Start("rebuild", "duo-slc", blocks)) return 3;
  VirtualClock& clock = pipe.clock;
  auto& card = pipe.card;
  auto& f = pipe.ftl;
  const uint64_t n = f->sectors();
  const auto span = static_cast<uint64_t>(static_cast<double>(n) * fill);
  std::vector<uint8_t> data(4096, 0x5A);
  Rng rng(11);
  // Closed loop at QD 16 until `stop()` says so.
  auto run = [&](bool sequential, uint64_t max_writes, const std::function<bool()>& stop, Window* w) {
    uint64_t issued = 0, completed = 0, next = 0;
    bool stopping = false;
    const TimeNs t0 = clock.Now();
    std::function<void()> issue = [&]() {
      if (stopping || issued >= max_writes) return;
      ++issued;
      const uint64_t lba = sequential ? next++ : rng.Below(span);
      const TimeNs s0 = clock.Now();
      f->Write(lba, 1, data.data(), false, [&, s0](Status s) {
        if (!s.ok()) std::abort();
        ++completed;
        if (w) w->lat.push_back(clock.Now() - s0);
        if (stop()) stopping = true;
        issue();
      });
    };
    for (int i = 0; i < 16; ++i) issue();
    clock.RunUntilTrue([&] { return completed == issued && (stopping || issued >= max_writes); });
    if (w) {
      w->writes = completed;
      w->span = clock.Now() - t0;
    }
  };
  run(true, span, [] { return false; }, nullptr);
  run(false, span, [] { return false; }, nullptr);  // warm up the groomer
  Window before, during;
  run(false, span / 2, [] { return false; }, &before);
  // Sectors on the die about to die: what the rebuild must recover.
  const uint32_t dead = 5;
  const uint64_t gc_before = f->stats().gc_write_sectors;
  card->InjectDieFailure(0, dead);
  const TimeNs t_fail = clock.Now();
  // The failure is noticed by the first command to the die; keep writing until done.
  bool noticed = false;
  run(false, UINT64_MAX, [&] {
    const auto fb = f->flashback_status();
    noticed = noticed || fb.active;
    return noticed && fb.rebuild_lebs_left == 0;
  }, &during);
  const DurNs rebuild_ns = clock.Now() - t_fail;
  const auto fb = f->flashback_status();
  const auto& stt = f->stats();
  const double rebuilt_gib = static_cast<double>(stt.rebuilt_pages) * card->geometry().page_data_bytes / double(1 << 30);
  const double moved_gib = static_cast<double>(stt.gc_write_sectors - gc_before) * 4096 / double(1 << 30);
  bench::Report report;
  char buf[512];
  std::snprintf(buf, sizeof(buf), "## FlashBack rebuild, one duo-slc pipe (%u blocks/die, %llu user sectors, %.0f%% in use), QD16 4 KiB random writes, virtual time",
                blocks, static_cast<unsigned long long>(n), fill * 100);
  report.Line(buf);
  report.Line("");
  report.Line("| phase | host IOPS | avg us | p99 us | p99.9 us | max us |");
  report.Line("|---|---|---|---|---|---|");
  for (auto* w : {&before, &during}) {
    double sum = 0;
    for (auto v : w->lat) sum += static_cast<double>(v);
    std::snprintf(buf, sizeof(buf), "| %s | %.0f | %.1f | %.1f | %.1f | %.1f |", w == &before ? "before the failure" : "during the rebuild",
                  w->Iops(), w->lat.empty() ? 0 : sum / static_cast<double>(w->lat.size()) / 1000, w->Pct(0.99), w->Pct(0.999), w->Pct(1.0));
    report.Line(buf);
  }
  report.Line("");
  std::snprintf(buf, sizeof(buf), "rebuild: %.1f ms of card time; %llu pages rebuilt from parity (%.3f GiB); %llu LEBs groomed for it, %.3f GiB moved (with the host's own grooming): %.2f s per GiB moved; host IOPS during / before: %.2f; lost sectors: %zu; mode: %s",
                static_cast<double>(rebuild_ns) / 1e6, static_cast<unsigned long long>(stt.rebuilt_pages), rebuilt_gib,
                static_cast<unsigned long long>(stt.rebuild_lebs), moved_gib,
                moved_gib > 0 ? static_cast<double>(rebuild_ns) / 1e9 / moved_gib : 0.0,
                before.Iops() > 0 ? during.Iops() / before.Iops() : 0.0, fb.lost_lbas.size(), std::string(ftl::HealthModeName(fb.mode)).c_str());
  report.Line(buf);
  if (!report.WriteTo(out)) std::fprintf(stderr, "cannot write %s\n", out.c_str());
  return fb.lost_lbas.empty() && fb.rebuild_lebs_left == 0 ? 0 : 1;
}
