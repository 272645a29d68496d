// The SDK's C API and C++ wrapper in in-process mode: every call, its errors, many I/Os
// in flight from several threads, the sparse space, and atomic batches across power cuts
// injected in virtual time (checked against what was acknowledged).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cerrno>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "tests/testutil/sim_of.h"
#include "sdk/src/device.h"
#include "tests/sdk/sdk_fixture.h"
#include "vsl/vsl.hpp"

namespace vsl::testing {
namespace {

using sdk::Device;

class SdkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.Sub("card");
    MakeFormattedCard(dir_, "duo-slc-small", 24, {});
  }
  std::unique_ptr<Device> Open(uint32_t lun = 0) {
    std::unique_ptr<Device> d;
    const int r = Device::OpenCard(dir_, lun, &d);
    EXPECT_EQ(r, 0) << vsl_strerror(r);
    return d;
  }
  TempDir tmp_;
  std::string dir_;
};

TEST_F(SdkTest, OpenRefusesWhatItCannotOpen) {
  vsl_dev* d = reinterpret_cast<vsl_dev*>(1);
  EXPECT_EQ(vsl_open_card((tmp_.path() + "/none").c_str(), 0, &d), -ENOENT);
  EXPECT_EQ(d, nullptr) << "the handle is cleared on failure";
  EXPECT_EQ(vsl_open_card(dir_.c_str(), 9, &d), -ENOENT);
  EXPECT_EQ(vsl_open_card(nullptr, 0, &d), -EINVAL);
  auto dev = Open(0);
  ASSERT_TRUE(dev);
  // One owner at a time: a second opener (another process, vsld) is refused.
  EXPECT_EQ(vsl_open_card(dir_.c_str(), 1, &d), -EBUSY);
  EXPECT_EQ(dev->Close(), 0);
  // An unformatted LUN.
  auto p = simcard::FindProfile("test-small");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(simcard::SimCard::Create(tmp_.Sub("blank"), *p, {}).ok());
  EXPECT_EQ(vsl_open_card(tmp_.Sub("blank").c_str(), 0, &d), -ENODEV);
  EXPECT_EQ(vsl_close(nullptr), 0);
  EXPECT_EQ(vsl_version() >> 16, static_cast<uint32_t>(VSL_SDK_VERSION_MAJOR));
  EXPECT_STRNE(vsl_strerror(-ENOSPC), "");
}

// The zero-time card (VSL_TIMING_NONE, a benchmarking mode): the same data path with no
// NAND time. In virtual time the model's card advances the clock for every program and
// read; on the zero-time card only the FTL's own timers move it, and the data is all there.
TEST_F(SdkTest, ZeroTimeCardServesTheSameDataInNoDeviceTime) {
  TimeNs spent[2] = {0, 0};
  for (const bool zero : {false, true}) {
    VirtualClock clock(7);
    card::Card* card = nullptr;
    vsl_dev* dev = nullptr;
    sdk::InProcessOptions o;
    o.clock = &clock;
    o.zero_time = zero;
    o.card_out = &card;
    ASSERT_EQ(sdk::OpenInProcess(dir_, 0, o, &dev), 0) << vsl_last_error();
    EXPECT_EQ(card->backend().zero_time(), zero);
    vsl_caps c{};
    ASSERT_EQ(vsl_get_caps(dev, &c), 0);
    const uint32_t sb = c.sector_bytes;
    const TimeNs t0 = clock.Now();
    for (uint64_t lba = 0; lba < 256; ++lba) {
      auto p = Pattern(lba, zero ? 2 : 1, sb);
      ASSERT_EQ(vsl_write(dev, lba * 37, 1, p.data(), 0), 0);
    }
    ASSERT_EQ(vsl_flush(dev), 0);
    std::vector<uint8_t> out(sb);
    for (uint64_t lba = 0; lba < 256; ++lba) {
      ASSERT_EQ(vsl_read(dev, lba * 37, 1, out.data()), 0);
      ASSERT_EQ(out, Pattern(lba, zero ? 2 : 1, sb)) << "lba " << lba * 37;
    }
    spent[zero] = clock.Now() - t0;
    ASSERT_EQ(vsl_close(dev), 0);
  }
  // What is left on the zero-time card is the FTL's own timers (padding a partial page,
  // the governor's window), not NAND time: the model spends tR or tPROG on every one of
  // these QD1 operations.
  std::printf("virtual time for 256 writes + flush + 256 reads: model %.3f ms, zero-time %.3f ms\n",
              static_cast<double>(spent[0]) / kMs, static_cast<double>(spent[1]) / kMs);
  EXPECT_GT(spent[0], 256 * 20 * kUs);
  EXPECT_LT(spent[1] * 4, spent[0]);
}

TEST_F(SdkTest, OpenOptionsAreChecked) {
  vsl_dev* d = nullptr;
  vsl_open_opts oo{};
  oo.size = sizeof oo;
  oo.timing = 7;
  EXPECT_EQ(vsl_open_card_opts(dir_.c_str(), 0, &oo, &d), -EINVAL);
  EXPECT_NE(std::string(vsl_last_error()).find("unknown timing"), std::string::npos);
  oo.timing = VSL_TIMING_NONE;
  oo.size = 4;
  EXPECT_EQ(vsl_open_card_opts(dir_.c_str(), 0, &oo, &d), -EINVAL);
  oo.size = sizeof oo;
  oo.reserved[1] = 1;
  EXPECT_EQ(vsl_open_card_opts(dir_.c_str(), 0, &oo, &d), -EINVAL);
  oo.reserved[1] = 0;
  EXPECT_EQ(vsl_open_card_opts(("rtl:" + dir_).c_str(), 0, &oo, &d), -EINVAL);
  EXPECT_NE(std::string(vsl_last_error()).find("simulated cards only"), std::string::npos);
  EXPECT_EQ(d, nullptr);
  // Valid: a zero-time open, and NULL options (the defaults).
  ASSERT_EQ(vsl_open_card_opts(dir_.c_str(), 0, &oo, &d), 0) << vsl_last_error();
  std::vector<uint8_t> buf(4096, 9), out(4096);
  ASSERT_EQ(vsl_write(d, 5, 1, buf.data(), 0), 0);
  ASSERT_EQ(vsl_close(d), 0);
  ASSERT_EQ(vsl_open_card_opts(dir_.c_str(), 0, nullptr, &d), 0) << vsl_last_error();
  ASSERT_EQ(vsl_read(d, 5, 1, out.data()), 0);
  EXPECT_EQ(out, buf) << "a zero-time card's data is on the card like any other";
  ASSERT_EQ(vsl_close(d), 0);
}

TEST_F(SdkTest, CapsUsageAndSyncIo) {
  auto dev = Open();
  const vsl_caps& c = dev->caps();
  EXPECT_EQ(c.sector_bytes, 4096u);
  EXPECT_GT(c.sectors, 1000u);
  EXPECT_TRUE(c.flags & VSL_CAP_ATOMIC_WRITE);
  EXPECT_TRUE(c.flags & VSL_CAP_ATOMIC_TRIM);
  EXPECT_TRUE(c.flags & VSL_CAP_PERSISTENT_TRIM);
  EXPECT_FALSE(c.flags & VSL_CAP_SPARSE);
  EXPECT_FALSE(c.flags & VSL_CAP_VOLATILE_CACHE);
  EXPECT_GE(c.atomic_max_vectors, 16u);
  EXPECT_GE(c.atomic_max_sectors * c.sector_bytes, uint64_t{1} << 20) << "a 1 MiB value fits one batch";
  const uint32_t sb = c.sector_bytes;
  auto a = Pattern(10, 1, sb, 4);
  ASSERT_EQ(dev->Write(10, 4, a.data()), 0);
  ASSERT_EQ(dev->Write(20, 1, a.data(), VSL_FUA), 0);
  std::vector<uint8_t> out(6 * sb);
  ASSERT_EQ(dev->Read(9, 6, out.data()), 0);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + sb), std::vector<uint8_t>(sb, 0));
  EXPECT_EQ(std::vector<uint8_t>(out.begin() + sb, out.begin() + 5 * sb), a);
  ASSERT_EQ(dev->Flush(), 0);
  vsl_usage u{};
  ASSERT_EQ(dev->Usage(&u), 0);
  EXPECT_EQ(u.logical_sectors, c.sectors);
  EXPECT_EQ(u.mapped_sectors, 5u);
  EXPECT_GE(u.physical_sectors, c.sectors);
  ASSERT_EQ(dev->Trim(11, 2), 0);
  EXPECT_EQ(dev->Exists(10, 4), 2);
  ASSERT_EQ(dev->Read(11, 1, out.data()), 0);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + sb), std::vector<uint8_t>(sb, 0));
  // Bad input: clear errors, nothing changes.
  EXPECT_EQ(dev->Write(c.sectors, 1, a.data()), -EINVAL);
  EXPECT_EQ(dev->Write(c.sectors - 1, 2, a.data()), -EINVAL);
  EXPECT_EQ(dev->Write(0, 0, a.data()), -EINVAL);
  EXPECT_EQ(dev->Write(0, 1, nullptr), -EINVAL);
  EXPECT_EQ(dev->Write(0, 1, a.data(), 0x80), -EINVAL);
  EXPECT_EQ(dev->Write(0, c.max_io_sectors + 1, a.data()), -EINVAL);
  EXPECT_EQ(dev->Read(c.sectors, 1, out.data()), -EINVAL);
  EXPECT_EQ(dev->Trim(0, 0), -EINVAL);
  EXPECT_EQ(dev->Trim(c.sectors, 1), -EINVAL);
  EXPECT_EQ(dev->Exists(c.sectors, 1), -EINVAL);
  EXPECT_EQ(vsl_read(nullptr, 0, 1, out.data()), -EINVAL);
  ASSERT_EQ(dev->Usage(&u), 0);
  EXPECT_EQ(u.mapped_sectors, 3u);
  // Survives a clean close and reopen.
  ASSERT_EQ(dev->Close(), 0);
  dev = Open();
  ASSERT_EQ(dev->Read(10, 1, out.data()), 0);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + sb), std::vector<uint8_t>(a.begin(), a.begin() + sb));
  EXPECT_EQ(dev->Exists(10, 4), 2);
}

TEST_F(SdkTest, AtomicBatchesAndTheirLimits) {
  auto dev = Open();
  const vsl_caps& c = dev->caps();
  const uint32_t sb = c.sector_bytes;
  ASSERT_EQ(dev->Write(100, 4, Pattern(100, 1, sb, 4).data()), 0);
  auto x = Pattern(5, 2, sb, 3), y = Pattern(5000, 2, sb, 1);
  auto b = dev->NewBatch();
  b.Write(5, 3, x.data()).Trim(100, 2).Write(5000, 1, y.data());
  ASSERT_EQ(b.Commit(), 0);
  std::vector<uint8_t> out(3 * sb);
  ASSERT_EQ(dev->Read(5, 3, out.data()), 0);
  EXPECT_EQ(out, x);
  EXPECT_EQ(dev->Exists(100, 4), 2);
  EXPECT_EQ(dev->Exists(5000), 1);
  // Refused batches apply nothing.
  const int64_t before = dev->Exists(0, c.sectors);
  std::vector<vsl_vec> many(c.atomic_max_vectors + 1, vsl_vec{7, 1, x.data(), VSL_VEC_WRITE, 0});
  EXPECT_EQ(dev->WriteAtomic(many), -EINVAL);
  std::vector<uint8_t> big((c.atomic_max_sectors + 1) * sb, 3);
  EXPECT_EQ(dev->WriteAtomic({{7, c.atomic_max_sectors + 1, big.data(), VSL_VEC_WRITE, 0}}), -EINVAL);
  EXPECT_EQ(dev->WriteAtomic({{7, 1, x.data(), VSL_VEC_WRITE, 0}, {c.sectors, 1, x.data(), VSL_VEC_WRITE, 0}}), -EINVAL);
  EXPECT_EQ(dev->WriteAtomic({{7, 1, x.data(), VSL_VEC_WRITE, 0}, {7, 1, nullptr, VSL_VEC_TRIM, 0}}), -EINVAL);
  EXPECT_EQ(dev->WriteAtomic({{7, 1, nullptr, VSL_VEC_WRITE, 0}}), -EINVAL);
  EXPECT_EQ(dev->WriteAtomic({{7, 1, x.data(), 9, 0}}), -EINVAL);
  EXPECT_EQ(dev->WriteAtomic({}), -EINVAL);
  EXPECT_EQ(dev->Exists(0, c.sectors), before);
  // The largest allowed batch goes through whole.
  std::vector<uint8_t> most(c.atomic_max_sectors * sb, 5);
  EXPECT_EQ(dev->WriteAtomic({{20000, c.atomic_max_sectors, most.data(), VSL_VEC_WRITE, 0}}), 0);
  EXPECT_EQ(dev->Exists(20000, c.atomic_max_sectors), static_cast<int64_t>(c.atomic_max_sectors));
}

TEST_F(SdkTest, MappedRangeIterator) {
  auto dev = Open();
  const uint32_t sb = dev->sector_bytes();
  std::vector<std::pair<uint64_t, uint64_t>> want;
  for (uint64_t i = 0; i < 700; ++i) {
    const uint64_t lba = i * 37 + (i % 3);
    const uint64_t n = 1 + i % 4;
    ASSERT_EQ(dev->Write(lba, static_cast<uint32_t>(n), Pattern(lba, 1, sb, static_cast<uint32_t>(n)).data()), 0);
    if (!want.empty() && want.back().first + want.back().second >= lba) {
      want.back().second = std::max(want.back().first + want.back().second, lba + n) - want.back().first;
    } else {
      want.emplace_back(lba, n);
    }
  }
  std::vector<std::pair<uint64_t, uint64_t>> got;
  ASSERT_EQ(dev->ForEachMappedRange(0, dev->sectors(), [&](uint64_t l, uint64_t n) {
              got.emplace_back(l, n);
              return true;
            }),
            0);
  EXPECT_EQ(got, want) << "more runs than one call returns (256): the iterator goes on";
  // C API paging: `next` resumes.
  vsl_range r[3];
  uint32_t n = 0;
  uint64_t next = 0;
  ASSERT_EQ(vsl_mapped_ranges(dev->handle(), 0, dev->sectors(), r, 3, &n, &next), 0);
  ASSERT_EQ(n, 3u);
  EXPECT_EQ(next, want[3].first);
  EXPECT_EQ(vsl_mapped_ranges(dev->handle(), 0, dev->sectors(), r, 0, &n, &next), -EINVAL);
  EXPECT_EQ(vsl_mapped_ranges(dev->handle(), dev->sectors(), 1, r, 3, &n, &next), -EINVAL);
}

TEST_F(SdkTest, ManyAsyncIosInFlightFromSeveralThreads) {
  auto dev = Open();
  const uint32_t sb = dev->sector_bytes();
  constexpr int kThreads = 4, kPerThread = 600;
  std::vector<std::vector<uint8_t>> data(kThreads * kPerThread);
  for (int i = 0; i < kThreads * kPerThread; ++i) data[i] = Pattern(i, 3, sb);
  std::atomic<int> errors{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      // Each thread polls its own completions; all share the device's queue, so any
      // poller may run any callback: count globally.
      int submitted = 0;
      for (int i = 0; i < kPerThread; ++i) {
        const int k = t * kPerThread + i;
        for (;;) {
          const int r = dev->WriteAsync(k, 1, data[k].data(), [&errors](int res) {
            if (res != 0) ++errors;
          });
          if (r == 0) break;
          if (r != -EAGAIN) {
            ++errors;
            break;
          }
          dev->Poll(1, 0, 10);
        }
        ++submitted;
      }
    });
  }
  for (auto& t : ts) t.join();
  while (dev->inflight() != 0) dev->Poll(1, 0, 100);
  EXPECT_EQ(errors.load(), 0);
  // Reads back, asynchronously, up to 256 at once.
  std::vector<std::vector<uint8_t>> out(kThreads * kPerThread, std::vector<uint8_t>(sb));
  int bad = 0, done = 0, max_inflight = 0;
  for (int k = 0; k < kThreads * kPerThread; ++k) {
    while (dev->ReadAsync(k, 1, out[k].data(), [&, k](int r) {
             ++done;
             if (r != 0 || out[k] != data[k]) ++bad;
           }) == -EAGAIN) {
      dev->Poll(1);
    }
    max_inflight = std::max<int>(max_inflight, static_cast<int>(dev->inflight()));
    if (dev->inflight() >= 256) dev->Poll(1);
  }
  while (dev->inflight() != 0) dev->Poll(1);
  EXPECT_EQ(done, kThreads * kPerThread);
  EXPECT_EQ(bad, 0);
  EXPECT_GE(max_inflight, 100) << "many I/Os in flight from one thread";
  // Submission errors do not call the callback.
  EXPECT_EQ(vsl_read_async(dev->handle(), 0, 1, out[0].data(), nullptr, nullptr), -EINVAL);
  EXPECT_EQ(vsl_read_async(dev->handle(), 0, 0, out[0].data(), [](void*, int) {}, nullptr), -EINVAL);
  // A range error found by the FTL arrives through the callback.
  int result = 1;
  ASSERT_EQ(vsl_read_async(dev->handle(), dev->sectors(), 1, out[0].data(),
                           [](void* a, int r) { *static_cast<int*>(a) = r; }, &result),
            0);
  EXPECT_EQ(dev->Poll(1, 0, 5000), 1);
  EXPECT_EQ(result, -EINVAL);
  EXPECT_EQ(dev->Poll(0, 0, 0), 0) << "nothing left";
}

TEST_F(SdkTest, SparseLunOfTwoToTheFortySectors) {
  const std::string sparse = tmp_.Sub("sparse");
  ftl::FormatOptions fo;
  fo.sparse = true;
  fo.sparse_sectors = uint64_t{1} << 40;
  MakeFormattedCard(sparse, "duo-slc-small", 24, fo);
  std::unique_ptr<Device> dev;
  ASSERT_EQ(Device::OpenCard(sparse, 1, &dev), 0);
  EXPECT_TRUE(dev->caps().flags & VSL_CAP_SPARSE);
  EXPECT_EQ(dev->sectors(), uint64_t{1} << 40);
  const uint32_t sb = dev->sector_bytes();
  const uint64_t far = (uint64_t{1} << 40) - 3;
  ASSERT_EQ(dev->Write(far, 2, Pattern(far, 1, sb, 2).data()), 0);
  vsl_usage u{};
  ASSERT_EQ(dev->Usage(&u), 0);
  EXPECT_EQ(u.logical_sectors, uint64_t{1} << 40);
  EXPECT_EQ(u.mapped_sectors, 2u);
  EXPECT_LT(u.physical_sectors, u.logical_sectors / 1000) << "physical room is reported apart";
  EXPECT_EQ(dev->Exists(0, uint64_t{1} << 40), 2);
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  ASSERT_EQ(dev->ForEachMappedRange(0, uint64_t{1} << 40, [&](uint64_t l, uint64_t n) {
              runs.emplace_back(l, n);
              return true;
            }),
            0);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0], std::make_pair(far, uint64_t{2}));
  ASSERT_EQ(dev->Close(), 0);
  ASSERT_EQ(Device::OpenCard(sparse, 1, &dev), 0);
  EXPECT_EQ(dev->Exists(far, 3), 2);
}

// A sparse LUN whose flash fills: writes and atomic batches needing new room fail
// -ENOSPC with nothing applied, what was written stays, overwrites and trims still work.
TEST_F(SdkTest, FullSparseLunSaysNoSpaceAndLosesNothing) {
  const std::string sparse = tmp_.Sub("full");
  ftl::FormatOptions fo;
  fo.sparse = true;
  fo.sparse_sectors = uint64_t{1} << 32;
  MakeFormattedCard(sparse, "test-small", 0, fo);
  std::unique_ptr<Device> dev;
  ASSERT_EQ(Device::OpenCard(sparse, 0, &dev), 0);
  const uint32_t sb = dev->sector_bytes();
  vsl_usage u{};
  ASSERT_EQ(dev->Usage(&u), 0);
  uint64_t written = 0;
  int r = 0;
  for (uint64_t i = 0; i < u.physical_sectors + 10; ++i) {
    r = dev->Write(i * 1000, 1, Pattern(i * 1000, 1, sb).data());
    if (r != 0) break;
    ++written;
  }
  EXPECT_EQ(r, -ENOSPC);
  EXPECT_GT(written, u.physical_sectors / 2);
  auto x = Pattern(7, 2, sb);
  EXPECT_EQ(dev->WriteAtomic({{5, 1, x.data(), VSL_VEC_WRITE, 0}, {123456789, 1, x.data(), VSL_VEC_WRITE, 0}}),
            -ENOSPC);
  EXPECT_EQ(dev->Exists(123456789), 0) << "nothing of the refused batch";
  std::vector<uint8_t> out(sb);
  for (uint64_t i = 0; i < written; i += 37) {
    ASSERT_EQ(dev->Read(i * 1000, 1, out.data()), 0);
    ASSERT_EQ(out, Pattern(i * 1000, 1, sb)) << i;
  }
  ASSERT_EQ(dev->Write(0, 1, x.data()), 0) << "an overwrite needs no new room";
  ASSERT_EQ(dev->Trim(1000, 1), 0);
  ASSERT_EQ(dev->Write(123456789, 1, x.data()), 0) << "a trim made room";
}

// Atomic batches in flight across power cuts at random instants, in virtual time: after
// recovery each batch is wholly there or wholly not, and every acknowledged one is.
TEST_F(SdkTest, AtomicBatchesAcrossPowerCutsInVirtualTime) {
  uint64_t whole = 0, none = 0, acked_total = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    VirtualClock clock(seed);
    Rng rng(seed);
    const std::string dir = tmp_.Sub("card-" + std::to_string(seed));  // a fresh card per seed
    MakeFormattedCard(dir, "duo-slc-small", 24, {});
    std::map<uint64_t, uint64_t> acked;  // lba -> version (0: zeroes)
    uint64_t version = 0;
    for (int round = 0; round < 3; ++round) {
      card::Card* card = nullptr;
      vsl_dev* dev = nullptr;
      ASSERT_EQ(OpenVirtual(dir, 0, clock, seed, &card, &dev), 0);
      vsl_caps c{};
      ASSERT_EQ(vsl_get_caps(dev, &c), 0);
      const uint32_t sb = c.sector_bytes;
      // Check what the last cut left, then forget the batches.
      for (auto& [lba, v] : acked) {
        std::vector<uint8_t> out(sb);
        ASSERT_EQ(vsl_read(dev, lba, 1, out.data()), 0);
        ASSERT_EQ(out, v == 0 ? std::vector<uint8_t>(sb, 0) : Pattern(lba, v, sb))
            << "seed " << seed << " round " << round << " lba " << lba;
      }
      std::vector<std::unique_ptr<ModelBatch>> batches;
      std::set<uint64_t> busy;
      for (int i = 0; i < 12; ++i) {
        auto b = std::make_unique<ModelBatch>();
        const int nv = 1 + static_cast<int>(rng.Below(5));
        for (int v = 0; v < nv; ++v) {
          const uint64_t lba = rng.Below(4000);
          const uint64_t n = 1 + rng.Below(8);
          bool clash = false;
          for (uint64_t k = 0; k < n; ++k) clash = clash || busy.count(lba + k) != 0;
          if (clash) continue;
          for (uint64_t k = 0; k < n; ++k) busy.insert(lba + k);
          if (rng.Bernoulli(0.2)) {
            b->Trim(lba, n);
          } else {
            b->Write(lba, n, &version, sb);
          }
        }
        if (b->vecs.empty()) continue;
        ModelBatch* raw = b.get();
        ASSERT_EQ(vsl_write_atomic_async(dev, raw->vecs.data(), static_cast<uint32_t>(raw->vecs.size()), 0,
                                         [](void* a, int r) { static_cast<ModelBatch*>(a)->result = r; }, raw),
                  0);
        batches.push_back(std::move(b));
      }
      clock.RunFor(static_cast<DurNs>(rng.Below(3 * kMs)));
      vsl::testing::SimOf(*card).PowerCut();
      clock.RunUntilIdle();
      while (vsl_inflight(dev) != 0) vsl_poll(dev, 0, 0, 0);
      vsl_close(dev);  // the detach fails (no power); the card is closed
      // After the cut: each batch whole or not at all.
      ASSERT_EQ(OpenVirtual(dir, 0, clock, seed, &card, &dev), 0);
      for (auto& b : batches) {
        uint64_t now = 0, old = 0;
        CountNewAndOld(dev, *b, acked, sb, "seed " + std::to_string(seed) + " round " + std::to_string(round), &now,
                       &old);
        if (HasFatalFailure()) return;
        if (b->result == 0) {
          ASSERT_EQ(old, 0u) << "seed " << seed << ": an acknowledged batch lost sectors";
          ++acked_total;
        }
        ASSERT_TRUE(now == 0 || old == 0) << "seed " << seed << ": batch half applied (" << now << " new, "
                                          << old << " old)";
        (old == 0 ? whole : none)++;
        if (old == 0) {
          for (auto& [lba, v] : b->sectors) acked[lba] = v;
        }
      }
      vsl_close(dev);
    }
  }
  std::printf("batches: %llu acknowledged; after cuts %llu whole, %llu not at all\n",
              static_cast<unsigned long long>(acked_total), static_cast<unsigned long long>(whole),
              static_cast<unsigned long long>(none));
  EXPECT_GT(none, 0u);
  EXPECT_GT(whole, acked_total);
}

}  // namespace
}  // namespace vsl::testing

namespace vsl::testing {
namespace {

// An application that owns the card in-process is SIGKILLed with atomic batches in
// flight (its engines die with it; what the controller had accepted is finished from the
// PLP journal at the next open). Batch i writes 1-4 vectors inside sectors [64i, 64i+64),
// so batches never overlap: after the kill each must be whole or absent, and every batch
// the child reported acknowledged (through a pipe) must be whole.
TEST(SdkKillTest, KilledApplicationLeavesEachBatchWholeOrAbsent) {
  TempDir tmp;
  const std::string dir = tmp.Sub("card");
  MakeFormattedCard(dir, "duo-slc-small", 64, {});
  constexpr uint32_t kBatches = 1200;  // x 64 sectors x 3 rounds: within the LUN
  auto batch = [](uint32_t i, uint32_t sb, std::vector<std::vector<uint8_t>>* bufs, std::vector<vsl_vec>* vecs) {
    Rng rng(i + 17);
    const uint32_t n = 1 + static_cast<uint32_t>(rng.Below(4));
    for (uint32_t v = 0; v < n; ++v) {
      const uint64_t lba = uint64_t{i} * 64 + v * 16 + rng.Below(8);
      const uint64_t count = 1 + rng.Below(8);
      bufs->push_back(Pattern(lba, i + 1, sb, static_cast<uint32_t>(count)));
      vecs->push_back({lba, count, nullptr, VSL_VEC_WRITE, 0});
    }
    for (std::size_t v = 0; v < vecs->size(); ++v) (*vecs)[v].buf = (*bufs)[v].data();
  };
  uint64_t whole = 0, absent = 0, acked_total = 0;
  for (int round = 0; round < 3; ++round) {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const uint32_t first = round * kBatches;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      vsl_dev* dev = nullptr;
      if (vsl_open_card(dir.c_str(), 0, &dev) != 0) ::_exit(3);
      vsl_caps c{};
      vsl_get_caps(dev, &c);
      struct Ctx {
        std::vector<std::vector<uint8_t>> bufs;
        std::vector<vsl_vec> vecs;
        uint32_t id;
        int fd;
      };
      for (uint32_t i = first; i < first + kBatches; ++i) {
        auto* ctx = new Ctx{{}, {}, i, fds[1]};
        batch(i, c.sector_bytes, &ctx->bufs, &ctx->vecs);
        // Submitted once: retried only while the queue is full (-EAGAIN); then at most
        // 32 in flight.
        int rc;
        while ((rc = vsl_write_atomic_async(dev, ctx->vecs.data(), static_cast<uint32_t>(ctx->vecs.size()), 0,
                                            [](void* a, int r) {
                                              auto* x = static_cast<Ctx*>(a);
                                              if (r == 0) (void)!::write(x->fd, &x->id, sizeof(x->id));
                                              delete x;
                                            },
                                            ctx)) == -EAGAIN) {
          vsl_poll(dev, 1, 0, 10);
        }
        if (rc != 0) ::_exit(3);
        while (vsl_inflight(dev) > 32) vsl_poll(dev, 1, 0, 10);
      }
      while (vsl_inflight(dev) != 0) vsl_poll(dev, 1, 0, 10);
      ::_exit(0);  // (the kill usually comes first)
    }
    ::close(fds[1]);
    // The kill comes a little after the first acknowledgement, with batches streaming.
    std::set<uint32_t> acked;
    uint32_t id;
    ASSERT_EQ(::read(fds[0], &id, sizeof(id)), static_cast<ssize_t>(sizeof(id))) << "the child never got going";
    acked.insert(id);
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + 40 * round));
    ::kill(pid, SIGKILL);
    int st = 0;
    ::waitpid(pid, &st, 0);
    while (::read(fds[0], &id, sizeof(id)) == static_cast<ssize_t>(sizeof(id))) acked.insert(id);
    ::close(fds[0]);
    ASSERT_FALSE(acked.empty()) << "round " << round << ": the child acknowledged nothing before the kill";
    vsl_dev* dev = nullptr;
    ASSERT_EQ(vsl_open_card(dir.c_str(), 0, &dev), 0) << "round " << round << ": the card reopens after the kill";
    vsl_caps c{};
    vsl_get_caps(dev, &c);
    const uint32_t sb = c.sector_bytes;
    for (uint32_t i = first; i < first + kBatches; ++i) {
      std::vector<std::vector<uint8_t>> bufs;
      std::vector<vsl_vec> vecs;
      batch(i, sb, &bufs, &vecs);
      uint64_t now = 0, old = 0;
      for (std::size_t v = 0; v < vecs.size(); ++v) {
        std::vector<uint8_t> out(vecs[v].count * sb);
        ASSERT_EQ(vsl_read(dev, vecs[v].lba, static_cast<uint32_t>(vecs[v].count), out.data()), 0);
        for (uint64_t k = 0; k < vecs[v].count; ++k) {
          const bool is_new = std::equal(out.begin() + k * sb, out.begin() + (k + 1) * sb, bufs[v].begin() + k * sb);
          const bool is_zero = std::all_of(out.begin() + k * sb, out.begin() + (k + 1) * sb, [](uint8_t b) { return b == 0; });
          ASSERT_TRUE(is_new || is_zero) << "round " << round << " batch " << i;
          now += is_new;
          old += is_zero;
        }
      }
      ASSERT_TRUE(now == 0 || old == 0) << "round " << round << ": batch " << i << " half applied";
      if (acked.count(i)) {
        ASSERT_EQ(old, 0u) << "round " << round << ": acknowledged batch " << i << " lost";
      }
      (old == 0 ? whole : absent)++;
    }
    acked_total += acked.size();
    ASSERT_EQ(vsl_close(dev), 0);
  }
  std::printf("3 kills: %llu batches acknowledged; %llu whole, %llu absent\n",
              static_cast<unsigned long long>(acked_total), static_cast<unsigned long long>(whole),
              static_cast<unsigned long long>(absent));
  EXPECT_GT(absent, 0u) << "some kill should land before batches were written";
}

}  // namespace
}  // namespace vsl::testing
