// The runtime model in real time: the card runs on its own engine thread (as the
// controller hardware does) and a host engine thread talks to it only through
// Engine::Submit, in both directions. Run under TSan (VSL_SANITIZE=thread) this also
// checks that nothing is shared without synchronization.
#include <atomic>
#include <future>

#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "vsl/core/engine.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::testing {
namespace {

TEST(ThreadsTest, HostEngineDrivesCardEngineThroughRingsInRealTime) {
  TempDir tmp;
  auto profile = simcard::FindProfile("test-small").value();
  ASSERT_TRUE(simcard::SimCard::Create(tmp.Sub("c"), profile, {}).ok());
  EngineThread card_thread("card");
  EngineThread host_thread("host-pipe0");
  std::unique_ptr<simcard::SimCard> card;
  card_thread.RunSync([&] {
    card = std::move(simcard::SimCard::Open(tmp.Sub("c"), card_thread.engine().clock()).value());
  });
  constexpr uint32_t kPages = 8;
  const uint32_t dies = card->geometry().dies_per_pipe();
  std::vector<std::vector<uint8_t>> data(dies * kPages, std::vector<uint8_t>(4096));
  std::vector<std::vector<uint8_t>> back(dies * kPages, std::vector<uint8_t>(4096));
  for (uint32_t i = 0; i < data.size(); ++i) Rng(i).Fill(data[i].data(), 4096);
  std::promise<uint32_t> all_done;
  uint32_t completed = 0, good = 0;  // owned by the host engine
  Engine& host = host_thread.engine();
  Engine& hw = card_thread.engine();
  auto on_host = [&](nand::Completion c, bool is_read, uint32_t i) {
    ++completed;
    if (c.ok() && (!is_read || back[i] == data[i])) ++good;
    if (completed == dies * (2 * kPages + 1)) all_done.set_value(good);
  };
  host_thread.RunSync([&] {
    for (uint32_t d = 0; d < dies; ++d) {
      hw.Submit([&, d] {
        card->pipe(0).Erase(d, 1, [&](const nand::Completion& c) {
          host.Submit([&, c] { on_host(c, false, 0); });
        });
        for (uint32_t p = 0; p < kPages; ++p) {
          const uint32_t i = d * kPages + p;
          card->pipe(0).Program({{d, 1, p}, data[i].data(), nullptr}, nullptr,
                                [&](const nand::Completion& c) {
                                  host.Submit([&, c] { on_host(c, false, 0); });
                                });
          card->pipe(0).Read({{d, 1, p}, 0, 0, back[i].data(), nullptr},
                             [&, i](const nand::Completion& c) {
                               host.Submit([&, c, i] { on_host(c, true, i); });
                             });
        }
      });
    }
  });
  auto f = all_done.get_future();
  ASSERT_EQ(f.wait_for(std::chrono::seconds(30)), std::future_status::ready);
  EXPECT_EQ(f.get(), dies * (2 * kPages + 1));
  card_thread.RunSync([&] { card.reset(); });
}

}  // namespace
}  // namespace vsl::testing
