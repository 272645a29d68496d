// The card as a user benchmarks it, in virtual time: a volume over the four LUNs of a
// duo-slc card (2 controllers x 2 pipes x 24 dies, duo-slc NAND timing and host link),
// models.md's workloads at T threads x Q queue (T*Q requests outstanding), with IOPS,
// bandwidth and latency (average, standard deviation, p99, p99.9, max) per window. The
// clock is virtual, so every figure is deterministic and free of this machine's noise;
// host CPU is not charged (ftl_cpu_bench measures it). JSON on stdout or --json FILE;
// bench/perf_report.py turns it into docs/performance.md.
//
// usage: card_perf_bench [--blocks N] [--format stock|hp] [--steady] [--quick] [--json F]
//                        [--round-fraction F] [--max-rounds N] [--window-ms MS]
//                        [--span-gib G] [--seed S] [--power-override W] [--settle-ms MS]
//                        [--sector-size 512|4096] [--copy|--no-copy]
//
//   --blocks N   blocks per die (0, the default: the full-size card, 16,384 per die).
//   --steady     precondition to steady state (sequential fill, then rounds of 4 KiB random
//                writes at 16T/16Q until the SNIA criterion holds over 5 rounds), then the
//                workloads and the scaling sweep. Needs the whole card written several
//                times over, so it is meant for small --blocks; without it the card is
//                fresh: burst writes, then a sequential write of --span-gib and reads over it.
//   --power-override W  the card's power limit (default: the 24.75 W slot limit, as shipped).
//   --copy, --no-copy  the groomer relocates by controller copy / through host memory;
//                neither: as the card decides (CardOptions::copy_relocation: by copy with
//                the power override, through host memory at the slot limit).
//
// Phases, in order (each in the JSON under "phases"):
//   attach_fresh  format + attach time (card ms) and host memory of the empty card
//   burst         4 KiB random writes at 16T/16Q on the fresh card, --window-ms
//   seq_write     1 MiB sequential writes at QD 16: the whole volume (--steady) or --span-gib
//   rounds        (--steady) the preconditioning rounds, each --round-fraction of capacity
//   read_after_writes (--steady) 4K random reads at 16T/16Q as soon as the rounds end,
//                 while the groomer catches up; then the card idles --settle-ms (2,000)
//   workloads     each workload at 16T/16Q for --window-ms after a quarter of that
//                 unmeasured (the ramp), plus 1 MiB sequential reads
//   scaling       4K random read, 4K random write, 8K 70/30 at 1T/1Q, 2T/2Q ... 16T/16Q
//                 (same ramp)
//   attach        clean (DetachAll, AttachAll) and unclean (power cut under writes) attach
// Exit 0 on success; 1 if any I/O failed; 2 bad usage; 3 the card could not be set up.
#include <sys/resource.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/testutil/sim_of.h"
#include "bench/latency_summary.h"
#include "tests/testutil/temp_dir.h"
#include "vsl/card/card.h"
#include "vsl/card/volume.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"

namespace {
using namespace vsl;
using json = nlohmann::json;

struct Mix {
  std::string name;
  double read_share;
  bool sequential = false;
  std::vector<std::pair<uint32_t, double>> sizes;  // bytes, share
};

// models.md's workloads; request sizes below the sector size go as one sector.
std::vector<Mix> Mixes() {
  return {
      {"4k-randread", 1.0, false, {{4096, 1}}},
      {"4k-randwrite", 0.0, false, {{4096, 1}}},
      {"8k-randrw-70", 0.7, false, {{8192, 1}}},
      {"fileserver", 0.8, false,
       {{512, .10}, {1024, .05}, {2048, .05}, {4096, .60}, {8192, .02}, {16384, .04}, {32768, .04}, {65536, .10}}},
      {"webserver", 1.0, false,
       {{512, .22}, {1024, .15}, {2048, .08}, {4096, .23}, {8192, .15}, {16384, .02}, {32768, .06},
        {65536, .07}, {131072, .01}, {524288, .01}}},
  };
}
// The reference spec's small-block figures (700K read / 1.1M write IOPS) are for
// 512-byte sectors: the rows a card formatted with them reports (--sector-size 512).
std::vector<Mix> SectorMixes() {
  return {{"512-randread", 1.0, false, {{512, 1}}}, {"512-randwrite", 0.0, false, {{512, 1}}}};
}
const Mix kSeqRead{"1m-seqread", 1.0, true, {{1 << 20, 1}}};
const Mix kSeqWrite{"1m-seqwrite", 0.0, true, {{1 << 20, 1}}};

// Latencies in ns of the requests completed inside a window.
struct Window {
  std::string mix;
  uint32_t threads = 0, queue = 0;
  uint64_t ops = 0, reads = 0, writes = 0, bytes = 0, errors = 0;
  DurNs span = 0;
  std::vector<DurNs> lat, read_lat, write_lat;
  double waf = 0;  // flash data sectors written / host sectors, over the window
  double copy_share = 0;  // of the sectors the groomer relocated in the window: by controller copy
  // The groomer's reads to learn what to copy (page metadata, victim summaries) per page
  // of data it copied: 1 or more when it reads each victim page's spare, near 0 when it
  // copies from the victim's summary (format 1.6).
  double copy_meta_reads = 0;
  // How busy the simulated card's channels and dies were over the window (0..1; see
  // PipeStats::bus_busy_ns); negative when the card is not the simulated one.
  double bus_util = -1, die_util = -1, die_wait = -1;  // die_wait: of the dies' time, waiting for the bus
  double nand_w = -1;  // the NAND work's average power over the window (W, above static power)

  static json Stats(std::vector<DurNs>& v) {
    if (v.empty()) return json::object();
    const bench::LatencySummary l = bench::SummarizeLatency(v);
    return {{"avg_us", l.avg_us}, {"stddev_us", l.stddev_us}, {"p50_us", l.p50_us},
            {"p99_us", l.p99_us}, {"p999_us", l.p999_us},     {"max_us", l.max_us}};
  }
  json ToJson() {
    const double secs = static_cast<double>(span) / 1e9;
    json j = {{"workload", mix}, {"threads", threads}, {"queue", queue}, {"ops", ops},
              {"reads", reads}, {"writes", writes}, {"errors", errors}, {"seconds", secs},
              {"iops", secs > 0 ? static_cast<double>(ops) / secs : 0},
              {"mb_s", secs > 0 ? static_cast<double>(bytes) / 1e6 / secs : 0},
              {"lat", Stats(lat)}, {"read_lat", Stats(read_lat)}, {"write_lat", Stats(write_lat)}};
    if (writes) j["waf"] = waf;
    if (writes) j["copy_share"] = copy_share;
    if (writes) j["copy_meta_reads"] = copy_meta_reads;
    if (bus_util >= 0) {
      j["bus_util"] = bus_util;
      j["die_util"] = die_util;
      j["die_bus_wait"] = die_wait;
      j["nand_w"] = nand_w;
    }
    return j;
  }
};

class Bench {
 public:
  Bench(VirtualClock& clock, card::Card& c, card::CardVolume& vol, uint64_t seed)
      : clock_(clock), card_(c), vol_(vol), rng_(seed) {
    wbuf_.resize(1 << 20);
    for (std::size_t i = 0; i < wbuf_.size(); ++i) wbuf_[i] = static_cast<uint8_t>(i * 131 + seed);
  }

  // The FTL counters the report uses, summed over the LUNs.
  ftl::FtlStats Totals() {
    ftl::FtlStats t;
    for (card::Lun* l : card_.luns()) {
      const auto& s = l->ftl()->stats();
      t.host_write_sectors += s.host_write_sectors;
      t.gc_write_sectors += s.gc_write_sectors;
      t.gc_copy_sectors += s.gc_copy_sectors;
      t.copy_fallbacks += s.copy_fallbacks;
      t.gc_meta_reads += s.gc_meta_reads;
      t.pad_sectors += s.pad_sectors;
      t.victims += s.victims;
      t.write_stalls += s.write_stalls;
      t.paced_waits += s.paced_waits;
      t.room_waits += s.room_waits;
    }
    return t;
  }
  // Flash data sectors written (host, relocated, padding) and host sectors.
  std::pair<uint64_t, uint64_t> WafCounters() {
    const ftl::FtlStats t = Totals();
    return {t.host_write_sectors + t.gc_write_sectors + t.pad_sectors, t.host_write_sectors};
  }
  // Bus and die busy time summed over the simulated card's pipes (0, 0 off it).
  struct Busy {
    uint64_t bus = 0, die = 0, wait = 0, energy_nj = 0;
  };
  Busy BusyCounters() {
    Busy b;
    simcard::SimCard* sc = card::SimCardOf(card_.backend());
    if (sc == nullptr) return b;
    for (uint32_t p = 0; p < sc->pipe_count(); ++p) {
      b.bus += sc->stats(p).bus_busy_ns;
      b.die += sc->stats(p).die_busy_ns;
      b.wait += sc->stats(p).die_bus_wait_ns;
      b.energy_nj += sc->stats(p).energy_nj;
    }
    return b;
  }
  // Sectors the groomer relocated, and of those by controller copy.
  // Sectors relocated, of them by copy, and the groomer's reads to learn what to copy.
  std::tuple<uint64_t, uint64_t, uint64_t> CopyCounters() {
    const ftl::FtlStats t = Totals();
    return {t.gc_write_sectors, t.gc_copy_sectors, t.gc_meta_reads};
  }

  // Runs `mix` with threads*queue requests outstanding over the first `span` sectors:
  // `ramp` of card time unmeasured (fio's ramp_time), then `window` measured, or until
  // `max_ops` requests completed (whichever first). Sequential mixes give each stream
  // its own region of the span.
  Window Run(const Mix& mix, uint32_t threads, uint32_t queue, uint64_t span, DurNs window,
             uint64_t max_ops = UINT64_MAX, DurNs ramp = 0) {
    Window w;
    w.mix = mix.name;
    w.threads = threads;
    w.queue = queue;
    const uint32_t sb = vol_.sector_bytes();
    const uint32_t slots = threads * queue;
    std::vector<std::vector<uint8_t>> rbufs(slots);
    std::vector<uint64_t> cursor(slots);
    for (uint32_t s = 0; s < slots; ++s) cursor[s] = span / slots * s;
    bool stop = false;
    uint64_t inflight = 0, issued = 0;
    const TimeNs t0 = clock_.Now() + ramp;
    auto [flash0, host0] = WafCounters();
    auto [gc0, copied0, meta0] = CopyCounters();
    Busy busy0 = BusyCounters();
    if (ramp > 0) {
      clock_.At(t0, [&] {
        std::tie(flash0, host0) = WafCounters();
        std::tie(gc0, copied0, meta0) = CopyCounters();
        busy0 = BusyCounters();
      });
    }
    std::function<void(uint32_t)> issue = [&](uint32_t slot) {
      if (stop || issued >= max_ops) return;
      ++issued;
      double u = rng_.Uniform();
      uint32_t bytes = mix.sizes.back().first;
      for (auto& [b, share] : mix.sizes) {
        if (u < share) {
          bytes = b;
          break;
        }
        u -= share;
      }
      const uint32_t n = std::max<uint32_t>(1, (bytes + sb - 1) / sb);
      uint64_t lba;
      if (mix.sequential) {
        if (cursor[slot] + n > span) cursor[slot] = 0;
        lba = cursor[slot];
        cursor[slot] += n;
      } else {
        lba = rng_.Below(span / n) * n;
      }
      const bool read = rng_.Uniform() < mix.read_share;
      const TimeNs s0 = clock_.Now();
      ++inflight;
      auto done = [&, slot, s0, read, n](Status st) {
        --inflight;
        if (stop) return;  // completed after the window: not counted
        if (!st.ok()) {
          if (++w.errors == 1) std::fprintf(stderr, "I/O error: %s\n", st.ToString().c_str());
        }
        if (s0 < t0) {  // issued during the ramp
          issue(slot);
          return;
        }
        const DurNs l = clock_.Now() - s0;
        ++w.ops;
        w.bytes += uint64_t{n} * sb;
        w.lat.push_back(l);
        (read ? w.read_lat : w.write_lat).push_back(l);
        ++(read ? w.reads : w.writes);
        issue(slot);
      };
      if (read) {
        rbufs[slot].resize(uint64_t{n} * sb);
        vol_.Read(lba, n, rbufs[slot].data(), std::move(done));
      } else {
        vol_.Write(lba, n, wbuf_.data(), false, std::move(done));
      }
    };
    for (uint32_t s = 0; s < slots; ++s) issue(s);
    clock_.RunUntilTrue([&] { return clock_.Now() >= t0 + window || (issued >= max_ops && inflight == 0); });
    w.span = clock_.Now() - t0;
    const Busy busy1 = BusyCounters();
    stop = true;
    clock_.RunUntilTrue([&] { return inflight == 0; });
    const auto [flash1, host1] = WafCounters();
    if (host1 > host0) w.waf = static_cast<double>(flash1 - flash0) / static_cast<double>(host1 - host0);
    const auto [gc1, copied1, meta1] = CopyCounters();
    if (gc1 > gc0) w.copy_share = static_cast<double>(copied1 - copied0) / static_cast<double>(gc1 - gc0);
    if (copied1 > copied0) {
      w.copy_meta_reads = static_cast<double>(meta1 - meta0) /
                          (static_cast<double>((copied1 - copied0) * sb) / card_.geometry().page_data_bytes);
    }
    if (simcard::SimCard* sc = card::SimCardOf(card_.backend()); sc != nullptr && w.span > 0) {
      // Busy time of the operations started in the window (charged when they start).
      const nand::Geometry& g = sc->geometry();
      const double secs_ns = static_cast<double>(w.span);
      w.bus_util = static_cast<double>(busy1.bus - busy0.bus) / (secs_ns * sc->pipe_count() * g.channels_per_pipe);
      w.die_util = static_cast<double>(busy1.die - busy0.die) / (secs_ns * sc->pipe_count() * g.dies_per_pipe());
      w.die_wait = static_cast<double>(busy1.wait - busy0.wait) / (secs_ns * sc->pipe_count() * g.dies_per_pipe());
      w.nand_w = static_cast<double>(busy1.energy_nj - busy0.energy_nj) / secs_ns;
    }
    errors_ += w.errors;
    return w;
  }

  Status Flush() {
    std::optional<Status> fl;
    vol_.Flush([&](Status s) { fl = s; });
    clock_.RunUntilTrue([&] { return fl.has_value(); });
    return *fl;
  }

  uint64_t errors() const { return errors_; }

 private:
  VirtualClock& clock_;
  card::Card& card_;
  card::CardVolume& vol_;
  Rng rng_;
  std::vector<uint8_t> wbuf_;
  uint64_t errors_ = 0;
};

// SNIA PTS steady state over the last five rounds: range within 20% of the mean, and the
// least-squares line's excursion across the window within 10% of the mean.
json SteadyState(const std::vector<double>& iops) {
  if (iops.size() < 5) return {{"reached", false}};
  const std::vector<double> w(iops.end() - 5, iops.end());
  double mean = 0;
  for (double x : w) mean += x / 5;
  const auto [mn, mx] = std::minmax_element(w.begin(), w.end());
  double sxy = 0, sxx = 0;
  for (int i = 0; i < 5; ++i) {
    sxy += (i - 2.0) * (w[i] - mean);
    sxx += (i - 2.0) * (i - 2.0);
  }
  const double slope = sxy / sxx;
  const double range = *mx - *mn, excursion = std::abs(slope) * 4;
  return {{"reached", range <= 0.2 * mean && excursion <= 0.1 * mean},
          {"window_first_round", iops.size() - 4},
          {"mean_iops", mean},
          {"range_pct", 100 * range / mean},
          {"slope_excursion_pct", 100 * excursion / mean}};
}

uint64_t RssBytes() {
  std::ifstream f("/proc/self/status");
  std::string k;
  while (f >> k) {
    if (k == "VmRSS:") {
      uint64_t kb = 0;
      f >> kb;
      return kb * 1024;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  uint32_t blocks = 0;
  std::string format = "stock", json_out;
  bool steady = false, quick = false;
  double round_fraction = 0.5, span_gib = 4;
  int max_rounds = 25;
  uint64_t window_ms = 200, seed = 1;
  double override_w = 0;
  uint64_t settle_ms = 2000;
  uint32_t sector_bytes = 4096;
  // --copy / --no-copy: the groomer relocates by controller copy / through host memory;
  // neither: as the card decides (CardOptions::copy_relocation, kAuto).
  card::CardOptions::CopyRelocation copy = card::CardOptions::CopyRelocation::kAuto;
  for (int i = 1; i < argc; ++i) {
    auto arg = [&](const char* name) { return !std::strcmp(argv[i], name) && i + 1 < argc; };
    if (arg("--blocks")) blocks = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (arg("--format")) format = argv[++i];
    else if (!std::strcmp(argv[i], "--steady")) steady = true;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (arg("--json")) json_out = argv[++i];
    else if (arg("--round-fraction")) round_fraction = std::atof(argv[++i]);
    else if (arg("--max-rounds")) max_rounds = std::atoi(argv[++i]);
    else if (arg("--window-ms")) window_ms = std::strtoull(argv[++i], nullptr, 10);
    else if (arg("--span-gib")) span_gib = std::atof(argv[++i]);
    else if (arg("--seed")) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (arg("--power-override")) override_w = std::atof(argv[++i]);
    else if (arg("--settle-ms")) settle_ms = std::strtoull(argv[++i], nullptr, 10);
    else if (arg("--sector-size")) sector_bytes = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--no-copy")) copy = card::CardOptions::CopyRelocation::kOff;
    else if (!std::strcmp(argv[i], "--copy")) copy = card::CardOptions::CopyRelocation::kOn;
    else {
      std::fprintf(stderr,
                   "usage: %s [--blocks N] [--format stock|hp] [--steady] [--quick] [--json F]\n"
                   "          [--round-fraction F] [--max-rounds N] [--window-ms MS] [--span-gib G] [--seed S]\n"
                   "          [--power-override W] [--settle-ms MS] [--sector-size 512|4096] [--copy|--no-copy]\n",
                   argv[0]);
      return 2;
    }
  }
  if (sector_bytes != 512 && sector_bytes != 4096) {
    std::fprintf(stderr, "--sector-size: 512 or 4096, not %u\n", sector_bytes);
    return 2;
  }
  if (format != "stock" && format != "hp") {
    std::fprintf(stderr, "--format: stock or hp, not '%s'\n", format.c_str());
    return 2;
  }
  if (quick) {
    window_ms = std::min<uint64_t>(window_ms, 20);
    max_rounds = std::min(max_rounds, 6);
    settle_ms = std::min<uint64_t>(settle_ms, 200);
    span_gib = std::min(span_gib, 0.25);
  }
  testing::TempDir tmp;
  auto profile = simcard::FindProfile("duo-slc");
  simcard::CreateOptions co;
  co.blocks_per_lun = blocks;
  co.seed = seed;
  if (!profile.ok() || !simcard::SimCard::Create(tmp.Sub("card"), *profile, co).ok()) return 3;
  VirtualClock clock(seed);
  card::CardOptions o;
  o.clock = &clock;
  o.power.override_w = override_w;
  o.copy_relocation = copy;
  o.power.slot_capability_w = std::max(o.power.slot_capability_w, override_w);
  auto opened = card::Card::Open(tmp.Sub("card"), o);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 3;
  }
  std::unique_ptr<card::Card> c = std::move(*opened);
  ftl::FormatOptions fo;
  fo.reserve = format == "hp" ? ftl::ReserveMode::kHighPerformance : ftl::ReserveMode::kStock;
  fo.sector_bytes = sector_bytes;
  const nand::Geometry& g = profile->geometry;
  const simcard::Timing& tm = profile->timing;
  json out = {{"profile", "duo-slc"},
              {"blocks_per_die", blocks ? blocks : g.blocks_per_lun},
              {"format", format},
              {"sector_bytes", sector_bytes},
              {"seed", seed},
              {"power_limit_w", o.power.limit_w()},
              {"geometry",
               {{"controllers", g.controllers}, {"pipes", g.pipes()}, {"channels_per_pipe", g.channels_per_pipe},
                {"dies_per_pipe", g.dies_per_pipe()}, {"page_bytes", g.page_data_bytes},
                {"pages_per_block", g.pages_per_block}}},
              {"timing",
               {{"t_read_us", tm.t_read_ns / 1e3}, {"t_prog_us", tm.t_prog_ns / 1e3},
                {"t_erase_us", tm.t_erase_ns / 1e3}, {"cmd_overhead_us", tm.cmd_overhead_ns / 1e3},
                {"bus_bytes_per_sec", tm.bus_bytes_per_sec}, {"link_bytes_per_sec", tm.link_bytes_per_sec}}}};
  // The governor's sustained rate for NAND work: the limit less static power, less the
  // burst and queue-lag allowance that keeps every window under the limit.
  out["governor_refill_w"] = c->governor().refill_w();
  const simcard::Power& pw = profile->power;
  out["power"] = {{"static_w_per_controller", pw.static_w}, {"read_uj", pw.read_uj}, {"program_uj", pw.program_uj},
                  {"erase_uj", pw.erase_uj}, {"channel_nj_per_byte", pw.channel_nj_per_byte},
                  {"link_nj_per_byte", pw.link_nj_per_byte}};
  json& ph = out["phases"];

  // Format and the first attach.
  const uint64_t rss0 = RssBytes();
  TimeNs t = clock.Now();
  for (uint32_t k = 0; k < g.controllers; ++k) {
    Status s = c->FormatController(k, card::PipeMode::kDual, fo);
    if (!s.ok()) {
      std::fprintf(stderr, "format: %s\n", s.ToString().c_str());
      return 3;
    }
  }
  const DurNs format_ns = clock.Now() - t;
  t = clock.Now();
  if (!c->AttachAll().ok()) return 3;
  const DurNs attach_ns = clock.Now() - t;
  auto ftl_memory = [&] {
    uint64_t m = 0;
    for (card::Lun* l : c->luns()) m += l->ftl()->memory_bytes();
    return m;
  };
  auto user_bytes = [&] {
    uint64_t b = 0;
    for (card::Lun* l : c->luns()) b += l->ftl()->sectors() * l->ftl()->sector_bytes();
    return b;
  };
  auto mapped_bytes = [&] {
    uint64_t b = 0;
    for (card::Lun* l : c->luns()) b += l->ftl()->mapped_sectors() * l->ftl()->sector_bytes();
    return b;
  };
  ph["attach_fresh"] = {{"format_card_ms", format_ns / 1e6}, {"attach_card_ms", attach_ns / 1e6},
                        {"user_bytes", user_bytes()}, {"ftl_memory_bytes", ftl_memory()},
                        {"rss_bytes", RssBytes()}, {"rss_before_bytes", rss0}};
  std::fprintf(stderr, "%s %u blocks/die: %.1f GB user, formatted and attached\n", format.c_str(),
               blocks ? blocks : g.blocks_per_lun, user_bytes() / 1e9);

  auto v = card::CardVolume::Create(c->luns(), card::CardVolume::kDefaultChunkBytes);
  if (!v.ok()) return 3;
  auto vol = std::move(*v);
  auto bench = std::make_unique<Bench>(clock, *c, *vol, seed);
  const DurNs window = window_ms * kMs, ramp = window / 4;
  const uint64_t sectors = vol->sectors(), sb = vol->sector_bytes();
  auto log = [&](Window& w) {
    std::fprintf(stderr, "  %-14s %2uT/%2uQ %9.0f IOPS %8.1f MB/s\n", w.mix.c_str(), w.threads, w.queue,
                 w.span ? w.ops * 1e9 / static_cast<double>(w.span) : 0.0,
                 w.span ? w.bytes * 1e3 / static_cast<double>(w.span) : 0.0);
  };
  // 512-byte sectors: the two small-block rows only (burst writes, then reads and writes
  // over what was written); the 4 KiB phases below (scaling, attach) are skipped.
  const bool small = sector_bytes == 512;
  const std::vector<Mix> mixes = small ? SectorMixes() : Mixes();
  const Mix* randwrite = &mixes[1];

  // Per page programmed, what else crossed the host link: FlashBack's staged parity
  // images (a whole page each) are where the burst's link bytes go beyond the data.
  auto page_counters = [&] {
    std::array<uint64_t, 3> n{0, 0, 0};
    for (card::Lun* l : c->luns()) {
      const auto& s = l->ftl()->stats();
      n[0] += s.pages_programmed;
      n[1] += s.parity_stages;
      n[2] += s.parity_pages + s.partial_parity_pages;
    }
    return n;
  };
  // Burst: the fresh card, nothing to groom yet.
  {
    const auto before = page_counters();
    Window w = bench->Run(*randwrite, 16, 16, sectors, window);
    const auto after = page_counters();
    log(w);
    ph["burst"] = w.ToJson();
    ph["burst"]["pages_programmed"] = after[0] - before[0];
    ph["burst"]["parity_stages"] = after[1] - before[1];
    ph["burst"]["parity_pages"] = after[2] - before[2];
    std::fprintf(stderr, "  burst: %llu pages programmed, %llu parity pages, %llu parity images staged\n",
                 static_cast<unsigned long long>(after[0] - before[0]),
                 static_cast<unsigned long long>(after[2] - before[2]),
                 static_cast<unsigned long long>(after[1] - before[1]));
  }
  // Sequential fill (or a span of it), 1 MiB at QD 16.
  const uint64_t span = steady ? sectors
                               : std::min<uint64_t>(sectors, static_cast<uint64_t>(span_gib * (1 << 30)) / sb);
  {
    Window w = bench->Run(kSeqWrite, 1, 16, span, INT64_MAX / 2, span * sb / (1 << 20));
    if (!bench->Flush().ok()) return 1;
    log(w);
    ph["seq_write"] = w.ToJson();
  }
  if (steady) {
    std::vector<double> iops;
    json rounds = json::array();
    const uint64_t per_round = static_cast<uint64_t>(round_fraction * static_cast<double>(sectors));
    for (int r = 1; r <= max_rounds; ++r) {
      const ftl::FtlStats before = bench->Totals();
      Window w = bench->Run(*randwrite, 16, 16, sectors, INT64_MAX / 2, per_round);
      const ftl::FtlStats after = bench->Totals();
      json j = w.ToJson();
      j["round"] = r;
      // Host writes that could not be appended at once (FtlStats::write_stalls: they
      // waited for the groomer, for pacing credits or for free room), and times the host
      // path stopped for want of credits.
      j["write_stalls"] = after.write_stalls - before.write_stalls;
      j["paced_waits"] = after.paced_waits - before.paced_waits;
      j["room_waits"] = after.room_waits - before.room_waits;
      iops.push_back(j["iops"]);
      rounds.push_back(j);
      std::fprintf(stderr, "  round %2d: %8.0f IOPS, WAF %.2f, p99 %.0f us, max %.0f us, channels %.0f%% busy, dies %.0f%% (%.0f%% waiting for the bus), NAND %.2f W, %llu writes waited for the groomer (host path stopped %llu times for credits, %llu for room)\n", r,
                   iops.back(), w.waf, j["lat"]["p99_us"].get<double>(), j["lat"]["max_us"].get<double>(), 100 * w.bus_util, 100 * w.die_util, 100 * w.die_wait,
                   w.nand_w, static_cast<unsigned long long>(after.write_stalls - before.write_stalls),
                   static_cast<unsigned long long>(after.paced_waits - before.paced_waits),
                   static_cast<unsigned long long>(after.room_waits - before.room_waits));
      if (SteadyState(iops)["reached"]) break;
    }
    ph["rounds"] = rounds;
    ph["steady_state"] = SteadyState(iops);
    // How the groomer moved data over the rounds (and the fill): by controller copy or
    // through host memory.
    const ftl::FtlStats tot = bench->Totals();
    const uint64_t gc = tot.gc_write_sectors, copied = tot.gc_copy_sectors, fallbacks = tot.copy_fallbacks,
                   host = tot.host_write_sectors, pad = tot.pad_sectors, victims = tot.victims;
    ph["relocation"] = {{"sectors", gc},       {"by_copy", copied}, {"copy_fallbacks", fallbacks},
                        {"host_sectors", host}, {"pad_sectors", pad}, {"victims", victims}};
    std::fprintf(stderr,
                 "  relocation: %llu sectors, %llu by controller copy, %llu copy pages fell back; "
                 "%llu host sectors, %llu padding, %llu victims\n",
                 static_cast<unsigned long long>(gc), static_cast<unsigned long long>(copied),
                 static_cast<unsigned long long>(fallbacks), static_cast<unsigned long long>(host),
                 static_cast<unsigned long long>(pad), static_cast<unsigned long long>(victims));
    // Reads right after the writes stop, while the groomer works off its backlog; then
    // the card idles for --settle-ms before the workloads.
    Window w = bench->Run(mixes[0], 16, 16, span, window);
    log(w);
    ph["read_after_writes"] = w.ToJson();
    clock.RunFor(settle_ms * kMs);
  }
  // The workloads at 16T/16Q over what was written.
  {
    json ws = json::array();
    for (const Mix& m : mixes) {
      Window w = bench->Run(m, 16, 16, span, window, UINT64_MAX, ramp);
      log(w);
      ws.push_back(w.ToJson());
    }
    Window w = bench->Run(kSeqRead, 1, 16, span, window, UINT64_MAX, ramp);
    log(w);
    ws.push_back(w.ToJson());
    ph["workloads"] = ws;
  }
  if (!small) {
    json sc = json::array();
    for (const Mix* m : {&mixes[0], &mixes[1], &mixes[2]}) {
      for (uint32_t tq : {1u, 2u, 4u, 8u, 16u}) {
        Window w = bench->Run(*m, tq, tq, span, window, UINT64_MAX, ramp);
        log(w);
        sc.push_back(w.ToJson());
      }
    }
    ph["scaling"] = sc;
  }
  if (!bench->Flush().ok()) return 1;
  ph["memory"] = {{"ftl_memory_bytes", ftl_memory()}, {"rss_bytes", RssBytes()},
                  {"mapped_bytes", mapped_bytes()}, {"user_bytes", user_bytes()}};

  // Attach after a clean shutdown, then after a power cut under 4 KiB random writes.
  json att;
  uint64_t io_errors = bench->errors();
  if (!small) {
    bench.reset();
    vol.reset();
    t = clock.Now();
    if (!c->DetachAll().ok()) return 1;
    att["detach_card_ms"] = (clock.Now() - t) / 1e6;
    t = clock.Now();
    if (!c->AttachAll().ok()) return 1;
    att["clean_attach_card_ms"] = (clock.Now() - t) / 1e6;
    v = card::CardVolume::Create(c->luns(), card::CardVolume::kDefaultChunkBytes);
    if (!v.ok()) return 3;
    vol = std::move(*v);
    bench = std::make_unique<Bench>(clock, *c, *vol, seed + 1);
    // Writes in flight at the cut are abandoned with the card (their callbacks never run).
    uint64_t issued = 0;
    Rng rng(seed + 2);
    std::vector<uint8_t> buf(sb, 0x5A);
    bool cut = false;
    std::function<void()> next = [&] {
      if (cut) return;
      ++issued;
      vol->Write(rng.Below(span), 1, buf.data(), false, [&](Status) { next(); });
    };
    for (int q = 0; q < 256; ++q) next();
    clock.RunFor(window / 2);
    cut = true;
    vsl::testing::SimOf(*c).PowerCut();
    clock.RunUntilIdle();
    io_errors += bench->errors();
    bench.reset();
    vol.reset();
    c.reset();
    auto re = card::Card::Open(tmp.Sub("card"), o);
    if (!re.ok()) return 1;
    c = std::move(*re);
    t = clock.Now();
    Status s = c->AttachAll();
    if (!s.ok()) {
      std::fprintf(stderr, "attach after the power cut: %s\n", s.ToString().c_str());
      return 1;
    }
    att["unclean_attach_card_ms"] = (clock.Now() - t) / 1e6;
    att["writes_issued_before_cut"] = issued;
    uint64_t scanned = 0, pages_read = 0;
    for (card::Lun* l : c->luns()) {
      scanned += l->ftl()->attach_info().lebs_scanned;
      pages_read += l->ftl()->attach_info().pages_read;
    }
    att["unclean_lebs_scanned"] = scanned;
    att["unclean_pages_read"] = pages_read;
    if (!c->DetachAll().ok()) return 1;
  }
  if (!small) ph["attach"] = att;
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  out["host_cpu_seconds"] = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
  out["max_rss_bytes"] = static_cast<uint64_t>(ru.ru_maxrss) * 1024;
  out["io_errors"] = io_errors;
  const std::string text = out.dump(1);
  if (json_out.empty()) {
    std::printf("%s\n", text.c_str());
  } else {
    std::ofstream f(json_out);
    f << text << "\n";
    if (!f) return 3;
  }
  return io_errors ? 1 : 0;
}
