// dst ^= src over n bytes: FlashBack's parity on the host (vsl/ftl/stripe.h) and the
// simulated controller's accumulators (vsl/simcard). Header shared with the testbench:
// keep it C++17-clean.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace vsl {

void XorInto(uint8_t* dst, const uint8_t* src, std::size_t n);

// The ways XorInto can run on this CPU, the one it uses first (AVX-512, AVX2, then 16-byte
// vectors and words): tests run each.
struct XorKernel {
  const char* name;
  void (*fn)(uint8_t* dst, const uint8_t* src, std::size_t n);
};
const std::vector<XorKernel>& XorKernels();

}  // namespace vsl
