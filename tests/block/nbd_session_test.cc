// The NBD session and server against exports held in memory: the handshake and every reply
// byte for byte (MemoryTransport), the threaded server under libnbd with many
// connections, deep queues and completions that come back out of order, and sessions
// read by their export's engine (polled) over socket pairs.
#include <libnbd.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "vsl/core/engine.h"
#include "vsl/nbd/proto.h"
#include "vsl/nbd/server.h"

namespace vsl::nbd {
namespace {

using vsl::testing::TempDir;

// Client-side byte builder and reply reader over a MemoryTransport's output.
struct Wire {
  std::vector<uint8_t> b;
  Wire& u16(uint16_t v) { uint8_t x[2]; Put16(x, v); b.insert(b.end(), x, x + 2); return *this; }
  Wire& u32(uint32_t v) { uint8_t x[4]; Put32(x, v); b.insert(b.end(), x, x + 4); return *this; }
  Wire& u64(uint64_t v) { uint8_t x[8]; Put64(x, v); b.insert(b.end(), x, x + 8); return *this; }
  Wire& str(const std::string& s) { b.insert(b.end(), s.begin(), s.end()); return *this; }
  Wire& bytes(std::size_t n, uint8_t v) { b.insert(b.end(), n, v); return *this; }
  Wire& opt(uint32_t o, const Wire& data) { u64(kOptMagic).u32(o).u32(static_cast<uint32_t>(data.b.size())); b.insert(b.end(), data.b.begin(), data.b.end()); return *this; }
  Wire& go(const std::string& name, std::vector<uint16_t> infos = {}) {
    Wire d;
    d.u32(static_cast<uint32_t>(name.size())).str(name).u16(static_cast<uint16_t>(infos.size()));
    for (uint16_t i : infos) d.u16(i);
    return opt(kOptGo, d);
  }
  Wire& req(uint16_t type, uint64_t handle, uint64_t off, uint32_t len, uint16_t flags = 0) {
    return u32(kRequestMagic).u16(flags).u16(type).u64(handle).u64(off).u32(len);
  }
};

struct Reader {
  std::vector<uint8_t> b;
  std::size_t p = 0;
  bool more() const { return p < b.size(); }
  uint16_t u16() { auto v = Get16(&b.at(p + 1) - 1); p += 2; return v; }
  uint32_t u32() { auto v = Get32(&b.at(p + 3) - 3); p += 4; return v; }
  uint64_t u64() { auto v = Get64(&b.at(p + 7) - 7); p += 8; return v; }
  std::string str(std::size_t n) { std::string s(b.begin() + p, b.begin() + p + n); p += n; return s; }
  struct OptRep { uint32_t opt, type; std::string data; };
  OptRep rep() {
    EXPECT_EQ(u64(), kRepMagic);
    OptRep r;
    r.opt = u32();
    r.type = u32();
    r.data = str(u32());
    return r;
  }
};

class SessionTest : public ::testing::Test {
 protected:
  SessionTest() {
    exp_ = std::make_shared<MemoryExport>(1 << 20, 512);
    cat_.Add({"mem", "a megabyte in memory"}, exp_);
    cat_.Add({"other", ""}, std::make_shared<MemoryExport>(64 << 10, 4096));
  }
  // Runs a whole session over `in` and returns what the server wrote after its greeting.
  Reader Run(const Wire& in, SessionOptions o = {}) {
    auto t = std::make_unique<MemoryTransport>(in.b.data(), in.b.size(), true);
    MemoryTransport* tp = t.get();
    Session s(std::move(t), cat_, o, "test");
    s.Run();
    Reader r{tp->output()};
    EXPECT_EQ(r.u64(), kNbdMagic);
    EXPECT_EQ(r.u64(), kOptMagic);
    EXPECT_EQ(r.u16(), kFlagFixedNewstyle | kFlagNoZeroes);
    return r;
  }
  static Wire Hello(uint32_t flags = kClientFixedNewstyle | kClientNoZeroes) { Wire w; w.u32(flags); return w; }
  // GO on "mem" and read its replies: returns the transmission flags.
  static uint16_t ExpectGo(Reader& r) {
    auto e = r.rep();
    EXPECT_EQ(e.type, kRepInfo);
    uint16_t flags = 0;
    for (;;) {
      if (e.type == kRepAck) break;
      EXPECT_EQ(e.type, kRepInfo);
      if (Get16(reinterpret_cast<const uint8_t*>(e.data.data())) == kInfoExport) {
        flags = Get16(reinterpret_cast<const uint8_t*>(e.data.data()) + 10);
      }
      e = r.rep();
    }
    return flags;
  }
  std::shared_ptr<MemoryExport> exp_;
  StaticCatalog cat_;
};

TEST_F(SessionTest, InfoReportsExportNameDescriptionAndBlockSizes) {
  Wire w = Hello();
  Wire d;
  d.u32(0).u16(2).u16(kInfoName).u16(kInfoDescription);  // the default export
  w.opt(kOptInfo, d).opt(kOptAbort, Wire{});
  Reader r = Run(w);
  bool name = false, desc = false, block = false, exportinfo = false;
  for (auto e = r.rep(); e.type != kRepAck; e = r.rep()) {
    ASSERT_EQ(e.type, kRepInfo);
    const auto* p = reinterpret_cast<const uint8_t*>(e.data.data());
    switch (Get16(p)) {
      case kInfoExport:
        exportinfo = true;
        EXPECT_EQ(Get64(p + 2), 1u << 20);
        EXPECT_TRUE(Get16(p + 10) & kTxCanMultiConn);
        break;
      case kInfoName: name = e.data.substr(2) == "mem"; break;
      case kInfoDescription: desc = e.data.substr(2) == "a megabyte in memory"; break;
      case kInfoBlockSize:
        block = Get32(p + 2) == 512 && Get32(p + 6) == 4096 && Get32(p + 10) == 32u << 20;
        break;
    }
  }
  EXPECT_TRUE(name && desc && block && exportinfo);
  EXPECT_EQ(r.rep().type, kRepAck);  // ABORT acknowledged
  EXPECT_FALSE(r.more());
}

TEST_F(SessionTest, ListNamesEveryExport) {
  Wire w = Hello();
  w.opt(kOptList, Wire{}).opt(kOptAbort, Wire{});
  Reader r = Run(w);
  std::vector<std::string> names;
  for (auto e = r.rep(); e.type != kRepAck; e = r.rep()) {
    ASSERT_EQ(e.type, kRepServer);
    names.push_back(e.data.substr(4, Get32(reinterpret_cast<const uint8_t*>(e.data.data()))));
  }
  EXPECT_EQ(names, (std::vector<std::string>{"mem", "other"}));
}

TEST_F(SessionTest, ExportNameWithAndWithoutZeroes) {
  for (bool no_zeroes : {true, false}) {
    Wire w = Hello(kClientFixedNewstyle | (no_zeroes ? kClientNoZeroes : 0));
    w.opt(kOptExportName, Wire{}.str("other")).req(kCmdRead, 5, 0, 4096);
    Reader r = Run(w);
    EXPECT_EQ(r.u64(), 64u << 10);
    EXPECT_TRUE(r.u16() & kTxHasFlags);
    if (!no_zeroes) {
      EXPECT_EQ(r.str(124), std::string(124, '\0'));
    }
    EXPECT_EQ(r.u32(), kSimpleReplyMagic);
    EXPECT_EQ(r.u32(), 0u);
    EXPECT_EQ(r.u64(), 5u);
    EXPECT_EQ(r.str(4096), std::string(4096, '\0'));
    EXPECT_FALSE(r.more());
  }
}

TEST_F(SessionTest, StructuredRepliesCarryDataErrorsAndMessages) {
  Wire w = Hello();
  w.opt(kOptStructuredReply, Wire{}).go("mem");
  Wire payload;
  payload.bytes(1024, 0x5A);
  w.req(kCmdWrite, 1, 512, 1024, kCmdFlagFua);
  w.b.insert(w.b.end(), payload.b.begin(), payload.b.end());
  w.req(kCmdRead, 2, 512, 1024, kCmdFlagDf).req(kCmdRead, 3, 100, 512).req(kCmdDisc, 4, 0, 0);
  Reader r = Run(w);
  EXPECT_EQ(r.rep().type, kRepAck);
  const uint16_t flags = ExpectGo(r);
  EXPECT_TRUE(flags & kTxSendDf);
  // Write: NONE chunk with DONE.
  EXPECT_EQ(r.u32(), kStructuredReplyMagic);
  EXPECT_EQ(r.u16(), kReplyFlagDone);
  EXPECT_EQ(r.u16(), kReplyTypeNone);
  EXPECT_EQ(r.u64(), 1u);
  EXPECT_EQ(r.u32(), 0u);
  // Read: one OFFSET_DATA chunk.
  EXPECT_EQ(r.u32(), kStructuredReplyMagic);
  EXPECT_EQ(r.u16(), kReplyFlagDone);
  EXPECT_EQ(r.u16(), kReplyTypeOffsetData);
  EXPECT_EQ(r.u64(), 2u);
  EXPECT_EQ(r.u32(), 8u + 1024);
  EXPECT_EQ(r.u64(), 512u);
  EXPECT_EQ(r.str(1024), std::string(1024, '\x5A'));
  // Misaligned read: an ERROR chunk with EINVAL and a message.
  EXPECT_EQ(r.u32(), kStructuredReplyMagic);
  EXPECT_EQ(r.u16(), kReplyFlagDone);
  EXPECT_EQ(r.u16(), kReplyTypeError);
  EXPECT_EQ(r.u64(), 3u);
  const uint32_t len = r.u32();
  EXPECT_EQ(r.u32(), kEINVAL);
  const std::string msg = r.str(r.u16());
  EXPECT_EQ(len, 6 + msg.size());
  EXPECT_NE(msg.find("not aligned to the 512-byte block"), std::string::npos) << msg;
  EXPECT_FALSE(r.more());
  EXPECT_EQ(exp_->data()[512], 0x5A);
}

TEST_F(SessionTest, AllocationContextAndBlockStatus) {
  auto ctx = [](const std::string& exp, std::vector<std::string> queries) {
    Wire d;
    d.u32(static_cast<uint32_t>(exp.size())).str(exp).u32(static_cast<uint32_t>(queries.size()));
    for (const auto& q : queries) d.u32(static_cast<uint32_t>(q.size())).str(q);
    return d;
  };
  Wire w = Hello();
  w.opt(kOptSetMetaContext, ctx("mem", {"base:allocation"}));       // before structured replies
  w.opt(kOptStructuredReply, Wire{});
  w.opt(kOptListMetaContext, ctx("mem", {}));                       // every context
  w.opt(kOptSetMetaContext, ctx("mem", {"qemu:dirty-bitmap:x", "base:allocation"}));
  w.opt(kOptSetMetaContext, ctx("nothere", {"base:allocation"}));
  w.go("mem").req(kCmdBlockStatus, 9, 4096, 8192).req(kCmdBlockStatus, 10, 100, 512);
  Reader r = Run(w);
  EXPECT_EQ(r.rep().type, kRepErrInvalid);
  EXPECT_EQ(r.rep().type, kRepAck);
  for (int i = 0; i < 2; ++i) {
    auto m = r.rep();
    EXPECT_EQ(m.type, kRepMetaContext);
    EXPECT_EQ(Get32(reinterpret_cast<const uint8_t*>(m.data.data())), kContextAllocationId);
    EXPECT_EQ(m.data.substr(4), "base:allocation");
    EXPECT_EQ(r.rep().type, kRepAck);
  }
  EXPECT_EQ(r.rep().type, kRepErrUnknown);
  ExpectGo(r);
  // A memory export does not know its allocation: one mapped extent.
  EXPECT_EQ(r.u32(), kStructuredReplyMagic);
  EXPECT_EQ(r.u16(), kReplyFlagDone);
  EXPECT_EQ(r.u16(), kReplyTypeBlockStatus);
  EXPECT_EQ(r.u64(), 9u);
  EXPECT_EQ(r.u32(), 12u);
  EXPECT_EQ(r.u32(), kContextAllocationId);
  EXPECT_EQ(r.u32(), 8192u);
  EXPECT_EQ(r.u32(), 0u);
  EXPECT_EQ(r.u32(), kStructuredReplyMagic);  // misaligned: an error chunk
  EXPECT_EQ(r.u16(), kReplyFlagDone);
  EXPECT_EQ(r.u16(), kReplyTypeError);
}

TEST_F(SessionTest, TlsRequiredRefusesEverythingButStartTlsAndAbort) {
  TempDir dir;
  const std::string psk = dir.path() + "/keys.psk";
  std::ofstream(psk) << "alice:00112233445566778899aabbccddeeff\n";
  TlsConfig tc;
  tc.mode = TlsMode::kRequire;
  tc.psk_file = psk;
  auto ctx = TlsContext::Create(tc);
  ASSERT_TRUE(ctx.ok()) << ctx.status().ToString();
  SessionOptions o;
  o.tls = *ctx;
  Wire w = Hello();
  w.go("mem").opt(kOptList, Wire{}).opt(kOptStructuredReply, Wire{}).opt(kOptExportName, Wire{}.str("mem"));
  Reader r = Run(w, o);
  EXPECT_EQ(r.rep().type, kRepErrTlsReqd);
  EXPECT_EQ(r.rep().type, kRepErrTlsReqd);
  EXPECT_EQ(r.rep().type, kRepErrTlsReqd);
  EXPECT_FALSE(r.more());  // EXPORT_NAME without TLS: closed, no reply
}

TEST_F(SessionTest, TlsCredentialsAreCheckedAtStart) {
  TlsConfig tc;
  tc.mode = TlsMode::kOn;
  EXPECT_EQ(TlsContext::Create(tc).status().code(), StatusCode::kInvalidArgument);
  tc.cert_file = "/nonexistent/cert.pem";
  tc.key_file = "/nonexistent/key.pem";
  auto r = TlsContext::Create(tc);
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("/nonexistent/cert.pem"), std::string::npos);
  EXPECT_FALSE(ParseTlsMode("maybe").ok());
}

TEST_F(SessionTest, TooManyOptionsEndTheConnection) {
  Wire w = Hello();
  for (int i = 0; i < 10; ++i) w.opt(1000 + i, Wire{});
  SessionOptions o;
  o.max_options = 4;
  Reader r = Run(w, o);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(r.rep().type, kRepErrUnsup);
  EXPECT_FALSE(r.more());
}

TEST_F(SessionTest, ReadOnlyRefusesWritesButConsumesTheirPayload) {
  SessionOptions o;
  o.read_only = true;
  Wire w = Hello();
  w.go("mem").req(kCmdWrite, 1, 0, 512).bytes(512, 0xEE).req(kCmdTrim, 2, 0, 512).req(kCmdRead, 3, 0, 512);
  Reader r = Run(w, o);
  EXPECT_TRUE(ExpectGo(r) & kTxReadOnly);
  for (uint64_t h : {1, 2}) {
    EXPECT_EQ(r.u32(), kSimpleReplyMagic);
    EXPECT_EQ(r.u32(), kEPERM);
    EXPECT_EQ(r.u64(), h);
  }
  EXPECT_EQ(r.u32(), kSimpleReplyMagic);
  EXPECT_EQ(r.u32(), 0u);
  EXPECT_EQ(r.u64(), 3u);
  EXPECT_EQ(r.str(512), std::string(512, '\0'));
  EXPECT_EQ(exp_->data()[0], 0);
}

// An export whose device fails the way a LUN can: unreadable sectors (a double die
// failure), a full sparse device, a LUN gone read-only, a LUN detached.
class FailingExport : public MemoryExport {
 public:
  using MemoryExport::MemoryExport;
  void Read(uint64_t offset, uint32_t length, uint8_t* out, Done done) override {
    if (offset == 0) return done(Status::IOError("sector 0 lost with two dies"));
    MemoryExport::Read(offset, length, out, std::move(done));
  }
  void Write(uint64_t offset, uint32_t, const uint8_t*, bool, Done done) override {
    if (offset == 0) return done(Status::NoSpace("the sparse device's physical space is full"));
    if (offset == 512) return done(Status::FailedPrecondition("the pipe is read-only"));
    done(Status::Aborted("lun0 is offline"));
  }
  void Flush(Done done) override { done(Status::IOError("lun0 is offline")); }
};

TEST_F(SessionTest, DeviceErrorsBecomeProtocolErrorsWithTheirReason) {
  StaticCatalog cat;
  cat.Add({"f", ""}, std::make_shared<FailingExport>(1 << 20, 512));
  Wire w = Hello();
  w.opt(kOptStructuredReply, Wire{}).go("f");
  w.req(kCmdRead, 1, 0, 512);
  w.req(kCmdWrite, 2, 0, 512).bytes(512, 1);
  w.req(kCmdWrite, 3, 512, 512).bytes(512, 1);
  w.req(kCmdWrite, 4, 1024, 512).bytes(512, 1);
  w.req(kCmdFlush, 5, 0, 0);
  w.req(kCmdRead, 6, 512, 512);  // still served after all that
  auto t = std::make_unique<MemoryTransport>(w.b.data(), w.b.size(), true);
  MemoryTransport* tp = t.get();
  Session s(std::move(t), cat, {}, "test");
  s.Run();
  Reader r{tp->output()};
  r.p = 18;
  EXPECT_EQ(r.rep().type, kRepAck);
  ExpectGo(r);
  const std::pair<uint32_t, const char*> want[] = {{kEIO, "lost with two dies"},
                                                   {kENOSPC, "physical space is full"},
                                                   {kEPERM, "read-only"},
                                                   {kEIO, "offline"},
                                                   {kEIO, "offline"}};
  for (uint64_t h = 1; h <= 5; ++h) {
    EXPECT_EQ(r.u32(), kStructuredReplyMagic);
    EXPECT_EQ(r.u16(), kReplyFlagDone);
    EXPECT_EQ(r.u16(), kReplyTypeError);
    EXPECT_EQ(r.u64(), h);
    r.u32();
    EXPECT_EQ(r.u32(), want[h - 1].first) << h;
    const std::string msg = r.str(r.u16());
    EXPECT_NE(msg.find(want[h - 1].second), std::string::npos) << msg;
  }
  EXPECT_EQ(r.u32(), kStructuredReplyMagic);
  EXPECT_EQ(r.u16(), kReplyFlagDone);
  EXPECT_EQ(r.u16(), kReplyTypeOffsetData);
  EXPECT_EQ(r.u64(), 6u);
}

// ---- The threaded server under libnbd ----

// A memory export whose every call runs later, where a subclass's Defer puts it: the
// shuffled worker below, or a real engine thread.
class DeferredMemoryExport : public BlockExport {
 public:
  DeferredMemoryExport(uint64_t size, uint32_t block) : mem_(size, block) {}
  uint64_t size_bytes() const override { return mem_.size_bytes(); }
  uint32_t block_bytes() const override { return mem_.block_bytes(); }
  void Read(uint64_t o, uint32_t n, uint8_t* out, Done d) override {
    Defer([this, o, n, out, d = std::move(d)]() mutable { mem_.Read(o, n, out, std::move(d)); });
  }
  void Write(uint64_t o, uint32_t n, const uint8_t* in, bool fua, Done d) override {
    Defer([this, o, n, in, fua, d = std::move(d)]() mutable { mem_.Write(o, n, in, fua, std::move(d)); });
  }
  void Trim(uint64_t o, uint64_t n, Done d) override {
    Defer([this, o, n, d = std::move(d)]() mutable { mem_.Trim(o, n, std::move(d)); });
  }
  void Flush(Done d) override {
    Defer([d = std::move(d)]() mutable { d(Status::Ok()); });
  }
  // Before any session: sets the bytes at `offset`.
  void Fill(uint64_t offset, const std::vector<uint8_t>& d) {
    mem_.Write(offset, static_cast<uint32_t>(d.size()), d.data(), false, [](Status) {});
  }
  // Once no request is out.
  const MemoryExport& mem() const { return mem_; }

 protected:
  virtual void Defer(Function<void()> f) = 0;

 private:
  MemoryExport mem_;
};

// Completes every request on a worker thread after a random delay, so replies leave in an
// order unrelated to the requests'.
class ShuffledExport : public DeferredMemoryExport {
 public:
  ShuffledExport(uint64_t size, uint32_t block) : DeferredMemoryExport(size, block), worker_([this] { Loop(); }) {}
  ~ShuffledExport() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  uint64_t reordered() const { return reordered_; }

 private:
  void Defer(Function<void()> f) override {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push_back(std::move(f));
    }
    cv_.notify_all();
  }
  void Loop() {
    std::mt19937 rng(7);
    for (;;) {
      Function<void()> f;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait_for(l, std::chrono::microseconds(200), [this] { return stop_ || q_.size() >= 8; });
        if (q_.empty()) {
          if (stop_) return;
          continue;
        }
        const std::size_t i = rng() % q_.size();
        reordered_ += i != 0;
        f = std::move(q_[i]);
        q_.erase(q_.begin() + static_cast<std::ptrdiff_t>(i));
      }
      f();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Function<void()>> q_;
  bool stop_ = false;
  std::atomic<uint64_t> reordered_{0};
  std::thread worker_;
};

// One of `conns` libnbd connections: owns every conns-th of `blocks` 4 KiB blocks,
// writes them all (`depth` in flight), flushes, reads them back (`depth` in flight) and
// checks them. Returns the failures seen.
int WriteAndReadBack(nbd_handle* h, int c, int conns, int blocks, int depth) {
  int failures = 0;
  std::vector<std::vector<uint8_t>> bufs(blocks / conns, std::vector<uint8_t>(4096));
  for (int pass = 0; pass < 2; ++pass) {
    int next = 0;
    while (next < blocks / conns || nbd_aio_in_flight(h) > 0) {
      while (next < blocks / conns && nbd_aio_in_flight(h) < depth) {
        const uint64_t block = static_cast<uint64_t>(next) * conns + c;
        auto& b = bufs[next];
        int64_t r;
        if (pass == 0) {
          std::fill(b.begin(), b.end(), static_cast<uint8_t>(block * 7 + 1));
          r = nbd_aio_pwrite(h, b.data(), 4096, block * 4096, NBD_NULL_COMPLETION, 0);
        } else {
          r = nbd_aio_pread(h, b.data(), 4096, block * 4096, NBD_NULL_COMPLETION, 0);
        }
        if (r < 0) ++failures;
        ++next;
      }
      if (nbd_poll(h, -1) < 0) return failures + 1;
      int64_t cookie;
      while ((cookie = nbd_aio_peek_command_completed(h)) > 0) {
        if (nbd_aio_command_completed(h, static_cast<uint64_t>(cookie)) != 1) ++failures;
      }
    }
    if (pass == 0 && nbd_flush(h, 0) != 0) ++failures;
  }
  for (int i = 0; i < blocks / conns; ++i) {
    const uint64_t block = static_cast<uint64_t>(i) * conns + c;
    if (bufs[i] != std::vector<uint8_t>(4096, static_cast<uint8_t>(block * 7 + 1))) ++failures;
  }
  return failures;
}

TEST(ServerTest, ManyConnectionsDeepQueuesOutOfOrderReplies) {
  TempDir dir;
  auto exp = std::make_shared<ShuffledExport>(32 << 20, 4096);
  StaticCatalog cat;
  cat.Add({"shuffled", ""}, exp);
  ServerConfig cfg;
  cfg.unix_path = dir.path() + "/nbd.sock";
  cfg.session.max_inflight = 64;
  auto server = Server::Start(cat, cfg);
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  const std::string uri = "nbd+unix:///shuffled?socket=" + cfg.unix_path;

  constexpr int kConns = 4, kDepth = 128, kBlocks = 2048;
  std::vector<std::thread> clients;
  std::atomic<int> failures{0};
  for (int c = 0; c < kConns; ++c) {
    clients.emplace_back([&, c] {
      nbd_handle* h = nbd_create();
      if (h == nullptr || nbd_connect_uri(h, uri.c_str()) != 0) {
        ++failures;
        return;
      }
      failures += WriteAndReadBack(h, c, kConns, kBlocks, kDepth);
      nbd_shutdown(h, 0);
      nbd_close(h);
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GT(exp->reordered(), 100u) << "completions were not reordered: the test proves nothing";
}

// Bytes that differ from their neighbours and from block to block.
std::vector<uint8_t> Pattern(std::size_t n) {
  std::vector<uint8_t> p(n);
  for (std::size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>(i * 131 + (i >> 12));
  return p;
}

// A socket pair whose server side (sv[0]) has a 16 KiB send buffer, smaller than one
// 64 KiB reply: a reply the socket takes is taken in part.
void SmallSendBufferPair(int sv[2]) {
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  const int small = 16 << 10;
  ASSERT_EQ(::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small), 0);
}

// Reads everything the server sends until it closes.
Reader ReadAll(int fd) {
  Reader r;
  uint8_t buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    r.b.insert(r.b.end(), buf, buf + n);
  }
  return r;
}

// Past the greeting and GO's replies.
void SkipHandshake(Reader& r) {
  EXPECT_EQ(r.u64(), kNbdMagic);
  EXPECT_EQ(r.u64(), kOptMagic);
  r.u16();
  auto e = r.rep();
  while (e.type != kRepAck) e = r.rep();
}

// Replies sent by the completing thread (SendNow) to a peer that is not reading: the
// socket takes part of a reply and the rest waits for the writer, ahead of every later
// reply. The peer then reads the whole stream: every reply whole, each once, data right.
TEST(SessionSocketTest, RepliesTheSocketTakesInPartArriveWholeAndInOrderOfBytes) {
  constexpr uint32_t kLen = 64 << 10, kReads = 48;
  constexpr uint64_t kSize = 4 << 20;
  auto exp = std::make_shared<ShuffledExport>(kSize, 4096);
  const std::vector<uint8_t> pattern = Pattern(kSize);
  exp->Fill(0, pattern);
  StaticCatalog cat;
  cat.Add({"shuffled", ""}, exp);
  int sv[2];
  ASSERT_NO_FATAL_FAILURE(SmallSendBufferPair(sv));
  uint64_t direct = 0, split = 0;
  std::thread server([&] {
    Session s(std::make_unique<SocketTransport>(sv[0]), cat, SessionOptions{}, "pair");
    s.Run();
    direct = s.stats().replies_direct;
    split = s.stats().replies_split;
  });
  Wire w;
  w.u32(kClientFixedNewstyle | kClientNoZeroes).go("shuffled");
  for (uint32_t i = 0; i < kReads; ++i) w.req(kCmdRead, 1000 + i, uint64_t{i} * 69632 % (kSize - kLen) / 4096 * 4096, kLen);
  w.req(kCmdDisc, 1, 0, 0);
  std::thread client_writer([&] {
    std::size_t off = 0;
    while (off < w.b.size()) {
      const ssize_t n = ::send(sv[1], w.b.data() + off, w.b.size() - off, MSG_NOSIGNAL);
      if (n <= 0) break;
      off += static_cast<std::size_t>(n);
    }
  });
  // Not reading for a while: the completions meet a full socket.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  Reader r = ReadAll(sv[1]);
  client_writer.join();
  server.join();
  ::close(sv[1]);
  SkipHandshake(r);
  std::vector<int> seen(kReads, 0);
  for (uint32_t k = 0; k < kReads; ++k) {
    ASSERT_EQ(r.u32(), kSimpleReplyMagic) << "reply " << k << " at byte " << r.p;
    EXPECT_EQ(r.u32(), 0u);
    const uint64_t h = r.u64();
    ASSERT_GE(h, 1000u);
    ASSERT_LT(h, 1000u + kReads);
    const uint32_t i = static_cast<uint32_t>(h - 1000);
    ++seen[i];
    const uint64_t off = uint64_t{i} * 69632 % (kSize - kLen) / 4096 * 4096;
    ASSERT_LE(r.p + kLen, r.b.size());
    EXPECT_TRUE(std::equal(pattern.begin() + static_cast<std::ptrdiff_t>(off),
                           pattern.begin() + static_cast<std::ptrdiff_t>(off + kLen), r.b.begin() + static_cast<std::ptrdiff_t>(r.p)))
        << "reply for handle " << h;
    r.p += kLen;
  }
  EXPECT_FALSE(r.more());
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(kReads));
  EXPECT_GT(direct, 0u) << "no reply went out on the completing thread: the test proves nothing";
  EXPECT_GT(split, 0u) << "no reply was taken in part: the test proves nothing";
}

// ---- Polled sessions: the export's engine reads the connection ----

// A memory export whose requests run on a real engine thread, as a LUN's do, each
// completing after a pseudo-random 0-150 us timer so replies leave out of request order.
// engine() names that engine, so a session lets it read the connection.
class EngineExport : public DeferredMemoryExport {
 public:
  EngineExport(uint64_t size, uint32_t block) : DeferredMemoryExport(size, block), et_("nbd-test") {}
  Engine* engine() override { return &et_.engine(); }
  // Calls made on another thread than the engine's (a threaded session's reader).
  uint64_t off_engine() const { return off_engine_; }
  uint64_t calls() const { return calls_; }

 private:
  void Defer(Function<void()> f) override {
    ++calls_;
    if (!et_.engine().OnEngineThread()) ++off_engine_;
    et_.engine().RunHere([this, f = std::move(f)]() mutable {
      rng_ = rng_ * 6364136223846793005ull + 1442695040888963407ull;
      et_.engine().After(static_cast<DurNs>((rng_ >> 60) % 4) * 50'000, std::move(f));
    });
  }
  uint64_t rng_ = 1;  // the engine's
  std::atomic<uint64_t> calls_{0}, off_engine_{0};
  EngineThread et_;  // last: stopped before the memory goes
};

// Four connections over socket pairs, libnbd on the client side, 128 requests in flight
// on each against an admission of 16: the engine reads all four, stops reading a
// connection while its admission is full and takes it up again as replies leave. Every
// block written is read back. With polled off the same load is read by the sessions'
// threads (the contrast that shows the first run was polled).
void RunFourConnections(bool polled, uint64_t* off_engine, uint64_t* calls, uint64_t* batches, uint64_t* pauses) {
  auto exp = std::make_shared<EngineExport>(32 << 20, 4096);
  StaticCatalog cat;
  cat.Add({"eng", ""}, exp);
  SessionOptions o;
  o.max_inflight = 16;
  o.polled = polled;
  constexpr int kConns = 4, kDepth = 128, kBlocks = 2048;
  std::vector<std::unique_ptr<Session>> sessions;
  std::vector<std::thread> servers, clients;
  std::atomic<int> failures{0};
  std::vector<int> client_fds;
  for (int c = 0; c < kConns; ++c) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    sessions.push_back(std::make_unique<Session>(std::make_unique<SocketTransport>(sv[0]), cat, o, "pair"));
    client_fds.push_back(sv[1]);
  }
  for (auto& s : sessions) servers.emplace_back([&s] { s->Run(); });
  for (int c = 0; c < kConns; ++c) {
    clients.emplace_back([&, c] {
      nbd_handle* h = nbd_create();
      if (h == nullptr || nbd_set_export_name(h, "eng") != 0 || nbd_connect_socket(h, client_fds[c]) != 0) {
        ADD_FAILURE() << nbd_get_error();
        ++failures;
        return;
      }
      failures += WriteAndReadBack(h, c, kConns, kBlocks, kDepth);
      nbd_shutdown(h, 0);
      nbd_close(h);
    });
  }
  for (auto& t : clients) t.join();
  for (auto& t : servers) t.join();
  EXPECT_EQ(failures.load(), 0);
  *off_engine = exp->off_engine();
  *calls = exp->calls();
  *batches = *pauses = 0;
  for (auto& s : sessions) {
    EXPECT_TRUE(s->finished());
    *batches += s->stats().polled_batches;
    *pauses += s->stats().polled_pauses;
  }
}

TEST(PolledSessionTest, FourConnectionsOnOneEngineThroughAdmissionPauses) {
  uint64_t off = 0, calls = 0, batches = 0, pauses = 0;
  RunFourConnections(true, &off, &calls, &batches, &pauses);
  EXPECT_GE(calls, 2u * 2048);
  EXPECT_EQ(off, 0u) << "a request reached the export off the engine's thread: not polled";
  EXPECT_GT(batches, 0u);
  EXPECT_GT(pauses, 0u) << "admission never filled: the test proves nothing of the pauses";
  RunFourConnections(false, &off, &calls, &batches, &pauses);
  EXPECT_EQ(off, calls) << "threaded sessions' requests came from their reader threads";
  EXPECT_EQ(batches, 0u);
}

// What a client sends, in pieces of 1 to 13 bytes with pauses between some: the engine
// meets headers and payloads read in part and takes them up on later turns.
void SendDribbled(int fd, const std::vector<uint8_t>& b) {
  std::size_t off = 0;
  for (uint32_t k = 0; off < b.size(); ++k) {
    const std::size_t n = std::min<std::size_t>(1 + k * 7 % 13, b.size() - off);
    if (::send(fd, b.data() + off, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) return;
    off += n;
    if (k % 64 == 0) std::this_thread::sleep_for(std::chrono::microseconds(300));
  }
}

// Large reads and writes dribbled in a few bytes at a time while the client does not
// read: a batch the socket takes in part leaves its tail to the writer thread, ahead of
// every later reply. Every reply arrives whole and once, and the writes land whole.
TEST(PolledSessionTest, DribbledRequestsAndBatchesTheSocketTakesInPart) {
  constexpr uint32_t kWrites = 40, kLen = 64 << 10, kReads = 32;
  constexpr uint64_t kSize = 4 << 20;
  auto exp = std::make_shared<EngineExport>(kSize, 4096);
  const std::vector<uint8_t> pattern = Pattern(kSize);
  exp->Fill(0, pattern);
  StaticCatalog cat;
  cat.Add({"eng", ""}, exp);
  int sv[2];
  ASSERT_NO_FATAL_FAILURE(SmallSendBufferPair(sv));
  uint64_t batches = 0, split = 0;
  std::thread server([&] {
    Session s(std::make_unique<SocketTransport>(sv[0]), cat, SessionOptions{}, "pair");
    s.Run();
    batches = s.stats().polled_batches;
    split = s.stats().replies_split;
  });
  // The reads first (the first reply meets an empty socket that takes part of it), then
  // block 1000 - 64 + i written with byte 0xA0 + i (outside what the reads read).
  Wire w;
  w.u32(kClientFixedNewstyle | kClientNoZeroes).go("eng");
  for (uint32_t i = 0; i < kReads; ++i) w.req(kCmdRead, 1000 + i, uint64_t{i} * 69632 % (kSize / 2) / 4096 * 4096, kLen);
  for (uint32_t i = 0; i < kWrites; ++i) {
    w.req(kCmdWrite, 1 + i, (1000ull - 64 + i) * 4096, 4096).bytes(4096, static_cast<uint8_t>(0xA0 + i));
  }
  w.req(kCmdDisc, 1, 0, 0);
  std::thread client_writer([&] { SendDribbled(sv[1], w.b); });
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // not reading: replies meet a full socket
  Reader r = ReadAll(sv[1]);
  client_writer.join();
  server.join();
  ::close(sv[1]);
  SkipHandshake(r);
  std::vector<int> seen(kWrites + kReads, 0);
  for (uint32_t k = 0; k < kWrites + kReads; ++k) {
    ASSERT_EQ(r.u32(), kSimpleReplyMagic) << "reply " << k << " at byte " << r.p;
    EXPECT_EQ(r.u32(), 0u);
    const uint64_t h = r.u64();
    if (h >= 1000) {
      ASSERT_LT(h, 1000u + kReads);
      const uint32_t i = static_cast<uint32_t>(h - 1000);
      ++seen[kWrites + i];
      const uint64_t off = uint64_t{i} * 69632 % (kSize / 2) / 4096 * 4096;
      ASSERT_LE(r.p + kLen, r.b.size());
      EXPECT_TRUE(std::equal(pattern.begin() + static_cast<std::ptrdiff_t>(off),
                             pattern.begin() + static_cast<std::ptrdiff_t>(off + kLen),
                             r.b.begin() + static_cast<std::ptrdiff_t>(r.p)))
          << "reply for handle " << h;
      r.p += kLen;
    } else {
      ASSERT_GE(h, 1u);
      ASSERT_LE(h, kWrites);
      ++seen[h - 1];
    }
  }
  EXPECT_FALSE(r.more());
  EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), static_cast<long>(kWrites + kReads));
  // The writes landed whole (block 1000 - 64 + i holds byte 0xA0 + i).
  for (uint32_t i = 0; i < kWrites; ++i) {
    const auto at = exp->mem().data().begin() + static_cast<std::ptrdiff_t>((1000ull - 64 + i) * 4096);
    EXPECT_EQ(std::count(at, at + 4096, static_cast<uint8_t>(0xA0 + i)), 4096) << "block " << i;
  }
  EXPECT_GT(batches, 0u) << "no reply went out in an engine's batch: not polled";
  EXPECT_GT(split, 0u) << "no batch was taken in part: the test proves nothing";
}

// The ways a polled connection ends: every request accepted before the end is answered
// (a misaligned write before it gets EINVAL and the connection goes on), and Run returns.
TEST(PolledSessionTest, EndsAnswerWhatWasAcceptedAndReturn) {
  auto exp = std::make_shared<EngineExport>(1 << 20, 4096);
  StaticCatalog cat;
  cat.Add({"eng", ""}, exp);
  struct Case {
    const char* name;
    std::function<void(Wire&)> tail;  // after four writes (handles 1-4)
    uint32_t error_for_5;             // a fifth reply's error, 0 for none
  };
  const Case cases[] = {
      {"bad magic", [](Wire& w) { w.u32(0xdeadbeef).bytes(24, 0); }, 0},
      {"oversize write", [](Wire& w) { w.req(kCmdWrite, 5, 0, 64u << 20); }, kEINVAL},
      {"end in a payload", [](Wire& w) { w.req(kCmdWrite, 5, 0, 4096).bytes(100, 1); }, kEIO},
      {"end in a header", [](Wire& w) { w.u32(kRequestMagic).u16(0); }, 0},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    SessionOptions o;
    o.max_payload = 1 << 20;
    std::thread server([&] {
      Session s(std::make_unique<SocketTransport>(sv[0]), cat, o, "pair");
      s.Run();
    });
    Wire w;
    w.u32(kClientFixedNewstyle | kClientNoZeroes).go("eng");
    for (uint64_t h = 1; h <= 4; ++h) w.req(kCmdWrite, h, h * 4096, 4096).bytes(4096, 7);
    // Bad input the connection survives: a misaligned write (its payload consumed).
    w.req(kCmdWrite, 9, 512, 512).bytes(512, 3);
    c.tail(w);
    ASSERT_EQ(::send(sv[1], w.b.data(), w.b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(w.b.size()));
    ::shutdown(sv[1], SHUT_WR);  // the end of the stream after the tail
    Reader r = ReadAll(sv[1]);
    server.join();
    ::close(sv[1]);
    SkipHandshake(r);
    std::vector<uint64_t> handles;
    while (r.more()) {
      ASSERT_EQ(r.u32(), kSimpleReplyMagic);
      const uint32_t err = r.u32();
      const uint64_t h = r.u64();
      EXPECT_EQ(err, h == 5 ? c.error_for_5 : h == 9 ? kEINVAL : 0u) << h;
      handles.push_back(h);
    }
    std::sort(handles.begin(), handles.end());
    std::vector<uint64_t> want = {1, 2, 3, 4};
    if (c.error_for_5 != 0) want.push_back(5);
    want.push_back(9);
    EXPECT_EQ(handles, want);
  }
  // Stop from another thread while the connection idles: Run returns.
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  Session s(std::make_unique<SocketTransport>(sv[0]), cat, SessionOptions{}, "pair");
  std::thread server([&] { s.Run(); });
  Wire w;
  w.u32(kClientFixedNewstyle | kClientNoZeroes).go("eng").req(kCmdWrite, 1, 0, 4096).bytes(4096, 9);
  ASSERT_EQ(::send(sv[1], w.b.data(), w.b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(w.b.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  s.Stop();
  server.join();
  EXPECT_TRUE(s.finished());
  ::close(sv[1]);
  EXPECT_EQ(exp->off_engine(), 0u);
}

TEST(ServerTest, ASecondServerOnALiveSocketIsRefusedAndLeavesItAlone) {
  TempDir dir;
  StaticCatalog cat;
  cat.Add({"m", ""}, std::make_shared<MemoryExport>(1 << 20, 512));
  ServerConfig cfg;
  cfg.unix_path = dir.path() + "/nbd.sock";
  auto a = Server::Start(cat, cfg);
  ASSERT_TRUE(a.ok());
  auto b = Server::Start(cat, cfg);
  EXPECT_EQ(b.status().code(), StatusCode::kAlreadyExists);
  nbd_handle* h = nbd_create();
  ASSERT_EQ(nbd_connect_uri(h, ("nbd+unix:///m?socket=" + cfg.unix_path).c_str()), 0) << nbd_get_error();
  EXPECT_EQ(nbd_get_size(h), 1 << 20);
  nbd_close(h);
  ServerConfig tcp;
  tcp.tcp = "127.0.0.1:0";
  auto t = Server::Start(cat, tcp);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_GT((*t)->tcp_port(), 0);
  tcp.tcp = "localhost:99999";
  EXPECT_EQ(Server::Start(cat, tcp).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vsl::nbd
