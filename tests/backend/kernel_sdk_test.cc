// The SDK in process on a kernel: card: the co-simulated Alveo kernel (controller plus its
// synthesizable NAND emulators, set up by the board code a real Alveo gets) under the
// FTL, the atomic vectored writes and the key-value store; then the SDK closes the card
// and opens it again (the board stays up, as a card does across a driver restart) and
// everything written reads back; then a die of LUN 1 is killed through the emulator's
// fault register and everything still reads back (FlashBack). A second, different co-simulated card in the same
// process is refused with the reason (SystemC elaborates once per process).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sdk/src/device.h"
#include "tests/sdk/sdk_fixture.h"
#include "tests/testutil/temp_dir.h"
#include "vsl/backend/open.h"
#include "vsl/card/card.h"
#include "vsl/core/clock.h"
#include "vsl/vsl_kv.h"

namespace vsl::testing {
namespace {

TEST(KernelBackendTest, SdkAtomicWritesAndKvSurviveAReopen) {
  TempDir tmp;
  const std::string spec = "kernel:" + tmp.Sub("card");
  ASSERT_TRUE(backend::CreateCard(spec, {}).ok());
  VirtualClock clock(7);
  {
    card::CardOptions co;
    co.clock = &clock;
    auto c = backend::OpenCard(spec, co);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    EXPECT_EQ((*c)->backend().kind(), "kernel");
    EXPECT_NE((*c)->backend().identity(0).hardware.find("vsl_ctrl (ID 4F56534C"), std::string::npos)
        << (*c)->backend().identity(0).hardware;
    ftl::FormatOptions fo;
    ASSERT_TRUE((*c)->FormatController(0, card::PipeMode::kDual, fo).ok());
    // The board's power monitor (a model over the emulators' counters, what XRT reports
    // on a real board) saw the format's erases.
    EXPECT_GT((*c)->power_status().controllers.at(0).temperature_c, 25.0);
  }
  const uint32_t sb = 4096;
  ModelBatch b;
  uint64_t version = 0;
  b.Write(0, 3, &version, sb);
  b.Write(40, 2, &version, sb);
  b.Trim(10, 4);
  {
    card::Card* card = nullptr;
    vsl_dev* dev = nullptr;
    ASSERT_EQ(OpenVirtual(spec, 1, clock, 1, &card, &dev), 0) << vsl_last_error();
    ASSERT_EQ(vsl_write(dev, 10, 1, Pattern(10, 99, sb).data(), 0), 0);
    ASSERT_EQ(vsl_write_atomic(dev, b.vecs.data(), static_cast<uint32_t>(b.vecs.size()), 0), 0);
    ASSERT_EQ(vsl_close(dev), 0);
  }
  {  // the key-value store on lun0
    card::Card* card = nullptr;
    vsl_dev* dev = nullptr;
    ASSERT_EQ(OpenVirtual(spec, 0, clock, 1, &card, &dev), 0) << vsl_last_error();
    vsl_kv* kv = nullptr;
    vsl_kv_opts ko{};
    ko.max_pools = 1;  // the emulators' small card holds one pool
    ko.max_value_bytes = 8192;
    ASSERT_EQ(vsl_kv_open(dev, &ko, &kv), 0) << vsl_last_error();
    for (int i = 0; i < 20; ++i) {
      const std::string k = "key" + std::to_string(i), v = std::string(100 + i * 37, static_cast<char>('a' + i));
      ASSERT_EQ(vsl_kv_put(kv, 0, k.data(), static_cast<uint32_t>(k.size()), v.data(), static_cast<uint32_t>(v.size()), 0), 0);
    }
    ASSERT_EQ(vsl_kv_close(kv), 0);
    ASSERT_EQ(vsl_close(dev), 0);
  }
  {
    card::Card* card = nullptr;
    vsl_dev* dev = nullptr;
    ASSERT_EQ(OpenVirtual(spec, 1, clock, 2, &card, &dev), 0) << vsl_last_error();
    uint64_t now = 0, old = 0;
    CountNewAndOld(dev, b, {}, sb, "after reopen", &now, &old);
    EXPECT_EQ(old, 0u);
    EXPECT_GT(now, 0u);
    // A die of this LUN dies through the emulator's fault register (FAULT.DEAD): the
    // controller reports R/B# timeouts, FlashBack rebuilds, nothing is lost.
    Status killed = Status::Ok();
    card->RunOnPipe(1, [&] { killed = card->backend().InjectDieFailure(1, 2); });
    ASSERT_TRUE(killed.ok()) << killed.ToString();
    CountNewAndOld(dev, b, {}, sb, "after the die failure", &now, &old);
    EXPECT_EQ(old, 0u);
    std::vector<uint8_t> out(sb);
    ASSERT_EQ(vsl_read(dev, 10, 1, out.data()), 0);  // trimmed by the batch
    EXPECT_EQ(out, std::vector<uint8_t>(sb, 0));
    ASSERT_EQ(vsl_write(dev, 60, 1, Pattern(60, 5, sb).data(), VSL_FUA), 0);  // writes go on
    ASSERT_EQ(vsl_read(dev, 60, 1, out.data()), 0);
    EXPECT_EQ(out, Pattern(60, 5, sb));
    const ftl::FlashBackStatus fb = card->lun(1)->ftl()->flashback_status();
    EXPECT_TRUE(fb.active);
    EXPECT_EQ(fb.failed_dies, std::vector<uint32_t>{2});
    EXPECT_TRUE(fb.lost_lbas.empty());
    EXPECT_EQ(card->backend().Health(0, {}).failed_dies, 1u);
    ASSERT_EQ(vsl_close(dev), 0);
  }
  {
    card::Card* card = nullptr;
    vsl_dev* dev = nullptr;
    ASSERT_EQ(OpenVirtual(spec, 0, clock, 2, &card, &dev), 0) << vsl_last_error();
    vsl_kv* kv = nullptr;
    ASSERT_EQ(vsl_kv_open(dev, nullptr, &kv), 0);
    for (int i = 0; i < 20; ++i) {
      const std::string k = "key" + std::to_string(i), want = std::string(100 + i * 37, static_cast<char>('a' + i));
      std::string got(4096, '\0');
      const int64_t n = vsl_kv_get(kv, 0, k.data(), static_cast<uint32_t>(k.size()), got.data(),
                                   static_cast<uint32_t>(got.size()));
      ASSERT_EQ(n, static_cast<int64_t>(want.size())) << k;
      EXPECT_EQ(got.substr(0, want.size()), want) << k;
    }
    ASSERT_EQ(vsl_kv_close(kv), 0);
    ASSERT_EQ(vsl_close(dev), 0);
  }
  // Another co-simulated card in this process: refused, with the reason.
  const std::string other = "kernel:" + tmp.Sub("other");
  ASSERT_TRUE(backend::CreateCard(other, {}).ok());
  card::CardOptions co;
  co.clock = &clock;
  auto c2 = backend::OpenCard(other, co);
  ASSERT_FALSE(c2.ok());
  EXPECT_NE(c2.status().message().find("one simulation per process"), std::string::npos) << c2.status().ToString();
}

// The kernel card's flash outlives the process: a first process formats the card, writes
// with FUA and is killed (SIGKILL, no clean close); a second process opens the card (a new
// simulation: the RTL reset, the emulators' tables from the card file) and finds every
// acknowledged sector. Both run in children (one simulation per process).
int RunChild(const std::function<int()>& body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 255;
}

TEST(KernelBackendTest, FlashOutlivesTheProcessAndSigkill) {
  TempDir tmp;
  const std::string spec = "kernel:" + tmp.Sub("card");
  ASSERT_TRUE(backend::CreateCard(spec, {}).ok());
  const uint32_t sb = 4096;
  const int first = RunChild([&] {
    VirtualClock clock(3);
    card::CardOptions co;
    co.clock = &clock;
    auto c = backend::OpenCard(spec, co);
    if (!c.ok() || !(*c)->FormatController(0, card::PipeMode::kDual, {}).ok()) return 2;
    c->reset();
    card::Card* card = nullptr;
    vsl_dev* dev = nullptr;
    if (OpenVirtual(spec, 0, clock, 1, &card, &dev) != 0) return 3;
    for (uint64_t lba = 0; lba < 24; ++lba) {
      if (vsl_write(dev, lba, 1, Pattern(lba, 1, sb).data(), VSL_FUA) != 0) return 4;
    }
    ::kill(::getpid(), SIGKILL);  // acknowledged, never closed
    return 5;
  });
  ASSERT_EQ(first, 128 + SIGKILL);
  EXPECT_TRUE(std::filesystem::exists(tmp.Sub("card") + "/kernel-memory.img"));
  const int second = RunChild([&] {
    VirtualClock clock(4);
    card::Card* card = nullptr;
    vsl_dev* dev = nullptr;
    if (OpenVirtual(spec, 0, clock, 2, &card, &dev) != 0) return 10;
    std::vector<uint8_t> out(sb);
    for (uint64_t lba = 0; lba < 24; ++lba) {
      if (vsl_read(dev, lba, 1, out.data()) != 0) return 11;
      if (out != Pattern(lba, 1, sb)) return 12;
    }
    if (card->backend().power_cycles(0).unsafe_power_offs < 1) return 13;
    return vsl_close(dev) == 0 ? 0 : 14;
  });
  EXPECT_EQ(second, 0) << "10: open failed, 11: read failed, 12: a sector lost, 13: no unsafe power-off counted";
}

}  // namespace
}  // namespace vsl::testing
