// The card image: creation, persistence, and clear errors for foreign or damaged files.
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>
#include <atomic>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/simcard/card_fixture.h"
#include "vsl/core/crc.h"
#include "vsl/simcard/image.h"
#include "vsl/simcard/profile.h"

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


// One controller image of the test-small profile at `path`, outside a card.
Result<std::unique_ptr<simcard::ControllerImage>> TestSmallImage(const std::string& path) {
  auto prof = simcard::FindProfile("test-small");
  if (!prof.ok()) return prof.status();
  return simcard::ControllerImage::Create(path, *prof, 0, 1, "S", 1);
}

// Page slots are written through a mapping of the image: on a filesystem that fills up, a
// program must fail with a clear error (the block could not be allocated), never fault
// the process, and what was programmed before stays readable.
TEST(ImageSpaceTest, AFullFilesystemFailsTheProgramInsteadOfFaulting) {
  const std::string dir = ::testing::TempDir() + "/vsl-image-full";
  std::filesystem::create_directories(dir);
  ::umount2(dir.c_str(), MNT_DETACH);  // left by a run that crashed, if any
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno)
                 << "): needs root; the full-filesystem path is not exercised";
  }
  struct Unmount {
    std::string d;
    ~Unmount() { ::umount(d.c_str()); }
  } unmount{dir};
  auto img = TestSmallImage(dir + "/c0.img");
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  simcard::ControllerImage& im = **img;
  const nand::Geometry& g = im.geometry();
  std::vector<uint8_t> slot(g.page_data_bytes + g.page_spare_bytes);
  Status failed;
  uint32_t written = 0;
  for (uint32_t b = 0; b < g.blocks_per_lun && failed.ok(); ++b) {
    for (uint32_t p = 0; p < g.pages_per_block && failed.ok(); ++p) {
      std::fill(slot.begin(), slot.end(), static_cast<uint8_t>(b * 7 + p));
      failed = im.WriteSlot(0, b, p, slot.data());
      written += failed.ok();
    }
  }
  ASSERT_FALSE(failed.ok()) << "2 MiB held every slot of die 0?";
  EXPECT_EQ(failed.code(), StatusCode::kNoSpace) << failed.ToString();
  ASSERT_GT(written, 0u);
  std::vector<uint8_t> back(slot.size());
  ASSERT_TRUE(im.ReadSlot(0, 0, 1, back.data()).ok());
  EXPECT_EQ(back[0], 1u);
  EXPECT_EQ(back.back(), 1u);
  // An erased block keeps its slots for its next program (up to a share of the blocks):
  // it programs again on the full filesystem.
  im.EraseBlockPages(0, 0);
  EXPECT_TRUE(im.WriteSlot(0, 0, 0, slot.data()).ok());
}

// Kept room is never what fails a program. On a full filesystem, erased blocks that kept
// their slots give them back when a program needs room: the program succeeds (it fails
// only when the filesystem is full of programmed data), and what other blocks hold stays.
TEST(ImageSpaceTest, AFullFilesystemTakesBackKeptRoomBeforeFailingAProgram) {
  const std::string dir = ::testing::TempDir() + "/vsl-image-kept-full";
  std::filesystem::create_directories(dir);
  ::umount2(dir.c_str(), MNT_DETACH);
  if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=2m") != 0) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno)
                 << "): needs root; the full-filesystem path is not exercised";
  }
  struct Unmount {
    std::string d;
    ~Unmount() { ::umount(d.c_str()); }
  } unmount{dir};
  auto img = TestSmallImage(dir + "/c0.img");
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  simcard::ControllerImage& im = **img;
  const nand::Geometry& g = im.geometry();
  std::vector<uint8_t> slot(g.page_data_bytes + g.page_spare_bytes);
  uint32_t full_block = g.blocks_per_lun;
  for (uint32_t b = 0; b < g.blocks_per_lun && full_block == g.blocks_per_lun; ++b) {
    std::fill(slot.begin(), slot.end(), static_cast<uint8_t>(b + 1));
    Status s = im.WriteSlot(0, b, 0, slot.data());
    if (!s.ok()) {
      ASSERT_EQ(s.code(), StatusCode::kNoSpace) << s.ToString();
      full_block = b;
    }
  }
  ASSERT_LT(full_block, g.blocks_per_lun) << "2 MiB held a slot in every block of die 0?";
  ASSERT_GE(full_block, 4u);
  // Erase blocks 0 and 1: they keep their room (the share allows it), so the filesystem
  // stays full ...
  ASSERT_GE(im.KeptLimit(), 2u);
  im.EraseBlockPages(0, 0);
  im.EraseBlockPages(0, 1);
  EXPECT_EQ(im.KeptBlocks(), 2u);
  // ... until a program needs it.
  std::fill(slot.begin(), slot.end(), static_cast<uint8_t>(0xee));
  Status s = im.WriteSlot(0, full_block, 0, slot.data());
  ASSERT_TRUE(s.ok()) << "a program failed while erased blocks held room: " << s.ToString();
  EXPECT_EQ(im.KeptBlocks(), 0u);
  std::vector<uint8_t> back(slot.size());
  ASSERT_TRUE(im.ReadSlot(0, full_block, 0, back.data()).ok());
  EXPECT_EQ(back.front(), 0xee);
  EXPECT_EQ(back.back(), 0xee);
  for (uint32_t b = 2; b < full_block; ++b) {
    ASSERT_TRUE(im.ReadSlot(0, b, 0, back.data()).ok());
    EXPECT_EQ(back.front(), b + 1) << "block " << b;
    EXPECT_EQ(back.back(), b + 1) << "block " << b;
  }
  EXPECT_EQ(im.ReleaseKept(), 0u);  // nothing is left kept
}

// Keeping erased blocks' room is bounded in bytes too: on a card of full-size blocks the
// share of 1/kKeptErasedShare would hold far more of the host filesystem than a free
// pool needs.
TEST(ImageSpaceTest, TheKeptRoomIsBoundedInBytes) {
  const std::string dir = ::testing::TempDir() + "/vsl-image-kept-bound";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto prof = simcard::FindProfile("duo-slc-small");
  ASSERT_TRUE(prof.ok());
  auto img = simcard::ControllerImage::Create(dir + "/c0.img", *prof, 0, 1, "S", 1);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  const nand::Geometry& g = (*img)->geometry();
  const uint64_t block_bytes = uint64_t{g.pages_per_block} * (g.page_data_bytes + g.page_spare_bytes);
  const uint64_t blocks = uint64_t{(*img)->dies()} * g.blocks_per_lun;
  EXPECT_LE((*img)->KeptLimit() * block_bytes, simcard::ControllerImage::kKeptMaxBytes);
  EXPECT_LT((*img)->KeptLimit(), blocks / simcard::ControllerImage::kKeptErasedShare)
      << "the byte bound should bind on this card";
  EXPECT_GT((*img)->KeptLimit(), 0u);
  img->reset();
  std::filesystem::remove_all(dir);
}

// Slots are allocated a chunk at a time, not a whole block at its first program: blocks
// left part-written (the open LEBs of every crash) hold little more than their pages.
// (With whole blocks, a card killed 28 times filled the kernel VM's tmpfs.)
TEST(ImageSpaceTest, APartWrittenBlockHoldsLittleMoreThanItsPages) {
  const std::string dir = ::testing::TempDir() + "/vsl-image-chunk";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto prof = simcard::FindProfile("duo-slc-small");
  ASSERT_TRUE(prof.ok());
  auto img = simcard::ControllerImage::Create(dir + "/c0.img", *prof, 0, 1, "S", 1);
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  simcard::ControllerImage& im = **img;
  const nand::Geometry& g = im.geometry();
  const uint64_t slot_bytes = g.page_data_bytes + g.page_spare_bytes;
  const uint64_t block_bytes = uint64_t{g.pages_per_block} * slot_bytes;
  std::vector<uint8_t> slot(slot_bytes, 0x3c);
  const uint64_t empty = im.AllocatedBytes();
  constexpr uint32_t kBlocks = 16;
  for (uint32_t b = 0; b < kBlocks; ++b) {
    for (uint32_t p = 0; p < 2; ++p) ASSERT_TRUE(im.WriteSlot(0, b, p, slot.data()).ok());
  }
  const uint64_t used = im.AllocatedBytes() - empty;
  EXPECT_LE(used, kBlocks * (simcard::ControllerImage::kAllocChunkBytes + slot_bytes + 8192));
  EXPECT_LT(used, kBlocks * block_bytes / 2);
  // A block written through is backed through, and reads back.
  for (uint32_t p = 0; p < g.pages_per_block; ++p) {
    std::fill(slot.begin(), slot.end(), static_cast<uint8_t>(p));
    ASSERT_TRUE(im.WriteSlot(1, 0, p, slot.data()).ok());
  }
  std::vector<uint8_t> back(slot_bytes);
  for (uint32_t p = 0; p < g.pages_per_block; ++p) {
    ASSERT_TRUE(im.ReadSlot(1, 0, p, back.data()).ok());
    ASSERT_EQ(back.front(), static_cast<uint8_t>(p));
    ASSERT_EQ(back.back(), static_cast<uint8_t>(p));
  }
  EXPECT_GE(im.AllocatedBytes() - empty, used + block_bytes - 8192);
  img->reset();
  std::filesystem::remove_all(dir);
}

// Pipes program and erase their own dies' blocks while another thread (a pipe whose
// program found the filesystem full) releases kept room: a block being programmed never
// has its slots punched under it.
TEST(ImageSpaceTest, ReleasingKeptRoomRacesNoProgram) {
  const std::string dir = ::testing::TempDir() + "/vsl-image-kept-race";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto img = TestSmallImage(dir + "/c0.img");
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  simcard::ControllerImage& im = **img;
  const nand::Geometry& g = im.geometry();
  std::atomic<bool> done{false};
  std::thread releaser([&] {
    while (!done.load()) im.ReleaseKept();
  });
  std::vector<uint8_t> slot(g.page_data_bytes + g.page_spare_bytes);
  std::vector<uint8_t> back(slot.size());
  uint64_t bad = 0;
  for (uint32_t round = 0; round < 200 && bad == 0; ++round) {
    const uint32_t b = round % 4;
    im.EraseBlockPages(0, b);
    for (uint32_t p = 0; p < g.pages_per_block; ++p) {
      std::fill(slot.begin(), slot.end(), static_cast<uint8_t>(round * 31 + p + 1));
      ASSERT_TRUE(im.WriteSlot(0, b, p, slot.data()).ok());
    }
    for (uint32_t p = 0; p < g.pages_per_block; ++p) {
      ASSERT_TRUE(im.ReadSlot(0, b, p, back.data()).ok());
      bad += back != std::vector<uint8_t>(slot.size(), static_cast<uint8_t>(round * 31 + p + 1));
    }
  }
  done = true;
  releaser.join();
  EXPECT_EQ(bad, 0u) << "programmed slots were punched by a concurrent release";
  std::filesystem::remove_all(dir);
}

// Erased blocks keep their slots only up to 1/kKeptErasedShare of the blocks: past that,
// an erase gives the block's room back, so an image whose data is erased shrinks.
TEST(ImageSpaceTest, ErasedBlocksGiveTheirRoomBackBeyondTheKeptShare) {
  const std::string dir = ::testing::TempDir() + "/vsl-image-kept";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  auto img = TestSmallImage(dir + "/c0.img");
  ASSERT_TRUE(img.ok()) << img.status().ToString();
  simcard::ControllerImage& im = **img;
  const nand::Geometry& g = im.geometry();
  const uint64_t block_bytes = uint64_t{g.pages_per_block} * (g.page_data_bytes + g.page_spare_bytes);
  std::vector<uint8_t> slot(g.page_data_bytes + g.page_spare_bytes, 0x5a);
  const uint64_t empty = im.AllocatedBytes();
  for (uint32_t d = 0; d < im.dies(); ++d) {
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) ASSERT_TRUE(im.WriteSlot(d, b, 0, slot.data()).ok());
  }
  const uint64_t blocks = uint64_t{im.dies()} * g.blocks_per_lun;
  // (Slots are not page-aligned: a block shares a filesystem page with each neighbour,
  // which a punch cannot free, hence a page per block of slack.)
  const uint64_t slack = blocks * 4096;
  EXPECT_GE(im.AllocatedBytes() - empty + slack, blocks * block_bytes);  // every block's slots backed
  for (uint32_t d = 0; d < im.dies(); ++d) {
    for (uint32_t b = 0; b < g.blocks_per_lun; ++b) im.EraseBlockPages(d, b);
  }
  const uint64_t kept = im.KeptLimit();
  EXPECT_EQ(kept, blocks / simcard::ControllerImage::kKeptErasedShare);  // small blocks: the share binds
  EXPECT_LE(im.AllocatedBytes() - empty, (kept + 1) * block_bytes + slack);
  EXPECT_GE(im.AllocatedBytes() - empty + slack, kept * block_bytes);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace vsl::testing
