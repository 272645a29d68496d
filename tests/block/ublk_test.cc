// The ublk front end. The pure parts run everywhere: SET_PARAMS from an export's shape,
// and each request kind translated onto an export. The device tests need the kernel
// driver: on a host without it they skip with the reason; ctest kernel_ublk_device runs
// this binary in the VM (tests/vm/run-in-vm), where they must pass.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "vsl/daemon/ublk_front.h"
#include "vsl/ublk/ublk.h"

namespace vsl::ublk {
namespace {

TEST(UblkProbe, SaysPlainlyWhenTheKernelHasNoUblk) {
  Status s = Probe("/nonexistent/ublk-control");
  EXPECT_EQ(s.code(), StatusCode::kNotSupported);
  EXPECT_NE(s.message().find("/nonexistent/ublk-control is absent"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("ublk_drv"), std::string::npos);
  const Status here = Probe();
  if (::access(kControlPath, F_OK) != 0) {
    EXPECT_EQ(here.code(), StatusCode::kNotSupported);
  }
  nbd::StaticCatalog cat;
  cat.Add({"m", ""}, std::make_shared<nbd::MemoryExport>(1 << 20, 4096));
  auto f = daemon::UblkFrontEnd::Start(cat, "/tmp/unused-ublk.json", "/nonexistent/ublk-control");
  EXPECT_EQ(f.status().code(), StatusCode::kNotSupported);
}

TEST(UblkParams, FollowTheExport) {
  for (uint32_t bs : {512u, 4096u}) {
    ublk_params p = MakeParams({uint64_t{1} << 30, bs, false, 512 * 1024});
    EXPECT_EQ(p.len, sizeof p);
    EXPECT_EQ(p.types, UBLK_PARAM_TYPE_BASIC | UBLK_PARAM_TYPE_DISCARD);
    EXPECT_EQ(1u << p.basic.logical_bs_shift, bs);
    EXPECT_EQ(p.basic.physical_bs_shift, 12);
    EXPECT_EQ(p.basic.dev_sectors, (uint64_t{1} << 30) / 512);
    EXPECT_EQ(p.basic.max_sectors, 1024u);
    EXPECT_TRUE(p.basic.attrs & UBLK_ATTR_VOLATILE_CACHE);
    EXPECT_TRUE(p.basic.attrs & UBLK_ATTR_FUA);
    EXPECT_FALSE(p.basic.attrs & UBLK_ATTR_READ_ONLY);
    EXPECT_EQ(p.discard.discard_granularity, bs);
    EXPECT_EQ(p.discard.max_discard_sectors % (bs / 512), 0u);
  }
  EXPECT_TRUE(MakeParams({1 << 20, 4096, true, 1 << 20}).basic.attrs & UBLK_ATTR_READ_ONLY);
}

// Records FUA and flushes on top of memory.
class RecordingExport : public nbd::MemoryExport {
 public:
  using MemoryExport::MemoryExport;
  void Write(uint64_t o, uint32_t n, const uint8_t* d, bool fua, Done done) override {
    last_fua = fua;
    ++writes;
    MemoryExport::Write(o, n, d, fua, std::move(done));
  }
  void Flush(Done done) override {
    ++flushes;
    done(Status::Ok());
  }
  bool last_fua = false;
  int writes = 0, flushes = 0;
};

int32_t Do(nbd::BlockExport& e, Request r, uint8_t* buf) {
  std::optional<int32_t> res;
  Serve(e, r, buf, [&](int32_t v) { res = v; });
  EXPECT_TRUE(res.has_value());
  return res.value_or(-9999);
}

TEST(UblkServe, EveryRequestKind) {
  RecordingExport e(8 << 20, 4096);
  std::vector<uint8_t> buf(64 << 10, 0xAB);
  // Write 16 KiB at 8 KiB with FUA, read it back.
  EXPECT_EQ(Do(e, {UBLK_IO_OP_WRITE, UBLK_IO_F_FUA >> 8, 16, 32}, buf.data()), 16384);
  EXPECT_TRUE(e.last_fua);
  std::vector<uint8_t> out(16384);
  EXPECT_EQ(Do(e, {UBLK_IO_OP_READ, 0, 16, 32}, out.data()), 16384);
  EXPECT_EQ(out, std::vector<uint8_t>(16384, 0xAB));
  EXPECT_EQ(Do(e, {UBLK_IO_OP_FLUSH, 0, 0, 0}, nullptr), 0);
  EXPECT_EQ(e.flushes, 1);
  // Discard and write-zeroes (unmap allowed) trim; with NOUNMAP zeroes are written.
  EXPECT_EQ(Do(e, {UBLK_IO_OP_DISCARD, 0, 16, 8}, nullptr), 4096);
  EXPECT_EQ(Do(e, {UBLK_IO_OP_READ, 0, 16, 8}, out.data()), 4096);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 4096), std::vector<uint8_t>(4096, 0));
  const int writes = e.writes;
  EXPECT_EQ(Do(e, {UBLK_IO_OP_WRITE_ZEROES, UBLK_IO_F_NOUNMAP >> 8, 24, 8}, nullptr), 4096);
  EXPECT_EQ(e.writes, writes + 1);
  EXPECT_EQ(Do(e, {UBLK_IO_OP_READ, 0, 24, 8}, out.data()), 4096);
  EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + 4096), std::vector<uint8_t>(4096, 0));
  EXPECT_EQ(Do(e, {UBLK_IO_OP_WRITE_ZEROES, UBLK_IO_F_FUA >> 8, 32, 8}, nullptr), 4096);
  EXPECT_EQ(e.flushes, 2);  // a FUA trim is followed by a flush
  // Large write-zeroes without a buffer, in chunks.
  EXPECT_EQ(Do(e, {UBLK_IO_OP_WRITE_ZEROES, UBLK_IO_F_NOUNMAP >> 8, 0, (6 << 20) / 512}, nullptr), 6 << 20);
  // Bad requests.
  EXPECT_EQ(Do(e, {UBLK_IO_OP_READ, 0, 1, 8}, out.data()), -EINVAL);          // misaligned for 4 KiB
  EXPECT_EQ(Do(e, {UBLK_IO_OP_READ, 0, (8 << 20) / 512, 8}, out.data()), -EINVAL);  // past the end
  EXPECT_EQ(Do(e, {UBLK_IO_OP_WRITE, 0, 0, 0}, buf.data()), -EINVAL);         // empty
  EXPECT_EQ(Do(e, {UBLK_IO_OP_WRITE_SAME, 0, 0, 8}, buf.data()), -EOPNOTSUPP);
  EXPECT_EQ(Do(e, {99, 0, 0, 8}, buf.data()), -EOPNOTSUPP);
}

TEST(UblkServe, ExportErrorsBecomeErrno) {
  EXPECT_EQ(ErrnoFor(Status::IOError("x")), -EIO);
  EXPECT_EQ(ErrnoFor(Status::NoSpace("x")), -ENOSPC);
  EXPECT_EQ(ErrnoFor(Status::FailedPrecondition("read-only")), -EPERM);
  EXPECT_EQ(ErrnoFor(Status::InvalidArgument("x")), -EINVAL);
  EXPECT_EQ(ErrnoFor(Status::Ok()), 0);
}

// The device tests need the kernel driver; in the VM (tests/vm/run-in-vm sets VSL_IN_VM)
// it must be there, so a missing driver fails instead of skipping.
#define REQUIRE_UBLK()                                                  \
  do {                                                                  \
    if (Status s = Probe(); !s.ok()) {                                  \
      if (std::getenv("VSL_IN_VM") != nullptr) FAIL() << s.message();   \
      GTEST_SKIP() << s.message();                                      \
    }                                                                   \
  } while (0)

bool SysBlockHas(const std::string& dev) {
  return ::access(("/sys/block/" + dev.substr(dev.rfind('/') + 1)).c_str(), F_OK) == 0;
}

// A device on memory, written and read through /dev/ublkbN.
TEST(UblkDevice, BlockDeviceRoundTrip) {
  REQUIRE_UBLK();
  auto e = std::make_shared<nbd::MemoryExport>(64 << 20, 4096);
  auto d = Device::Start(e, Device::Options{}, "test");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const int fd = ::open((*d)->block_path().c_str(), O_RDWR | O_DIRECT);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  void* p = nullptr;
  ASSERT_EQ(::posix_memalign(&p, 4096, 1 << 20), 0);
  std::memset(p, 0x5A, 1 << 20);
  EXPECT_EQ(::pwrite(fd, p, 1 << 20, 4 << 20), 1 << 20);
  EXPECT_EQ(::fsync(fd), 0);
  std::memset(p, 0, 1 << 20);
  EXPECT_EQ(::pread(fd, p, 1 << 20, 4 << 20), 1 << 20);
  EXPECT_EQ(static_cast<uint8_t*>(p)[12345], 0x5A);
  EXPECT_EQ(e->data()[(4 << 20) + 777], 0x5A);
  std::free(p);
  ::close(fd);
  const std::string path = (*d)->block_path();
  d->reset();
  EXPECT_FALSE(SysBlockHas(path)) << path << " still there after the device was deleted";
}

// The shipped defect: stopping a device that someone holds open (here an exclusive open,
// as a mount holds it) hung in DEL_DEV for ever. Now the stop returns within its bound,
// InUse names the holder first, and the kernel frees the device once the holder closes.
TEST(UblkDevice, StopsPromptlyWhileHeldOpenAndReportsTheHolder) {
  REQUIRE_UBLK();
  auto e = std::make_shared<nbd::MemoryExport>(16 << 20, 4096);
  Device::Options o;
  o.control_timeout_ms = 3000;
  auto d = Device::Start(e, o, "held");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  const std::string path = (*d)->block_path();
  EXPECT_EQ((*d)->InUse(), "");
  const int fd = ::open(path.c_str(), O_RDWR | O_EXCL);
  ASSERT_GE(fd, 0) << std::strerror(errno);
  EXPECT_NE((*d)->InUse().find("mounted or open exclusively"), std::string::npos) << (*d)->InUse();
  const auto t0 = std::chrono::steady_clock::now();
  d->reset();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(secs, 2 * o.control_timeout_ms / 1000.0 + 2) << "stop took " << secs << " s with the device held open";
  char b[4096];
  EXPECT_LE(::pread(fd, b, sizeof b, 0), 0) << "a stopped device still served a read";  // EOF or EIO
  ::close(fd);
  for (int i = 0; i < 100 && SysBlockHas(path); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_FALSE(SysBlockHas(path)) << path << " not freed after its holder closed it";
}

// Many devices stop one after another without waiting on each other (the first DEL_DEV
// used to block the rest).
TEST(UblkDevice, FourDevicesStartAndStop) {
  REQUIRE_UBLK();
  std::vector<std::unique_ptr<Device>> devs;
  for (int i = 0; i < 4; ++i) {
    auto d = Device::Start(std::make_shared<nbd::MemoryExport>(8 << 20, i % 2 ? 512 : 4096), Device::Options{},
                           "d" + std::to_string(i));
    ASSERT_TRUE(d.ok()) << d.status().ToString();
    devs.push_back(std::move(d).value());
  }
  std::vector<std::string> paths;
  for (auto& d : devs) paths.push_back(d->block_path());
  const auto t0 = std::chrono::steady_clock::now();
  devs.clear();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  for (const auto& p : paths) EXPECT_FALSE(SysBlockHas(p)) << p;
}

}  // namespace
}  // namespace vsl::ublk
