// The metadata record codec (vsl/ftl/checkpoint.h) on its own: round trips of the LEB
// table and the map, dense and sparse, and corrupted records refused.
#include <memory>

#include <gtest/gtest.h>

#include "vsl/ftl/checkpoint.h"

namespace vsl::ftl {
namespace {

constexpr uint32_t kLebs = 12, kDies = 4;

struct Image {
  std::unique_ptr<LebTable> lebs = std::make_unique<LebTable>(kLebs, kDies, 64, 64);
  ForwardMap map;
  explicit Image(uint64_t sectors) : map(sectors) {
    for (uint32_t i = 0; i < kLebs; ++i) {
      Leb& l = lebs->leb(i);
      l.erase_count = 10 + i;
      l.good = {1, 1, static_cast<uint8_t>(i % 3 != 0), 1};
      l.open_seq = 100 + i;
      lebs->SetState(l, i < 2 ? LebState::kMeta : i % 2 ? LebState::kClosed : LebState::kFree);
      if (i == 5) l.trim_pages = {3, 9, 17};
      if (i == 7) l.unprotected = true;
      if (i == 8) l.stale_seq = 77;
    }
  }
};

RecordConfig Config(format::MetaKind kind, bool sparse) {
  RecordConfig c;
  c.kind = kind;
  c.seq = 500;
  c.next_seq = 501;
  c.epoch = 0xE90C;
  c.dies = kDies;
  c.sparse = sparse;
  c.flashback = true;
  c.slot_lebs = 3;
  return c;
}

struct Decoded {
  std::vector<RecordLeb> lebs;
  std::vector<std::vector<uint8_t>> good;
  std::vector<std::pair<uint64_t, Psa>> entries;
  format::MetaHeader h{};
  Status status;
};

Decoded Decode(const std::vector<uint8_t>& in, bool with_map, uint64_t sectors) {
  Decoded d;
  d.status = DecodeMetaRecord(
      in, with_map, sectors,
      [&](uint32_t, const RecordLeb& e) {
        d.lebs.push_back(e);
        d.good.emplace_back(e.good, e.good + kDies);
      },
      [&](uint64_t lba, Psa p) {
        d.entries.emplace_back(lba, p);
        return Status::Ok();
      },
      &d.h);
  return d;
}

TEST(CheckpointCodecTest, DenseCheckpointRoundTrips) {
  Image img(5000);
  img.map.Set(0, 4096);
  img.map.Set(4999, 4097);
  img.map.Set(1234, 9999);
  const auto rec = EncodeMetaRecord(Config(format::MetaKind::kCheckpoint, false), *img.lebs, img.map);
  const Decoded d = Decode(rec, true, 5000);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.h.magic, format::kMetaMagic);
  EXPECT_EQ(d.h.seq, 500u);
  EXPECT_EQ(d.h.epoch, 0xE90Cu);
  EXPECT_EQ(d.h.user_sectors, 5000u);
  EXPECT_NE(d.h.flags & format::kFlagMetaSlots, 0u);
  EXPECT_NE(d.h.flags & format::kFlagFlashBack, 0u);
  ASSERT_EQ(d.lebs.size(), kLebs);
  for (uint32_t i = 0; i < kLebs; ++i) {
    EXPECT_EQ(d.lebs[i].m.erase_count, 10 + i);
    EXPECT_EQ(d.good[i], img.lebs->leb(i).good);
    EXPECT_EQ(d.lebs[i].m.state, static_cast<uint8_t>(img.lebs->leb(i).state));
  }
  EXPECT_EQ(d.lebs[5].trim_pages, (std::vector<uint32_t>{3, 9, 17}));
  EXPECT_EQ(d.lebs[7].m.flags, format::kMetaLebUnprotected);
  EXPECT_EQ(d.lebs[8].m.open_seq, 77u) << "a free LEB carries its stale seq";
  EXPECT_EQ(d.entries, (std::vector<std::pair<uint64_t, Psa>>{{0, 4096}, {1234, 9999}, {4999, 4097}}));
}

TEST(CheckpointCodecTest, SparseCheckpointHoldsOnlyAllocatedChunks) {
  const uint64_t sectors = uint64_t{1} << 36;
  Image img(sectors);
  img.map.Set(5, 1);
  img.map.Set(sectors - 1, 2);
  const auto rec = EncodeMetaRecord(Config(format::MetaKind::kDirtyCheckpoint, true), *img.lebs, img.map);
  EXPECT_LT(rec.size(), 3 * ForwardMap::kChunkEntries * sizeof(Psa)) << "two chunks, not 2^36 entries";
  const Decoded d = Decode(rec, true, sectors);
  ASSERT_TRUE(d.status.ok()) << d.status.ToString();
  EXPECT_EQ(d.entries, (std::vector<std::pair<uint64_t, Psa>>{{5, 1}, {sectors - 1, 2}}));
}

TEST(CheckpointCodecTest, MountRecordHasNoMapOrLebStates) {
  Image img(5000);
  img.map.Set(3, 4096);
  const auto rec = EncodeMetaRecord(Config(format::MetaKind::kMount, false), *img.lebs, img.map);
  const Decoded d = Decode(rec, false, 5000);
  ASSERT_TRUE(d.status.ok());
  EXPECT_EQ(d.h.map_entries, 0u);
  EXPECT_TRUE(d.entries.empty());
  EXPECT_TRUE(d.lebs[5].trim_pages.empty());
  EXPECT_EQ(d.lebs[3].m.open_seq, 0u);
}

TEST(CheckpointCodecTest, TruncatedOrInconsistentRecordsAreCorruption) {
  Image img(5000);
  img.map.Set(10, 4096);
  const auto rec = EncodeMetaRecord(Config(format::MetaKind::kCheckpoint, false), *img.lebs, img.map);
  for (std::size_t cut : {std::size_t{0}, std::size_t{40}, sizeof(format::MetaHeader) + 30, rec.size() - 1}) {
    std::vector<uint8_t> part(rec.begin(), rec.begin() + static_cast<std::ptrdiff_t>(cut));
    EXPECT_EQ(Decode(part, true, 5000).status.code(), StatusCode::kCorruption) << "cut at " << cut;
  }
  EXPECT_EQ(Decode(rec, true, 4000).status.code(), StatusCode::kCorruption) << "a map of another size";
  // A sparse record whose chunk is not at a chunk boundary.
  Image sp(1 << 20);
  sp.map.Set(5000, 1);
  auto srec = EncodeMetaRecord(Config(format::MetaKind::kCheckpoint, true), *sp.lebs, sp.map);
  const std::size_t chunk_at = srec.size() - (8 + ForwardMap::kChunkEntries * sizeof(Psa));
  srec[chunk_at] ^= 1;
  EXPECT_EQ(Decode(srec, true, 1 << 20).status.code(), StatusCode::kCorruption);
  // The caller's own check stops the decode.
  EXPECT_EQ(DecodeMetaRecord(rec, true, 5000, [](uint32_t, const RecordLeb&) {},
                             [](uint64_t, Psa) { return Status::Corruption("outside the data area"); })
                .code(),
            StatusCode::kCorruption);
}

}  // namespace
}  // namespace vsl::ftl
