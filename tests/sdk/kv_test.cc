// The key-value store (vsl_kv.h): every call and its errors, pools, iteration, expiry,
// probing under collisions against a reference map, atomic batches, and puts cut by
// power failures in virtual time (each key old or new, never a mix).
#include <cerrno>
#include <ctime>
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "tests/testutil/sim_of.h"
#include "sdk/src/device.h"
#include "tests/sdk/sdk_fixture.h"
#include "vsl/card/card.h"
#include "vsl/vsl.hpp"
#include "vsl/vsl_kv.h"

namespace vsl::testing {
namespace {

std::string Value(const std::string& key, uint64_t version, std::size_t len) {
  std::string v(len, '\0');
  Rng(std::hash<std::string>()(key) ^ (version * 0x9E3779B97F4A7C15ULL)).Fill(v.data(), len);
  return v;
}

class KvTest : public ::testing::Test {
 protected:
  void Open(const std::string& profile, uint32_t blocks, const ftl::FormatOptions& fo,
            const vsl_kv_opts* ko = nullptr) {
    dir_ = tmp_.Sub("card");
    MakeFormattedCard(dir_, profile, blocks, fo);
    ASSERT_EQ(vsl_open_card(dir_.c_str(), 0, &dev_), 0);
    ASSERT_EQ(vsl_kv_open(dev_, ko, &kv_), 0);
  }
  void Reopen() {
    ASSERT_EQ(vsl_kv_close(kv_), 0);
    ASSERT_EQ(vsl_close(dev_), 0);
    ASSERT_EQ(vsl_open_card(dir_.c_str(), 0, &dev_), 0);
    ASSERT_EQ(vsl_kv_open(dev_, nullptr, &kv_), 0);
  }
  void TearDown() override {
    vsl_kv_close(kv_);
    vsl_close(dev_);
  }
  int Put(uint32_t pool, const std::string& k, const std::string& v, uint64_t expiry = 0) {
    return vsl_kv_put(kv_, pool, k.data(), static_cast<uint32_t>(k.size()), v.data(),
                      static_cast<uint32_t>(v.size()), expiry);
  }
  // The value, or "<errno>" on error.
  std::string Get(uint32_t pool, const std::string& k) {
    std::string buf(vsl_kv_max_value(kv_), '\0');
    const int64_t r = vsl_kv_get(kv_, pool, k.data(), static_cast<uint32_t>(k.size()), buf.data(),
                                 static_cast<uint32_t>(buf.size()));
    if (r < 0) return "<" + std::to_string(-r) + ">";
    buf.resize(static_cast<std::size_t>(r));
    return buf;
  }
  int Del(uint32_t pool, const std::string& k) {
    return vsl_kv_delete(kv_, pool, k.data(), static_cast<uint32_t>(k.size()));
  }
  int Exists(uint32_t pool, const std::string& k) {
    return vsl_kv_exists(kv_, pool, k.data(), static_cast<uint32_t>(k.size()));
  }
  std::set<std::string> Keys(uint32_t pool) {
    std::set<std::string> keys;
    uint64_t cursor = 0;
    char k[VSL_KV_MAX_KEY];
    uint32_t kl = 0, vl = 0;
    int r;
    while ((r = vsl_kv_next(kv_, pool, &cursor, k, sizeof(k), &kl, &vl)) == 1) {
      EXPECT_TRUE(keys.insert(std::string(k, kl)).second) << "a key seen twice";
    }
    EXPECT_EQ(r, 0);
    return keys;
  }

  TempDir tmp_;
  std::string dir_;
  vsl_dev* dev_ = nullptr;
  vsl_kv* kv_ = nullptr;
};

ftl::FormatOptions Sparse() {
  ftl::FormatOptions fo;
  fo.sparse = true;
  fo.sparse_sectors = uint64_t{1} << 36;
  return fo;
}

TEST_F(KvTest, PutGetDeleteExistsAndTheirErrors) {
  Open("duo-slc-small", 24, Sparse());
  EXPECT_EQ(vsl_kv_max_value(kv_), 1u << 20) << "1 MiB values on a sparse LUN";
  EXPECT_EQ(vsl_kv_max_pools(kv_), 16u);
  ASSERT_EQ(Put(0, "alpha", "one"), 0);
  EXPECT_EQ(Get(0, "alpha"), "one");
  EXPECT_EQ(Exists(0, "alpha"), 1);
  EXPECT_EQ(Exists(0, "beta"), 0);
  EXPECT_EQ(Get(0, "beta"), "<" + std::to_string(ENOENT) + ">");
  // Overwrite longer, then shorter (the tail of the longer one is trimmed in the same batch).
  const std::string big = Value("alpha", 2, 1u << 20);
  ASSERT_EQ(Put(0, "alpha", big), 0);
  EXPECT_EQ(Get(0, "alpha"), big);
  vsl_usage u1{}, u2{};
  ASSERT_EQ(vsl_get_usage(dev_, &u1), 0);
  ASSERT_EQ(Put(0, "alpha", "short"), 0);
  ASSERT_EQ(vsl_get_usage(dev_, &u2), 0);
  EXPECT_EQ(Get(0, "alpha"), "short");
  EXPECT_LT(u2.mapped_sectors + 200, u1.mapped_sectors) << "the old value's sectors were trimmed";
  ASSERT_EQ(Put(0, "empty", ""), 0);
  EXPECT_EQ(Get(0, "empty"), "");
  const std::string k128(128, 'k');
  ASSERT_EQ(Put(0, k128, "x"), 0);
  EXPECT_EQ(Get(0, k128), "x");
  // Errors.
  EXPECT_EQ(Put(0, std::string(129, 'k'), "x"), -EINVAL);
  EXPECT_EQ(Put(0, "", "x"), -EINVAL);
  EXPECT_EQ(Put(16, "a", "x"), -EINVAL);
  EXPECT_EQ(Put(0, "a", std::string((1u << 20) + 1, 'v')), -EINVAL);
  EXPECT_EQ(Del(0, "never"), -ENOENT);
  EXPECT_EQ(vsl_kv_put(nullptr, 0, "a", 1, "x", 1, 0), -EINVAL);
  char small[2];
  EXPECT_EQ(vsl_kv_get(kv_, 0, "alpha", 5, small, 2), -ENOBUFS);
  EXPECT_EQ(std::string(small, 2), "sh");
  // Delete.
  ASSERT_EQ(Del(0, "alpha"), 0);
  EXPECT_EQ(Exists(0, "alpha"), 0);
  EXPECT_EQ(Del(0, "alpha"), -ENOENT);
  // Persistent.
  Reopen();
  EXPECT_EQ(Get(0, k128), "x");
  EXPECT_EQ(Exists(0, "alpha"), 0);
  // A LUN holding something else is refused, and left alone.
  vsl_kv* other = nullptr;
  ASSERT_EQ(vsl_kv_close(kv_), 0);
  kv_ = nullptr;
  std::vector<uint8_t> junk(4096, 0x5A);
  ASSERT_EQ(vsl_write(dev_, 0, 1, junk.data(), 0), 0);
  EXPECT_EQ(vsl_kv_open(dev_, nullptr, &other), -EINVAL);
  EXPECT_EQ(other, nullptr);
}

// 512-byte sectors: the header sector holds the value's first 256 bytes.
TEST_F(KvTest, FiveTwelveByteSectors) {
  ftl::FormatOptions fo = Sparse();
  fo.sector_bytes = 512;
  Open("duo-slc-small", 24, fo);
  for (int i = 0; i < 200; ++i) {
    ASSERT_EQ(Put(3, "k" + std::to_string(i), Value("k", i, (i * 997) % 70000)), 0);
  }
  ASSERT_EQ(Del(3, "k7"), 0);
  Reopen();
  for (int i = 0; i < 200; ++i) {
    EXPECT_EQ(Get(3, "k" + std::to_string(i)),
              i == 7 ? "<" + std::to_string(ENOENT) + ">" : Value("k", i, (i * 997) % 70000))
        << i;
  }
  EXPECT_EQ(Keys(3).size(), 199u);
}

TEST_F(KvTest, PoolsIterationAndExpiry) {
  Open("duo-slc-small", 24, Sparse());
  for (int i = 0; i < 300; ++i) ASSERT_EQ(Put(i % 3, "key" + std::to_string(i), Value("k", i, i * 13)), 0);
  ASSERT_EQ(Put(1, "key0", "pool 1 has its own key0"), 0);
  EXPECT_EQ(Get(0, "key0"), Value("k", 0, 0));
  EXPECT_EQ(Get(1, "key0"), "pool 1 has its own key0");
  for (int i = 0; i < 300; i += 7) ASSERT_EQ(Del(i % 3, "key" + std::to_string(i)), 0);
  std::set<std::string> want0;
  for (int i = 0; i < 300; ++i) {
    if (i % 3 == 0 && i % 7 != 0) want0.insert("key" + std::to_string(i));
  }
  EXPECT_EQ(Keys(0), want0);
  EXPECT_EQ(Keys(1).size(), 100u - 14u + 1u);
  EXPECT_TRUE(Keys(5).empty());
  // Expiry: past entries read as absent and are not listed; future ones are there.
  const uint64_t now = static_cast<uint64_t>(std::time(nullptr));
  ASSERT_EQ(Put(4, "gone", "x", now - 1), 0);
  ASSERT_EQ(Put(4, "later", "y", now + 3600), 0);
  EXPECT_EQ(Exists(4, "gone"), 0);
  EXPECT_EQ(Get(4, "later"), "y");
  EXPECT_EQ(Keys(4), std::set<std::string>{"later"});
  ASSERT_EQ(Put(4, "gone", "again"), 0) << "an expired place is reused";
  EXPECT_EQ(Get(4, "gone"), "again");
}

// A small non-sparse LUN, a store with few buckets per pool: long probe chains,
// tombstones, reuse; checked against a std::map after every step and after a reopen.
TEST_F(KvTest, CollisionsAgainstAReferenceMap) {
  vsl_kv_opts ko{};
  ko.max_pools = 2;
  ko.max_value_bytes = 3000;
  Open("test-small", 0, {}, &ko);
  Rng rng(7);
  std::map<std::string, std::string> model;
  int nospace = 0;
  for (int step = 0; step < 3000; ++step) {
    const std::string k = "k" + std::to_string(rng.Below(520));  // more keys than buckets
    const int what = static_cast<int>(rng.Below(10));
    if (what < 6) {
      const std::string v = Value(k, static_cast<uint64_t>(step), rng.Below(3001));
      const int r = Put(1, k, v);
      if (r == -ENOSPC) {
        ++nospace;
        continue;
      }
      ASSERT_EQ(r, 0) << step;
      model[k] = v;
    } else if (what < 9) {
      const int r = Del(1, k);
      ASSERT_EQ(r, model.erase(k) ? 0 : -ENOENT) << step;
    } else {
      auto it = model.find(k);
      ASSERT_EQ(Get(1, k), it == model.end() ? "<" + std::to_string(ENOENT) + ">" : it->second) << step;
    }
  }
  std::set<std::string> keys;
  for (auto& [k, v] : model) keys.insert(k);
  EXPECT_EQ(Keys(1), keys);
  Reopen();
  for (auto& [k, v] : model) ASSERT_EQ(Get(1, k), v) << k;
  EXPECT_EQ(Keys(1), keys);
  EXPECT_TRUE(Keys(0).empty());
  std::printf("%zu keys live, %d puts refused for a full neighbourhood\n", model.size(), nospace);
  EXPECT_GT(nospace, 0) << "the pool should have filled up";
}

TEST_F(KvTest, BatchPutIsAtomicAndBounded) {
  Open("duo-slc-small", 24, Sparse());
  std::vector<std::string> keys, vals;
  for (int i = 0; i < 10; ++i) {
    keys.push_back("b" + std::to_string(i));
    vals.push_back(Value(keys.back(), 1, 5000 + i));
  }
  std::vector<vsl_kv_pair> pairs;
  for (int i = 0; i < 10; ++i) {
    pairs.push_back({keys[i].data(), static_cast<uint32_t>(keys[i].size()), static_cast<uint32_t>(vals[i].size()),
                     vals[i].data(), 0});
  }
  ASSERT_EQ(vsl_kv_batch_put(kv_, 2, pairs.data(), 10), 0);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(Get(2, keys[i]), vals[i]);
  // A key twice, or more than one atomic write holds: refused, nothing written.
  auto dup = pairs;
  dup[3] = dup[0];
  dup[3].value = "changed";
  dup[3].value_len = 7;
  EXPECT_EQ(vsl_kv_batch_put(kv_, 2, dup.data(), 10), -EINVAL);
  EXPECT_EQ(Get(2, keys[0]), vals[0]);
  const std::string huge(1u << 20, 'h');
  std::vector<std::string> hk;
  std::vector<vsl_kv_pair> many;
  for (int i = 0; i < 4; ++i) hk.push_back("h" + std::to_string(i));
  for (int i = 0; i < 4; ++i) many.push_back({hk[i].data(), 2, static_cast<uint32_t>(huge.size()), huge.data(), 0});
  EXPECT_EQ(vsl_kv_batch_put(kv_, 2, many.data(), 4), -EINVAL) << "4 MiB is beyond one atomic write";
  EXPECT_EQ(Exists(2, "h0"), 0);
}

// Puts cut by power failures at random instants (virtual time): every key reads as its
// last acknowledged value or as the value being put at the cut, whole; never a mix.
TEST(KvPowerCutTest, EachKeyOldOrNewAfterACut) {
  TempDir tmp;
  const std::string dir = tmp.Sub("card");
  MakeFormattedCard(dir, "duo-slc-small", 24, Sparse());
  VirtualClock clock(3);
  Rng rng(3);
  std::map<std::string, std::string> acked;
  uint64_t version = 0, cut_puts = 0, landed = 0;
  for (int round = 0; round < 8; ++round) {
    card::Card* card = nullptr;
    vsl_dev* dev = nullptr;
    ASSERT_EQ(OpenVirtual(dir, 0, clock, 3, &card, &dev), 0);
    vsl_kv* kv = nullptr;
    ASSERT_EQ(vsl_kv_open(dev, nullptr, &kv), 0);
    std::string buf(1u << 20, '\0');
    for (auto& [k, v] : acked) {
      const int64_t r = vsl_kv_get(kv, 0, k.data(), static_cast<uint32_t>(k.size()), buf.data(), 1u << 20);
      ASSERT_EQ(r, static_cast<int64_t>(v.size())) << "round " << round << " key " << k;
      ASSERT_EQ(buf.substr(0, v.size()), v) << "round " << round << " key " << k;
    }
    // The cut comes at a random instant while puts run.
    const TimeNs cut = clock.Now() + static_cast<TimeNs>(rng.Range(1 * kMs, 40 * kMs));
    clock.At(cut, [card] { vsl::testing::SimOf(*card).PowerCut(); });
    for (;;) {
      const std::string k = "key" + std::to_string(rng.Below(50));
      const std::string v = Value(k, ++version, rng.Below(300'000));
      const int r = vsl_kv_put(kv, 0, k.data(), static_cast<uint32_t>(k.size()), v.data(),
                               static_cast<uint32_t>(v.size()), 0);
      if (r == 0) {
        acked[k] = v;
        continue;
      }
      // The put the cut caught: old or new after recovery.
      clock.RunUntilIdle();
      vsl_kv_close(kv);
      vsl_close(dev);
      ASSERT_EQ(OpenVirtual(dir, 0, clock, 3, &card, &dev), 0);
      ASSERT_EQ(vsl_kv_open(dev, nullptr, &kv), 0);
      const int64_t g = vsl_kv_get(kv, 0, k.data(), static_cast<uint32_t>(k.size()), buf.data(), 1u << 20);
      const auto it = acked.find(k);
      const bool is_new = g == static_cast<int64_t>(v.size()) && buf.substr(0, v.size()) == v;
      const bool is_old = it == acked.end() ? g == -ENOENT
                                            : g == static_cast<int64_t>(it->second.size()) &&
                                                  buf.substr(0, it->second.size()) == it->second;
      ASSERT_TRUE(is_new || is_old) << "round " << round << ": key " << k << " holds neither (get " << g << ")";
      ++cut_puts;
      if (is_new) {
        acked[k] = v;
        ++landed;
      }
      break;
    }
    vsl_kv_close(kv);
    vsl_close(dev);
  }
  std::printf("%llu puts cut by power failures: %llu landed whole, the rest not at all\n",
              static_cast<unsigned long long>(cut_puts), static_cast<unsigned long long>(landed));
  EXPECT_EQ(cut_puts, 8u);
}

}  // namespace
}  // namespace vsl::testing
