#include "tests/rtl/ftl_harness.h"

#include <cstdlib>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

#include "tests/rtl/cosim_pipes.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"

namespace vsl::testing {
namespace {

struct Model {
  uint64_t version = 0;  // 0: zeroes
  uint64_t issue = 0;    // issue number of the op that set it
};

}  // namespace

int HarnessSeeds() {
  const char* e = std::getenv("VSL_COSIM_SEEDS");
  return e ? std::atoi(e) : 2;
}

void RunFtlHarness(HarnessCard& card, VirtualClock& clock, std::unique_ptr<hw::ControllerPipe> (&pipes)[2],
                   int seeds, HarnessTotals* totals) {
  HarnessTotals& t = *totals;
  for (int seed = 1; seed <= seeds; ++seed) {
    Rng rng(static_cast<uint64_t>(seed));
    // In the last seed (of two or more) a die of pipe 0 dies in the middle of round 1:
    // FlashBack must rebuild its data from parity, online, and lose nothing.
    const bool kill = seed == seeds && seeds >= 2;
    const auto kill_lun = static_cast<uint32_t>(rng.Below(4));
    const int kill_op = static_cast<int>(rng.Range(5, 25));
    std::unique_ptr<ftl::Ftl> ftls[2];
    auto attach = [&](uint32_t p) {
      ftls[p].reset();
      std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
      ftl::Ftl::Open(*pipes[p], clock, {}, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
      clock.RunUntilTrue([&] { return r.has_value(); }, kMaxEvents);
      ASSERT_TRUE(r.has_value() && r->ok()) << "seed " << seed << " pipe " << p << ": "
                                            << (r ? r->status().ToString() : "open never finished");
      ftls[p] = std::move(*r).value();
    };
    for (uint32_t p = 0; p < 2; ++p) {
      std::optional<Status> s;
      ftl::FormatOptions fo;
      // 512-byte sectors in the first seed (partial-page reads through the controller),
      // 4 KiB otherwise (the die-failure seed needs them: parity metadata).
      fo.sector_bytes = seed == 1 ? 512 : 4096;
      if (kill && p == 0) {  // room to stay writable on three dies
        fo.reserve = ftl::ReserveMode::kCustom;
        fo.spare_percent = 80;
      }
      ftl::Ftl::Format(*pipes[p], clock, fo, [&](Status x) { s = x; });
      clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
      ASSERT_TRUE(s && s->ok()) << (s ? s->ToString() : "format never finished");
      attach(p);
      if (::testing::Test::HasFatalFailure()) return;
    }
    std::map<uint64_t, Model> model[2];
    uint64_t issue = 0, version = 0;
    const uint32_t sb = ftls[0]->sector_bytes();
    auto content = [&](uint32_t p, uint64_t lba, uint64_t v) {
      std::vector<uint8_t> d(sb, 0);
      if (v != 0) Rng((uint64_t{p} << 60) ^ (lba * 1000003) ^ v).Fill(d.data(), sb);
      return d;
    };
    for (int round = 0; round < 4; ++round) {
      std::vector<std::shared_ptr<std::vector<uint8_t>>> bufs;
      int pending = 0;
      const int ops = static_cast<int>(rng.Range(30, 60));
      for (int i = 0; i < ops; ++i) {
        if (kill && round == 1 && i == kill_op) {
          card.kill_lun(0, kill_lun);
          t.die_failed = true;
        }
        const uint32_t p = static_cast<uint32_t>(rng.Below(2));
        auto& f = *ftls[p];
        const uint64_t span = std::max<uint64_t>(8, f.sectors() / 2);
        const uint64_t lba = rng.Below(span);
        const uint64_t kind = rng.Below(100), is = ++issue;
        ++pending;
        if (kind < 70) {
          const uint64_t v = ++version;
          auto buf = std::make_shared<std::vector<uint8_t>>(content(p, lba, v));
          bufs.push_back(buf);
          f.Write(lba, 1, buf->data(), rng.Bernoulli(0.1), [&, p, lba, v, is](Status s) {
            --pending;
            ASSERT_TRUE(s.ok()) << "write " << lba << ": " << s.ToString();
            ++t.acked;
            if (is > model[p][lba].issue) model[p][lba] = Model{v, is};
          });
        } else if (kind < 80) {
          f.Trim(lba, 1, [&, p, lba, is](Status s) {
            --pending;
            ASSERT_TRUE(s.ok()) << "trim " << lba << ": " << s.ToString();
            if (is > model[p][lba].issue) model[p][lba] = Model{0, is};
          });
        } else if (kind < 95) {
          auto buf = std::make_shared<std::vector<uint8_t>>(sb);
          bufs.push_back(buf);
          f.Read(lba, 1, buf->data(), [&](Status s) {
            --pending;
            EXPECT_TRUE(s.ok()) << s.ToString();
          });
        } else {
          f.Flush([&](Status s) {
            --pending;
            EXPECT_TRUE(s.ok()) << s.ToString();
          });
        }
        if (rng.Bernoulli(0.2)) clock.RunFor(rng.Range(0, 200 * kUs));
      }
      clock.RunUntilTrue([&] { return pending == 0; }, kMaxEvents);
      ASSERT_EQ(pending, 0) << "seed " << seed << " round " << round << ": requests never completed";
      uint64_t action = rng.Below(3);
      // After the die failure only clean restarts and live checks: a scanning attach
      // would read every page of the dead die, each costing RB_TIMEOUT of device time
      // (seconds of co-simulation per page).
      if (t.die_failed && action == 2) action = 1;
      if (round == 1 && !kill) action = 2;  // every run has a host crash
      for (uint32_t p = 0; p < 2; ++p) {
        if (action == 1) {  // clean restart of the host side
          std::optional<Status> s;
          ftls[p]->Shutdown([&](Status x) { s = x; });
          clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
          ASSERT_TRUE(s && s->ok());
          attach(p);
          ASSERT_TRUE(ftls[p]->attach_info().from_checkpoint);
        } else if (action == 2) {
          // Host crash: the FTL and the host's side of the pipe go without a shutdown,
          // commands of theirs possibly still in the controller (to a dead die, say); a new
          // host takes the rings over and the attach scans.
          ftls[p].reset();
          pipes[p].reset();
          auto np = hw::ControllerPipe::Create(card.port, clock, p, card.region_base[p], card.region_bytes);
          ASSERT_TRUE(np.ok()) << np.status().ToString();
          pipes[p] = std::move(np).value();
          std::optional<Status> s;
          pipes[p]->Init([&](Status x) { s = x; });
          clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
          ASSERT_TRUE(s && s->ok()) << (s ? s->ToString() : "Init never finished");
          ++t.host_crashes;
          attach(p);
          ASSERT_FALSE(ftls[p]->attach_info().from_checkpoint);
        }
        if (::testing::Test::HasFatalFailure()) return;
        for (const auto& [lba, m] : model[p]) {
          std::vector<uint8_t> out(sb, 0xAA);
          std::optional<Status> s;
          ftls[p]->Read(lba, 1, out.data(), [&](Status x) { s = x; });
          clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
          ASSERT_TRUE(s && s->ok());
          ASSERT_EQ(out, content(p, lba, m.version))
              << "seed " << seed << " round " << round << " pipe " << p << " sector " << lba << " (action "
              << action << ")";
          ++t.checked;
        }
      }
    }
    if (kill) {
      const auto st = ftls[0]->flashback_status();
      EXPECT_EQ(st.failed_dies, std::vector<uint32_t>{kill_lun}) << "the dead die was not taken out";
      EXPECT_EQ(st.rebuild_lebs_left, 0u) << "the rebuild did not finish";
      t.rebuilt = st.rebuilt_pages;
    }
    for (uint32_t p = 0; p < 2; ++p) {
      std::optional<Status> s;
      ftls[p]->Shutdown([&](Status x) { s = x; });
      clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
      ASSERT_TRUE(s && s->ok());
    }
  }
}

}  // namespace vsl::testing
