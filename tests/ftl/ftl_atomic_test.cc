// Atomic batches (Ftl::WriteAtomic), exists queries, mapped runs and the sparse space,
// checked against a reference model, with power cuts at random instants in virtual time.
//
// The campaign's rule: after any cut and recovery, every batch acknowledged before the
// cut is applied, and every batch still in flight at the cut is applied entirely or not
// at all (its writes and trims together). Batches in flight at once touch disjoint
// sectors, so "not at all" means each sector reads as its last acknowledged contents.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "tests/ftl/ftl_fixture.h"

namespace vsl::testing {
namespace {

int Seeds(int dflt) {
  const char* e = std::getenv("VSL_SEEDS");
  return e ? std::atoi(e) : dflt;
}

class FtlAtomicTest : public FtlFixture {
 protected:
  Status Atomic(std::vector<ftl::AtomicOp> ops, bool fua = false) {
    return Sync([&](ftl::Ftl::Done d) { ftl_->WriteAtomic(std::move(ops), fua, std::move(d)); });
  }
  static ftl::AtomicOp W(uint64_t lba, const std::vector<uint8_t>& data, uint32_t sb) {
    return {ftl::AtomicOp::kWrite, lba, data.size() / sb, data.data()};
  }
  static ftl::AtomicOp T(uint64_t lba, uint64_t n) { return {ftl::AtomicOp::kTrim, lba, n, nullptr}; }
};

TEST_F(FtlAtomicTest, BatchOfScatteredWritesAndTrimsAppliesWhole) {
  MakeCard("duo-slc-small", 24);
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  const uint32_t sb = ftl_->sector_bytes();
  ASSERT_TRUE(Write(100, Sector(100, 1, 8)).ok());
  auto a = Sector(5, 2, 3), b = Sector(900, 2, 1), c = Sector(77, 2, 2);
  Status st = Atomic({W(5, a, sb), T(102, 4), W(900, b, sb), W(77, c, sb)});
  ASSERT_TRUE(st.ok()) << st.ToString();
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(5, 3, &out).ok());
  EXPECT_EQ(out, a);
  ASSERT_TRUE(Read(900, 1, &out).ok());
  EXPECT_EQ(out, b);
  ASSERT_TRUE(Read(100, 8, &out).ok());
  auto want = Sector(100, 1, 8);
  std::fill(want.begin() + 2 * sb, want.begin() + 6 * sb, 0);
  EXPECT_EQ(out, want);
  // Exists and mapped runs see the batch.
  EXPECT_TRUE(ftl_->Exists(5) && ftl_->Exists(7) && !ftl_->Exists(8));
  EXPECT_EQ(ftl_->MappedIn(100, 8), 4u);
  auto runs = ftl_->MappedRuns(0, ftl_->sectors(), 100);
  std::vector<std::pair<uint64_t, uint64_t>> expect{{5, 3}, {77, 2}, {100, 2}, {106, 2}, {900, 1}};
  EXPECT_EQ(runs, expect);
  uint64_t next = 0;
  runs = ftl_->MappedRuns(0, ftl_->sectors(), 2, &next);
  EXPECT_EQ(runs.size(), 2u);
  EXPECT_EQ(next, 100u) << "continues at the third run";
  // Survives a clean restart and a power cut alike.
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach().ok());
  ASSERT_TRUE(Read(77, 2, &out).ok());
  EXPECT_EQ(out, c);
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  ASSERT_TRUE(Read(5, 3, &out).ok());
  EXPECT_EQ(out, a);
  EXPECT_EQ(ftl_->MappedIn(100, 8), 4u);
}

TEST_F(FtlAtomicTest, BadBatchesAreRefusedAndChangeNothing) {
  MakeCard("duo-slc-small", 24);
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  const uint32_t sb = ftl_->sector_bytes();
  const auto lim = ftl_->atomic_limits();
  EXPECT_GE(lim.max_ops, 16u);
  EXPECT_GE(lim.max_write_sectors, 64u);
  auto d = Sector(0, 1, 1);
  EXPECT_EQ(Atomic({}).code(), StatusCode::kInvalidArgument);
  std::vector<ftl::AtomicOp> many(lim.max_ops + 1, W(1, d, sb));
  EXPECT_EQ(Atomic(many).code(), StatusCode::kInvalidArgument);
  std::vector<uint8_t> big((lim.max_write_sectors + 1) * sb, 1);
  EXPECT_EQ(Atomic({W(0, big, sb)}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Atomic({W(0, d, sb), W(ftl_->sectors(), d, sb)}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Atomic({W(0, d, sb), T(0, 2)}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Atomic({{ftl::AtomicOp::kWrite, 3, 1, nullptr}}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Atomic({T(ftl_->sectors() - 1, 2)}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ftl_->mapped_sectors(), 0u) << "nothing of a refused batch is applied";
  std::vector<ftl::AtomicOp> trims(lim.max_trims + 1, T(0, 1));
  for (uint32_t i = 0; i < trims.size(); ++i) trims[i].lba = i * 2;
  EXPECT_EQ(Atomic(trims).code(), StatusCode::kInvalidArgument) << "one trim too many";
  // The largest batch the limits allow goes through: every sector its own vector, and
  // every trim.
  std::vector<uint8_t> most(lim.max_write_sectors * sb);
  for (uint64_t i = 0; i < lim.max_write_sectors; ++i) {
    auto s = Sector(i * 3, 9);
    std::copy(s.begin(), s.end(), most.begin() + static_cast<std::ptrdiff_t>(i * sb));
  }
  std::vector<ftl::AtomicOp> ops;
  for (uint64_t i = 0; i < lim.max_write_sectors; ++i) {
    ops.push_back({ftl::AtomicOp::kWrite, 10'000 + i * 7, 1, most.data() + i * sb});
  }
  for (uint32_t i = 0; i < lim.max_trims; ++i) ops.push_back(T(i * 2, 1));
  ASSERT_LE(ops.size(), lim.max_ops);
  ASSERT_TRUE(Atomic(ops).ok());
  EXPECT_EQ(ftl_->mapped_sectors(), lim.max_write_sectors);
}

TEST_F(FtlAtomicTest, SparseSpaceOfTwoToTheFortySectors) {
  MakeCard("duo-slc-small", 24);
  ftl::FormatOptions fo;
  fo.sparse = true;
  fo.sparse_sectors = uint64_t{1} << 40;
  ASSERT_TRUE(Format(fo).ok());
  ASSERT_TRUE(Attach().ok());
  EXPECT_EQ(ftl_->sectors(), uint64_t{1} << 40);
  // 2^40 sectors of 4 KiB are 4 PiB of address space: the empty map costs 512 KiB of
  // directory pointers.
  EXPECT_LT(ftl_->memory_bytes(), uint64_t{2} << 20);
  const uint32_t sb = ftl_->sector_bytes();
  const std::vector<uint64_t> where{0, 123'456'789'012, (uint64_t{1} << 40) - 1, uint64_t{1} << 39};
  std::vector<std::vector<uint8_t>> data;
  for (uint64_t l : where) data.push_back(Sector(l, 4));
  std::vector<ftl::AtomicOp> ops;
  for (std::size_t i = 0; i < where.size(); ++i) ops.push_back(W(where[i], data[i], sb));
  ASSERT_TRUE(Atomic(ops).ok());
  EXPECT_EQ(ftl_->MappedIn(0, uint64_t{1} << 40), where.size());
  auto runs = ftl_->MappedRuns(1, uint64_t{1} << 40, 10);
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].first, 123'456'789'012u);
  const uint64_t mem = ftl_->memory_bytes();
  // A clean restart writes the sparse map chunk by chunk; a power cut rebuilds it.
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach().ok());
  EXPECT_TRUE(ftl_->attach_info().from_checkpoint);
  for (std::size_t i = 0; i < where.size(); ++i) {
    std::vector<uint8_t> out;
    ASSERT_TRUE(Read(where[i], 1, &out).ok());
    EXPECT_EQ(out, data[i]) << where[i];
  }
  EXPECT_EQ(ftl_->memory_bytes(), mem);
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  EXPECT_EQ(ftl_->MappedIn(0, uint64_t{1} << 40), where.size());
  ASSERT_TRUE(Trim(0, uint64_t{1} << 40).ok());
  EXPECT_EQ(ftl_->mapped_sectors(), 0u);
}

// --- the power-cut campaign ---

struct Batch {
  uint64_t id = 0;
  std::vector<std::pair<uint64_t, uint64_t>> writes;  // (lba, version) per sector
  std::vector<uint64_t> trimmed;                      // sectors
  std::vector<std::vector<uint8_t>> buffers;
  std::vector<ftl::AtomicOp> ops;
  bool answered = false;
  Status status;
};

class FtlAtomicCampaign : public FtlAtomicTest {
 protected:
  std::map<uint64_t, uint64_t> acked_;  // lba -> version (absent or 0: zeroes)
  std::set<uint64_t> busy_;             // sectors of batches in flight
  uint64_t version_ = 0;
  uint64_t whole_ = 0, none_ = 0, acked_batches_ = 0, die_failures_ = 0;
  std::map<uint64_t, std::vector<uint64_t>> hist_;  // lba -> versions issued (diagnostics)
  std::set<uint64_t> plain_;                          // versions written by plain writes
  std::string Describe(uint64_t l, const std::vector<uint8_t>& out) {
    if (out == std::vector<uint8_t>(ftl_->sector_bytes(), 0)) return "zeroes";
    for (uint64_t v : hist_[l]) {
      if (out == Sector(l, v)) {
        return "version " + std::to_string(v) + (plain_.count(v) ? " (plain write)" : " (batch)");
      }
    }
    return "unknown contents";
  }

  std::unique_ptr<Batch> MakeBatch(Rng& rng, uint64_t space, const ftl::AtomicLimits& lim) {
    auto b = std::make_unique<Batch>();
    const uint32_t sb = ftl_->sector_bytes();
    const uint32_t nops = 1 + static_cast<uint32_t>(rng.Below(std::min<uint32_t>(lim.max_ops, 12)));
    uint64_t budget = lim.max_write_sectors;
    for (uint32_t i = 0; i < nops; ++i) {
      const bool trim = rng.Bernoulli(0.2);
      const uint64_t n = 1 + rng.Below(trim ? 16 : std::min<uint64_t>(budget, 24));
      const uint64_t lba = rng.Below(space - n);
      bool clash = false;
      for (uint64_t k = 0; k < n && !clash; ++k) {
        clash = busy_.count(lba + k) != 0;
        for (auto& [l, v] : b->writes) clash = clash || l == lba + k;
        clash = clash || std::find(b->trimmed.begin(), b->trimmed.end(), lba + k) != b->trimmed.end();
      }
      if (clash || (!trim && n > budget)) continue;
      if (trim) {
        for (uint64_t k = 0; k < n; ++k) b->trimmed.push_back(lba + k);
        b->ops.push_back(T(lba, n));
        continue;
      }
      budget -= n;
      std::vector<uint8_t> buf;
      for (uint64_t k = 0; k < n; ++k) {
        const uint64_t v = ++version_;
        b->writes.emplace_back(lba + k, v);
        hist_[lba + k].push_back(v);
        auto s = Sector(lba + k, v);
        buf.insert(buf.end(), s.begin(), s.end());
      }
      b->buffers.push_back(std::move(buf));
      b->ops.push_back({ftl::AtomicOp::kWrite, lba, n, nullptr});
    }
    // Data pointers once the buffers stop moving.
    std::size_t w = 0;
    for (auto& o : b->ops) {
      if (o.kind == ftl::AtomicOp::kWrite) o.data = b->buffers[w++].data();
    }
    (void)sb;
    for (auto& [l, v] : b->writes) busy_.insert(l);
    for (uint64_t l : b->trimmed) busy_.insert(l);
    return b;
  }
  void Retire(Batch& b, bool applied) {
    for (auto& [l, v] : b.writes) {
      busy_.erase(l);
      if (applied) acked_[l] = v;
    }
    for (uint64_t l : b.trimmed) {
      busy_.erase(l);
      if (applied) acked_[l] = 0;
    }
  }
  // Which of `b`'s sectors show it applied; all or none must.
  void CheckBatch(Batch& b, uint64_t seed) {
    const uint32_t sb = ftl_->sector_bytes();
    uint64_t applied = 0, old = 0;
    std::vector<uint8_t> out;
    auto expect_old = [&](uint64_t l) {
      auto it = acked_.find(l);
      return it == acked_.end() || it->second == 0 ? std::vector<uint8_t>(sb, 0) : Sector(l, it->second);
    };
    for (auto& [l, v] : b.writes) {
      ASSERT_TRUE(Read(l, 1, &out).ok());
      const bool now = out == Sector(l, v), before = out == expect_old(l);
      ASSERT_TRUE(now || before) << "seed " << seed << " batch " << b.id << ": sector " << l
                                 << " holds neither the batch's data nor the old";
      applied += now;
      old += before && !now;
    }
    for (uint64_t l : b.trimmed) {
      ASSERT_TRUE(Read(l, 1, &out).ok());
      const bool now = out == std::vector<uint8_t>(sb, 0), before = out == expect_old(l);
      ASSERT_TRUE(now || before) << "seed " << seed << " batch " << b.id << ": trimmed sector " << l;
      // A trimmed sector that was zero already tells nothing.
      if (!(now && before)) {
        applied += now;
        old += before;
      }
    }
    if (b.answered && b.status.ok()) {
      ASSERT_EQ(old, 0u) << "seed " << seed << ": acknowledged batch " << b.id << " lost " << old
                         << " sectors";
    }
    ASSERT_TRUE(applied == 0 || old == 0) << "seed " << seed << ": batch " << b.id << " half applied: "
                                          << applied << " sectors new, " << old << " old";
    const bool is_applied = old == 0;
    (is_applied ? whole_ : none_)++;
    Retire(b, is_applied);
  }

  void RunSeed(uint64_t seed) {
    Rng rng(seed);
    card_opts_.seed = seed;
    clock_ = VirtualClock(seed);
    // In about a third of the seeds a die dies at a random instant of a random round
    // (FlashBack rebuilds its pages, atomic members and commit pages among them). Those
    // seeds turn the card's random program/erase failures off, so the die failure is the
    // only fault (a second one in a stripe is a double failure). VSL_DIE_FAILURES=0: none.
    const char* df = std::getenv("VSL_DIE_FAILURES");
    const bool die_fails = rng.Bernoulli(0.35) && !(df != nullptr && std::string(df) == "0");
    const int fail_round = static_cast<int>(rng.Below(3));
    card_opts_.reliability.reset();
    if (die_fails) {
      simcard::Reliability rel = simcard::FindProfile("duo-slc-small")->reliability;
      rel.fail_base = 0;
      rel.fail_wear = 0;
      card_opts_.reliability = rel;
    }
    MakeCard("duo-slc-small", 24);
    ftl::FormatOptions fo;
    fo.sector_bytes = rng.Bernoulli(0.3) ? 512 : 4096;
    ASSERT_TRUE(Format(fo).ok());
    ASSERT_TRUE(Attach().ok());
    const bool plp_failed = rng.Bernoulli(0.3);
    if (plp_failed) card_->SetPlpState(nand::PlpState::kFailed);
    const auto lim = ftl_->atomic_limits();
    // A small space, so batches overwrite each other's sectors and the groomer runs.
    const uint64_t space = std::min<uint64_t>(ftl_->sectors(), 3000);
    for (int round = 0; round < 4; ++round) {
      std::vector<std::unique_ptr<Batch>> flight;
      const TimeNs cut_at = clock_.Now() + static_cast<TimeNs>(rng.Below(40 * kMs));
      const TimeNs fail_at = clock_.Now() + static_cast<TimeNs>(rng.Below(30 * kMs));
      bool failed_now = false;
      uint64_t next_id = 0;
      while (clock_.Now() < cut_at) {
        if (die_fails && round == fail_round && !failed_now && clock_.Now() >= fail_at) {
          card_->InjectDieFailure(0, static_cast<uint32_t>(rng.Below(card_->geometry().dies_per_pipe())));
          failed_now = true;
          ++die_failures_;
        }
        while (flight.size() < 1 + rng.Below(6)) {
          auto b = MakeBatch(rng, space, lim);
          if (b->ops.empty()) break;
          b->id = next_id++;
          Batch* raw = b.get();
          ftl_->WriteAtomic(raw->ops, false, [raw](Status s) {
            raw->answered = true;
            raw->status = s;
          });
          flight.push_back(std::move(b));
        }
        // Some plain writes beside (disjoint too), to share pages and LEBs.
        if (rng.Bernoulli(0.3)) {
          const uint64_t l = rng.Below(space);
          if (busy_.count(l) == 0) {
            const uint64_t v = ++version_;
            auto d = Sector(l, v);
            const Status ws = Write(l, d);
            ASSERT_TRUE(ws.ok()) << "seed " << seed << ": " << ws.ToString() << "; "
                                 << ftl_->TEST_DebugState();
            acked_[l] = v;
            hist_[l].push_back(v);
            plain_.insert(v);
          }
        }
        clock_.RunFor(static_cast<DurNs>(20 * kUs + rng.Below(300 * kUs)));
        for (auto it = flight.begin(); it != flight.end();) {
          Batch& b = **it;
          if (b.answered) {
            ASSERT_TRUE(b.status.ok()) << "seed " << seed << ": " << b.status.ToString();
            ++acked_batches_;
            Retire(b, true);
            it = flight.erase(it);
          } else {
            ++it;
          }
        }
      }
      // Cut the power with batches in flight.
      card_->PowerCut();
      clock_.RunUntilIdle();
      ftl_.reset();
      card_.reset();
      OpenCard();
      if (plp_failed) card_->SetPlpState(nand::PlpState::kFailed);
      ASSERT_TRUE(Attach().ok()) << "seed " << seed;
      for (auto& b : flight) {
        CheckBatch(*b, seed);
        if (HasFatalFailure()) return;
      }
      // Every acknowledged sector too.
      for (auto& [l, v] : acked_) {
        std::vector<uint8_t> out;
        ASSERT_TRUE(Read(l, 1, &out).ok());
        ASSERT_TRUE(out == (v == 0 ? std::vector<uint8_t>(ftl_->sector_bytes(), 0) : Sector(l, v)))
            << "seed " << seed << " round " << round << " (plp " << (plp_failed ? "failed" : "healthy")
            << ", " << ftl_->sector_bytes() << " B sectors): sector " << l << " holds "
            << Describe(l, out) << ", not acknowledged version " << v
            << (plain_.count(v) ? " (plain write)" : " (batch)");
      }
    }
    ASSERT_TRUE(Shutdown().ok());
  }
};

TEST_F(FtlAtomicCampaign, PowerCutsNeverHalfApplyABatch) {
  const int seeds = Seeds(12);
  const char* first = std::getenv("VSL_FIRST_SEED");  // to replay one seed
  for (int s = first ? std::atoi(first) : 1; s <= seeds; ++s) {
    acked_.clear();
    busy_.clear();
    ftl_.reset();
    card_.reset();
    std::filesystem::remove_all(tmp_.Sub("card"));
    RunSeed(static_cast<uint64_t>(s));
    if (HasFatalFailure()) return;
  }
  std::printf("batches: %llu acknowledged; in flight at a cut: %llu applied whole, %llu not at all; %llu dies "
              "failed\n",
              static_cast<unsigned long long>(acked_batches_), static_cast<unsigned long long>(whole_),
              static_cast<unsigned long long>(none_), static_cast<unsigned long long>(die_failures_));
  EXPECT_GT(whole_ + none_, 0u);
  EXPECT_GT(none_, 0u) << "some cut should catch a batch before its commit";
}

}  // namespace
}  // namespace vsl::testing
