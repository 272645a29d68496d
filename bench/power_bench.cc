// Power and thermal benchmark (docs/power.md): in virtual time on the duo-slc shape.
//
//  1. Write bandwidth and power against the card's limit: the slot limit (no override),
//     a 35 W and a 55 W override, and no limit at all (the NAND's own pace), each on a
//     fresh card with the same seeds: 2 x 2 LUNs, QD16 of 64 KiB random writes each.
//  2. Temperature over time at two airflows, full-speed writes with a 55 W override at
//     40 C ambient. The heat capacity is divided by --time-scale so the curves take
//     seconds of simulated time, not minutes; the table gives both the simulated time and
//     the time it stands for at the card's real heat capacity (the model is linear and
//     first order, so only the time axis scales).
//
// Usage: power_bench [--quick] [--blocks N] [--out FILE]
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <fmt/format.h>

#include "tests/testutil/sim_of.h"
#include "bench/bench_report.h"
#include "vsl/core/log.h"
#include "tests/power/power_harness.h"

namespace {

using namespace vsl;
using vsl::testing::Load;
using vsl::testing::LoadResult;

std::string TempDir() {
  std::string t = (std::filesystem::temp_directory_path() / "vsl-power-bench-XXXXXX").string();
  if (::mkdtemp(t.data()) == nullptr) std::abort();
  return t;
}

struct Args {
  bool quick = false;
  uint32_t blocks = 40;
  double time_scale = 40;
  std::string out;
};

}  // namespace

int main(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--quick") a.quick = true;
    else if (s == "--blocks" && i + 1 < argc) a.blocks = static_cast<uint32_t>(std::stoul(argv[++i]));
    else if (s == "--time-scale" && i + 1 < argc) a.time_scale = std::stod(argv[++i]);
    else if (s == "--out" && i + 1 < argc) a.out = argv[++i];
    else {
      std::fprintf(stderr, "usage: power_bench [--quick] [--blocks N] [--time-scale K] [--out FILE]\n");
      return 2;
    }
  }
  vsl::SetLogLevel(spdlog::level::warn);
  bench::Report rep;
  const DurNs run = a.quick ? 50 * kMs : 400 * kMs;
  rep.Line(fmt::format("# Power and thermal (virtual time, duo-slc shape, {} blocks per die)\n", a.blocks));
  rep.Line("## Write bandwidth and power against the limit\n");
  rep.Line(fmt::format("4 LUNs x QD16 x 64 KiB random writes, {} ms after a 50 ms warm-up; power from the card's own "
                       "energy meter sampled every 1 ms.\n",
                       run / kMs));
  rep.Line("| limit | write MB/s | of no-limit | average W | highest 100 ms window W |");
  rep.Line("|---|---|---|---|---|");
  struct Row {
    const char* name;
    double override_w;
  };
  const Row rows[] = {{"none (no limit)", 1000}, {"no override: slot 24.75 W", 0}, {"override 35 W", 35},
                      {"override 55 W", 55}};
  double free_mbps = 0;
  int failures = 0;
  for (const Row& row : rows) {
    const std::string dir = TempDir();
    if (!vsl::testing::MakeDuoSlc(dir + "/card", a.blocks).ok()) return 1;
    VirtualClock clock(1);
    card::CardOptions o;
    o.power.override_w = row.override_w;
    o.power.slot_capability_w = 1000;
    auto c = vsl::testing::OpenAttached(dir + "/card", clock, o);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
      return 1;
    }
    Load load;
    load.write_qd = 16;
    vsl::testing::RunLoad(**c, clock, load, 50 * kMs);
    const LoadResult r = vsl::testing::RunLoad(**c, clock, load, run);
    if (row.override_w >= 1000) free_mbps = r.WriteMBps();
    const double limit = row.override_w > 0 ? row.override_w : card::kSlotLimitW;
    if (r.MaxWindowW(100) > limit || r.errors != 0) ++failures;
    rep.Line(fmt::format("| {} | {:.0f} | {:.0f}% | {:.2f} | {:.2f} |", row.name, r.WriteMBps(),
                         free_mbps > 0 ? 100 * r.WriteMBps() / free_mbps : 100.0, r.AvgW(), r.MaxWindowW(100)));
    c->reset();
    std::filesystem::remove_all(dir);
  }
  const double scale = a.time_scale;
  const simcard::Power pw;
  rep.Line(fmt::format("\n## Temperature over time at two airflows\n\nFull-speed writes (as above) with a 55 W override "
                       "at 40 C ambient; heat capacity {:.3f} J/C instead of {:.0f} (time scale {:.0f}x). Thermal "
                       "resistance per controller: {:.2f} C/W at 300 LFM, {:.2f} C/W at 50 LFM. Writes throttle from "
                       "78 C.\n",
                       pw.heat_capacity_j_per_c / scale, pw.heat_capacity_j_per_c, scale, pw.ThermalResistance(300),
                       pw.ThermalResistance(50)));
  const double airflows[] = {300, 50};
  const int steps = a.quick ? 2 : 16;
  const DurNs step = 500 * kMs;
  std::vector<std::vector<std::pair<double, double>>> curves;  // (temp, MB/s) per step
  for (double lfm : airflows) {
    const std::string dir = TempDir();
    if (!vsl::testing::MakeDuoSlc(dir + "/card", a.blocks).ok()) return 1;
    VirtualClock clock(1);
    card::CardOptions o;
    o.power.override_w = 55;
    o.power.slot_capability_w = 75;
    simcard::Power p2;
    p2.heat_capacity_j_per_c = pw.heat_capacity_j_per_c / scale;
    o.sim.power = p2;
    o.sim.environment = {40.0, lfm};
    auto c = vsl::testing::OpenAttached(dir + "/card", clock, o);
    if (!c.ok()) return 1;
    // From the temperature at rest.
    clock.RunFor(static_cast<DurNs>(10 * pw.ThermalResistance(lfm) * p2.heat_capacity_j_per_c * 1e9));
    Load load;
    load.write_qd = 16;
    std::vector<std::pair<double, double>> curve;
    double t0 = 0;
    for (uint32_t k = 0; k < (*c)->controllers(); ++k) t0 = std::max(t0, vsl::testing::SimOf(*(*c)).ReadPower(k).temperature_c);
    curve.emplace_back(t0, 0);
    for (int i = 0; i < steps; ++i) {
      const LoadResult r = vsl::testing::RunLoad(**c, clock, load, step);
      if (r.errors != 0 || r.MaxTempC() >= 85) ++failures;
      curve.emplace_back(r.temp_c.empty() ? 0 : r.temp_c.back(), r.WriteMBps());
    }
    const auto st = (*c)->power_status();
    rep.Line(fmt::format("- {:.0f} LFM: {} throttle event(s), {:.2f} s throttled (simulated), highest {:.1f} C", lfm,
                         st.throttle_events, st.throttled_ns / 1e9, st.controllers[0].max_temperature_c));
    curves.push_back(curve);
    c->reset();
    std::filesystem::remove_all(dir);
  }
  rep.Line("\n| simulated s | at real heat capacity, s | 300 LFM: C | MB/s | 50 LFM: C | MB/s |");
  rep.Line("|---|---|---|---|---|---|");
  for (int i = 0; i <= steps; ++i) {
    const double ts = i * step / 1e9;
    rep.Line(fmt::format("| {:.1f} | {:.0f} | {:.1f} | {} | {:.1f} | {} |", ts, ts * scale, curves[0][i].first,
                         i == 0 ? std::string("-") : fmt::format("{:.0f}", curves[0][i].second), curves[1][i].first,
                         i == 0 ? std::string("-") : fmt::format("{:.0f}", curves[1][i].second)));
  }
  if (!rep.WriteTo(a.out)) return 1;
  if (failures != 0) {
    std::fprintf(stderr, "power_bench: %d check(s) failed (a window over its limit, I/O errors, or 85 C reached)\n",
                 failures);
    return 1;
  }
  return 0;
}
