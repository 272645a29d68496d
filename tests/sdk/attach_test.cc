// The SDK attached to a running vsld (shared-memory rings): the same calls and semantics
// as in-process, zero-copy buffers and bounced ones, many I/Os in flight, errors, and
// SIGKILL of vsld with atomic batches in flight: every request then ends with -ENOTCONN
// (or its real answer), and after a restart each batch is wholly there or not at all,
// every acknowledged one there.
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "sdk/src/shm_format.h"
#include "tests/sdk/sdk_fixture.h"
#include "vsl/vsl.hpp"
#include "vsl/vsl_kv.h"

namespace vsl::testing {
namespace {

class Vsld {
 public:
  Vsld(std::string card, std::string dir) : card_(std::move(card)), dir_(std::move(dir)) {}
  ~Vsld() { Kill(SIGTERM); }
  std::string sdk_socket() const { return dir_ + "/ctl-sdk.sock"; }
  void Start() {
    // Both sockets outlive a SIGKILLed daemon: a stale SDK socket refuses connections.
    std::filesystem::remove(dir_ + "/ctl.sock");
    std::filesystem::remove(sdk_socket());
    pid_ = ::fork();
    if (pid_ == 0) {
      const std::string log = dir_ + "/vsld.log";
      FILE* f = std::freopen(log.c_str(), "a", stderr);
      (void)f;
      ::execl(VSLD_PATH, VSLD_PATH, "--card", card_.c_str(), "--socket", (dir_ + "/ctl.sock").c_str(),
              "--nbd-socket", "none", "--ublk", "off", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    // Ready once the control socket exists and the SDK socket takes a connection (vsld
    // opens the control socket before its front ends: its existence alone is not enough).
    for (int i = 0; i < 600; ++i) {
      if (std::filesystem::exists(dir_ + "/ctl.sock") && Accepts(sdk_socket())) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    FAIL() << "vsld did not start";
  }
  // A connection to the Unix socket at `path`, or -1 (errno says why).
  static int Connect(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strncpy(a.sun_path, path.c_str(), sizeof a.sun_path - 1);
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
      const int e = errno;
      ::close(fd);
      errno = e;
      return -1;
    }
    return fd;
  }
  static bool Accepts(const std::string& path) {
    const int fd = Connect(path);
    if (fd < 0) return false;
    ::close(fd);
    return true;
  }
  void Kill(int sig) {
    if (pid_ <= 0) return;
    ::kill(pid_, sig);
    int st = 0;
    ::waitpid(pid_, &st, 0);
    pid_ = -1;
  }

 private:
  std::string card_, dir_;
  pid_t pid_ = -1;
};

class AttachTest : public ::testing::Test {
 protected:
  void SetUp() override {
    card_ = tmp_.Sub("card");
    MakeFormattedCard(card_, "duo-slc-small", 24, {});
    vsld_ = std::make_unique<Vsld>(card_, tmp_.path());
    vsld_->Start();
  }
  TempDir tmp_;
  std::string card_;
  std::unique_ptr<Vsld> vsld_;
};

TEST_F(AttachTest, RefusesWhatItCannotAttach) {
  vsl_dev* d = reinterpret_cast<vsl_dev*>(1);
  EXPECT_EQ(vsl_attach((tmp_.path() + "/nothing.sock").c_str(), "lun0", &d), -ENOENT);
  EXPECT_EQ(d, nullptr);
  EXPECT_EQ(vsl_attach(vsld_->sdk_socket().c_str(), "lun9", &d), -ENOENT);
  EXPECT_NE(std::string(vsl_last_error()).find("no LUN named 'lun9'"), std::string::npos) << vsl_last_error();
  EXPECT_EQ(vsl_attach(vsld_->sdk_socket().c_str(), nullptr, &d), -EINVAL);
  EXPECT_EQ(vsl_attach(vsld_->sdk_socket().c_str(), std::string(100, 'x').c_str(), &d), -EINVAL);
  // The card belongs to vsld: an in-process open is refused.
  EXPECT_EQ(vsl_open_card(card_.c_str(), 0, &d), -EBUSY);
  EXPECT_NE(std::string(vsl_last_error()).find("in use by another process"), std::string::npos) << vsl_last_error();
}

TEST_F(AttachTest, SameCallsAndSemanticsAsInProcess) {
  std::unique_ptr<sdk::Device> dev;
  ASSERT_EQ(sdk::Device::Attach(vsld_->sdk_socket(), "lun1", &dev), 0);
  const vsl_caps& c = dev->caps();
  EXPECT_EQ(c.sector_bytes, 4096u);
  EXPECT_TRUE(c.flags & VSL_CAP_ATOMIC_WRITE);
  const uint32_t sb = c.sector_bytes;
  // An ordinary buffer (bounced) and a shared one (zero copy).
  auto a = Pattern(7, 1, sb, 4);
  ASSERT_EQ(dev->Write(7, 4, a.data()), 0);
  auto* shared = static_cast<uint8_t*>(vsl_buf_alloc(dev->handle(), 8 * sb));
  ASSERT_NE(shared, nullptr);
  ASSERT_EQ(dev->Read(7, 4, shared), 0);
  EXPECT_EQ(std::vector<uint8_t>(shared, shared + 4 * sb), a);
  std::memcpy(shared, Pattern(100, 2, sb, 8).data(), 8 * sb);
  ASSERT_EQ(dev->Write(100, 8, shared, VSL_FUA), 0);
  std::vector<uint8_t> out(8 * sb);
  ASSERT_EQ(dev->Read(100, 8, out.data()), 0);
  EXPECT_EQ(out, Pattern(100, 2, sb, 8));
  vsl_buf_free(dev->handle(), shared);
  // Atomic batch, trim, exists, runs, usage, flush.
  auto x = Pattern(5000, 3, sb, 2);
  ASSERT_EQ(dev->NewBatch().Write(5000, 2, x.data()).Trim(100, 4).Write(9, 1, a.data()).Commit(), 0);
  EXPECT_EQ(dev->Exists(100, 8), 4);
  EXPECT_EQ(dev->Exists(5000, 2), 2);
  std::vector<std::pair<uint64_t, uint64_t>> runs;
  ASSERT_EQ(dev->ForEachMappedRange(0, dev->sectors(), [&](uint64_t l, uint64_t n) {
              runs.emplace_back(l, n);
              return true;
            }),
            0);
  std::vector<std::pair<uint64_t, uint64_t>> want{{7, 4}, {104, 4}, {5000, 2}};
  EXPECT_EQ(runs, want);
  vsl_usage u{};
  ASSERT_EQ(dev->Usage(&u), 0);
  EXPECT_EQ(u.mapped_sectors, 10u);
  ASSERT_EQ(dev->Flush(), 0);
  ASSERT_EQ(dev->Trim(5000, 2), 0);
  EXPECT_EQ(dev->Exists(5000, 2), 0);
  // Errors come back as in-process.
  EXPECT_EQ(dev->Write(dev->sectors(), 1, a.data()), -EINVAL);
  EXPECT_EQ(dev->Read(0, c.max_io_sectors + 1, out.data()), -EINVAL);
  EXPECT_EQ(dev->WriteAtomic({{1, 1, a.data(), VSL_VEC_WRITE, 0}, {1, 1, nullptr, VSL_VEC_TRIM, 0}}), -EINVAL);
  // Many in flight from one thread.
  std::vector<std::vector<uint8_t>> bufs(2000);
  int done = 0, bad = 0;
  for (int i = 0; i < 2000; ++i) {
    bufs[i] = Pattern(20000 + i, 4, sb);
    while (dev->WriteAsync(20000 + i, 1, bufs[i].data(), [&](int r) {
             ++done;
             bad += r != 0;
           }) == -EAGAIN) {
      dev->Poll(1);
    }
  }
  while (dev->inflight() != 0) dev->Poll(1);
  EXPECT_EQ(done, 2000);
  EXPECT_EQ(bad, 0);
  for (int i = 0; i < 2000; i += 97) {
    ASSERT_EQ(dev->Read(20000 + i, 1, out.data()), 0);
    EXPECT_EQ(std::vector<uint8_t>(out.begin(), out.begin() + sb), bufs[i]);
  }
  // The key-value store works the same over it.
  vsl_kv* kv = nullptr;
  ASSERT_EQ(dev->Write(0, 1, a.data()), 0);
  ASSERT_EQ(vsl_kv_open(dev->handle(), nullptr, &kv), -EINVAL) << "LBA 0 holds data already";
  std::unique_ptr<sdk::Device> dev2;
  ASSERT_EQ(sdk::Device::Attach(vsld_->sdk_socket(), "lun2", &dev2), 0);
  ASSERT_EQ(vsl_kv_open(dev2->handle(), nullptr, &kv), 0);
  ASSERT_EQ(vsl_kv_put(kv, 0, "k", 1, "value", 5, 0), 0);
  char v[8];
  EXPECT_EQ(vsl_kv_get(kv, 0, "k", 1, v, sizeof(v)), 5);
  vsl_kv_close(kv);
}

// SIGKILL of vsld with atomic batches in flight, five times.
// Several threads share one attached device: some find their completion while they spin
// (taking it off the ring themselves, so vsld writes no eventfd), others give up spinning
// and sleep (FUA writes and flushes go to flash, longer than a spin), and need the
// completion thread woken. Every request must still be answered with the right data; a
// completion left unannounced would hang a sleeper (the ctest timeout).
TEST_F(AttachTest, ThreadsThatSpinAndThreadsThatSleepAllGetTheirCompletions) {
  std::unique_ptr<sdk::Device> dev;
  ASSERT_EQ(sdk::Device::Attach(vsld_->sdk_socket(), "lun0", &dev), 0);
  const uint32_t sb = dev->caps().sector_bytes;
  constexpr int kThreads = 4, kRounds = 150;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<uint8_t> out(2 * sb);
      for (int r = 0; r < kRounds; ++r) {
        const uint64_t lba = 1000 * (t + 1) + (r % 50) * 2;
        const auto data = Pattern(lba, r + 1, sb, 2);
        const uint32_t flags = (r % 5 == 0) ? VSL_FUA : 0;
        bad[t] += dev->Write(lba, 2, data.data(), flags) != 0;
        bad[t] += dev->Read(lba, 2, out.data()) != 0;
        bad[t] += out != data;
        if (r % 25 == 24) bad[t] += dev->Flush() != 0;
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(bad[t], 0) << "thread " << t;
}

// An application built against another version of the shared-memory protocol (e.g. an
// older libvsl beside a newer vsld) is refused at the handshake with the reason, never
// served with a header layout it does not share.
TEST_F(AttachTest, AnotherProtocolVersionIsRefusedWithTheReason) {
  const int sock = Vsld::Connect(vsld_->sdk_socket());
  ASSERT_GE(sock, 0) << std::strerror(errno);
  sdk::shm::Hello h{};
  h.magic = sdk::shm::kHelloMagic;
  h.version = sdk::shm::kVersion - 1;
  std::snprintf(h.lun, sizeof(h.lun), "lun0");
  const int fds[3] = {::eventfd(0, EFD_CLOEXEC), ::eventfd(0, EFD_CLOEXEC), ::eventfd(0, EFD_CLOEXEC)};
  ASSERT_TRUE(sdk::shm::SendHello(sock, h, fds));
  sdk::shm::Welcome w{};
  ASSERT_EQ(::recv(sock, &w, sizeof(w), MSG_WAITALL), static_cast<ssize_t>(sizeof(w)));
  EXPECT_EQ(w.result, -EPROTONOSUPPORT);
  EXPECT_NE(std::string(w.message).find("vsld speaks " + std::to_string(sdk::shm::kVersion)), std::string::npos)
      << w.message;
  for (int fd : fds) ::close(fd);
  ::close(sock);
}

TEST_F(AttachTest, KilledDaemonLeavesEachBatchWholeOrAbsent) {
  Rng rng(5);
  std::map<uint64_t, uint64_t> acked;  // lba -> version
  uint64_t version = 0, whole = 0, none = 0, notconn = 0;
  for (int round = 0; round < 5; ++round) {
    std::unique_ptr<sdk::Device> dev;
    ASSERT_EQ(sdk::Device::Attach(vsld_->sdk_socket(), "lun0", &dev), 0) << "round " << round;
    const uint32_t sb = dev->sector_bytes();
    std::vector<uint8_t> out(sb);
    for (auto& [lba, v] : acked) {
      ASSERT_EQ(dev->Read(lba, 1, out.data()), 0);
      ASSERT_EQ(out, Pattern(lba, v, sb)) << "round " << round << ": acknowledged sector " << lba;
    }
    std::vector<std::unique_ptr<ModelBatch>> batches;
    std::set<uint64_t> busy;
    const auto kill_at = std::chrono::steady_clock::now() + std::chrono::milliseconds(50 + rng.Below(400));
    std::thread killer([&] {
      std::this_thread::sleep_until(kill_at);
      vsld_->Kill(SIGKILL);
    });
    for (int i = 0; i < 400; ++i) {
      auto b = std::make_unique<ModelBatch>();
      for (int v = 0; v < 4; ++v) {
        const uint64_t lba = rng.Below(20000);
        const uint64_t n = 1 + rng.Below(16);
        bool clash = false;
        for (uint64_t k = 0; k < n; ++k) clash = clash || busy.count(lba + k) != 0;
        if (clash) continue;
        for (uint64_t k = 0; k < n; ++k) busy.insert(lba + k);
        b->Write(lba, n, &version, sb);
      }
      if (b->vecs.empty()) continue;
      ModelBatch* raw = b.get();
      const int r = dev->WriteAtomicAsync(raw->vecs, [raw](int res) { raw->result = res; });
      if (r != 0) {
        ASSERT_EQ(r, -EAGAIN);
        dev->Poll(1, 0, 100);
        continue;
      }
      batches.push_back(std::move(b));
      dev->Poll(0, 0, 0);
      std::this_thread::sleep_for(std::chrono::microseconds(300));
    }
    killer.join();
    while (dev->inflight() != 0) dev->Poll(1, 0, 1000);
    for (auto& b : batches) {
      ASSERT_TRUE(b->result == 0 || b->result == -ENOTCONN) << b->result;
      notconn += b->result == -ENOTCONN;
    }
    EXPECT_EQ(dev->Write(0, 1, out.data()), -ENOTCONN) << "after the daemon died";
    dev.reset();
    vsld_->Start();
    ASSERT_EQ(sdk::Device::Attach(vsld_->sdk_socket(), "lun0", &dev), 0);
    for (auto& b : batches) {
      uint64_t now = 0, old = 0;
      CountNewAndOld(dev->handle(), *b, acked, sb, "round " + std::to_string(round), &now, &old);
      if (HasFatalFailure()) return;
      if (b->result == 0) {
        ASSERT_EQ(old, 0u) << "an acknowledged batch lost sectors";
      }
      ASSERT_TRUE(now == 0 || old == 0) << "round " << round << ": batch half applied";
      (old == 0 ? whole : none)++;
      if (old == 0) {
        for (auto& [lba, v] : b->sectors) acked[lba] = v;
      }
    }
  }
  std::printf("after 5 kills: %llu batches whole, %llu not at all, %llu answered -ENOTCONN\n",
              static_cast<unsigned long long>(whole), static_cast<unsigned long long>(none),
              static_cast<unsigned long long>(notconn));
  EXPECT_GT(notconn, 0u);
}

}  // namespace
}  // namespace vsl::testing
