// The simulated card (vsl/simcard/sim_card.h) as a card backend: the embedded default, and
// the only backend a Card opened by a bare directory gets.
#pragma once

#include <memory>
#include <string>

#include "vsl/card/backend.h"
#include "vsl/core/status.h"
#include "vsl/nand/card_model.h"

namespace vsl::simcard {
class SimCard;
}

namespace vsl::card {

// Probes the card in `dir` (shape and pipe modes, nothing opened) into a backend that
// opens it on Start.
Result<std::unique_ptr<CardBackend>> MakeSimBackend(const std::string& dir, const model::SimCardOptions& opts);

// The simulated card under a card's backend, for tests and benchmarks that drive it
// directly (power cuts, fault injection by block, ground truth); null on another backend.
simcard::SimCard* SimCardOf(CardBackend& backend);

}  // namespace vsl::card
