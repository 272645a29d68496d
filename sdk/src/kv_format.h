// The key-value store's layout on a LUN (docs/formats/kv.md). Little-endian.
//
//   LBA 0: KvSuper (the rest of the sector zero)
//   bucket b of pool p: bucket_sectors sectors from
//       first_bucket_lba + (p * buckets_per_pool + b) * bucket_sectors
//   an entry: KvHeader at byte 0 of its bucket's first sector, the key inside it, the
//   value from byte kValueOffset, over as many sectors as it needs (`sectors`).
// A bucket is empty when its first sector is unmapped (reads as zeroes), a tombstone when
// its header has kTombstone (a deleted key whose place a probe chain still crosses).
// Versioning: kKvVersion changes when an older reader would misread; readers refuse
// other versions (-EINVAL).
#pragma once

#include <cstdint>

namespace vsl::sdk::kv {

inline constexpr uint64_t kSuperMagic = 0x3130564B4C53564FULL;  // "OVSLKV01"
inline constexpr uint32_t kKvVersion = 1;
inline constexpr uint32_t kEntryMagic = 0x3145564BU;  // "KVE1"
inline constexpr uint32_t kValueOffset = 256;
inline constexpr uint32_t kMaxKey = 128;
inline constexpr uint32_t kMaxProbe = 64;  // buckets a put or get looks at from a key's home
inline constexpr uint8_t kTombstone = 1;

#pragma pack(push, 1)
struct KvSuper {
  uint64_t magic;
  uint32_t version;
  uint32_t sector_bytes;
  uint32_t bucket_sectors;
  uint32_t max_pools;
  uint64_t buckets_per_pool;
  uint64_t first_bucket_lba;
  uint32_t max_value_bytes;
  uint32_t crc;  // CRC32C of the bytes before it
};
struct KvHeader {
  uint32_t magic;
  uint8_t flags;  // kTombstone
  uint8_t reserved;
  uint16_t key_len;
  uint32_t value_len;
  uint32_t value_crc;  // CRC32C of the value
  uint64_t expiry;     // Unix seconds; 0: never
  uint64_t key_hash;
  uint32_t sectors;     // sectors the entry occupies from the bucket's start
  uint32_t header_crc;  // CRC32C of the header with this field 0, and the key
  uint8_t key[kMaxKey];
};
#pragma pack(pop)
static_assert(sizeof(KvSuper) == 48, "KvSuper size is part of the format");
static_assert(sizeof(KvHeader) == 168, "KvHeader size is part of the format");
static_assert(sizeof(KvHeader) <= kValueOffset, "the value starts after the header");

}  // namespace vsl::sdk::kv
