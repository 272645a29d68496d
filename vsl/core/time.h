// Time in the host stack: unsigned nanoseconds since the clock's epoch.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>

namespace vsl {

__extension__ typedef unsigned __int128 Uint128;  // GCC/Clang extension, named once

using TimeNs = uint64_t;  // an instant, ns since the clock's epoch
using DurNs = uint64_t;   // a duration, ns

inline constexpr DurNs kNs = 1;
inline constexpr DurNs kUs = 1000;
inline constexpr DurNs kMs = 1000 * kUs;
inline constexpr DurNs kSec = 1000 * kMs;
inline constexpr TimeNs kTimeNever = UINT64_MAX;

// Time to move `bytes` at `bytes_per_sec`, rounded up to whole ns (0 when bandwidth is 0,
// which means "unmodelled").
constexpr DurNs TransferNs(uint64_t bytes, uint64_t bytes_per_sec) {
  if (bytes_per_sec == 0) return 0;
  return static_cast<DurNs>(
      (static_cast<Uint128>(bytes) * kSec + bytes_per_sec - 1) / bytes_per_sec);
}

}  // namespace vsl
