// dst ^= src over n bytes: FlashBack's parity on the host (vsl/ftl/stripe.h) and the
// simulated controller's accumulators (vsl/simcard). Header shared with the testbench:
// keep it C++17-clean.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vsl {

void XorInto(uint8_t* dst, const uint8_t* src, std::size_t n);

}  // namespace vsl
