// FTL features beyond the basic I/O contract: memory cost, sparse address space, reserve
// modes, bad blocks growing under the FTL, and damaged checkpoints.
#include <cstring>

#include <gtest/gtest.h>

#include "tests/ftl/ftl_fixture.h"
#include "vsl/core/crc.h"
#include "vsl/ftl/ftl_format.h"

namespace vsl::testing {
namespace {

class FtlFeaturesTest : public FtlFixture {
 public:
  // Writes ~97 sectors spread over the whole space (one per chunk of the map), overwrites
  // a third, trims one; shuts down, attaches (from a checkpoint or by a scan, as
  // expected), checks; then writes once more, cuts power and checks again.
  void CheckSpread(bool expect_checkpoint) {
    const uint64_t n = ftl_->sectors();
    std::vector<uint64_t> lbas;
    for (uint64_t lba = 0; lba < n; lba += n / 97) lbas.push_back(lba);
    for (uint64_t lba : lbas) ASSERT_TRUE(Write(lba, Sector(lba, 1)).ok());
    for (std::size_t i = 0; i < lbas.size(); i += 3) ASSERT_TRUE(Write(lbas[i], Sector(lbas[i], 2)).ok());
    ASSERT_TRUE(Trim(lbas[1], 1).ok());
    auto check = [&](const char* when) {
      std::vector<uint8_t> out;
      for (std::size_t i = 0; i < lbas.size(); ++i) {
        ASSERT_TRUE(Read(lbas[i], 1, &out).ok()) << when;
        const auto want = i == 1 ? std::vector<uint8_t>(ftl_->sector_bytes(), 0) : Sector(lbas[i], i % 3 == 0 ? 2 : 1);
        ASSERT_EQ(out, want) << when << ": lba " << lbas[i];
      }
    };
    check("before shutdown");
    ASSERT_TRUE(Shutdown().ok()) << "a clean shutdown is clean with or without room for its checkpoint";
    ASSERT_TRUE(Attach().ok());
    EXPECT_EQ(ftl_->attach_info().from_checkpoint, expect_checkpoint);
    if (expect_checkpoint) {
      EXPECT_EQ(ftl_->attach_info().lebs_scanned, 0u);
    } else {
      EXPECT_GT(ftl_->attach_info().lebs_scanned, 0u);
    }
    check("after a clean shutdown");
    ASSERT_TRUE(Write(lbas[2], Sector(lbas[2], 3)).ok());
    PowerCycle();
    ASSERT_TRUE(Attach().ok());
    std::vector<uint8_t> out;
    ASSERT_TRUE(Read(lbas[2], 1, &out).ok());
    EXPECT_EQ(out, Sector(lbas[2], 3)) << "after a power cut";
  }
};

TEST_F(FtlFeaturesTest, MapCostsAboutFourBytesPerMappedSector) {
  MakeCard("duo-slc-small", 32);
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  const uint64_t n = ftl_->sectors();
  std::vector<uint8_t> data(uint64_t{64} * 4096, 7);
  for (uint64_t lba = 0; lba + 64 <= n; lba += 64) {
    ASSERT_TRUE(Write(lba, data).ok());
  }
  const double per_sector = static_cast<double>(ftl_->memory_bytes()) / ftl_->mapped_sectors();
  // 4 B of map per sector; the LEB table adds a validity bit per physical sector and a
  // few dozen bytes per LEB.
  EXPECT_LT(per_sector, 4.5) << ftl_->memory_bytes() << " bytes for " << ftl_->mapped_sectors();
  EXPECT_GE(per_sector, 4.0);
}

TEST_F(FtlFeaturesTest, SparseSpaceIsLargerThanFlashAndFullIsNoSpace) {
  MakeCard();
  ftl::FormatOptions fo;
  fo.sparse = true;
  fo.sparse_sectors = uint64_t{1} << 32;  // 16 TiB of 4 KiB sectors on a tiny card
  ASSERT_TRUE(Format(fo).ok());
  ASSERT_TRUE(Attach().ok());
  EXPECT_EQ(ftl_->sectors(), uint64_t{1} << 32);
  const uint64_t far = (uint64_t{1} << 32) - 10;
  ASSERT_TRUE(Write(far, Sector(far, 1, 2)).ok());
  ASSERT_TRUE(Write(12345678, Sector(12345678, 1)).ok());
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(far, 2, &out).ok());
  EXPECT_EQ(out, Sector(far, 1, 2));
  EXPECT_LT(ftl_->memory_bytes(), uint64_t{16} << 20) << "map chunks only where mapped";
  EXPECT_TRUE(ftl_->Exists(12345678));
  EXPECT_FALSE(ftl_->Exists(12345679));
  ASSERT_TRUE(Trim(0, uint64_t{1} << 32).ok()) << "trimming the whole space is cheap";
  EXPECT_FALSE(ftl_->Exists(far));
  // Fill the physical space: the write that does not fit is NoSpace, not a hang.
  Status s;
  uint64_t lba = 0;
  for (; lba < (uint64_t{1} << 20); ++lba) {
    s = Write(lba * 977, Sector(lba, 2));
    if (!s.ok()) break;
  }
  EXPECT_EQ(s.code(), StatusCode::kNoSpace) << s.ToString();
  ASSERT_TRUE(Write(0, Sector(0, 3)).ok()) << "overwriting a mapped sector still works";
  ASSERT_TRUE(Read(0, 1, &out).ok());
  EXPECT_EQ(out, Sector(0, 3));
}

TEST_F(FtlFeaturesTest, ReserveModesSetCapacity) {
  MakeCard();
  auto capacity = [&](ftl::ReserveMode m, double pct) {
    ftl::FormatOptions fo;
    fo.reserve = m;
    fo.spare_percent = pct;
    EXPECT_TRUE(Format(fo).ok());
    EXPECT_TRUE(Attach().ok());
    const uint64_t c = ftl_->sectors();
    ftl_.reset();
    return c;
  };
  const uint64_t stock = capacity(ftl::ReserveMode::kStock, 0);
  const uint64_t hp = capacity(ftl::ReserveMode::kHighPerformance, 0);
  const uint64_t custom = capacity(ftl::ReserveMode::kCustom, 100);
  const uint64_t under = capacity(ftl::ReserveMode::kUnderProvision, 2);
  EXPECT_NEAR(static_cast<double>(hp), 0.8 * stock, 2.0);
  EXPECT_NEAR(static_cast<double>(custom), stock * 1.28 / 2.0, 2.0);
  EXPECT_GT(under, stock);
  // Out-of-range spare is refused, not clamped.
  for (auto [m, pct] : {std::pair{ftl::ReserveMode::kCustom, -5.0}, std::pair{ftl::ReserveMode::kCustom, 1e9},
                        std::pair{ftl::ReserveMode::kUnderProvision, 7.0},
                        std::pair{ftl::ReserveMode::kUnderProvision, -1.0}}) {
    ftl::FormatOptions fo;
    fo.reserve = m;
    fo.spare_percent = pct;
    EXPECT_EQ(Format(fo).code(), StatusCode::kInvalidArgument) << pct;
  }
}

TEST_F(FtlFeaturesTest, FiveTwelveByteSectors) {
  MakeCard();
  ftl::FormatOptions fo;
  fo.sector_bytes = 512;
  ASSERT_TRUE(Format(fo).ok());
  ASSERT_TRUE(Attach().ok());
  EXPECT_EQ(ftl_->sector_bytes(), 512u);
  ASSERT_TRUE(Write(3, Sector(3, 1, 13)).ok());
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(0, 20, &out).ok());
  std::vector<uint8_t> want(20 * 512, 0);
  auto w = Sector(3, 1, 13);
  std::copy(w.begin(), w.end(), want.begin() + 3 * 512);
  EXPECT_EQ(out, want);
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  ASSERT_TRUE(Read(0, 20, &out).ok());
  EXPECT_EQ(out, want);
}

TEST_F(FtlFeaturesTest, ProgramAndEraseFailuresRetireBlocksWithoutLosingData) {
  MakeCard();
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  const uint64_t n = ftl_->sectors();
  // Make blocks fail under the FTL as it writes: every 5th LEB's block on die 1 fails its
  // next program, and every 7th LEB's block on die 2 its next erase.
  for (uint32_t b = 2; b < card_->geometry().blocks_per_lun; ++b) {
    if (b % 5 == 0) {
      for (uint32_t p = 0; p < card_->geometry().pages_per_block; ++p) card_->InjectProgramFail(0, {1, b, p});
    }
    if (b % 7 == 0) card_->InjectEraseFail(0, 2, b);
  }
  for (uint64_t round = 1; round <= 3; ++round) {
    for (uint64_t lba = 0; lba < n; ++lba) ASSERT_TRUE(Write(lba, Sector(lba, round)).ok());
  }
  EXPECT_GT(ftl_->stats().program_failures + ftl_->stats().erase_failures, 0u);
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < n; ++lba) {
    ASSERT_TRUE(Read(lba, 1, &out).ok()) << lba;
    ASSERT_EQ(out, Sector(lba, 3)) << lba;
  }
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  for (uint64_t lba = 0; lba < n; lba += 3) {
    ASSERT_TRUE(Read(lba, 1, &out).ok()) << lba;
    ASSERT_EQ(out, Sector(lba, 3)) << lba;
  }
}

TEST_F(FtlFeaturesTest, MetadataSurvivesADeadDie) {
  MakeCard();
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  ASSERT_TRUE(Write(5, Sector(5, 1, 4)).ok());
  ASSERT_TRUE(Shutdown().ok());
  card_->InjectDieFailure(0, 0);  // holds one copy of the checkpoint's first page
  Status s = Attach();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(ftl_->attach_info().from_checkpoint) << "the second copy serves";
  // The groom read issued once the die was declared failed at attach ends (a die timeout)
  // rather than hanging: the FTL comes to rest. (It used to leak its read-retry state when
  // the card was closed with it still in flight.)
  clock_.RunUntilIdle();
  EXPECT_TRUE(ftl_->Quiescent());
}

TEST_F(FtlFeaturesTest, CheckpointTornByAPowerCutFallsBackToScan) {
  MakeCard();
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  const uint64_t n = ftl_->sectors();
  for (uint64_t lba = 0; lba < n; lba += 2) ASSERT_TRUE(Write(lba, Sector(lba, 1)).ok());
  clock_.RunUntilIdle();  // everything acknowledged is on flash
  card_->SetPlpState(nand::PlpState::kFailed);  // so the cut tears the record
  bool done = false;
  ftl_->Shutdown([&](Status) { done = true; });
  clock_.RunFor(300 * kUs);  // inside the checkpoint's erase/programs
  ASSERT_FALSE(done);
  PowerCycle();
  card_->SetPlpState(nand::PlpState::kHealthy);
  Status s = Attach();
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_FALSE(ftl_->attach_info().from_checkpoint);
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < n; lba += 2) {
    ASSERT_TRUE(Read(lba, 1, &out).ok());
    ASSERT_EQ(out, Sector(lba, 1)) << lba;
  }
}

TEST_F(FtlFeaturesTest, FlushAndFuaWithoutPowerLossProtection) {
  MakeCard();
  card_->SetPlpState(nand::PlpState::kFailed);
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  ASSERT_TRUE(Write(1, Sector(1, 1)).ok());
  ASSERT_TRUE(Write(2, Sector(2, 1), /*fua=*/true).ok());
  ASSERT_TRUE(Sync([&](ftl::Ftl::Done d) { ftl_->Flush(std::move(d)); }).ok());
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(1, 2, &out).ok());
  auto want = Sector(1, 1);
  auto w2 = Sector(2, 1);
  want.insert(want.end(), w2.begin(), w2.end());
  EXPECT_EQ(out, want);
}

// A LUN whose forward map outgrows a metadata LEB (a 300 GB duo-slc LUN: a 285 MiB map
// against a 24 MiB LEB; here 4,096 blocks of a 4-die pipe against a 64-page LEB) gets
// metadata slots of several LEBs at format: its checkpoint spans them, so a clean attach
// scans nothing, trims included. A map beyond even that (a sparse space written one
// sector per chunk, far past the format's allowance) cannot be checkpointed: a mount
// record stands in, a clean shutdown is still clean, and the attach scans, losing nothing.
TEST_F(FtlFeaturesTest, LunWhoseMapOutgrowsAMetadataLebCheckpointsAcrossSeveralLebs) {
  MakeCard("test-small", 4096);
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  ASSERT_GT(ftl_->sectors() * sizeof(uint32_t), uint64_t{64} * 4096) << "the map must not fit one metadata LEB";
  EXPECT_GT(ftl_->metadata_slot_lebs(), 1u);
  CheckSpread(true);
}

TEST_F(FtlFeaturesTest, SparseMapPastTheCheckpointAllowanceShutsDownCleanlyAndAttachesByScan) {
  MakeCard("test-small");
  ftl::FormatOptions fo;
  fo.sparse = true;
  fo.sparse_sectors = uint64_t{1} << 32;
  ASSERT_TRUE(Format(fo).ok());
  ASSERT_TRUE(Attach().ok());
  CheckSpread(false);
}

}  // namespace
}  // namespace vsl::testing

namespace vsl::testing {
namespace {

class FtlWearTest : public FtlFixture {
 protected:
  // Cold data on most of the device, then a small hot range rewritten many times.
  // Returns the erase-count spread over the data LEBs at the end.
  uint32_t Spread(uint32_t wl_max_spread) {
    MakeCard();
    EXPECT_TRUE(Format().ok());
    ftl::FtlOptions o;
    o.wl_max_spread = wl_max_spread;
    EXPECT_TRUE(Attach(o).ok());
    const uint64_t n = ftl_->sectors();
    std::vector<uint8_t> data(4096, 9);
    for (uint64_t l = 0; l < n * 8 / 10; ++l) ftl_->Write(l, 1, data.data(), false, [](Status) {});
    clock_.RunUntilIdle();
    Rng rng(3);
    for (int round = 0; round < 1500; ++round) {
      for (int i = 0; i < 64; ++i) {
        ftl_->Write(n - 40 + rng.Below(40), 1, data.data(), false, [](Status s) { ASSERT_TRUE(s.ok()); });
      }
      clock_.RunUntilIdle();
    }
    auto [lo, hi] = ftl_->EraseCountRange();
    wear_moves_ = ftl_->stats().wear_moves;
    return hi - lo;
  }
  uint64_t wear_moves_ = 0;
};

TEST_F(FtlWearTest, StaticWearLevellingBoundsTheSpread) {
  const uint32_t with = Spread(16);
  EXPECT_GT(wear_moves_, 0u);
  EXPECT_LE(with, 16u + 2u) << "the spread stays near the bound";
  ftl_.reset();
  card_.reset();
  std::filesystem::remove_all(tmp_.Sub("card"));
  const uint32_t without = Spread(0);
  EXPECT_EQ(wear_moves_, 0u);
  EXPECT_GT(without, 2 * with) << "without levelling the hot LEBs run away";
}

}  // namespace
}  // namespace vsl::testing

namespace vsl::testing {
namespace {

using nand::Completion;

class FtlGarbageTest : public FtlFixture {};

// Pages full of garbage, and pages with valid-looking headers that lie (LBAs past the
// end, absurd trim counts), written straight to the card behind the FTL's back: attach
// after an unclean shutdown must not crash, must keep the real data, and must not map
// anything the garbage claims.
TEST_F(FtlGarbageTest, GarbageAndLyingPageHeadersNeverBreakRecovery) {
  MakeCard();
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  ASSERT_TRUE(Write(0, Sector(0, 1, 20)).ok());
  const uint32_t epoch = ftl_->epoch();
  clock_.RunUntilIdle();
  PowerCycle();
  // Find free LEBs (erased row 0) from the end and fill them with garbage.
  const auto& g = card_->geometry();
  Rng rng(11);
  std::vector<uint8_t> data(g.page_data_bytes), meta(g.meta_bytes_per_page());
  int garbage_pages = 0;
  for (uint32_t b = g.blocks_per_lun - 1; b > g.blocks_per_lun - 6; --b) {
    for (uint32_t d = 0; d < g.dies_per_pipe(); ++d) {
      if (card_->block_info(0, d, b).factory_bad) continue;
      std::optional<Completion> e;
      card_->pipe(0).Erase(d, b, [&](const Completion& c) { e = c; });
      clock_.RunUntilTrue([&] { return e.has_value(); });
      for (uint32_t p = 0; p < 4; ++p) {
        rng.Fill(data.data(), data.size());
        rng.Fill(meta.data(), meta.size());
        meta[0] = 0xFF;
        if (p % 2 == 1) {
          // A header whose CRC checks but whose contents lie.
          auto* h = reinterpret_cast<ftl::format::PageHeader*>(meta.data());
          h->type = p == 1 ? 1 : 2;
          h->version_major = ftl::format::kVersionMajor;
          h->sectors = 1;
          h->epoch = epoch;
          h->seq = UINT64_MAX - p;
          auto* e2 = reinterpret_cast<ftl::format::SectorEntry*>(meta.data() + sizeof(*h));
          e2[0].lba = p == 1 ? (uint64_t{1} << 40) : UINT64_MAX / 2;  // past the end / huge count
          const std::size_t n = ftl::format::MetaBytes(1) - 4;
          const uint32_t crc = Crc32c(meta.data(), n);
          std::memcpy(meta.data() + n, &crc, 4);
        }
        std::optional<Completion> pc;
        card_->pipe(0).Program({{d, b, p}, data.data(), meta.data()}, nullptr,
                               [&](const Completion& c) { pc = c; });
        clock_.RunUntilTrue([&] { return pc.has_value(); });
        ++garbage_pages;
      }
    }
  }
  ASSERT_GT(garbage_pages, 0);
  Status s = Attach();
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<uint8_t> out;
  ASSERT_TRUE(Read(0, 20, &out).ok());
  EXPECT_EQ(out, Sector(0, 1, 20));
  EXPECT_EQ(ftl_->mapped_sectors(), 20u);
  // And the device keeps working over the garbage.
  for (uint64_t l = 0; l < ftl_->sectors(); ++l) ASSERT_TRUE(Write(l, Sector(l, 2)).ok());
  ASSERT_TRUE(Read(0, 1, &out).ok());
  EXPECT_EQ(out, Sector(0, 2));
}

}  // namespace
}  // namespace vsl::testing

namespace vsl::testing {
namespace {

class FtlLatencyTest : public FtlFixture {};

// A lone 4 KiB write at queue depth 1 on duo-slc timing is acknowledged when its page is
// in the controller's protected buffer: about one DMA (8 KiB at 1.6 GB/s, ~5 us), well
// under the reference card's 15 us, not after a page fills or a NAND program (200 us).
TEST_F(FtlLatencyTest, LoneWriteAtQueueDepthOneWaitsOneDma) {
  MakeCard("duo-slc-small", 16);
  ASSERT_TRUE(Format().ok());
  ASSERT_TRUE(Attach().ok());
  clock_.RunUntilIdle();
  std::vector<uint8_t> data = Sector(7, 1);
  for (int i = 0; i < 20; ++i) {
    const TimeNs t0 = clock_.Now();
    std::optional<TimeNs> acked;
    ftl_->Write(7 + static_cast<uint64_t>(i), 1, data.data(), false, [&](Status s) {
      ASSERT_TRUE(s.ok());
      acked = clock_.Now();
    });
    clock_.RunUntilTrue([&] { return acked.has_value(); });
    ASSERT_TRUE(acked.has_value());
    EXPECT_LT(*acked - t0, 15 * kUs) << "write " << i;
    clock_.RunUntilIdle();  // queue depth 1: the next write comes after this one is done
  }
  // FUA waits for the NAND program.
  const TimeNs t0 = clock_.Now();
  ASSERT_TRUE(Write(100, data, /*fua=*/true).ok());
  EXPECT_GT(clock_.Now() - t0, 200 * kUs);
}

}  // namespace
}  // namespace vsl::testing

namespace vsl::testing {
namespace {

class FtlDuoSectorTest : public FtlFixture {};

// The reference card's page (8 KiB + 448 B spare, 240 B of host metadata) formatted with
// 512-byte sectors: 16 sector headers per page must fit, and data survives a power cut.
TEST_F(FtlDuoSectorTest, FiveTwelveByteSectorsOnTheReferencePage) {
  MakeCard("duo-slc-small", 16);
  ftl::FormatOptions fo;
  fo.sector_bytes = 512;
  ASSERT_TRUE(Format(fo).ok());
  ASSERT_TRUE(Attach().ok());
  EXPECT_EQ(ftl_->sector_bytes(), 512u);
  for (uint64_t lba = 0; lba < 4000; lba += 37) ASSERT_TRUE(Write(lba, Sector(lba, 1, 5)).ok());
  ASSERT_TRUE(Write(7, Sector(7, 2, 3)).ok());  // partial overwrite inside a page
  PowerCycle();
  ASSERT_TRUE(Attach().ok());
  std::vector<uint8_t> out;
  for (uint64_t lba = 0; lba < 4000; lba += 37) {
    ASSERT_TRUE(Read(lba, 5, &out).ok()) << lba;
    ASSERT_EQ(out, Sector(lba, 1, 5)) << lba;
  }
  ASSERT_TRUE(Read(7, 3, &out).ok());
  EXPECT_EQ(out, Sector(7, 2, 3));
}

}  // namespace
}  // namespace vsl::testing
