// A co-simulated card's two pipes as FlashPipes (the controller's, or the Alveo kernel's):
// ControllerPipe on each pipe's memory region, initialised (parameter page read) in
// virtual time.
#pragma once

#include <cstdlib>
#include <memory>
#include <optional>

#include <gtest/gtest.h>

#include "testbench/cosim/cosim_card.h"
#include "vsl/core/clock.h"
#include "vsl/hw/ctrl_pipe.h"

namespace vsl::testing {

// A bound on the events any one wait may take (each a 1 us completion poll, at most): a
// controller that never answers fails the test instead of hanging it.
inline constexpr uint64_t kMaxEvents = 50'000'000;

// Options for a test's card: VSL_COSIM_FST=<file> traces every RTL signal into <file>.
inline tb::CosimOptions CosimTestOptions(tb::CosimOptions o = {}) {
  if (const char* f = std::getenv("VSL_COSIM_FST")) o.trace_fst = f;
  return o;
}

// Card: a co-simulated card (a RegMemPort with region_base(p), region_bytes()).
template <class Card>
void OpenCosimPipes(Card& card, VirtualClock& clock, std::unique_ptr<hw::ControllerPipe> (&pipes)[2]) {
  for (uint32_t p = 0; p < 2; ++p) {
    auto pipe = hw::ControllerPipe::Create(card, clock, p, card.region_base(p), card.region_bytes());
    ASSERT_TRUE(pipe.ok()) << pipe.status().ToString();
    pipes[p] = std::move(pipe).value();
    std::optional<Status> s;
    pipes[p]->Init([&](Status x) { s = x; });
    clock.RunUntilTrue([&] { return s.has_value(); }, kMaxEvents);
    ASSERT_TRUE(s.has_value() && s->ok()) << (s ? s->ToString() : "Init never finished");
  }
}

}  // namespace vsl::testing
