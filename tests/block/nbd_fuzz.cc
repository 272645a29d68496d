// Fuzz target for the NBD server's handshake and request parser: the input is everything a
// client sends on one connection. The session runs over a memory transport against exports
// in memory; any crash, sanitizer report, hang or leak is a bug. Built two ways:
// with clang's libFuzzer (nbd_fuzz_libfuzzer, coverage-guided) and with the project's
// compiler as a deterministic driver over seeds and their mutations (nbd_fuzz_replay,
// nbd_fuzz_main.cc), so every build exercises it.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vsl/nbd/proto.h"
#include "vsl/nbd/session.h"

namespace {

using namespace vsl::nbd;

StaticCatalog& Catalog() {
  static StaticCatalog* c = [] {
    auto* cat = new StaticCatalog();
    cat->Add({"a", "512-byte blocks"}, std::make_shared<MemoryExport>(256 << 10, 512));
    cat->Add({"b", "4 KiB blocks"}, std::make_shared<MemoryExport>(128 << 10, 4096));
    return cat;
  }();
  return *c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SessionOptions o;
  o.max_payload = 64 << 10;  // small, so inputs can reach the limits
  o.max_inflight = 8;
  o.max_inflight_bytes = 128 << 10;
  o.max_options = 64;
  o.read_only = size > 0 && (data[size - 1] & 1) != 0;  // both modes, chosen by the input
  Session s(std::make_unique<MemoryTransport>(data, size, false), Catalog(), o, "fuzz");
  s.Run();
  return 0;
}

// Well-formed conversations to start from: every option, every command, both reply kinds.
std::vector<std::vector<uint8_t>> NbdFuzzSeeds() {
  struct W {
    std::vector<uint8_t> b;
    W& u16(uint16_t v) { uint8_t x[2]; Put16(x, v); b.insert(b.end(), x, x + 2); return *this; }
    W& u32(uint32_t v) { uint8_t x[4]; Put32(x, v); b.insert(b.end(), x, x + 4); return *this; }
    W& u64(uint64_t v) { uint8_t x[8]; Put64(x, v); b.insert(b.end(), x, x + 8); return *this; }
    W& opt(uint32_t o, std::vector<uint8_t> d) {
      u64(kOptMagic).u32(o).u32(static_cast<uint32_t>(d.size()));
      b.insert(b.end(), d.begin(), d.end());
      return *this;
    }
    W& go(char name, uint32_t o = kOptGo) {
      W d;
      d.u32(1).b.push_back(static_cast<uint8_t>(name));
      d.u16(2).u16(kInfoName).u16(kInfoBlockSize);
      return opt(o, d.b);
    }
    W& req(uint16_t type, uint16_t flags, uint64_t off, uint32_t len) {
      return u32(kRequestMagic).u16(flags).u16(type).u64(0x1234).u64(off).u32(len);
    }
  };
  std::vector<std::vector<uint8_t>> seeds;
  for (int structured = 0; structured < 2; ++structured) {
    W w;
    w.u32(kClientFixedNewstyle | kClientNoZeroes).opt(kOptList, {}).go('a', kOptInfo).opt(99, {1, 2, 3});
    if (structured) {
      w.opt(kOptStructuredReply, {});
      W c;
      c.u32(1).b.push_back('a');
      c.u32(1).u32(15);
      const std::string q = kContextAllocation;
      c.b.insert(c.b.end(), q.begin(), q.end());
      w.opt(kOptListMetaContext, c.b).opt(kOptSetMetaContext, c.b);
    }
    w.go('a');
    w.req(kCmdWrite, kCmdFlagFua, 512, 1024);
    w.b.insert(w.b.end(), 1024, 0xAB);
    w.req(kCmdRead, structured ? kCmdFlagDf : 0, 0, 2048).req(kCmdFlush, 0, 0, 0).req(kCmdTrim, 0, 100, 5000);
    w.req(kCmdWriteZeroes, kCmdFlagNoHole, 4096, 8192).req(kCmdWriteZeroes, 0, 0, 512);
    w.req(kCmdCache, 0, 0, 4096).req(kCmdBlockStatus, 0, 0, 4096).req(kCmdRead, 0, 100, 3);
    w.req(kCmdDisc, 0, 0, 0);
    seeds.push_back(w.b);
  }
  {
    W w;
    w.u32(kClientFixedNewstyle).opt(kOptExportName, {'b'}).req(kCmdRead, 0, 0, 4096).req(kCmdWrite, 0, 4096, 4096);
    w.b.insert(w.b.end(), 4096, 0x11);
    seeds.push_back(w.b);
  }
  {
    W w;
    w.u32(kClientFixedNewstyle | kClientNoZeroes).opt(kOptStartTls, {}).opt(kOptAbort, {});
    seeds.push_back(w.b);
  }
  return seeds;
}
