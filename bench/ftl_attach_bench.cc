// Attach time of one duo-slc pipe after a clean shutdown (checkpoint) and after a power
// cut (scan), as the written share of the device grows. Times are on the card's virtual
// clock (what a user would wait on the modelled card) and in wall time (host CPU).
//
// usage: ftl_attach_bench [--blocks N] [--quick] [--out FILE.md]
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_report.h"
#include "vsl/core/clock.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace fs = std::filesystem;
using namespace vsl;

namespace {
struct Env {
  std::string dir;
  VirtualClock clock{1};
  std::unique_ptr<simcard::SimCard> card;
  std::unique_ptr<ftl::Ftl> f;
  void OpenCard() { card = std::move(simcard::SimCard::Open(dir, clock).value()); }
  // Returns {virtual ns, wall ns} of the attach.
  std::pair<DurNs, double> Attach() {
    f.reset();
    const auto w0 = std::chrono::steady_clock::now();
    ftl::Ftl::Open(card->pipe(0), clock, {}, [&](Result<std::unique_ptr<ftl::Ftl>> r) {
      if (!r.ok()) std::abort();
      f = std::move(r).value();
    });
    clock.RunUntilTrue([&] { return f != nullptr; });
    const double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - w0).count();
    return {f->attach_info().attach_ns, wall};
  }
};
}  // namespace

int main(int argc, char** argv) {
  uint32_t blocks = 64;
  bool quick = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--blocks N] [--quick] [--out FILE.md]\n", argv[0]);
      return 2;
    }
  }
  if (quick) blocks = 16;
  bench::Report report;
  auto line = [&](const std::string& s) { report.Line(s); };
  char buf[256];
  std::snprintf(buf, sizeof(buf), "## Attach time, one duo-slc pipe with %u blocks per die (virtual time; wall time is host CPU)", blocks);
  line(buf);
  line("");
  line("| written | clean: card ms | clean: wall ms | unclean (scan): card ms | unclean: wall ms | page reads (unclean) | LEBs via summary / scanned |");
  line("|---|---|---|---|---|---|---|");
  for (double share : {0.1, 0.5, 1.0}) {
    Env e;
    e.dir = (fs::exists("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) +
            "/openvsl-attach-" + std::to_string(::getpid());
    fs::remove_all(e.dir);
    simcard::CreateOptions co;
    co.blocks_per_lun = blocks;
    if (!simcard::SimCard::Create(e.dir, simcard::FindProfile("duo-slc").value(), co).ok()) return 3;
    e.OpenCard();
    std::optional<Status> st;
    ftl::Ftl::Format(e.card->pipe(0), e.clock, {}, [&](Status s) { st = s; });
    e.clock.RunUntilTrue([&] { return st.has_value(); });
    e.Attach();
    const auto n = static_cast<uint64_t>(share * static_cast<double>(e.f->sectors()));
    std::vector<uint8_t> data(uint64_t{64} * 4096, 0x11);
    uint64_t done = 0;
    for (uint64_t lba = 0; lba < n; lba += 64) {
      const auto cnt = static_cast<uint32_t>(std::min<uint64_t>(64, n - lba));
      e.f->Write(lba, cnt, data.data(), false, [&](Status s) {
        if (!s.ok()) std::abort();
        ++done;
      });
      if (lba % (64 * 64) == 0) e.clock.RunUntilIdle();
    }
    e.clock.RunUntilIdle();
    // Unclean: power cut after writing, before any shutdown. Recovery loads the dirty
    // checkpoint written at the attach before the writes and scans what came after.
    e.card->PowerCut();
    e.clock.RunUntilIdle();
    e.f.reset();
    e.card.reset();
    e.OpenCard();
    auto unclean = e.Attach();
    const auto ai = e.f->attach_info();
    // Clean: shut down (checkpoint), reopen.
    std::optional<Status> sd;
    e.f->Shutdown([&](Status s) { sd = s; });
    e.clock.RunUntilTrue([&] { return sd.has_value(); });
    e.f.reset();
    e.card.reset();
    e.OpenCard();
    auto clean = e.Attach();
    const bool from_ckpt = e.f->attach_info().from_checkpoint;
    std::snprintf(buf, sizeof(buf), "| %.0f%% | %.1f%s | %.0f | %.1f | %.0f | %llu | %u / %u |", share * 100,
                  static_cast<double>(clean.first) / 1e6, from_ckpt ? "" : " (no checkpoint)",
                  clean.second / 1e6, static_cast<double>(unclean.first) / 1e6, unclean.second / 1e6,
                  static_cast<unsigned long long>(ai.pages_read), ai.summaries_used, ai.lebs_scanned);
    line(buf);
    e.f.reset();
    e.card.reset();
    fs::remove_all(e.dir);
  }
  if (!report.WriteTo(out)) std::fprintf(stderr, "cannot write %s\n", out.c_str());
  return 0;
}
