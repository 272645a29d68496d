// Controller-side relocation (FtlOptions::copy_relocation, FlashPipe::Copy): the groomer
// reads only a victim page's metadata and has the controller pack the live sectors into
// its pages. Against relocation through host memory on the same workload: the same
// contents, through a clean restart and a power cut, and no relocated data over the
// host link; a copy whose source cannot be read is moved through host memory, rebuilt
// from parity, losing nothing.
#include <algorithm>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>

#include <gtest/gtest.h>

#include "tests/ftl/ftl_fixture.h"
#include "vsl/core/crc.h"
#include "vsl/ftl/ftl_format.h"

namespace vsl::testing {
namespace {

class CopyRelocationTest : public FtlFixture {
 protected:
  struct Outcome {
    std::vector<uint32_t> crcs;  // per LBA: CRC of what it reads back
    ftl::FtlStats stats;
    uint64_t link_bytes = 0, copies = 0;
  };

  void Fresh(bool copy, bool controller_parity = true, uint32_t sector_bytes = 4096, bool summary_crcs = true) {
    // The card's timers live on the clock (SimCard): what the last FTL left in flight
    // (the groomer's reads after a check) finishes before the card goes.
    if (card_) clock_.RunUntilIdle();
    ftl_.reset();
    card_.reset();
    std::filesystem::remove_all(tmp_.Sub("card"));
    // 512-byte sectors: the reference card's page, whose spare holds FlashBack's
    // metadata for 16 sectors (the test card's does not).
    if (sector_bytes == 512) MakeCard("duo-slc-small", 16);
    else MakeCard();
    ftl::FormatOptions fo;
    fo.sector_bytes = sector_bytes;
    fo.summary_crcs = summary_crcs;
    ASSERT_TRUE(Format(fo).ok());
    opts_ = {};
    opts_.copy_relocation = copy;
    opts_.controller_parity = controller_parity;
    ASSERT_TRUE(Attach(opts_).ok());
    n_ = ftl_->sectors();
    version_.clear();
  }
  // Random writes after a fill until victims overlap and summaries are read ahead: both in
  // more than half the victims; every sector checked after a clean restart and after a
  // power cut mid-grooming.
  void OverlapAndReadAhead(uint32_t sector_bytes);
  // Program failures part-way through blocks of die 3 that the groomer copies into, on
  // the modelled card and without timing: nothing lost, nothing unreadable.
  void CopiesIntoABadBlock(uint32_t sector_bytes);
  // Fills the LUN, then overwrites even LBAs `rounds` times (odd ones stay where the
  // fill put them, so every victim has live sectors to move), trims a few.
  void Churn(uint32_t rounds) {
    for (uint64_t lba = 0; lba < n_; ++lba) Put(lba, 1);
    OverwriteEvens(rounds, 7);
    ASSERT_TRUE(Trim(12, 3).ok());
    for (uint64_t l = 12; l < 15; ++l) version_[l] = 0;
    clock_.RunUntilIdle();
  }
  // `rounds` rounds of n_/2 overwrites of random even LBAs (versions 2, 3, ...; odd LBAs
  // keep what the fill wrote, so every victim has live sectors to move).
  void OverwriteEvens(uint32_t rounds, uint64_t seed) {
    Rng rng(seed);
    for (uint32_t r = 0; r < rounds; ++r) {
      for (uint64_t i = 0; i < n_ / 2; ++i) Put(2 * rng.Below(n_ / 2), 2 + r);
    }
  }
  void Put(uint64_t lba, uint64_t v) {
    ASSERT_TRUE(Write(lba, Sector(lba, v)).ok()) << lba;
    version_[lba] = v;
  }
  // `total` 4 KiB random writes (versions from 100 up) at queue depth `qd`, until all are
  // answered (the groomer may still be at work): the number that failed.
  uint64_t RandomWrites(uint32_t qd, uint64_t total, uint64_t seed) {
    Rng rng(seed);
    uint64_t issued = 0, done = 0, failed = 0;
    std::vector<std::vector<uint8_t>> bufs(qd);
    std::function<void(uint32_t)> next = [&](uint32_t slot) {
      if (issued == total) return;
      const uint64_t lba = rng.Below(n_), v = 100 + issued++;
      bufs[slot] = Sector(lba, v);
      version_[lba] = v;
      ftl_->Write(lba, 1, bufs[slot].data(), false, [&, slot](Status st) {
        ++done;
        failed += !st.ok();
        next(slot);
      });
    };
    for (uint32_t i = 0; i < qd; ++i) next(i);
    clock_.RunUntilTrue([&] { return done == total; });
    return failed;
  }
  std::vector<uint8_t> Want(uint64_t lba) const {
    const auto it = version_.find(lba);
    if (it == version_.end() || it->second == 0) return std::vector<uint8_t>(ftl_->sector_bytes(), 0);
    return Sector(lba, it->second);
  }
  // Every sector against what was written (read 64 at a time), a CRC per LBA; empty on
  // the first mismatch.
  std::vector<uint32_t> Check(const char* when) {
    std::vector<uint32_t> crcs;
    std::vector<uint8_t> out;
    const uint32_t sb = ftl_->sector_bytes();
    for (uint64_t lba0 = 0; lba0 < n_; lba0 += 64) {
      const auto k = static_cast<uint32_t>(std::min<uint64_t>(64, n_ - lba0));
      const Status s = Read(lba0, k, &out);
      EXPECT_TRUE(s.ok()) << when << " lba " << lba0 << "+" << k << ": " << s.ToString();
      if (!s.ok()) return {};
      for (uint32_t i = 0; i < k; ++i) {
        const uint64_t lba = lba0 + i;
        const std::vector<uint8_t> got(out.begin() + i * sb, out.begin() + (i + 1) * sb);
        EXPECT_EQ(got, Want(lba)) << when << " lba " << lba;
        if (got != Want(lba)) return {};
        crcs.push_back(Crc32c(got.data(), got.size()));
      }
    }
    return crcs;
  }
  Outcome Run(bool copy) {
    Outcome o;
    Fresh(copy);
    Churn(6);
    o.stats = ftl_->stats();
    o.link_bytes = card_->stats(0).link_bytes;
    o.copies = card_->stats(0).copies;
    o.crcs = Check("after the churn");
    EXPECT_TRUE(Shutdown().ok());
    EXPECT_TRUE(Attach(opts_).ok());
    EXPECT_EQ(Check("after a clean restart"), o.crcs);
    // A power cut in the middle of more grooming.
    for (uint64_t i = 0; i < n_ / 4; ++i) Put((4 * i) % n_, 50);
    card_->PowerCut();
    clock_.RunUntilIdle();
    PowerCycle();
    EXPECT_TRUE(Attach(opts_).ok());
    EXPECT_FALSE(Check("after a power cut").empty());
    return o;
  }

  ftl::FtlOptions opts_;
  uint64_t n_ = 0;
  std::map<uint64_t, uint64_t> version_;
};

TEST_F(CopyRelocationTest, CopyAndHostRelocationKeepTheSameContentsAndCopiesSpareTheLink) {
  const Outcome copy = Run(true);
  const Outcome host = Run(false);
  ASSERT_FALSE(copy.crcs.empty());
  EXPECT_EQ(copy.crcs, host.crcs);
  EXPECT_GT(host.stats.gc_write_sectors, 0u);
  EXPECT_EQ(host.stats.gc_copy_sectors, 0u);
  EXPECT_EQ(host.copies, 0u);
  // Most relocation went by copy (a page whose row found no free accumulator goes
  // through host memory).
  EXPECT_GT(copy.stats.gc_copy_sectors, copy.stats.gc_write_sectors * 9 / 10) << "fallbacks " << copy.stats.copy_fallbacks;
  EXPECT_GT(copy.copies, 0u);
  EXPECT_EQ(copy.copies, copy.stats.copy_pages);
  // What relocation through host memory sent over the link, copies did not: each
  // relocated sector was read and written again there.
  const uint64_t sb = 4096;
  ASSERT_GT(host.link_bytes, copy.link_bytes);
  EXPECT_GT(host.link_bytes - copy.link_bytes, host.stats.gc_write_sectors * sb);
}

// A stage (the running parity of a row still being written, parked in a controller
// slot) buys early acknowledgements. The groomer's rows hold relocated data no host
// write waits for, so while it still reads its victim they are not staged (their parity
// page follows as the row fills); once it stops, and for a flush, they are. Before, a
// stage went out for nearly every relocated page. Flushes mid-grooming complete, and a
// power cut in the middle of it loses nothing, with or without controller copies.
TEST_F(CopyRelocationTest, TheGroomersOwnRowsAreStagedOnlyWhenSomethingWaitsForThem) {
  for (const bool copy : {true, false}) {
    SCOPED_TRACE(copy ? "controller copies" : "relocation through host memory");
    Fresh(copy);
    for (uint64_t lba = 0; lba < n_; ++lba) Put(lba, 1);
    clock_.RunUntilIdle();
    const ftl::FtlStats pre = ftl_->stats();
    Rng rng(11);
    for (uint32_t r = 0; r < 2; ++r) {
      for (uint64_t i = 0; i < n_ / 2; ++i) {
        Put(2 * rng.Below(n_ / 2), 2 + r);
        if (i % 64 == 63) {
          ASSERT_TRUE(Sync([&](ftl::Ftl::Done d) { ftl_->Flush(std::move(d)); }).ok());
        }
      }
    }
    clock_.RunUntilIdle();
    const ftl::FtlStats st = ftl_->stats();
    const uint64_t host = st.host_write_sectors - pre.host_write_sectors;
    const uint64_t gc = st.gc_write_sectors - pre.gc_write_sectors;
    const uint64_t stages = st.parity_stages - pre.parity_stages;
    ASSERT_GT(gc, host / 2) << "the groomer was not busy";
    // A host write acknowledged alone takes a stage unless it completes its row (one in
    // dies - 1); the groomer's pages add few (its rows at a victim's end and at the
    // flushes). Staging them as before added about two thirds of a stage per page.
    const uint64_t d = card_->geometry().dies_per_pipe();
    ASSERT_GE(d, 3u);
    EXPECT_GE(stages, host * (d - 2) / (d - 1) * 9 / 10);
    EXPECT_LT(stages, host * (d - 2) / (d - 1) + gc / 8) << "host " << host << " relocated " << gc;
    EXPECT_FALSE(Check("after grooming").empty());
    for (uint64_t i = 0; i < n_ / 4; ++i) Put((4 * i + 2) % n_, 9);
    PowerCycle();
    ASSERT_TRUE(Attach(opts_).ok());
    EXPECT_FALSE(Check("after a power cut mid-grooming").empty());
  }
}

// Format 1.6 keeps each sector's CRC in the LEB summary, so the groomer reads a victim's
// summary once and has the controller copy its pages without reading their metadata one
// by one (the copy's new metadata needs the LBAs and CRCs). A card formatted as 1.5 did
// (summaries of LBAs only) still attaches, keeps its layout across restarts, and reads
// each page's metadata; both keep every sector through a clean restart and a power cut.
TEST_F(CopyRelocationTest, TheGroomerCopiesAVictimFromItsSummaryWithoutReadingItsPages) {
  uint64_t reads[2] = {}, copied[2] = {};
  for (const bool crcs : {true, false}) {
    SCOPED_TRACE(crcs ? "format 1.6: summaries with CRCs" : "format 1.5: summaries of LBAs");
    Fresh(true, true, 4096, crcs);
    for (uint64_t lba = 0; lba < n_; ++lba) Put(lba, 1);
    clock_.RunUntilIdle();
    // The card counts a copy's read of its source among its reads: what is left is the
    // groomer's own (metadata and summaries).
    const uint64_t reads0 = card_->stats(0).reads - card_->stats(0).copies, copied0 = ftl_->stats().gc_copy_sectors;
    Rng rng(5);
    for (uint32_t r = 0; r < 3; ++r) {
      for (uint64_t i = 0; i < n_ / 2; ++i) Put(2 * rng.Below(n_ / 2), 2 + r);
    }
    clock_.RunUntilIdle();
    reads[crcs] = card_->stats(0).reads - card_->stats(0).copies - reads0;
    copied[crcs] = ftl_->stats().gc_copy_sectors - copied0;
    ASSERT_GT(copied[crcs], n_ / 4) << "the groomer copied little";
    EXPECT_FALSE(Check("after grooming").empty());
    ASSERT_TRUE(Shutdown().ok());
    ASSERT_TRUE(Attach(opts_).ok());
    EXPECT_FALSE(Check("after a clean restart").empty());
    // Victims closed before the restart have no summary this FTL wrote: their pages'
    // metadata is read. Then a power cut in the middle of more grooming.
    for (uint64_t i = 0; i < n_ / 2; ++i) Put(2 * rng.Below(n_ / 2), 9);
    card_->PowerCut();
    clock_.RunUntilIdle();
    PowerCycle();
    ASSERT_TRUE(Attach(opts_).ok());
    EXPECT_FALSE(Check("after a power cut").empty());
  }
  // Every copied page cost a metadata read on the 1.5 card; on 1.6 only the summaries'.
  EXPECT_GE(reads[false], copied[false]);
  EXPECT_LT(reads[true] * 10, copied[true]) << "reads " << reads[true] << " for " << copied[true] << " copied";
}

// Copies from the summary read nothing first, so nothing spaces them but the groomer's
// bound on pages queued ahead of the controller: its share of the dies (the share of
// programs the pacer gives relocation), not two per die as for relocation that reads. At
// queue depth 16 of random writes the groomer keeps at most one copy per die queued.
TEST_F(CopyRelocationTest, CopiesFromTheSummaryQueueNoMoreThanTheirShareOfTheDies) {
  Fresh(true);
  for (uint64_t lba = 0; lba < n_; ++lba) Put(lba, 1);
  clock_.RunUntilIdle();
  const uint32_t dies = card_->geometry().dies_per_pipe();
  const ftl::FtlStats s0 = ftl_->stats();
  EXPECT_EQ(RandomWrites(16, 3 * n_, 11), 0u);
  clock_.RunUntilIdle();
  const ftl::FtlStats& s = ftl_->stats();
  ASSERT_GT(s.gc_copy_sectors - s0.gc_copy_sectors, n_) << "the groomer copied little";
  EXPECT_LT((s.gc_meta_reads - s0.gc_meta_reads) * 10, (s.copy_pages - s0.copy_pages))
      << "the groomer read its victims' pages instead of their summaries";
  // (Plus the next victim's summary read, one page here: victims overlap, so it may be
  // in flight beside the copies of the one draining. Two per die would be 8.)
  EXPECT_LE(s.gc_queued_max, dies + 1) << "copies queued ahead of the controller";
  EXPECT_FALSE(Check("after the random writes").empty());
}

// Victims overlap: once a victim is read through and only waits for its copies to land,
// the next starts beside it, with its summary already read ahead while the one before
// was groomed (the pacing stalls between victims, docs/ftl.md). Nothing is lost.
TEST_F(CopyRelocationTest, VictimsOverlapAndTheNextSummaryIsReadAhead) { OverlapAndReadAhead(4096); }

// The same with 512-byte sectors (the reference card's format: 16 sectors a page, FlashBack's
// metadata for all of them in the spare): a page's sectors come from many more LBAs, and a
// summary names eight times as many.
TEST_F(CopyRelocationTest, VictimsOverlapAndTheNextSummaryIsReadAheadWith512ByteSectors) {
  OverlapAndReadAhead(512);
}

void CopyRelocationTest::OverlapAndReadAhead(uint32_t sector_bytes) {
  Fresh(true, true, sector_bytes);
  for (uint64_t lba = 0; lba < n_; ++lba) Put(lba, 1);
  clock_.RunUntilIdle();
  const ftl::FtlStats s0 = ftl_->stats();
  EXPECT_EQ(RandomWrites(16, 3 * n_, 12), 0u);
  clock_.RunUntilIdle();
  ftl::FtlStats s = ftl_->stats();
  const uint64_t victims = s.victims - s0.victims, overlapped = s.victims_overlapped - s0.victims_overlapped;
  const uint64_t hits = s.summary_prefetch_hits - s0.summary_prefetch_hits;
  const uint64_t misses = s.summary_prefetch_misses - s0.summary_prefetch_misses;
  ASSERT_GT(victims, 10u);
  EXPECT_GT(overlapped * 2, victims) << overlapped << " of " << victims << " victims overlapped the next";
  EXPECT_GT(hits * 2, victims) << hits << " summaries read ahead and used, " << misses << " not, of " << victims;
  EXPECT_TRUE(ftl_->idle());  // every victim released
  EXPECT_FALSE(Check("after the random writes").empty());
  ASSERT_TRUE(Shutdown().ok());
  ASSERT_TRUE(Attach(opts_).ok());
  EXPECT_FALSE(Check("after a clean restart").empty());
  // A power cut as the last writes are answered, the groomer still at work (victims
  // draining beside the current one, a summary read ahead): nothing acknowledged is lost.
  s = ftl_->stats();
  EXPECT_EQ(RandomWrites(16, n_, 13), 0u);
  EXPECT_GT(ftl_->stats().victims_overlapped, s.victims_overlapped);
  card_->PowerCut();
  clock_.RunUntilIdle();
  PowerCycle();
  ASSERT_TRUE(Attach(opts_).ok());
  EXPECT_FALSE(Check("after a power cut mid-grooming").empty());
}

// A die that fails under copy relocation: once the FTL has declared it failed, the
// groomer neither copies from it nor reads its pages' metadata; its pages are rebuilt
// from parity through host memory. Copies that failed
// against it over and over once livelocked the groomer (campaign seed 1086).
TEST_F(CopyRelocationTest, PagesOnAFailedDieAreRebuiltNeverCopied) {
  Fresh(true);
  // Half the LUN: what the three surviving dies can still hold with room to groom.
  for (uint64_t lba = 0; lba < n_ / 2; ++lba) Put(lba, 1);
  clock_.RunUntilIdle();
  card_->InjectDieFailure(0, 1);
  // Writes until the FTL meets the dead die and declares it (the rebuild of its LEBs
  // has not begun: nothing copied from it can have failed yet).
  Rng rng(13);
  uint64_t v = 2;
  while (ftl_->flashback_status().failed_dies.empty()) Put(rng.Below(n_ / 2), v++);
  ASSERT_GT(ftl_->flashback_status().rebuild_lebs_left, 0u);
  const uint64_t fallbacks0 = ftl_->stats().copy_fallbacks, copied0 = ftl_->stats().gc_copy_sectors;
  for (uint64_t i = 0; i < 2 * n_; ++i) Put(rng.Below(n_ / 2), v++);
  clock_.RunUntilIdle();
  EXPECT_EQ(ftl_->flashback_status().rebuild_lebs_left, 0u);
  EXPECT_GT(ftl_->stats().gc_copy_sectors, copied0) << "the groomer copied nothing after the failure";
  EXPECT_EQ(ftl_->stats().copy_fallbacks, fallbacks0) << "copies from the failed die";
  EXPECT_FALSE(Check("after the rebuild").empty());
}

// Blocks that go bad under the groomer's own copies: a program fails part-way through a
// block of die 3, and every later page the FTL had queued to that block fails with it
// (parity pages and copies among them, many already acknowledged as covered by their
// rows' parity). The copied sectors are rebuilt from their rows and moved; nothing is lost
// and no victim is kept for want of sectors it cannot read. On the modelled card and on
// one without timing, where a copy and its row's parity page once entered the controller
// in the same instant and landed in either order (the parity then missed the copy, and
// ftl_cpu_bench's groomer read such a page back, unrebuildable, 215 times a run).
TEST_F(CopyRelocationTest, CopiesIntoABlockThatGoesBadAreRebuiltAndLoseNothing) { CopiesIntoABadBlock(4096); }

// The same with 512-byte sectors (the reference card's format): a page holds 16 sectors,
// so a copy page gathers runs from several victim pages and a failed page takes more of
// them with it; FlashBack's metadata for them rides in the spare.
TEST_F(CopyRelocationTest, CopiesIntoABlockThatGoesBadAreRebuiltAndLoseNothingWith512ByteSectors) {
  CopiesIntoABadBlock(512);
}

void CopyRelocationTest::CopiesIntoABadBlock(uint32_t sector_bytes) {
  for (const bool null_timing : {false, true}) {
    SCOPED_TRACE(null_timing ? "without timing" : "modelled timing");
    card_opts_.null_timing = null_timing;
    Fresh(true, true, sector_bytes);
    const nand::Geometry g = card_->geometry();
    const bool small = sector_bytes == 512;
    if (small) {
      // A page at a time: the 512-byte card holds 200K sectors.
      const uint32_t per = g.page_data_bytes / sector_bytes;
      for (uint64_t lba = 0; lba < n_; lba += per) {
        const uint32_t k = static_cast<uint32_t>(std::min<uint64_t>(per, n_ - lba));
        std::vector<uint8_t> data;
        for (uint32_t i = 0; i < k; ++i) {
          const auto sec = Sector(lba + i, 1);
          data.insert(data.end(), sec.begin(), sec.end());
          version_[lba + i] = 1;
        }
        ASSERT_TRUE(Write(lba, data).ok()) << lba;
      }
    } else {
      for (uint64_t lba = 0; lba < n_; ++lba) Put(lba, 1);
    }
    clock_.RunUntilIdle();
    uint32_t armed = 0;
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
      // 4 KiB: the blocks the fill left unwritten, the groomer's first destinations. The
      // 512-byte card's fill leaves hardly any: every block, failing when it is written
      // again after its erase.
      if (!small && card_->block_info(0, 3, b).next_page != 0) continue;
      card_->InjectProgramFail(0, {3, b, 5});
      ++armed;
    }
    ASSERT_GT(armed, 0u);
    OverwriteEvens(small ? 1 : 4, 21);
    clock_.RunUntilIdle();
    const ftl::FtlStats st = ftl_->stats();
    EXPECT_GT(st.program_failures, 0u);
    EXPECT_GT(st.gc_copy_sectors, 0u);
    EXPECT_EQ(st.read_errors, 0u) << "sectors the groomer could not read";
    EXPECT_TRUE(ftl_->flashback_status().lost_lbas.empty());
    EXPECT_FALSE(Check("after blocks went bad under copies").empty());
    PowerCycle();
    ASSERT_TRUE(Attach(opts_).ok());
    EXPECT_FALSE(Check("after a power cut").empty());
  }
}

// A sector the groomer has copied into a page it has not yet submitted has no data in
// host memory (the controller moves it when the page goes): a read meanwhile is served
// from the sector's source, which the victim keeps. It once read the open page's empty
// buffer and returned zeroes (atomic campaign, seed 9, with failed-die pages read first).
TEST_F(CopyRelocationTest, ASectorWaitingInAnOpenCopyPageReadsFromItsSource) {
  Fresh(true, true, 512);  // many sectors to a page: copies wait in it for more
  const uint32_t sb = ftl_->sector_bytes();
  auto run = [&](uint64_t lba, uint32_t n, uint64_t v) {
    std::vector<uint8_t> data;
    for (uint32_t k = 0; k < n; ++k) {
      const auto sec = Sector(lba + k, v);
      data.insert(data.end(), sec.begin(), sec.end());
    }
    return data;
  };
  for (uint64_t lba = 0; lba < n_; lba += 128) {
    ASSERT_TRUE(Write(lba, run(lba, static_cast<uint32_t>(std::min<uint64_t>(128, n_ - lba)), 1)).ok());
  }
  clock_.RunUntilIdle();
  // Three LBAs of every 16 keep version 1 while the rest are written over, so victims
  // have runs of sectors to copy, and the groomer's pages fill in odd steps. Event by
  // event, each kept sector waiting in an open copy page is read then.
  const ftl::FtlStats s0 = ftl_->stats();
  uint64_t issued = 0, reads = 0, wrong = 0, first_wrong = UINT64_MAX;
  std::deque<std::vector<uint8_t>> outs;
  std::vector<uint64_t> seen;
  for (uint64_t v = 2; v < 4; ++v) {
    for (uint64_t lba = 0; lba + 16 <= n_; lba += 16) {
      const auto data = run(lba + 3, 13, v);
      bool done = false;
      ftl_->Write(lba + 3, 13, data.data(), false, [&](Status st) {
        EXPECT_TRUE(st.ok()) << st.ToString();
        done = true;
      });
      do {
        clock_.Step();
        std::vector<uint64_t> now = ftl_->TEST_OpenCopyLbas();
        std::sort(now.begin(), now.end());
        for (const uint64_t l : now) {
          // Once per stay in an open page.
          if (l % 16 >= 3 || l + 16 > n_ || std::binary_search(seen.begin(), seen.end(), l)) continue;
          ++issued;
          outs.emplace_back(sb);
          uint8_t* dst = outs.back().data();
          ftl_->Read(l, 1, dst, [&, l, dst](Status st) {
            ++reads;
            const auto want = Sector(l, 1);
            if (!st.ok() || !std::equal(want.begin(), want.end(), dst)) {
              ++wrong;
              first_wrong = std::min(first_wrong, l);
            }
          });
        }
        seen = std::move(now);
      } while (!done);
    }
  }
  clock_.RunUntilIdle();
  ASSERT_GT(ftl_->stats().gc_copy_sectors - s0.gc_copy_sectors, n_ / 32) << "the groomer copied little";
  ASSERT_GT(issued, 1000u) << "few reads met a sector in an open copy page";
  EXPECT_EQ(reads, issued);
  EXPECT_EQ(wrong, 0u) << "of " << reads << " reads; first at lba " << first_wrong;
}

// A victim whose summary does not check (a summary page unreadable) is groomed by reading
// its pages' metadata, with a warning; nothing is lost.
TEST_F(CopyRelocationTest, AVictimWhoseSummaryCannotBeReadIsGroomedPageByPage) {
  Fresh(true);
  for (uint64_t lba = 0; lba < n_; ++lba) Put(lba, 1);
  clock_.RunUntilIdle();
  // Every summary page on flash now becomes unreadable (found by its spare's page type).
  const nand::Geometry g = card_->geometry();
  uint32_t hit = 0;
  std::vector<uint8_t> meta(g.meta_bytes_per_page());
  for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
    for (uint32_t d = 0; d < g.dies_per_pipe(); ++d) {
      for (uint32_t p = 0; p < g.pages_per_block; ++p) {
        if (card_->block_info(0, d, b).next_page <= p) break;
        std::optional<nand::Completion> c;
        card_->pipe(0).Read({{d, b, p}, g.codewords_per_page() - 1, 1, nullptr, meta.data()},
                            [&](const nand::Completion& x) { c = x; });
        clock_.RunUntilTrue([&] { return c.has_value(); });
        if (c && c->ok() && reinterpret_cast<const ftl::format::PageHeader*>(meta.data())->type ==
                                static_cast<uint8_t>(ftl::format::PageType::kSummary)) {
          card_->InjectUncorrectable(0, {d, b, p});
          ++hit;
        }
      }
    }
  }
  ASSERT_GT(hit, 2u) << "no summary pages found";
  const uint64_t reads0 = card_->stats(0).reads - card_->stats(0).copies, copied0 = ftl_->stats().gc_copy_sectors;
  Rng rng(9);
  for (uint64_t i = 0; i < n_ / 2; ++i) Put(2 * rng.Below(n_ / 2), 2);
  clock_.RunUntilIdle();
  const uint64_t copied = ftl_->stats().gc_copy_sectors - copied0;
  ASSERT_GT(copied, 0u);
  EXPECT_GE(card_->stats(0).reads - card_->stats(0).copies - reads0, copied) << "the unreadable summaries were trusted";
  EXPECT_TRUE(ftl_->flashback_status().lost_lbas.empty());
  EXPECT_FALSE(Check("after grooming victims with unreadable summaries").empty());
}

// A victim page whose data cannot be read but whose metadata can: the copy from it fails
// (the destination holds nothing), its sectors go back to it and move through host
// memory, rebuilt from the row's parity. Nothing is lost, before and after a power cut.
TEST_F(CopyRelocationTest, ACopyFromAnUncorrectablePageIsRebuiltFromParity) {
  Fresh(true);
  for (uint64_t lba = 0; lba < n_; ++lba) Put(lba, 1);
  clock_.RunUntilIdle();
  ASSERT_TRUE(ftl_->flashback_status().enabled);
  // Two blocks the fill wrote on die 1 decay.
  uint32_t hit = 0;
  const nand::Geometry g = card_->geometry();
  for (uint32_t b = 0; b < g.blocks_per_lun && hit < 2; ++b) {
    const simcard::BlockInfo bi = card_->block_info(0, 1, b);
    if (bi.next_page < g.pages_per_block) continue;  // metadata or open
    for (uint32_t p = 0; p < g.pages_per_block; ++p) card_->InjectUncorrectable(0, {1, b, p});
    ++hit;
  }
  ASSERT_EQ(hit, 2u);
  OverwriteEvens(4, 3);
  clock_.RunUntilIdle();
  const ftl::FtlStats st = ftl_->stats();
  EXPECT_GT(st.copy_fallbacks, 0u) << "no copy met the decayed pages";
  EXPECT_GT(st.gc_copy_sectors, 0u);
  EXPECT_GT(ftl_->flashback_status().rebuilt_pages, 0u);
  EXPECT_TRUE(ftl_->flashback_status().lost_lbas.empty());
  EXPECT_FALSE(Check("after grooming over decayed pages").empty());
  PowerCycle();
  ASSERT_TRUE(Attach(opts_).ok());
  EXPECT_FALSE(Check("after a power cut").empty());
}

// A member of the row still being written becomes unreadable (its row has no parity
// page yet). With the row's parity formed in a controller accumulator the host keeps no
// XOR of the row: the FTL writes the row's parity page early and rebuilds from flash.
// Without accumulators it rebuilds from the host's running XOR. Both give back every
// sector, in 4 KiB and 512-byte formats, and after a power cut; only the first spends a
// parity page on it.
TEST_F(CopyRelocationTest, AMemberOfTheRowBeingWrittenIsRebuiltWithOrWithoutItsAccumulator) {
  for (const uint32_t sb : {4096u, 512u})
  for (const bool accs : {true, false}) {
    SCOPED_TRACE(accs ? "row parity in an accumulator" : "row parity in host memory");
    SCOPED_TRACE(sb);
    Fresh(accs, accs, sb);
    ASSERT_TRUE(ftl_->flashback_status().enabled);
    const nand::Geometry g = card_->geometry();
    const uint32_t dies = g.dies_per_pipe();
    std::vector<uint32_t> before(dies * g.blocks_per_lun);
    for (uint32_t d = 0; d < dies; ++d) {
      for (uint32_t b = 0; b < g.blocks_per_lun; ++b) before[d * g.blocks_per_lun + b] = card_->block_info(0, d, b).next_page;
    }
    // Two sectors, each acknowledged alone: two members of the first row, which has
    // room for more (a row has dies - 1 data pages).
    ASSERT_GE(dies, 4u);
    Put(0, 1);
    Put(1, 1);
    clock_.RunUntilIdle();  // on flash, the row still open
    const ftl::FtlStats pre = ftl_->stats();
    ASSERT_EQ(pre.parity_pages, 0u) << "the row is complete: nothing is left to rebuild from the open row";
    // The first die that took a page since the attach decays: its member is unreadable.
    uint32_t decayed = 0;
    for (uint32_t d = 0; d < dies && decayed == 0; ++d) {
      for (uint32_t b = 0; b < g.blocks_per_lun; ++b) {
        const uint32_t now = card_->block_info(0, d, b).next_page;
        for (uint32_t p = before[d * g.blocks_per_lun + b]; p < now; ++p, ++decayed) card_->InjectUncorrectable(0, {d, b, p});
      }
    }
    ASSERT_GT(decayed, 0u);
    std::vector<uint8_t> out;
    for (uint64_t lba = 0; lba < 2; ++lba) {
      ASSERT_TRUE(Read(lba, 1, &out).ok()) << lba;
      EXPECT_EQ(out, Want(lba)) << lba;
    }
    clock_.RunUntilIdle();
    const ftl::FtlStats st = ftl_->stats();
    EXPECT_GE(st.rebuilt_pages, 1u);
    EXPECT_TRUE(ftl_->flashback_status().lost_lbas.empty());
    EXPECT_EQ(st.rebuild_parity_pages, accs ? 1u : 0u);
    // The rebuilt sectors moved to a healthy place, and the row goes on being written.
    for (uint64_t lba = 2; lba < 8; ++lba) Put(lba, 1);
    clock_.RunUntilIdle();
    for (uint64_t lba = 0; lba < 8; ++lba) {
      ASSERT_TRUE(Read(lba, 1, &out).ok()) << lba;
      EXPECT_EQ(out, Want(lba)) << lba;
    }
    // A power cut with the row still open behind the early parity page (its later
    // members unprotected, as after a short row): the attach finds every sector.
    Put(8, 2);
    PowerCycle();
    ASSERT_TRUE(Attach(opts_).ok());
    for (uint64_t lba = 0; lba < 9; ++lba) {
      ASSERT_TRUE(Read(lba, 1, &out).ok()) << lba;
      EXPECT_EQ(out, Want(lba)) << lba;
    }
  }
}

}  // namespace
}  // namespace vsl::testing
