// The groomer's relocation bookkeeping (vsl/ftl/relocation.h) without flash: which
// positions it reads, the trim records it carries, and when the victim may go.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "vsl/core/crc.h"
#include "vsl/ftl/relocation.h"

namespace vsl::ftl {
namespace {
namespace f = format;

constexpr uint32_t kDies = 4, kPages = 4, kSpp = 2, kEpoch = 3;

class RelocationTest : public ::testing::Test {
 protected:
  RelocationTest() : addr_(kDies, kPages, kSpp), reloc_(addr_) {
    v_.index = 5;
    v_.good.assign(kDies, 1);
    v_.valid_bits.assign((addr_.slots_per_leb() + 63) / 64, 0);
  }
  void SetValid(uint32_t die, uint32_t page, uint32_t slot) {
    const uint32_t i = addr_.SlotInLeb(addr_.Make(v_.index, die, page, slot));
    v_.valid_bits[i / 64] |= uint64_t{1} << (i % 64);
    ++v_.valid;
  }
  // A trim page as the writer leaves it: records in the data area, their count and CRC
  // in entry 0, header CRC at the end of the spare.
  void TrimPage(const std::vector<f::TrimRecord>& recs, std::vector<uint8_t>& meta, std::vector<uint8_t>& data,
                f::PageType type = f::PageType::kTrim, uint32_t epoch = kEpoch) {
    data.assign(4096, 0);
    std::memcpy(data.data(), recs.data(), recs.size() * sizeof(f::TrimRecord));
    meta.assign(64, 0xFF);
    const f::PageHeader h{0xFF, static_cast<uint8_t>(type), f::kVersionMajor, kSpp, epoch, 99};
    std::memcpy(meta.data(), &h, sizeof(h));
    const f::SectorEntry e{recs.size(), Crc32c(data.data(), data.size())};
    std::memcpy(meta.data() + sizeof(h), &e, sizeof(e));
    const std::size_t n = f::MetaBytes(kSpp) - 4;
    const uint32_t crc = Crc32c(meta.data(), n);
    std::memcpy(meta.data() + n, &crc, 4);
  }

  // Hands out and completes every read left.
  void ReadAll() {
    while (reloc_.NextRead(4)) reloc_.ReadDone();
  }

  PsaLayout addr_;
  Relocation reloc_;
  Leb v_;
};

TEST_F(RelocationTest, ReadsOnlyPositionsWithValidSectorsOrTrimRecordsInOrder) {
  SetValid(2, 0, 1);
  SetValid(0, 3, 0);
  SetValid(0, 3, 1);
  v_.trim_pages = {1 * kDies + 1};  // row 1, die 1
  EXPECT_FALSE(reloc_.NextRead(8).has_value());  // no victim yet
  reloc_.Start(&v_);
  EXPECT_EQ(reloc_.victim(), &v_);
  // At most two in flight.
  auto a = reloc_.NextRead(2);
  auto b = reloc_.NextRead(2);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->die, 2u);
  EXPECT_EQ(a->page, 0u);
  EXPECT_FALSE(a->is_trim);
  EXPECT_EQ(b->die, 1u);
  EXPECT_EQ(b->page, 1u);
  EXPECT_TRUE(b->is_trim);
  EXPECT_FALSE(reloc_.NextRead(2).has_value());
  EXPECT_EQ(reloc_.reads(), 2u);
  reloc_.ReadDone();
  auto c = reloc_.NextRead(2);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->die, 0u);
  EXPECT_EQ(c->page, 3u);
  EXPECT_FALSE(reloc_.NextRead(8).has_value());  // nothing else is worth reading
  EXPECT_TRUE(reloc_.Reading());                 // two reads still out
  reloc_.ReadDone();
  reloc_.ReadDone();
  EXPECT_FALSE(reloc_.Reading());
  // A new Start reads the LEB again from its first position.
  reloc_.Start(&v_);
  EXPECT_EQ(reloc_.NextRead(8)->die, 2u);
}

TEST_F(RelocationTest, CarriesOnlyTrustedRecordsNewerThanTheOldestData) {
  reloc_.Start(&v_);
  std::vector<uint8_t> meta, data;
  TrimPage({{10, 5, 40}, {20, 1, 60}, {30, 2, 61}}, meta, data);
  std::vector<std::pair<uint64_t, bool>> seen;
  EXPECT_TRUE(reloc_.CarryTrims(meta.data(), data, kSpp, kEpoch, 60,
                                [&](const f::TrimRecord& r, bool kept) { seen.emplace_back(r.seq, kept); }));
  ASSERT_EQ(reloc_.carried().size(), 1u);
  EXPECT_EQ(reloc_.carried()[0].lba, 30u);
  EXPECT_EQ(seen, (std::vector<std::pair<uint64_t, bool>>{{40, false}, {60, false}, {61, true}}));
  // Not trusted: a page of another epoch, another type, or data whose CRC fails (a
  // listed page that never reached flash reads back erased).
  reloc_.carried().clear();
  TrimPage({{10, 5, 90}}, meta, data, f::PageType::kTrim, kEpoch + 1);
  EXPECT_FALSE(reloc_.CarryTrims(meta.data(), data, kSpp, kEpoch, 0));
  TrimPage({{10, 5, 90}}, meta, data, f::PageType::kData);
  EXPECT_FALSE(reloc_.CarryTrims(meta.data(), data, kSpp, kEpoch, 0));
  TrimPage({{10, 5, 90}}, meta, data);
  data[3] ^= 1;
  EXPECT_FALSE(reloc_.CarryTrims(meta.data(), data, kSpp, kEpoch, 0));
  std::vector<uint8_t> erased(64, 0xFF), erased_data(4096, 0xFF);
  EXPECT_FALSE(reloc_.CarryTrims(erased.data(), erased_data, kSpp, kEpoch, 0));
  EXPECT_TRUE(reloc_.carried().empty());
  // Start forgets what the last victim carried.
  TrimPage({{10, 5, 90}}, meta, data);
  EXPECT_TRUE(reloc_.CarryTrims(meta.data(), data, kSpp, kEpoch, 0));
  reloc_.Start(&v_);
  EXPECT_TRUE(reloc_.carried().empty());
}

TEST_F(RelocationTest, ReleaseWaitsForReadsRefsAndPinsThenFreesOrKeeps) {
  SetValid(0, 0, 0);
  reloc_.Start(&v_);
  ASSERT_TRUE(reloc_.NextRead(4));
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kReading);
  reloc_.ReadDone();
  EXPECT_FALSE(reloc_.NextRead(4).has_value());
  // The sector was appended elsewhere: one reference until that page is durable.
  Relocation::AddRef(v_);
  v_.valid = 0;
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kRefs);
  Relocation::DropRef(v_);
  // A newer copy of one of its sectors is not durable yet.
  v_.pins = 1;
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kPins);
  // Unless the device is gone: nothing more lands, nothing to wait for.
  EXPECT_EQ(reloc_.Release(v_, 0, true), Relocation::Verdict::kFree);
  // A pin held by a rewrite job waiting for room holds the victim instead.
  EXPECT_EQ(reloc_.Release(v_, 1, false), Relocation::Verdict::kKeep);
  EXPECT_TRUE(v_.reloc_held);
  reloc_.Start(&v_);
  EXPECT_FALSE(v_.reloc_held);
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kReading);
  ReadAll();
  v_.pins = 0;
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kFree);
  // Something it could not move keeps it.
  v_.valid = 1;
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kKeep);
  v_.valid = 0;
  reloc_.Hold();
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kKeep);
  reloc_.End(&v_);
  EXPECT_EQ(reloc_.victim(), nullptr);
  EXPECT_FALSE(reloc_.busy());
}

TEST_F(RelocationTest, AReadThroughVictimDrainsBesideTheNextAndEachIsReleasedOnItsOwnRefs) {
  Leb w;
  w.index = 6;
  w.good.assign(kDies, 1);
  w.valid_bits.assign((addr_.slots_per_leb() + 63) / 64, 0);
  SetValid(1, 0, 0);
  reloc_.Start(&v_);
  EXPECT_FALSE(reloc_.CanDrain());  // positions left to read
  ASSERT_TRUE(reloc_.NextRead(4));
  EXPECT_FALSE(reloc_.CanDrain());  // a read in flight
  reloc_.ReadDone();
  EXPECT_FALSE(reloc_.NextRead(4).has_value());
  Relocation::AddRef(v_);  // its sector's new page is not durable yet
  v_.valid = 0;
  ASSERT_TRUE(reloc_.CanDrain());
  reloc_.Drain();
  EXPECT_EQ(reloc_.victim(), nullptr);
  EXPECT_TRUE(reloc_.busy());
  EXPECT_TRUE(reloc_.IsVictim(&v_));
  // The next victim starts while the first drains; the first's references are its own.
  reloc_.Start(&w);
  EXPECT_EQ(reloc_.victim(), &w);
  EXPECT_EQ(reloc_.refs(), 0u);
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kRefs);
  EXPECT_EQ(reloc_.Release(w, 0, false), Relocation::Verdict::kReading);
  Relocation::DropRef(v_);
  EXPECT_EQ(reloc_.Release(v_, 0, false), Relocation::Verdict::kFree);
  reloc_.End(&v_);
  EXPECT_FALSE(reloc_.IsVictim(&v_));
  EXPECT_TRUE(reloc_.IsVictim(&w));
  EXPECT_TRUE(reloc_.draining().empty());
  // At most kMaxDraining set aside: then the current one waits where it is.
  Leb x[Relocation::kMaxDraining];
  for (Leb& l : x) {
    l.valid_bits.assign((addr_.slots_per_leb() + 63) / 64, 0);
    reloc_.End(reloc_.victim());
    reloc_.Start(&l);
    ASSERT_TRUE(reloc_.NextRead(4) == std::nullopt);  // nothing valid: read through at once
    ASSERT_TRUE(reloc_.CanDrain());
    reloc_.Drain();
  }
  reloc_.Start(&w);
  ReadAll();
  EXPECT_FALSE(reloc_.CanDrain());
  EXPECT_EQ(reloc_.draining().size(), Relocation::kMaxDraining);
}

TEST_F(RelocationTest, ReadBuffersAreReusedAndThePoolIsBounded) {
  Relocation::Buffer b = reloc_.TakeBuffer(4096, 64);
  EXPECT_EQ(b->first.size(), 4096u);
  EXPECT_EQ(b->second.size(), 64u);
  auto* raw = b.get();
  reloc_.ReturnBuffer(std::move(b));
  EXPECT_EQ(reloc_.TakeBuffer(4096, 64).get(), raw);
  std::vector<Relocation::Buffer> many;
  for (int i = 0; i < 100; ++i) many.push_back(reloc_.TakeBuffer(16, 8));
  std::vector<void*> given;
  std::vector<Relocation::Buffer> alive = many;  // so no new buffer can take a dropped one's address
  for (auto& m : many) {
    given.push_back(m.get());
    reloc_.ReturnBuffer(std::move(m));
  }
  // Only the first 64 returned are kept: taking 65 gives one new buffer.
  int reused = 0;
  for (int i = 0; i < 65; ++i) {
    const Relocation::Buffer t = reloc_.TakeBuffer(16, 8);
    reused += std::find(given.begin(), given.end(), t.get()) != given.end();
    many.push_back(t);
  }
  EXPECT_EQ(reused, 64);
}

}  // namespace
}  // namespace vsl::ftl
