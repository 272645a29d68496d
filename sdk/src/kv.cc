// The key-value store (vsl_kv.h) over the C API: hashed buckets with linear probing in
// each pool's share of the LUN, every change one atomic vectored write.
#include <algorithm>
#include <cerrno>
#include <cstring>
#include <cstddef>
#include <ctime>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "sdk/src/kv_format.h"
#include "vsl/core/crc.h"
#include "vsl/vsl_kv.h"

using namespace vsl::sdk::kv;

struct vsl_kv {
  static constexpr uint64_t kMagic = 0x4B4C53564F31ULL;
  uint64_t magic = kMagic;
  vsl_dev* dev = nullptr;
  vsl_caps caps{};
  KvSuper sb{};
  std::mutex write_mu;  // puts, deletes and batches, one at a time
};

namespace {

bool Valid(const vsl_kv* kv) { return kv != nullptr && kv->magic == vsl_kv::kMagic; }

uint64_t Hash(uint32_t pool, const void* key, uint32_t len) {
  // FNV-1a over the pool and key, then a 64-bit finalizer (spreads the low bits).
  uint64_t h = 0xcbf29ce484222325ULL ^ pool;
  const auto* p = static_cast<const uint8_t*>(key);
  for (uint32_t i = 0; i < len; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  return h;
}

uint32_t HeaderCrc(const KvHeader& h) {
  KvHeader c = h;
  c.header_crc = 0;
  return vsl::Crc32c(&c, sizeof(c));
}

// An aligned buffer from the device (shared with vsld in attached mode).
struct Buf {
  vsl_dev* dev;
  uint8_t* p;
  Buf(vsl_dev* d, std::size_t n) : dev(d), p(static_cast<uint8_t*>(vsl_buf_alloc(d, n))) {}
  ~Buf() { vsl_buf_free(dev, p); }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
};

uint64_t BucketLba(const vsl_kv* kv, uint32_t pool, uint64_t b) {
  return kv->sb.first_bucket_lba + (pool * kv->sb.buckets_per_pool + b) * kv->sb.bucket_sectors;
}

uint32_t EntrySectors(const vsl_kv* kv, uint32_t value_len) {
  return static_cast<uint32_t>((kValueOffset + uint64_t{value_len} + kv->caps.sector_bytes - 1) /
                               kv->caps.sector_bytes);
}

enum class Slot { kEmpty, kTombstone, kLive, kForeign };
struct Probe {
  Slot slot = Slot::kEmpty;
  KvHeader h{};
};

// Reads bucket b's header. kForeign: something that is not a valid entry (treated as
// occupied by probes, never returned).
int ReadSlot(vsl_kv* kv, uint32_t pool, uint64_t b, Probe* out, uint8_t* sector) {
  const int r = vsl_read(kv->dev, BucketLba(kv, pool, b), 1, sector);
  if (r != 0) return r;
  std::memcpy(&out->h, sector, sizeof(KvHeader));
  if (out->h.magic == 0 && std::all_of(sector, sector + kv->caps.sector_bytes, [](uint8_t c) { return c == 0; })) {
    out->slot = Slot::kEmpty;
  } else if (out->h.magic != kEntryMagic || HeaderCrc(out->h) != out->h.header_crc ||
             out->h.key_len == 0 || out->h.key_len > kMaxKey) {
    out->slot = Slot::kForeign;
  } else {
    out->slot = (out->h.flags & kTombstone) ? Slot::kTombstone : Slot::kLive;
  }
  return 0;
}

bool Expired(const KvHeader& h) {
  return h.expiry != 0 && static_cast<uint64_t>(std::time(nullptr)) >= h.expiry;
}

int CheckKey(const vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len) {
  if (!Valid(kv) || pool >= kv->sb.max_pools || key == nullptr || key_len == 0 || key_len > kMaxKey) {
    return -EINVAL;
  }
  return 0;
}

struct Found {
  int64_t bucket = -1;       // where the key is (-1: not there)
  int64_t free_bucket = -1;  // first reusable place on the way (empty, tombstone, expired)
  Probe at;                  // the key's header when found
  bool free_is_empty = false;
  uint32_t free_old_sectors = 0;  // sectors the reusable place still holds
};

// Walks the key's probe chain. `reserved`: buckets a batch has already claimed.
int Find(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len, uint64_t hash, Found* f,
         const std::set<uint64_t>* reserved = nullptr) {
  Buf sector(kv->dev, kv->caps.sector_bytes);
  if (sector.p == nullptr) return -ENOMEM;
  const uint64_t n = kv->sb.buckets_per_pool;
  for (uint32_t i = 0; i < kMaxProbe && i < n; ++i) {
    const uint64_t b = (hash + i) % n;
    if (reserved != nullptr && reserved->count(b) != 0) continue;
    Probe p;
    if (int r = ReadSlot(kv, pool, b, &p, sector.p); r != 0) return r;
    if (p.slot == Slot::kEmpty) {
      if (f->free_bucket < 0) {
        f->free_bucket = static_cast<int64_t>(b);
        f->free_is_empty = true;
      }
      return 0;  // the chain ends here
    }
    if (p.slot == Slot::kLive && p.h.key_hash == hash && p.h.key_len == key_len &&
        std::memcmp(p.h.key, key, key_len) == 0) {
      f->bucket = static_cast<int64_t>(b);
      f->at = p;
      return 0;
    }
    const bool reusable = p.slot == Slot::kTombstone || (p.slot == Slot::kLive && Expired(p.h));
    if (reusable && f->free_bucket < 0) {
      f->free_bucket = static_cast<int64_t>(b);
      f->free_old_sectors = p.h.sectors;
    }
  }
  return 0;
}

// The vectors that store one entry at bucket b (header + value, and a trim of what an
// older, longer entry there leaves beyond it). `storage` keeps the sector images alive.
void EntryVecs(vsl_kv* kv, uint32_t pool, uint64_t b, uint64_t hash, const void* key, uint32_t key_len,
               const void* value, uint32_t value_len, uint64_t expiry, uint8_t flags, uint32_t old_sectors,
               std::vector<vsl_vec>* vecs, std::vector<Buf*>* storage) {
  const uint32_t sb = kv->caps.sector_bytes;
  const uint32_t sectors = flags & kTombstone ? 1 : EntrySectors(kv, value_len);
  auto* img = new Buf(kv->dev, uint64_t{sectors} * sb);
  storage->push_back(img);
  std::memset(img->p, 0, uint64_t{sectors} * sb);
  KvHeader h{};
  h.magic = kEntryMagic;
  h.flags = flags;
  h.key_len = static_cast<uint16_t>(key_len);
  h.value_len = flags & kTombstone ? 0 : value_len;
  // The value goes into the image with its CRC taken in the same pass.
  h.value_crc = h.value_len != 0 ? vsl::Crc32cCopy(img->p + kValueOffset, value, h.value_len) : vsl::Crc32c(value, 0);
  h.expiry = expiry;
  h.key_hash = hash;
  h.sectors = sectors;
  std::memcpy(h.key, key, key_len);
  h.header_crc = HeaderCrc(h);
  std::memcpy(img->p, &h, sizeof(h));
  const uint64_t lba = BucketLba(kv, pool, b);
  vecs->push_back({lba, sectors, img->p, VSL_VEC_WRITE, 0});
  if (old_sectors > sectors) vecs->push_back({lba + sectors, old_sectors - sectors, nullptr, VSL_VEC_TRIM, 0});
}

void FreeAll(std::vector<Buf*>& v) {
  for (Buf* b : v) delete b;
  v.clear();
}

}  // namespace

extern "C" {

int vsl_kv_open(vsl_dev* dev, const vsl_kv_opts* opts, vsl_kv** out) {
  if (out == nullptr) return -EINVAL;
  *out = nullptr;
  auto kv = std::make_unique<vsl_kv>();
  kv->dev = dev;
  if (int r = vsl_get_caps(dev, &kv->caps); r != 0) return r;
  const uint32_t sb = kv->caps.sector_bytes;
  Buf sector(dev, sb);
  if (sector.p == nullptr) return -ENOMEM;
  if (int r = vsl_read(dev, 0, 1, sector.p); r != 0) return r;
  KvSuper s{};
  std::memcpy(&s, sector.p, sizeof(s));
  const bool blank = std::all_of(sector.p, sector.p + sb, [](uint8_t c) { return c == 0; });
  if (blank) {
    s.magic = kSuperMagic;
    s.version = kKvVersion;
    s.sector_bytes = sb;
    s.max_pools = opts && opts->max_pools ? opts->max_pools : 16;
    const bool sparse = kv->caps.flags & VSL_CAP_SPARSE;
    uint64_t max_value = opts && opts->max_value_bytes ? opts->max_value_bytes : (sparse ? 1u << 20 : 64u << 10);
    // A put writes its whole entry in one atomic batch.
    const uint64_t atomic_bytes = kv->caps.atomic_max_sectors * sb;
    if (kValueOffset + max_value > atomic_bytes) {
      if (opts && opts->max_value_bytes) return -EINVAL;
      max_value = atomic_bytes - kValueOffset;
    }
    uint32_t bucket = 1;
    while (uint64_t{bucket} * sb < kValueOffset + max_value) bucket <<= 1;
    s.bucket_sectors = bucket;
    s.max_value_bytes = static_cast<uint32_t>(max_value);
    s.first_bucket_lba = bucket;  // bucket 0's place holds the superblock
    const uint64_t buckets = kv->caps.sectors / bucket;
    if (buckets < 1 + uint64_t{s.max_pools} * 4) return -ENOSPC;
    s.buckets_per_pool = (buckets - 1) / s.max_pools;
    s.crc = vsl::Crc32c(&s, offsetof(KvSuper, crc));
    std::memset(sector.p, 0, sb);
    std::memcpy(sector.p, &s, sizeof(s));
    if (int r = vsl_write(dev, 0, 1, sector.p, VSL_FUA); r != 0) return r;
  } else if (s.magic != kSuperMagic || s.version != kKvVersion || s.sector_bytes != sb ||
             s.crc != vsl::Crc32c(&s, offsetof(KvSuper, crc)) || s.bucket_sectors == 0 || s.max_pools == 0) {
    return -EINVAL;  // not a store (or another version): nothing is touched
  } else if (opts && ((opts->max_pools && opts->max_pools != s.max_pools) ||
                      (opts->max_value_bytes && opts->max_value_bytes != s.max_value_bytes))) {
    return -EINVAL;
  }
  kv->sb = s;
  *out = kv.release();
  return 0;
}

int vsl_kv_close(vsl_kv* kv) {
  if (kv == nullptr) return 0;
  if (!Valid(kv)) return -EINVAL;
  kv->magic = 0;
  delete kv;
  return 0;
}

uint32_t vsl_kv_max_value(vsl_kv* kv) { return Valid(kv) ? kv->sb.max_value_bytes : 0; }
uint32_t vsl_kv_max_pools(vsl_kv* kv) { return Valid(kv) ? kv->sb.max_pools : 0; }

int vsl_kv_put(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len, const void* value,
               uint32_t value_len, uint64_t expiry) {
  vsl_kv_pair p{key, key_len, value_len, value, expiry};
  return vsl_kv_batch_put(kv, pool, &p, 1);
}

int vsl_kv_batch_put(vsl_kv* kv, uint32_t pool, const vsl_kv_pair* pairs, uint32_t n) {
  if (!Valid(kv) || pairs == nullptr || n == 0) return -EINVAL;
  for (uint32_t i = 0; i < n; ++i) {
    if (int e = CheckKey(kv, pool, pairs[i].key, pairs[i].key_len)) return e;
    if (pairs[i].value_len > kv->sb.max_value_bytes || (pairs[i].value == nullptr && pairs[i].value_len != 0)) {
      return -EINVAL;
    }
    for (uint32_t j = 0; j < i; ++j) {
      if (pairs[j].key_len == pairs[i].key_len && std::memcmp(pairs[j].key, pairs[i].key, pairs[i].key_len) == 0) {
        return -EINVAL;
      }
    }
  }
  std::lock_guard<std::mutex> l(kv->write_mu);
  std::vector<vsl_vec> vecs;
  std::vector<Buf*> storage;
  std::set<uint64_t> claimed;
  uint64_t sectors = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const vsl_kv_pair& p = pairs[i];
    const uint64_t h = Hash(pool, p.key, p.key_len);
    Found f;
    if (int r = Find(kv, pool, p.key, p.key_len, h, &f, &claimed); r != 0) {
      FreeAll(storage);
      return r;
    }
    int64_t b = f.bucket;
    uint32_t old = f.bucket >= 0 ? f.at.h.sectors : 0;
    if (b < 0) {
      b = f.free_bucket;
      old = f.free_old_sectors;
    }
    if (b < 0) {
      FreeAll(storage);
      return -ENOSPC;
    }
    claimed.insert(static_cast<uint64_t>(b));
    EntryVecs(kv, pool, static_cast<uint64_t>(b), h, p.key, p.key_len, p.value, p.value_len, p.expiry, 0, old,
              &vecs, &storage);
    sectors += EntrySectors(kv, p.value_len);
  }
  int r;
  if (vecs.size() > kv->caps.atomic_max_vectors || sectors > kv->caps.atomic_max_sectors) {
    r = -EINVAL;
  } else {
    r = vsl_write_atomic(kv->dev, vecs.data(), static_cast<uint32_t>(vecs.size()), 0);
  }
  FreeAll(storage);
  return r;
}

int64_t vsl_kv_get(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len, void* buf, uint32_t buf_len) {
  if (int e = CheckKey(kv, pool, key, key_len)) return e;
  if (buf == nullptr && buf_len != 0) return -EINVAL;
  const uint64_t h = Hash(pool, key, key_len);
  for (int attempt = 0; attempt < 8; ++attempt) {
    Found f;
    if (int r = Find(kv, pool, key, key_len, h, &f); r != 0) return r;
    if (f.bucket < 0 || Expired(f.at.h)) return -ENOENT;
    const KvHeader& hd = f.at.h;
    const uint32_t sb = kv->caps.sector_bytes;
    Buf img(kv->dev, uint64_t{hd.sectors} * sb);
    if (img.p == nullptr) return -ENOMEM;
    // One read of the whole entry: header and value from the same version.
    if (int r = vsl_read(kv->dev, BucketLba(kv, pool, static_cast<uint64_t>(f.bucket)), hd.sectors, img.p); r != 0) {
      return r;
    }
    KvHeader now;
    std::memcpy(&now, img.p, sizeof(now));
    if (now.magic != kEntryMagic || HeaderCrc(now) != now.header_crc || now.key_len != key_len ||
        std::memcmp(now.key, key, key_len) != 0 || (now.flags & kTombstone) || now.sectors != hd.sectors ||
        vsl::Crc32c(img.p + kValueOffset, now.value_len) != now.value_crc) {
      continue;  // replaced between the probe and the read: look again
    }
    std::memcpy(buf, img.p + kValueOffset, std::min(buf_len, now.value_len));
    return now.value_len > buf_len ? -ENOBUFS : static_cast<int64_t>(now.value_len);
  }
  return -EIO;  // kept changing under us (or damaged)
}

int vsl_kv_exists(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len) {
  if (int e = CheckKey(kv, pool, key, key_len)) return e;
  Found f;
  if (int r = Find(kv, pool, key, key_len, Hash(pool, key, key_len), &f); r != 0) return r;
  return f.bucket >= 0 && !Expired(f.at.h) ? 1 : 0;
}

int vsl_kv_delete(vsl_kv* kv, uint32_t pool, const void* key, uint32_t key_len) {
  if (int e = CheckKey(kv, pool, key, key_len)) return e;
  std::lock_guard<std::mutex> l(kv->write_mu);
  const uint64_t h = Hash(pool, key, key_len);
  Found f;
  if (int r = Find(kv, pool, key, key_len, h, &f); r != 0) return r;
  if (f.bucket < 0) return -ENOENT;
  const uint64_t b = static_cast<uint64_t>(f.bucket);
  // If the next bucket is empty no chain runs through this one: it can become empty;
  // otherwise it stays a tombstone so the keys beyond it are still found.
  Buf sector(kv->dev, kv->caps.sector_bytes);
  if (sector.p == nullptr) return -ENOMEM;
  Probe next;
  if (int r = ReadSlot(kv, pool, (b + 1) % kv->sb.buckets_per_pool, &next, sector.p); r != 0) return r;
  std::vector<vsl_vec> vecs;
  std::vector<Buf*> storage;
  if (next.slot == Slot::kEmpty) {
    vecs.push_back({BucketLba(kv, pool, b), f.at.h.sectors, nullptr, VSL_VEC_TRIM, 0});
  } else {
    EntryVecs(kv, pool, b, h, key, key_len, nullptr, 0, 0, kTombstone, f.at.h.sectors, &vecs, &storage);
  }
  const int r = vsl_write_atomic(kv->dev, vecs.data(), static_cast<uint32_t>(vecs.size()), 0);
  FreeAll(storage);
  return Expired(f.at.h) && r == 0 ? -ENOENT : r;
}

int vsl_kv_next(vsl_kv* kv, uint32_t pool, uint64_t* cursor, void* key, uint32_t key_cap, uint32_t* key_len,
                uint32_t* value_len) {
  if (!Valid(kv) || pool >= kv->sb.max_pools || cursor == nullptr || (key == nullptr && key_cap != 0)) {
    return -EINVAL;
  }
  const uint64_t end = BucketLba(kv, pool, kv->sb.buckets_per_pool);
  Buf sector(kv->dev, kv->caps.sector_bytes);
  if (sector.p == nullptr) return -ENOMEM;
  while (*cursor < kv->sb.buckets_per_pool) {
    const uint64_t from = BucketLba(kv, pool, *cursor);
    vsl_range run;
    uint32_t n = 0;
    uint64_t next = 0;
    if (int r = vsl_mapped_ranges(kv->dev, from, end - from, &run, 1, &n, &next); r != 0) return r;
    if (n == 0) {
      *cursor = kv->sb.buckets_per_pool;
      return 0;
    }
    const uint64_t b = (run.lba - BucketLba(kv, pool, 0)) / kv->sb.bucket_sectors;
    *cursor = b + 1;
    Probe p;
    if (int r = ReadSlot(kv, pool, b, &p, sector.p); r != 0) return r;
    if (p.slot != Slot::kLive || Expired(p.h)) continue;
    if (key_len != nullptr) *key_len = p.h.key_len;
    if (value_len != nullptr) *value_len = p.h.value_len;
    if (key != nullptr) std::memcpy(key, p.h.key, std::min<uint32_t>(key_cap, p.h.key_len));
    return 1;
  }
  return 0;
}

}  // extern "C"
