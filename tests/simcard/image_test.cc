// The card image: creation, persistence, and clear errors for foreign or damaged files.
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"
#include "vsl/core/crc.h"
#include "vsl/simcard/image.h"

namespace vsl::testing {
namespace {

using simcard::SimCard;
namespace fmt_ = simcard::format;

class ImageTest : public CardFixture {
 protected:
  Status OpenStatus() {
    card_.reset();
    auto c = SimCard::Open(dir(), clock_);
    return c.ok() ? Status::Ok() : c.status();
  }
  void Patch(const std::string& file, uint64_t off, const void* bytes, std::size_t n) {
    const int fd = ::open(file.c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, bytes, n, static_cast<off_t>(off)), static_cast<ssize_t>(n));
    ::close(fd);
  }
  fmt_::ImageHeader ReadHeader(const std::string& file) {
    fmt_::ImageHeader h{};
    std::ifstream in(file, std::ios::binary);
    in.read(reinterpret_cast<char*>(&h), sizeof(h));
    return h;
  }
  void WriteHeaderFixCrc(const std::string& file, fmt_::ImageHeader h) {
    h.header_crc = 0;
    h.header_crc = Crc32c(&h, sizeof(h));
    Patch(file, 0, &h, sizeof(h));
  }
};

TEST_F(ImageTest, CreateWritesOneSparseImagePerController) {
  Make("duo-slc-small");
  EXPECT_EQ(g().controllers, 2u);
  EXPECT_EQ(card_->pipe_count(), 4u);
  EXPECT_EQ(g().dies_per_pipe(), 24u);
  for (uint32_t c = 0; c < 2; ++c) {
    const auto h = card_->Health(c);
    EXPECT_GT(h.image_bytes, uint64_t{3} << 30);            // 3 GiB+ of addressable slots
    EXPECT_LT(h.image_allocated_bytes, uint64_t{64} << 20);  // but only metadata on disk
    EXPECT_EQ(h.profile, "duo-slc-small");
  }
  EXPECT_NE(card_->Health(0).serial, card_->Health(1).serial);
}

TEST_F(ImageTest, CreateRefusesToOverwriteAnExistingCard) {
  Make("test-small");
  Status s = SimCard::Create(dir(), profile_, {});
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists) << s.ToString();
}

TEST_F(ImageTest, ContentsAndWearSurviveReopen) {
  Make("test-small");
  const uint32_t b = GoodBlock(1, 3, 1);
  ASSERT_TRUE(Erase(1, 3, b).ok());
  auto data = Pattern(5, page_bytes());
  auto meta = Meta(5);
  ASSERT_TRUE(Program(1, {3, b, 0}, data, &meta).ok());
  Reopen();
  std::vector<uint8_t> got, got_meta;
  ASSERT_TRUE(Read(1, {3, b, 0}, &got, &got_meta).ok());
  EXPECT_EQ(got, data);
  EXPECT_EQ(got_meta, meta);
  EXPECT_EQ(card_->block_info(1, 3, b).erase_count, 1u);
  EXPECT_EQ(card_->block_info(1, 3, b).next_page, 1u);
  EXPECT_EQ(card_->Health(0).unsafe_power_offs, 0u);  // closed cleanly each time
  EXPECT_EQ(card_->Health(0).power_on_count, 2u);
}

TEST_F(ImageTest, MissingDirectoryOrControllerImageIsNotFound) {
  auto c = SimCard::Open(tmp_.Sub("nope"), clock_);
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  Make("duo-slc-small");
  card_.reset();
  std::filesystem::remove(dir() + "/ctrl1.img");
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("ctrl1.img"), std::string::npos);
}

TEST_F(ImageTest, ForeignFileIsRejectedAsNotAnImage) {
  std::filesystem::create_directories(dir());
  std::ofstream(dir() + "/ctrl0.img") << std::string(20000, 'x');
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("not an OpenVSL card image"), std::string::npos) << s.ToString();
  std::ofstream(dir() + "/ctrl0.img", std::ios::trunc) << "tiny";
  s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("too small"), std::string::npos) << s.ToString();
}

TEST_F(ImageTest, DamagedHeaderFailsItsCrc) {
  Make("test-small");
  card_.reset();
  const uint8_t junk = 0x77;
  Patch(dir() + "/ctrl0.img", offsetof(fmt_::ImageHeader, blocks_per_lun), &junk, 1);
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("header CRC"), std::string::npos) << s.ToString();
}

TEST_F(ImageTest, NewerMajorVersionIsRefusedOlderMinorAccepted) {
  Make("test-small");
  card_.reset();
  const std::string f = dir() + "/ctrl0.img";
  auto h = ReadHeader(f);
  h.version_minor = 9;
  WriteHeaderFixCrc(f, h);
  EXPECT_TRUE(OpenStatus().ok());
  card_.reset();
  h.version_major = 2;
  WriteHeaderFixCrc(f, h);
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kNotSupported) << s.ToString();
}

TEST_F(ImageTest, InconsistentGeometryOrTruncationIsCorruption) {
  Make("test-small");
  card_.reset();
  const std::string f = dir() + "/ctrl0.img";
  auto h = ReadHeader(f);
  auto bad = h;
  bad.blocks_per_lun *= 2;  // CRC fixed, but the layout no longer matches
  WriteHeaderFixCrc(f, bad);
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("layout"), std::string::npos) << s.ToString();
  WriteHeaderFixCrc(f, h);
  ASSERT_TRUE(OpenStatus().ok());
  card_.reset();
  ASSERT_EQ(::truncate(f.c_str(), static_cast<off_t>(h.file_bytes - 4096)), 0);
  s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("truncated"), std::string::npos) << s.ToString();
}

TEST_F(ImageTest, DamagedStateRecordIsCorruption) {
  Make("test-small");
  card_.reset();
  const uint32_t junk = 0xDEADBEEF;
  Patch(dir() + "/ctrl0.img", fmt_::kStateOffset, &junk, 4);
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("state"), std::string::npos) << s.ToString();
}

TEST_F(ImageTest, ImagesFromDifferentCardsDoNotMix) {
  Make("duo-slc-small", {.serial = "", .seed = 1, .blocks_per_lun = 8});
  card_.reset();
  const std::string other = tmp_.Sub("other");
  ASSERT_TRUE(SimCard::Create(other, profile_, {.serial = "", .seed = 2, .blocks_per_lun = 8}).ok());
  std::filesystem::copy_file(other + "/ctrl1.img", dir() + "/ctrl1.img",
                             std::filesystem::copy_options::overwrite_existing);
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kCorruption);
  EXPECT_NE(s.message().find("does not belong"), std::string::npos) << s.ToString();
}

TEST_F(ImageTest, UnknownProfileIsNotFound) {
  Make("test-small");
  card_.reset();
  const std::string f = dir() + "/ctrl0.img";
  auto h = ReadHeader(f);
  std::memset(h.profile, 0, sizeof(h.profile));
  std::strcpy(h.profile, "qlc-9000");
  WriteHeaderFixCrc(f, h);
  Status s = OpenStatus();
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_NE(s.message().find("qlc-9000"), std::string::npos);
}

TEST(ImageLayoutTest, TablesAreAlignedAndSlotsHoldDataAndSpare) {
  auto p = simcard::FindProfile("duo-slc");
  ASSERT_TRUE(p.ok());
  const auto l = simcard::ComputeLayout(p->geometry);
  EXPECT_EQ(l.die_table_offset % 4096, 0u);
  EXPECT_EQ(l.block_table_offset % 4096, 0u);
  EXPECT_EQ(l.page_table_offset % 4096, 0u);
  EXPECT_EQ(l.data_offset % 4096, 0u);
  EXPECT_EQ(l.page_slot_bytes, 8192u + 448u);
  // One controller of the full card: 48 dies x 16384 blocks x 128 pages.
  EXPECT_EQ(l.file_bytes - l.data_offset, uint64_t{48} * 16384 * 128 * (8192 + 448));
}

}  // namespace
}  // namespace vsl::testing
