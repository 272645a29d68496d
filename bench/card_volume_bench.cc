// Card volume scaling and LUN isolation, in virtual time on a duo-slc card (4 LUNs).
//
// usage: card_volume_bench [--blocks N] [--mib M] [--quick] [--check] [--out FILE.md]
//
// 1. Scaling: sequential 128 KiB writes at queue depth 32 into a card volume over 1 LUN,
//    2 LUNs (one per controller) and 4 LUNs; reports MB/s (virtual time) and the ratio to
//    one LUN (RAID 0 would give 2x and 4x).
// 2. Isolation: 4 KiB random writes at queue depth 16 on LUN 2 alone, then again while
//    LUN 0 (the other controller) is reset and reformatted in a loop, then while LUN 3
//    (the same controller) is; reports LUN 2's IOPS and p99 latency each time, as ratios
//    to alone. --check fails (exit 1) if 4 LUNs give under 3x one LUN, or LUN 2 keeps
//    under 0.9x its IOPS while the other controller's LUN is reset and formatted.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench_report.h"
#include "tests/testutil/temp_dir.h"
#include "vsl/card/card.h"
#include "vsl/card/volume.h"
#include "vsl/simcard/sim_card.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"

namespace {
using namespace vsl;

struct Window {
  uint64_t ops = 0;
  DurNs span = 0;
  std::vector<uint64_t> lat;
  double Iops() const { return span ? static_cast<double>(ops) * 1e9 / static_cast<double>(span) : 0; }
  double P99Us() {
    if (lat.empty()) return 0;
    std::sort(lat.begin(), lat.end());
    return static_cast<double>(lat[std::min(lat.size() - 1, lat.size() * 99 / 100)]) / 1000.0;
  }
};

}  // namespace

int main(int argc, char** argv) {
  uint32_t blocks = 48;
  uint64_t mib = 256;
  bool check = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--mib") && i + 1 < argc) mib = std::strtoull(argv[++i], nullptr, 10);
    else if (!std::strcmp(argv[i], "--quick")) { blocks = 24; mib = 64; }
    else if (!std::strcmp(argv[i], "--check")) check = true;
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--blocks N] [--mib M] [--quick] [--check] [--out F]\n", argv[0]);
      return 2;
    }
  }
  testing::TempDir tmp;
  auto profile = simcard::FindProfile("duo-slc");
  simcard::CreateOptions co;
  co.blocks_per_lun = blocks;
  if (!profile.ok() || !simcard::SimCard::Create(tmp.Sub("card"), *profile, co).ok()) return 3;
  VirtualClock clock(1);
  card::CardOptions o;
  o.clock = &clock;
  // With the power override (55 W, docs/power.md): the slot limit as shipped holds writes
  // to about 1.4 GB/s, which two LUNs already reach, so scaling would measure the
  // governor, not the volume's striping over the LUNs' dies and links.
  o.power.override_w = 55;
  o.power.slot_capability_w = std::max(o.power.slot_capability_w, o.power.override_w);
  auto opened = card::Card::Open(tmp.Sub("card"), o);
  if (!opened.ok()) {
    std::fprintf(stderr, "%s\n", opened.status().ToString().c_str());
    return 3;
  }
  card::Card& c = **opened;
  for (uint32_t k = 0; k < 2; ++k) {
    if (!c.FormatController(k, card::PipeMode::kDual, {}).ok()) return 3;
  }
  if (!c.AttachAll().ok()) return 3;
  bench::Report rep;
  rep.Line(fmt::format("# Card volume scaling and LUN isolation (duo-slc, {} blocks/die, virtual time, 55 W power override)\n", blocks));

  // ---- 1. scaling ----
  const uint32_t req_bytes = 128 * 1024;
  std::vector<uint8_t> data(req_bytes, 0xA5);
  auto seq_write = [&](std::vector<card::Lun*> luns) -> double {
    auto v = card::CardVolume::Create(luns, card::CardVolume::kDefaultChunkBytes);
    if (!v.ok()) std::abort();
    card::CardVolume& vol = **v;
    const uint32_t per = req_bytes / vol.sector_bytes();
    const uint64_t total = std::min<uint64_t>(mib * 1024 * 1024 / req_bytes, vol.sectors() / per);
    uint64_t issued = 0, done = 0;
    const TimeNs t0 = clock.Now();
    std::function<void()> issue = [&]() {
      if (issued >= total) return;
      const uint64_t lba = issued++ * per;
      vol.Write(lba, per, data.data(), false, [&](Status s) {
        if (!s.ok()) std::abort();
        ++done;
        issue();
      });
    };
    for (int q = 0; q < 32; ++q) issue();
    clock.RunUntilTrue([&] { return done == total; });
    std::optional<Status> fl;
    vol.Flush([&](Status s) { fl = s; });
    clock.RunUntilTrue([&] { return fl.has_value(); });
    const double secs = static_cast<double>(clock.Now() - t0) / 1e9;
    return static_cast<double>(total) * req_bytes / 1e6 / secs;
  };
  auto luns = c.luns();
  const double one = seq_write({luns[0]});
  const double two = seq_write({luns[0], luns[2]});
  const double four = seq_write(luns);
  rep.Line("## Sequential 128 KiB writes, queue depth 32, 128 KiB chunks\n");
  rep.Line("| volume | MB/s | vs 1 LUN |");
  rep.Line("|---|---|---|");
  rep.Line(fmt::format("| 1 LUN | {:.0f} | 1.00 |", one));
  rep.Line(fmt::format("| 2 LUNs (one per controller) | {:.0f} | {:.2f} |", two, two / one));
  rep.Line(fmt::format("| 4 LUNs | {:.0f} | {:.2f} |", four, four / one));

  // ---- 2. isolation ----
  card::Lun& probe = *c.lun(2);
  ftl::Ftl* pf = probe.ftl();
  std::vector<uint8_t> small(pf->sector_bytes(), 0x3C);
  Rng rng(7);
  const uint64_t span = pf->sectors() / 2;
  // LUN 2 under QD16 random 4 KiB writes for `window` of virtual time while `disturb`
  // (if any) runs its own loop on another LUN.
  bool stop = false;  // ends LUN 2's loop and the churn of the other LUN
  auto measure = [&](DurNs window, std::function<void(std::function<bool()>)> disturb) {
    Window w;
    stop = false;
    uint64_t inflight = 0;
    std::function<void()> issue = [&]() {
      if (stop) return;
      ++inflight;
      const TimeNs s0 = clock.Now();
      pf->Write(rng.Below(span), 1, small.data(), false, [&, s0](Status s) {
        if (!s.ok()) std::abort();
        --inflight;
        ++w.ops;
        w.lat.push_back(clock.Now() - s0);
        issue();
      });
    };
    const TimeNs t0 = clock.Now();
    for (int q = 0; q < 16; ++q) issue();
    if (disturb) disturb([&] { return stop; });
    clock.RunUntil(t0 + window);
    stop = true;
    w.span = clock.Now() - t0;
    clock.RunUntilTrue([&] { return inflight == 0; });
    return w;
  };
  // Resets and reformats LUN `l` over and over until told to stop.
  auto churn = [&](card::Lun& l, uint64_t* cycles) {
    return [&l, cycles](std::function<bool()> stopped) {
      // The step holds itself only weakly: the pending call's callback holds it, so it
      // is freed once the loop stops (a strong self-reference leaked it).
      auto step = std::make_shared<std::function<void(int)>>();
      std::weak_ptr<std::function<void(int)>> weak = step;
      *step = [&l, cycles, stopped, weak](int phase) {
        if (stopped()) return;
        auto next = [self = weak.lock(), phase](Status) { (*self)((phase + 1) % 4); };
        switch (phase) {
          case 0: l.Reset(next); break;
          case 1: l.Detach(next); break;
          case 2: l.Format({}, next); break;
          default: ++*cycles; l.Attach(next); break;
        }
      };
      (*step)(0);
    };
  };
  const DurNs window = 200 * kMs;
  measure(20 * kMs, nullptr);  // warm up
  Window alone = measure(window, nullptr);
  uint64_t other_cycles = 0, same_cycles = 0;
  Window other = measure(window, churn(*c.lun(0), &other_cycles));
  clock.RunUntilIdle();
  Window same = measure(window, churn(*c.lun(3), &same_cycles));
  clock.RunUntilIdle();
  rep.Line("\n## LUN 2 under 4 KiB random writes (QD 16) while another LUN is reset, detached, formatted, attached in a loop\n");
  rep.Line("| while | IOPS | vs alone | p99 us | reset+format cycles |");
  rep.Line("|---|---|---|---|---|");
  rep.Line(fmt::format("| alone | {:.0f} | 1.00 | {:.0f} | - |", alone.Iops(), alone.P99Us()));
  rep.Line(fmt::format("| LUN 0 (other controller) churns | {:.0f} | {:.2f} | {:.0f} | {} |", other.Iops(),
                       other.Iops() / alone.Iops(), other.P99Us(), other_cycles));
  rep.Line(fmt::format("| LUN 3 (same controller) churns | {:.0f} | {:.2f} | {:.0f} | {} |", same.Iops(),
                       same.Iops() / alone.Iops(), same.P99Us(), same_cycles));
  if (!rep.WriteTo(out)) return 3;
  if (check) {
    if (four / one < 3.0) {
      std::fprintf(stderr, "FAIL: 4 LUNs give %.2fx one LUN (want >= 3x)\n", four / one);
      return 1;
    }
    if (other.Iops() / alone.Iops() < 0.9) {
      std::fprintf(stderr, "FAIL: LUN 2 keeps %.2fx its IOPS while LUN 0 churns (want >= 0.9)\n",
                   other.Iops() / alone.Iops());
      return 1;
    }
  }
  return 0;
}
