// The card model: controllers in dual- or single-pipe mode, a LUN per pipe (or per
// controller), each with its own engine and FTL; LUN isolation (one LUN reset, formatted
// or detached while another runs I/O), in virtual time and on real engine threads.
#include <atomic>
#include <map>
#include <optional>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/testutil/sim_of.h"
#include "tests/testutil/temp_dir.h"
#include "vsl/card/card.h"
#include "vsl/card/joined_pipe.h"
#include "vsl/card/volume.h"
#include "vsl/core/random.h"

namespace vsl::testing {
namespace {

using card::Card;
using card::CardOptions;
using card::Lun;
using card::LunState;
using card::PipeMode;

std::vector<uint8_t> Pattern(uint32_t lun, uint64_t lba, uint64_t version, uint32_t bytes) {
  std::vector<uint8_t> v(bytes);
  Rng((uint64_t{lun} << 48) ^ (lba * 1000003) ^ version).Fill(v.data(), bytes);
  return v;
}

class CardTest : public ::testing::Test {
 protected:
  void Create(uint32_t blocks = 24) {
    auto p = simcard::FindProfile("duo-slc-small");
    ASSERT_TRUE(p.ok());
    simcard::CreateOptions co;
    co.blocks_per_lun = blocks;
    ASSERT_TRUE(simcard::SimCard::Create(tmp_.Sub("card"), *p, co).ok());
  }
  void Open(bool threads = false) {
    CardOptions o;
    o.clock = threads ? nullptr : &clock_;
    auto c = Card::Open(tmp_.Sub("card"), o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    card_ = std::move(c).value();
  }
  // Synchronous I/O on a LUN (from the test thread: the LUN's engine runs it).
  Status Write(Lun& l, uint64_t lba, const std::vector<uint8_t>& data) {
    return l.Call([&l, lba, &data](Lun::Done d) {
      if (l.ftl() == nullptr) return d(Status::FailedPrecondition("offline"));
      l.ftl()->Write(lba, static_cast<uint32_t>(data.size() / l.ftl()->sector_bytes()), data.data(), false,
                     std::move(d));
    });
  }
  Status Read(Lun& l, uint64_t lba, std::vector<uint8_t>* out) {
    return l.Call([&l, lba, out](Lun::Done d) {
      if (l.ftl() == nullptr) return d(Status::FailedPrecondition("offline"));
      out->assign(l.ftl()->sector_bytes(), 0);
      l.ftl()->Read(lba, 1, out->data(), std::move(d));
    });
  }
  // The LUN's capacity and sector size (0, 0 when offline).
  std::pair<uint64_t, uint32_t> Shape(Lun& l) {
    std::pair<uint64_t, uint32_t> shape{0, 0};
    EXPECT_TRUE(l.Call([&l, &shape](Lun::Done d) {
      if (l.ftl() != nullptr) shape = {l.ftl()->sectors(), l.ftl()->sector_bytes()};
      d(Status::Ok());
    }).ok());
    return shape;
  }
  uint64_t Sectors(Lun& l) { return Shape(l).first; }
  uint32_t SectorBytes(Lun& l) { return Shape(l).second; }

  TempDir tmp_;
  VirtualClock clock_{1};
  std::unique_ptr<Card> card_;
};

TEST_F(CardTest, DuoCardShowsFourLunsInDualModeEachWithItsOwnData) {
  Create();
  Open();
  ASSERT_EQ(card_->luns().size(), 4u);
  for (Lun* l : card_->luns()) EXPECT_EQ(l->pipes().size(), 1u);
  // Never formatted: attach says so and the LUNs stay unformatted.
  ASSERT_TRUE(card_->AttachAll().ok());
  for (Lun* l : card_->luns()) EXPECT_EQ(l->state(), LunState::kUnformatted) << l->name();
  for (uint32_t c = 0; c < 2; ++c) ASSERT_TRUE(card_->FormatController(c, PipeMode::kDual, {}).ok());
  ASSERT_TRUE(card_->AttachAll().ok());
  for (Lun* l : card_->luns()) ASSERT_EQ(l->state(), LunState::kOnline) << l->name();
  const uint32_t sb = SectorBytes(*card_->lun(0));
  for (Lun* l : card_->luns()) {
    for (uint64_t lba = 0; lba < 64; ++lba) ASSERT_TRUE(Write(*l, lba, Pattern(l->index(), lba, 1, sb)).ok());
  }
  // Through a clean close and reopen.
  card_.reset();
  Open();
  ASSERT_TRUE(card_->AttachAll().ok());
  std::vector<uint8_t> out;
  for (Lun* l : card_->luns()) {
    EXPECT_EQ(card_->pipe_mode(l->controller()), PipeMode::kDual);
    for (uint64_t lba = 0; lba < 64; ++lba) {
      ASSERT_TRUE(Read(*l, lba, &out).ok());
      ASSERT_EQ(out, Pattern(l->index(), lba, 1, sb)) << l->name() << " lba " << lba;
    }
  }
}

// Single-pipe mode: one LUN over both pipes of a controller (twice the dies, about twice
// the capacity), kept in the controller's register across reopen and power cuts.
TEST_F(CardTest, SinglePipeModeJoinsTheControllersPipesIntoOneLun) {
  Create();
  Open();
  ASSERT_TRUE(card_->FormatController(1, PipeMode::kDual, {}).ok());
  ASSERT_TRUE(card_->FormatController(0, PipeMode::kSingle, {}).ok());
  ASSERT_TRUE(card_->AttachAll().ok());
  auto luns = card_->luns();
  ASSERT_EQ(luns.size(), 3u);
  Lun& joined = *card_->lun(0);
  EXPECT_EQ(joined.pipes(), (std::vector<uint32_t>{0, 1}));
  EXPECT_EQ(card_->lun(1), nullptr);
  const uint64_t big = Sectors(joined), small = Sectors(*card_->lun(2));
  EXPECT_GT(big, small * 19 / 10) << "two pipes' dies";
  EXPECT_LE(big, small * 21 / 10);
  const uint32_t sb = SectorBytes(joined);
  // Spread over the whole LUN, so both pipes hold data.
  std::vector<uint64_t> lbas;
  for (uint64_t lba = 0; lba < big; lba += big / 200) lbas.push_back(lba);
  for (uint64_t lba : lbas) ASSERT_TRUE(Write(joined, lba, Pattern(0, lba, 7, sb)).ok());
  // A power cut: every acknowledged write survives, the mode too.
  vsl::testing::SimOf(*card_).PowerCut();
  clock_.RunUntilIdle();
  card_.reset();
  Open();
  EXPECT_EQ(card_->pipe_mode(0), PipeMode::kSingle);
  ASSERT_TRUE(card_->AttachAll().ok());
  std::vector<uint8_t> out;
  for (uint64_t lba : lbas) {
    ASSERT_TRUE(Read(*card_->lun(0), lba, &out).ok());
    ASSERT_EQ(out, Pattern(0, lba, 7, sb)) << "lba " << lba;
  }
  // And back to dual-pipe mode: two LUNs again, each formatted afresh.
  ASSERT_TRUE(card_->FormatController(0, PipeMode::kDual, {}).ok());
  ASSERT_TRUE(card_->AttachAll().ok());
  EXPECT_EQ(card_->luns().size(), 4u);
  EXPECT_EQ(Sectors(*card_->lun(1)), small);
}

// The dual-active test: LUN 2 (the other controller) and LUN 1 (the same controller) run
// writes and verifying reads while LUN 0 is reset (its host side crashes and recovers),
// then detached, formatted and attached again. Nothing of LUNs 1 and 2 is disturbed: every
// operation succeeds and every sector reads back as written; LUN 0 keeps what it had
// acknowledged across the reset.
TEST_F(CardTest, ResetAndFormatOfOneLunLeaveTheOthersUndisturbed) {
  Create();
  Open();
  for (uint32_t c = 0; c < 2; ++c) ASSERT_TRUE(card_->FormatController(c, PipeMode::kDual, {}).ok());
  ASSERT_TRUE(card_->AttachAll().ok());
  Lun& victim = *card_->lun(0);
  const uint32_t sb = SectorBytes(victim);
  for (uint64_t lba = 0; lba < 100; ++lba) ASSERT_TRUE(Write(victim, lba, Pattern(0, lba, 1, sb)).ok());
  // Background load on LUNs 1 and 2, driven on the shared virtual clock.
  struct Load {
    Lun* lun;
    uint64_t next = 0, ops = 0, errors = 0;
  };
  std::vector<Load> loads(2);
  loads[0].lun = card_->lun(1);
  loads[1].lun = card_->lun(2);
  bool stop = false;
  std::function<void(Load&)> issue = [&](Load& ld) {
    if (stop) return;
    const uint64_t lba = ld.next++ % 200;
    auto buf = std::make_shared<std::vector<uint8_t>>(Pattern(ld.lun->index(), lba, ld.next / 200 + 1, sb));
    ld.lun->ftl()->Write(lba, 1, buf->data(), false, [&, buf, lba](Status s) {
      ++ld.ops;
      if (!s.ok()) ++ld.errors;
      auto out = std::make_shared<std::vector<uint8_t>>(sb);
      ld.lun->ftl()->Read(lba, 1, out->data(), [&, out, buf](Status rs) {
        if (!rs.ok() || *out != *buf) ++ld.errors;
        issue(ld);
      });
    });
  };
  for (Load& ld : loads) issue(ld);
  clock_.RunFor(2 * kMs);
  const uint64_t before[2] = {loads[0].ops, loads[1].ops};
  // Writes of LUN 0 still on their way when it is reset are answered (an error or, if
  // they made it, success), never left waiting.
  int answered = 0;
  std::vector<std::vector<uint8_t>> pending_bufs;
  for (uint64_t lba = 500; lba < 540; ++lba) pending_bufs.push_back(Pattern(0, lba, 2, sb));
  for (uint64_t i = 0; i < pending_bufs.size(); ++i) {
    victim.ftl()->Write(500 + i, 1, pending_bufs[i].data(), false, [&answered](Status) { ++answered; });
  }
  ASSERT_TRUE(victim.Call([&victim](Lun::Done d) { victim.Reset(std::move(d)); }).ok());
  EXPECT_EQ(answered, 40) << "every write in flight at the reset got its answer";
  EXPECT_EQ(victim.state(), LunState::kOnline);
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < 100; ++lba) {
    ASSERT_TRUE(Read(victim, lba, &out).ok());
    ASSERT_EQ(out, Pattern(0, lba, 1, sb)) << "acknowledged before the reset: lba " << lba;
  }
  ASSERT_TRUE(victim.Call([&victim](Lun::Done d) { victim.Detach(std::move(d)); }).ok());
  ASSERT_TRUE(victim.Call([&victim](Lun::Done d) { victim.Format({}, std::move(d)); }).ok());
  ASSERT_TRUE(victim.Call([&victim](Lun::Done d) { victim.Attach(std::move(d)); }).ok());
  ASSERT_TRUE(Read(victim, 5, &out).ok());
  EXPECT_EQ(out, std::vector<uint8_t>(sb, 0)) << "formatted afresh";
  clock_.RunFor(2 * kMs);
  stop = true;
  clock_.RunUntilIdle();
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(loads[i].errors, 0u) << loads[i].lun->name();
    EXPECT_GT(loads[i].ops, before[i] + 10) << loads[i].lun->name() << " kept running throughout";
  }
}

// Real engine threads: each LUN on its own thread, driven from its own host thread, one
// LUN reset and reformatted meanwhile.
TEST_F(CardTest, LunsOnTheirOwnEngineThreadsServeInParallel) {
  Create();
  Open(/*threads=*/true);
  for (uint32_t c = 0; c < 2; ++c) ASSERT_TRUE(card_->FormatController(c, PipeMode::kDual, {}).ok());
  ASSERT_TRUE(card_->AttachAll().ok());
  const uint32_t sb = SectorBytes(*card_->lun(0));
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> errors{0}, ops{0};
  std::vector<std::thread> hosts;
  for (uint32_t i = 1; i < 4; ++i) {
    hosts.emplace_back([&, i] {
      Lun& l = *card_->lun(i);
      for (uint64_t n = 0; !stop.load() || n < 50; ++n) {
        const uint64_t lba = n % 300;
        const auto data = Pattern(i, lba, n, sb);
        if (!Write(l, lba, data).ok()) ++errors;
        std::vector<uint8_t> out;
        if (!Read(l, lba, &out).ok() || out != data) ++errors;
        ++ops;
      }
    });
  }
  Lun& victim = *card_->lun(0);
  for (uint64_t lba = 0; lba < 50; ++lba) ASSERT_TRUE(Write(victim, lba, Pattern(0, lba, 1, sb)).ok());
  for (int round = 0; round < 3; ++round) {
    ASSERT_TRUE(victim.Call([&victim](Lun::Done d) { victim.Reset(std::move(d)); }).ok());
    std::vector<uint8_t> out;
    for (uint64_t lba = 0; lba < 50; ++lba) {
      ASSERT_TRUE(Read(victim, lba, &out).ok());
      ASSERT_EQ(out, Pattern(0, lba, 1, sb));
    }
  }
  ASSERT_TRUE(victim.Call([&victim](Lun::Done d) { victim.Detach(std::move(d)); }).ok());
  ASSERT_TRUE(victim.Call([&victim](Lun::Done d) { victim.Format({}, std::move(d)); }).ok());
  ASSERT_TRUE(victim.Call([&victim](Lun::Done d) { victim.Attach(std::move(d)); }).ok());
  stop = true;
  for (auto& t : hosts) t.join();
  EXPECT_EQ(errors.load(), 0u);
  EXPECT_GE(ops.load(), 150u);
  card_.reset();  // clean detach of every LUN from the test thread
  Open(true);
  ASSERT_TRUE(card_->AttachAll().ok());
  for (Lun* l : card_->luns()) EXPECT_EQ(l->state(), LunState::kOnline);
}

// The card volume: chunks round-robin over the LUNs; a request spanning chunks lands on
// several LUNs, each part where Locate says.
TEST_F(CardTest, VolumeStripesChunksAcrossTheLuns) {
  Create();
  Open();
  for (uint32_t c = 0; c < 2; ++c) ASSERT_TRUE(card_->FormatController(c, PipeMode::kDual, {}).ok());
  ASSERT_TRUE(card_->AttachAll().ok());
  auto v = card::CardVolume::Create(card_->luns(), 64 * 1024);
  ASSERT_TRUE(v.ok()) << v.status().ToString();
  card::CardVolume& vol = **v;
  const uint32_t sb = vol.sector_bytes();
  ASSERT_EQ(vol.chunk_sectors(), 16u);
  uint64_t smallest = UINT64_MAX;
  for (Lun* l : card_->luns()) smallest = std::min(smallest, Sectors(*l));
  EXPECT_EQ(vol.sectors(), smallest / 16 * 16 * 4);
  auto sync = [this](auto fn) {
    std::optional<Status> s;
    fn([&s](Status x) { s = x; });
    clock_.RunUntilTrue([&s] { return s.has_value(); });
    return s.value_or(Status::Internal("never completed"));
  };
  // Writes of 1..40 sectors at odd places: many cross chunk (and so LUN) boundaries.
  std::map<uint64_t, uint64_t> version;
  Rng rng(5);
  for (int i = 0; i < 60; ++i) {
    const uint32_t n = static_cast<uint32_t>(rng.Range(1, 40));
    const uint64_t lba = rng.Below(vol.sectors() - n);
    std::vector<uint8_t> data;
    for (uint32_t k = 0; k < n; ++k) {
      const auto p = Pattern(9, lba + k, i + 1, sb);
      data.insert(data.end(), p.begin(), p.end());
      version[lba + k] = i + 1;
    }
    ASSERT_TRUE(sync([&](auto d) { vol.Write(lba, n, data.data(), false, std::move(d)); }).ok());
  }
  ASSERT_TRUE(sync([&](auto d) { vol.Flush(std::move(d)); }).ok());
  std::vector<uint8_t> out(sb);
  for (const auto& [lba, ver] : version) {
    ASSERT_TRUE(sync([&](auto d) { vol.Read(lba, 1, out.data(), std::move(d)); }).ok());
    ASSERT_EQ(out, Pattern(9, lba, ver, sb)) << "volume lba " << lba;
    // The same sector, read from its LUN directly.
    const auto [pos, lun_lba] = vol.Locate(lba);
    ASSERT_TRUE(Read(*card_->luns()[pos], lun_lba, &out).ok());
    ASSERT_EQ(out, Pattern(9, lba, ver, sb)) << "LUN " << pos << " lba " << lun_lba;
  }
  // A multi-chunk read in one request, and a trim across every LUN.
  const uint64_t first = version.begin()->first;
  std::vector<uint8_t> many(uint64_t{100} * sb);
  ASSERT_TRUE(sync([&](auto d) { vol.Read(first, 100, many.data(), std::move(d)); }).ok());
  for (uint64_t k = 0; k < 100; ++k) {
    const auto it = version.find(first + k);
    const auto want = it == version.end() ? std::vector<uint8_t>(sb, 0) : Pattern(9, first + k, it->second, sb);
    ASSERT_TRUE(std::equal(want.begin(), want.end(), many.begin() + static_cast<std::ptrdiff_t>(k * sb)));
  }
  ASSERT_TRUE(sync([&](auto d) { vol.Trim(0, vol.sectors(), std::move(d)); }).ok());
  ASSERT_TRUE(sync([&](auto d) { vol.Read(first, 1, out.data(), std::move(d)); }).ok());
  EXPECT_EQ(out, std::vector<uint8_t>(sb, 0));
  // Out of range, and LUNs that cannot be striped together.
  EXPECT_EQ(sync([&](auto d) { vol.Read(vol.sectors(), 1, out.data(), std::move(d)); }).code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(card::CardVolume::Create({}, 64 * 1024).ok());
  EXPECT_FALSE(card::CardVolume::Create(card_->luns(), 1000).ok());
  ASSERT_TRUE(card_->FormatController(1, PipeMode::kDual, {.sector_bytes = 512}).ok());
  ASSERT_TRUE(card_->AttachAll().ok());
  EXPECT_FALSE(card::CardVolume::Create(card_->luns(), 64 * 1024).ok()) << "mixed sector sizes";
}

// Single-pipe mode under power cuts at random instants, with a die failure in half of the
// seeds: the FTL over JoinedPipe (fenced parity across both pipes, stage slots on either)
// loses no acknowledged write. 30 seeds on test-small (one controller, two pipes of 4
// dies), each four cut/attach rounds.
// Controller-side relocation follows the power policy (CardOptions::copy_relocation,
// kAuto): by copy with the power override, through host memory at the slot limit; kOn
// and kOff force it. The same churn of one LUN, whose contents survive either way.
TEST(CardCopyPolicyTest, CopiesWithTheOverrideHostMemoryAtTheSlotLimit) {
  using CR = CardOptions::CopyRelocation;
  struct Case {
    double override_w;
    CR policy;
    bool copies;
  };
  for (const Case& k : {Case{0, CR::kAuto, false}, Case{55, CR::kAuto, true}, Case{0, CR::kOn, true},
                        Case{55, CR::kOff, false}}) {
    TempDir tmp;
    VirtualClock clock(1);
    auto p = simcard::FindProfile("duo-slc-small");
    ASSERT_TRUE(p.ok());
    simcard::CreateOptions co;
    co.blocks_per_lun = 24;
    ASSERT_TRUE(simcard::SimCard::Create(tmp.Sub("card"), *p, co).ok());
    CardOptions o;
    o.clock = &clock;
    o.power.override_w = k.override_w;
    o.power.slot_capability_w = 55;
    o.copy_relocation = k.policy;
    auto c = Card::Open(tmp.Sub("card"), o);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::unique_ptr<Card> card = std::move(c).value();
    ASSERT_TRUE(card->FormatController(0, PipeMode::kDual, {}).ok());
    ASSERT_TRUE(card->AttachAll().ok());
    Lun& l = *card->lun(0);
    ASSERT_EQ(l.state(), LunState::kOnline);
    uint64_t n = 0;
    uint32_t sb = 0;
    ASSERT_TRUE(l.Call([&](Lun::Done d) {
      n = l.ftl()->sectors();
      sb = l.ftl()->sector_bytes();
      d(Status::Ok());
    }).ok());
    auto write = [&](uint64_t lba, uint64_t v) {
      const auto data = Pattern(0, lba, v, sb);
      return l.Call([&](Lun::Done d) { l.ftl()->Write(lba, 1, data.data(), false, std::move(d)); });
    };
    std::map<uint64_t, uint64_t> ver;
    for (uint64_t lba = 0; lba < n; ++lba) {
      ASSERT_TRUE(write(lba, 1).ok());
      ver[lba] = 1;
    }
    Rng rng(5);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t lba = 2 * rng.Below(n / 2);
      ASSERT_TRUE(write(lba, 2 + i).ok());
      ver[lba] = 2 + i;
    }
    ftl::FtlStats st;
    ASSERT_TRUE(l.Call([&](Lun::Done d) {
      st = l.ftl()->stats();
      d(Status::Ok());
    }).ok());
    SCOPED_TRACE(::testing::Message() << "override " << k.override_w << " policy " << static_cast<int>(k.policy));
    ASSERT_GT(st.gc_write_sectors, 0u);
    if (k.copies) {
      EXPECT_GT(st.gc_copy_sectors, st.gc_write_sectors / 2);
    } else {
      EXPECT_EQ(st.gc_copy_sectors, 0u);
    }
    std::vector<uint8_t> out(sb);
    for (uint64_t lba = 0; lba < n; lba += 7) {
      ASSERT_TRUE(l.Call([&](Lun::Done d) { l.ftl()->Read(lba, 1, out.data(), std::move(d)); }).ok());
      ASSERT_EQ(out, Pattern(0, lba, ver[lba], sb)) << lba;
    }
  }
}

TEST(CardPowerCutTest, SinglePipeLunLosesNoAcknowledgedWriteAcrossCuts) {
  for (uint64_t seed = 1; seed <= 30; ++seed) {
    TempDir tmp;
    auto p = simcard::FindProfile("test-small");
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(simcard::SimCard::Create(tmp.Sub("card"), *p, {}).ok());
    VirtualClock clock(seed);
    CardOptions o;
    o.clock = &clock;
    o.sim.seed = seed;
    auto c = Card::Open(tmp.Sub("card"), o);
    ASSERT_TRUE(c.ok());
    ftl::FormatOptions fo;
    fo.reserve = ftl::ReserveMode::kCustom;
    fo.spare_percent = 80;  // room to rebuild onto the surviving dies
    ASSERT_TRUE((*c)->FormatController(0, PipeMode::kSingle, fo).ok());
    ASSERT_TRUE((*c)->AttachAll().ok());
    Rng rng(seed);
    std::map<uint64_t, uint64_t> acked;                  // lba -> version
    std::map<uint64_t, std::set<uint64_t>> maybe;        // lba -> versions in flight at a cut
    uint64_t version = 0;
    for (int round = 0; round < 4; ++round) {
      Lun& l = *(*c)->lun(0);
      ftl::Ftl* f = l.ftl();
      ASSERT_NE(f, nullptr) << "seed " << seed;
      const uint32_t sb = f->sector_bytes();
      const uint64_t span = std::min<uint64_t>(f->sectors(), 300);
      std::vector<std::shared_ptr<std::vector<uint8_t>>> bufs;
      const int ops = static_cast<int>(rng.Range(20, 200));
      // In half of the seeds a die of either pipe dies in round 1: FlashBack rebuilds from
      // parity that may live on the other pipe (the cross-pipe fence at work).
      const int kill_at = (seed % 2 == 0 && round == 1) ? static_cast<int>(rng.Below(ops)) : -1;
      for (int i = 0; i < ops; ++i) {
        if (i == kill_at) {
          vsl::testing::SimOf(*(*c)).InjectDieFailure(static_cast<uint32_t>(rng.Below(2)), static_cast<uint32_t>(rng.Below(4)));
        }
        const uint64_t lba = rng.Below(span);
        const uint64_t v = ++version;
        auto buf = std::make_shared<std::vector<uint8_t>>(Pattern(0, lba, v, sb));
        bufs.push_back(buf);
        maybe[lba].insert(v);
        f->Write(lba, 1, buf->data(), rng.Bernoulli(0.1), [&acked, &maybe, lba, v](Status st) {
          if (!st.ok()) return;
          if (acked[lba] < v) acked[lba] = v;
          maybe[lba].erase(v);
        });
        if (rng.Bernoulli(0.2)) clock.RunFor(rng.Range(0, 200 * kUs));
      }
      clock.RunFor(rng.Range(0, 2 * kMs));
      vsl::testing::SimOf(*(*c)).PowerCut();
      clock.RunUntilIdle();
      c->reset();
      c = Card::Open(tmp.Sub("card"), o);
      ASSERT_TRUE(c.ok());
      ASSERT_TRUE((*c)->AttachAll().ok()) << "seed " << seed << " round " << round;
      Lun& l2 = *(*c)->lun(0);
      std::vector<uint8_t> out(sb);
      for (auto& [lba, v] : acked) {
        std::optional<Status> r;
        l2.ftl()->Read(lba, 1, out.data(), [&r](Status st) { r = st; });
        clock.RunUntilTrue([&r] { return r.has_value(); });
        ASSERT_TRUE(r->ok()) << "seed " << seed << " lba " << lba;
        bool ok = out == Pattern(0, lba, v, sb);
        uint64_t now = v;
        for (uint64_t later : maybe[lba]) {
          if (later > v && out == Pattern(0, lba, later, sb)) {
            ok = true;
            now = later;
          }
        }
        ASSERT_TRUE(ok) << "seed " << seed << " round " << round << ": lba " << lba
                        << " lost its acknowledged version " << v;
        v = now;  // what is on flash now is the truth
      }
      maybe.clear();
    }
  }
}

TEST_F(CardTest, BadRequestsGetClearErrors) {
  Create();
  Open();
  EXPECT_EQ(card_->FormatController(5, PipeMode::kDual, {}).code(), StatusCode::kInvalidArgument);
  // Bad format options change nothing: not the mode, not the LUNs.
  ftl::FormatOptions bad;
  bad.reserve = ftl::ReserveMode::kCustom;
  bad.spare_percent = -50;
  EXPECT_EQ(card_->FormatController(0, PipeMode::kSingle, bad).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(card_->pipe_mode(0), PipeMode::kDual);
  EXPECT_EQ(card_->luns().size(), 4u);
  EXPECT_FALSE(card::ParsePipeMode("triple").ok());
  ASSERT_TRUE(card_->FormatController(0, PipeMode::kDual, {}).ok());
  ASSERT_TRUE(card_->AttachAll().ok());
  Lun& l = *card_->lun(0);
  EXPECT_EQ(l.Call([&l](Lun::Done d) { l.Format({}, std::move(d)); }).code(), StatusCode::kFailedPrecondition)
      << "an attached LUN is not formatted under its FTL";
  // A card directory that is not a card.
  CardOptions o;
  o.clock = &clock_;
  EXPECT_FALSE(Card::Open(tmp_.Sub("nothing"), o).ok());
}

}  // namespace
}  // namespace vsl::testing
