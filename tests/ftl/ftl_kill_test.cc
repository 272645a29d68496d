// The host process killed (not a power cut): the card keeps its power and finishes what
// its controller accepted (the simulated card's PLP journal), and the FTL recovers by
// scan. Every write acknowledged before the kill must read back; one in flight may read
// old or new. Deterministic per seed, in virtual time (VSL_KILL_SEEDS seeds, default 40;
// VSL_KILL_SEED=N replays one; VSL_KILL_PROFILE=duo-slc-small for the card vsld runs).
// Leaves the killed FTL allocated by design (marked for LeakSanitizer).
#include <cstdlib>
#include <map>
#include <memory>
#include <optional>

#include <gtest/gtest.h>
#ifdef __SANITIZE_ADDRESS__
#include <sanitizer/lsan_interface.h>
#endif

#include "tests/testutil/temp_dir.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::testing {
namespace {

struct Life {
  std::unique_ptr<VirtualClock> clock;
  std::unique_ptr<simcard::SimCard> card;
  std::unique_ptr<ftl::Ftl> ftl;
};

std::vector<uint8_t> Data(uint64_t lba, uint64_t version, uint32_t bytes) {
  std::vector<uint8_t> v(bytes);
  Rng(lba * 1000003 + version).Fill(v.data(), v.size());
  return v;
}

// Returns "" or what went wrong.
std::string RunSeed(uint64_t seed) {
  TempDir tmp;
  const std::string dir = tmp.Sub("card");
  const char* pe = std::getenv("VSL_KILL_PROFILE");
  auto prof = simcard::FindProfile(pe != nullptr ? pe : "test-small").value();
  if (!simcard::SimCard::Create(dir, prof, {}).ok()) return "create";
  Rng rng(seed);
  std::map<uint64_t, uint64_t> acked;           // lba -> version acknowledged last
  std::map<uint64_t, uint64_t> inflight;        // lba -> version in flight
  uint64_t next_version = 1;
  auto open = [&](bool format) -> Life {
    Life l;
    l.clock = std::make_unique<VirtualClock>(seed);
    l.card = simcard::SimCard::Open(dir, *l.clock).value();
    if (format) {
      std::optional<Status> s;
      ftl::Ftl::Format(l.card->pipe(0), *l.clock, {}, [&](Status x) { s = x; });
      l.clock->RunUntilTrue([&] { return s.has_value(); });
    }
    std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
    ftl::Ftl::Open(l.card->pipe(0), *l.clock, {}, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
    l.clock->RunUntilTrue([&] { return r.has_value(); });
    if (r.has_value() && r->ok()) l.ftl = std::move(*r).value();
    return l;
  };
  Life life = open(true);
  for (int round = 0; round < 4; ++round) {
    if (!life.ftl) return "attach failed in round " + std::to_string(round);
    ftl::Ftl& f = *life.ftl;
    const uint32_t sb = f.sector_bytes();
    const char* se = std::getenv("VSL_KILL_SPAN");
    const uint64_t span = std::min<uint64_t>(f.sectors(), se != nullptr ? std::strtoull(se, nullptr, 10) : 2048);
    if (std::getenv("VSL_KILL_TRIM") != nullptr) {
      // As the NBD crash test does: the range zeroed (trimmed) and flushed first.
      std::optional<Status> t;
      f.Trim(0, span, [&](Status x) { t = x; });
      life.clock->RunUntilTrue([&] { return t.has_value(); });
      std::optional<Status> fl;
      f.Flush([&](Status x) { fl = x; });
      life.clock->RunUntilTrue([&] { return fl.has_value(); });
      acked.clear();
    }
    // Keep 16 writes in flight, never two on one sector.
    std::function<void()> issue = [&]() {
      while (inflight.size() < 16) {
        const uint64_t lba = rng.Below(span);
        if (inflight.count(lba)) continue;
        const uint64_t v = next_version++;
        inflight[lba] = v;
        auto buf = std::make_shared<std::vector<uint8_t>>(Data(lba, v, sb));
        f.Write(lba, 1, buf->data(), false, [&, lba, v, buf](Status s) {
          inflight.erase(lba);
          if (s.ok()) acked[lba] = v;
          issue();
        });
      }
    };
    issue();
    const char* me = std::getenv("VSL_KILL_MS");
    const uint64_t max_ms = me != nullptr ? std::strtoull(me, nullptr, 10) : 20;
    life.clock->RunUntil(life.clock->Now() + 200 * kUs + rng.Below(max_ms * kMs));
    // The kill: nothing more runs in this life.
    life.card->TEST_Abandon();
    life.card.reset();
    // Its contexts refer to the dead clock: it is left, as the process would leave it
    // (kept live for LeakSanitizer: everything it holds is then not reported).
    ftl::Ftl* dead = life.ftl.release();
#ifdef __SANITIZE_ADDRESS__
    __lsan_ignore_object(dead);
#else
    (void)dead;
#endif
    life.clock.reset();
    std::map<uint64_t, uint64_t> pending = inflight;
    inflight.clear();
    life = open(false);
    if (!life.ftl) return "attach after kill " + std::to_string(round) + " failed";
    for (const auto& [lba, v] : acked) {
      std::vector<uint8_t> out(life.ftl->sector_bytes());
      std::optional<Status> s;
      life.ftl->Read(lba, 1, out.data(), [&](Status x) { s = x; });
      life.clock->RunUntilTrue([&] { return s.has_value(); });
      const bool is_acked = out == Data(lba, v, life.ftl->sector_bytes());
      const auto p = pending.find(lba);
      const bool is_pending = p != pending.end() && out == Data(lba, p->second, life.ftl->sector_bytes());
      if (!s.has_value() || !s->ok() || !(is_acked || is_pending)) {
        return "round " + std::to_string(round) + ": lba " + std::to_string(lba) + " version " + std::to_string(v) +
               " lost";
      }
      if (is_pending) acked[lba] = p->second;
    }
    for (const auto& [lba, v] : pending) {
      if (acked.count(lba)) continue;
      std::vector<uint8_t> out(life.ftl->sector_bytes());
      std::optional<Status> s;
      life.ftl->Read(lba, 1, out.data(), [&](Status x) { s = x; });
      life.clock->RunUntilTrue([&] { return s.has_value(); });
      if (out == Data(lba, v, life.ftl->sector_bytes())) acked[lba] = v;
    }
  }
  return "";
}

TEST(FtlHostKill, AcknowledgedWritesSurviveAKilledHost) {
  uint64_t first = 1, n = 40;
  if (const char* e = std::getenv("VSL_KILL_SEEDS")) n = std::strtoull(e, nullptr, 10);
  if (const char* e = std::getenv("VSL_KILL_SEED")) first = std::strtoull(e, nullptr, 10), n = 1;
  int failures = 0;
  for (uint64_t seed = first; seed < first + n; ++seed) {
    const std::string r = RunSeed(seed);
    if (!r.empty()) {
      ADD_FAILURE() << "seed " << seed << ": " << r;
      if (++failures >= 5) break;
    }
  }
}

}  // namespace
}  // namespace vsl::testing
