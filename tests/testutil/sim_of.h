// The simulated card under a Card, for tests and benchmarks that drive it directly (power
// cuts, fault injection by block, ground truth): the card must be on the sim backend.
#pragma once

#include <cstdio>
#include <cstdlib>

#include "vsl/card/card.h"
#include "vsl/card/sim_backend.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::testing {

inline simcard::SimCard& SimOf(card::Card& c) {
  simcard::SimCard* s = card::SimCardOf(c.backend());
  if (s == nullptr) {
    std::fprintf(stderr, "SimOf: card %s is on the %s backend, not the simulated card\n", c.dir().c_str(),
                 c.backend().kind().c_str());
    std::abort();
  }
  return *s;
}

}  // namespace vsl::testing
