// Attach time of one duo-slc pipe after a clean shutdown (checkpoint) and after a power
// cut (scan), as the written share of the device grows. Times are on the card's virtual
// clock (what a user would wait on the modelled card) and in wall time (host CPU).
//
// usage: ftl_attach_bench [--blocks N] [--quick] [--out FILE.md]
//        ftl_attach_bench --full-size [--write-gib G] [--out FILE.md]
// --full-size: one pipe of the full-size duo-slc card (16384 blocks per die, ~300 GB):
// its checkpoint spans metadata slots of several LEBs; the clean attach reads it (a dense
// map's checkpoint is as large however much is written), the unclean one reads the
// attach's checkpoint and scans what was written since, bounded by the periodic
// checkpoints (FtlOptions::checkpoint_interval_lebs).
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
  ftl::FtlOptions opts;
  void OpenCard() { card = std::move(simcard::SimCard::Open(dir, clock).value()); }
  // Returns {virtual ns, wall ns} of the attach.
  std::pair<DurNs, double> Attach() {
    f.reset();
    const auto w0 = std::chrono::steady_clock::now();
    ftl::Ftl::Open(card->pipe(0), clock, opts, [&](Result<std::unique_ptr<ftl::Ftl>> r) {
      if (!r.ok()) std::abort();
      f = std::move(r).value();
    });
    clock.RunUntilTrue([&] { return f != nullptr; });
    const double wall = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - w0).count();
    return {f->attach_info().attach_ns, wall};
  }

  // Writes sectors [from, to) sequentially, 64 at a time.
  void WriteRange(uint64_t from, uint64_t to) {
    std::vector<uint8_t> data(uint64_t{64} * f->sector_bytes(), 0x11);
    for (uint64_t lba = from; lba < to; lba += 64) {
      const auto cnt = static_cast<uint32_t>(std::min<uint64_t>(64, to - lba));
      f->Write(lba, cnt, data.data(), false, [](Status s) {
        if (!s.ok()) std::abort();
      });
      if (lba % (64 * 64) == 0) clock.RunUntilIdle();
    }
    clock.RunUntilIdle();
  }
  DurNs Shutdown() {
    const TimeNs t0 = clock.Now();
    std::optional<Status> sd;
    f->Shutdown([&](Status s) { sd = s; });
    clock.RunUntilTrue([&] { return sd.has_value(); });
    if (!sd->ok()) std::abort();
    return clock.Now() - t0;
  }
  void Reopen(bool cut) {
    if (cut) {
      card->PowerCut();
      clock.RunUntilIdle();
    }
    f.reset();
    card.reset();
    OpenCard();
  }
};

std::string TempCardDir() {
  return (fs::exists("/dev/shm") ? std::string("/dev/shm") : fs::temp_directory_path().string()) +
         "/openvsl-attach-" + std::to_string(::getpid());
}

// One pipe of the full-size duo-slc card: format, write, clean and unclean attach.
int FullSize(double write_gib, bench::Report& report) {
  auto line = [&](const std::string& s) { report.Line(s); };
  char buf[512];
  Env e;
  e.dir = TempCardDir();
  fs::remove_all(e.dir);
  if (!simcard::SimCard::Create(e.dir, simcard::FindProfile("duo-slc").value(), {}).ok()) return 3;
  e.OpenCard();
  std::optional<Status> st;
  const TimeNs f0 = e.clock.Now();
  ftl::Ftl::Format(e.card->pipe(0), e.clock, {}, [&](Status s) { st = s; });
  e.clock.RunUntilTrue([&] { return st.has_value(); });
  if (!st->ok()) return 4;
  const DurNs format_ns = e.clock.Now() - f0;
  const auto first = e.Attach();
  const uint64_t n = e.f->sectors();
  const double user_gib = static_cast<double>(n) * e.f->sector_bytes() / (1ull << 30);
  const uint32_t k = e.f->metadata_slot_lebs();
  const auto to = std::min<uint64_t>(n, static_cast<uint64_t>(write_gib * (1ull << 30) / e.f->sector_bytes()));
  const auto w0 = std::chrono::steady_clock::now();
  e.WriteRange(0, to);
  const double write_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const DurNs shutdown_ns = e.Shutdown();
  e.Reopen(false);
  const auto clean = e.Attach();
  const auto ca = e.f->attach_info();
  // Unclean: 2 GiB more after the clean attach (whose dirty checkpoint is the base), cut.
  const uint64_t more = std::min<uint64_t>(n, to + (2ull << 30) / e.f->sector_bytes());
  e.WriteRange(to, more);
  e.Reopen(true);
  const auto unclean = e.Attach();
  const auto ua = e.f->attach_info();
  // The bound: with a short interval, far more written than it, the scan stays near it.
  e.opts.checkpoint_interval_lebs = 64;
  e.Attach();
  e.WriteRange(0, std::min<uint64_t>(n, (6ull << 30) / e.f->sector_bytes()));
  const uint64_t periodic = e.f->stats().periodic_checkpoints;
  e.Reopen(true);
  const auto bounded = e.Attach();
  const auto ba = e.f->attach_info();
  line("## Attach of a full-size duo-slc pipe (metadata slots of several LEBs)");
  line("");
  std::snprintf(buf, sizeof(buf),
                "One pipe of the full-size card: %.1f GiB of user space, %u blocks per die, metadata slots of %u LEBs "
                "(format %.0f card ms, first attach %.1f card ms). %.2f GiB written sequentially (%.1f s of host "
                "time), then a clean shutdown (its checkpoint: %.1f card ms).",
                user_gib, e.f->geometry().blocks_per_lun, k, static_cast<double>(format_ns) / 1e6,
                static_cast<double>(first.first) / 1e6, static_cast<double>(to) * e.f->sector_bytes() / (1ull << 30),
                write_s, static_cast<double>(shutdown_ns) / 1e6);
  line(buf);
  line("");
  line("| attach | card ms | card ms per 100 GiB of user space | wall ms | LEBs scanned | page reads of the scan |");
  line("|---|---|---|---|---|---|");
  auto row = [&](const std::string& what, std::pair<DurNs, double> t, const ftl::AttachInfo& a) {
    std::snprintf(buf, sizeof(buf), "| %s | %.1f | %.1f | %.0f | %u | %llu |", what.c_str(), static_cast<double>(t.first) / 1e6,
                  static_cast<double>(t.first) / 1e6 * 100.0 / user_gib, t.second / 1e6, a.lebs_scanned,
                  static_cast<unsigned long long>(a.pages_read));
    line(buf);
  };
  row(ca.from_checkpoint ? "clean (from the checkpoint)" : "clean (NO checkpoint: scanned)", clean, ca);
  row("unclean: cut after 2 GiB more (interval 1024 LEBs)", unclean, ua);
  row("unclean: cut after 6 GiB with interval 64 LEBs (" + std::to_string(periodic) + " periodic checkpoints)",
      bounded, ba);
  line("");
  line("A dense map's checkpoint holds every sector's entry whether written or not, so the clean figure is the "
       "same for a pipe written end to end (what changes is host CPU to load the entries). The unclean attach "
       "reads the attach's checkpoint, then scans the LEBs opened since the last checkpoint: at most "
       "checkpoint_interval_lebs plus the open ones.");
  line("");
  e.f.reset();
  e.card.reset();
  fs::remove_all(e.dir);
  return 0;
}
}  // namespace

int main(int argc, char** argv) {
  uint32_t blocks = 64;
  bool quick = false, full_size = false;
  double write_gib = 8;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--blocks") && i + 1 < argc) blocks = static_cast<uint32_t>(std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--full-size")) full_size = true;
    else if (!std::strcmp(argv[i], "--write-gib") && i + 1 < argc) write_gib = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--out") && i + 1 < argc) out = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--blocks N] [--quick] [--full-size [--write-gib G]] [--out FILE.md]\n", argv[0]);
      return 2;
    }
  }
  if (full_size) {
    bench::Report report;
    if (int rc = FullSize(write_gib, report); rc != 0) return rc;
    if (!report.WriteTo(out)) std::fprintf(stderr, "cannot write %s\n", out.c_str());
    return 0;
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
