// Static wear levelling (docs/ftl.md, "Groomer and wear"): dynamic levelling comes from
// LebTable::PickFree (the least-erased free LEB is opened next); cold data would still pin
// young blocks for ever, so when the most-erased data LEB is more than `max_spread` P/E
// cycles ahead of the least-erased closed one, that one's data is moved (the groomer takes
// it as a victim) and its block returns to the free pool to take hot writes.
#pragma once

#include <cstdint>
#include <utility>

#include "vsl/ftl/leb.h"

namespace vsl::ftl {

// The closed LEB (at `first_data_leb` or after, not in flight, not held, not pinned by an
// atomic batch) with the lowest erase count, if it lags the highest erase count of any
// data LEB by more than `max_spread`; else null. `max_spread` 0 disables it.
Leb* PickWearVictim(LebTable& lebs, uint32_t first_data_leb, uint32_t max_spread);

// Lowest and highest erase count over the data LEBs with a usable block (lowest 0 when
// there are none).
std::pair<uint32_t, uint32_t> EraseCountRange(const LebTable& lebs, uint32_t first_data_leb);

}  // namespace vsl::ftl
