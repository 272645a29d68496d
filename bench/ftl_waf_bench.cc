// Write amplification of the FTL's groomer, measured in virtual time on the simulated
// card, against the analytic figure for uniform random writes with greedy cleaning:
//   WAF = a / (a + W0(-a e^-a)),  a = 1 + rho  (rho = spare / user capacity)
// and, under 80/20 skew, cost-benefit with hot/cold separation against greedy.
//
// usage: ftl_waf_bench [--quick] [--check] [--out FILE.md]
//   --quick   small run (a smoke test: checks it runs)
//   --check   exit 1 if greedy misses the formula by more than 5% at any rho
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace vsl {
namespace {

namespace fs = std::filesystem;

// Principal branch of Lambert W for x in [-1/e, 0), by Halley's iteration.
double LambertW0(double x) {
  double w = x < -0.3 ? -0.5 : x;
  for (int i = 0; i < 100; ++i) {
    const double e = std::exp(w);
    const double f = w * e - x;
    const double next = w - f / (e * (w + 1) - (w + 2) * f / (2 * w + 2));
    if (std::fabs(next - w) < 1e-14) return next;
    w = next;
  }
  return w;
}

double FormulaWaf(double rho) {
  const double a = 1 + rho;
  return a / (a + LambertW0(-a * std::exp(-a)));
}

struct WafResult {
  double rho_nominal, rho_effective, waf, formula;
  uint64_t host_sectors;
};

// Formats a fresh bench card with `spare` and runs random writes; `hot` < 1 sends 80% of
// writes to that fraction of the space.
WafResult Run(double spare, ftl::VictimPolicy policy, bool separate, double hot_fraction,
           double prefill_rounds, double measure_rounds, uint64_t seed) {
  const std::string dir = (fs::exists("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) +
                          "/openvsl-waf-" + std::to_string(::getpid());
  fs::remove_all(dir);
  auto profile = simcard::FindProfile("bench-waf").value();
  if (!simcard::SimCard::Create(dir, profile, {}).ok()) std::abort();
  VirtualClock clock(seed);
  simcard::SimCardOptions so;
  so.null_timing = true;
  auto card = std::move(simcard::SimCard::Open(dir, clock, so).value());
  ftl::FormatOptions fo;
  fo.reserve = spare < 0.07 ? ftl::ReserveMode::kUnderProvision : ftl::ReserveMode::kCustom;
  fo.spare_percent = spare * 100;
  std::optional<Status> st;
  ftl::Ftl::Format(card->pipe(0), clock, fo, [&](Status s) { st = s; });
  clock.RunUntilTrue([&] { return st.has_value(); });
  ftl::FtlOptions oo;
  oo.victim_policy = policy;
  oo.separate_gc_stream = separate;
  std::unique_ptr<ftl::Ftl> f;
  ftl::Ftl::Open(card->pipe(0), clock, oo, [&](Result<std::unique_ptr<ftl::Ftl>> r) {
    if (!r.ok()) std::abort();
    f = std::move(r).value();
  });
  clock.RunUntilTrue([&] { return f != nullptr; });
  const uint64_t n = f->sectors();
  std::vector<uint8_t> data(4096, 0x5A);
  Rng rng(seed);
  auto burst = [&](uint64_t count, bool sequential, uint64_t start) {
    // Queue depth 256: enough that pages fill before the engine pads them.
    uint64_t issued = 0;
    while (issued < count) {
      const uint64_t batch = std::min<uint64_t>(256, count - issued);
      for (uint64_t i = 0; i < batch; ++i) {
        uint64_t lba;
        if (sequential) {
          lba = (start + issued + i) % n;
        } else if (hot_fraction < 1 && rng.Bernoulli(0.8)) {
          lba = rng.Below(static_cast<uint64_t>(n * hot_fraction));
        } else if (hot_fraction < 1) {
          const uint64_t hot = static_cast<uint64_t>(n * hot_fraction);
          lba = hot + rng.Below(n - hot);
        } else {
          lba = rng.Below(n);
        }
        f->Write(lba, 1, data.data(), false, [](Status s) {
          if (!s.ok()) std::abort();
        });
      }
      issued += batch;
      clock.RunUntilIdle();
    }
  };
  burst(n, true, 0);  // precondition: every sector mapped once
  burst(static_cast<uint64_t>(prefill_rounds * n), false, 0);
  const auto before = f->stats();
  burst(static_cast<uint64_t>(measure_rounds * n), false, 0);
  const auto& after = f->stats();
  const double host = static_cast<double>(after.host_write_sectors - before.host_write_sectors);
  const double flash = static_cast<double>((after.host_write_sectors + after.gc_write_sectors + after.pad_sectors) -
                                           (before.host_write_sectors + before.gc_write_sectors + before.pad_sectors));
  // Effective spare: every data LEB that can hold sectors (less its summary pages),
  // except those the groomer keeps free, against the user capacity.
  const auto& g = f->geometry();
  const auto leb_sectors = static_cast<double>(f->leb_data_sectors());
  const double holding = (g.blocks_per_lun - 2 - oo.gc_start_free_lebs) * leb_sectors;
  WafResult r{spare, holding / static_cast<double>(n) - 1, flash / host, 0, static_cast<uint64_t>(host)};
  r.formula = FormulaWaf(r.rho_effective);
  f.reset();
  card.reset();
  fs::remove_all(dir);
  return r;
}

}  // namespace
}  // namespace vsl

int main(int argc, char** argv) {
  using namespace vsl;
  bool quick = false, check = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--check")) check = true;
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--check] [--out FILE.md]\n", argv[0]);
      return 2;
    }
  }
  const double prefill = quick ? 0.3 : 3.0, measure = quick ? 0.3 : 3.0;
  bench::Report report;
  auto line = [&](const std::string& s) { report.Line(s); };
  line("## Uniform random 4 KiB writes, greedy victim choice (bench-waf card, virtual time)");
  line("");
  line("| rho (format) | rho (effective) | measured WAF | formula WAF | measured / formula |");
  line("|---|---|---|---|---|");
  bool ok = true;
  for (double rho : {0.07, 0.28, 1.0}) {
    auto r = Run(rho, ftl::VictimPolicy::kGreedy, false, 1.0, prefill, measure, 1);
    char buf[256];
    std::snprintf(buf, sizeof(buf), "| %.2f | %.3f | %.3f | %.3f | %.3f |", r.rho_nominal,
                  r.rho_effective, r.waf, r.formula, r.waf / r.formula);
    line(buf);
    if (std::fabs(r.waf / r.formula - 1) > 0.05) ok = false;
  }
  line("");
  line("## 80/20 skewed 4 KiB writes (80% of writes to 20% of the space), rho 0.28");
  line("");
  line("| policy | measured WAF |");
  line("|---|---|");
  auto g = Run(0.28, ftl::VictimPolicy::kGreedy, false, 0.2, prefill, measure, 2);
  auto cb = Run(0.28, ftl::VictimPolicy::kCostBenefit, true, 0.2, prefill, measure, 2);
  char buf[256];
  std::snprintf(buf, sizeof(buf), "| greedy, one append point | %.3f |", g.waf);
  line(buf);
  std::snprintf(buf, sizeof(buf), "| cost-benefit, groomed data to its own append point | %.3f |", cb.waf);
  line(buf);
  if (!report.WriteTo(out)) std::fprintf(stderr, "cannot write %s\n", out.c_str());
  if (check && !ok) {
    std::fprintf(stderr, "greedy WAF is more than 5%% from the formula\n");
    return 1;
  }
  return 0;
}
