// The raw-flash exercise: what a host driver does on first attach, plus a write/verify
// pass over every die. Used by `vslflash exercise` (the main job of scripts/run).
//
// Steps: discover every pipe (READ ID + parameter page), scan every block's first page
// for the factory bad-block marker, then on every die erase one good block, program
// `pages_per_die` pages of seeded data and metadata, and read them back and verify. All
// dies of all pipes work at once; commands to one die queue in order.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/status.h"
#include "vsl/nand/discover.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::tools {

struct ExerciseOptions {
  uint32_t pages_per_die = 32;  // capped at pages per block
  uint64_t seed = 1;            // data patterns
  bool scan_bad_blocks = true;
};

struct LatencyStats {
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  uint64_t max_ns = 0;
  void Add(uint64_t ns) {
    ++count;
    sum_ns += ns;
    if (ns > max_ns) max_ns = ns;
  }
  double mean_us() const { return count ? static_cast<double>(sum_ns) / count / 1000.0 : 0; }
  double max_us() const { return static_cast<double>(max_ns) / 1000.0; }
};

struct ExerciseReport {
  std::vector<nand::DiscoveredPipe> pipes;
  uint64_t bad_blocks_found = 0;   // by the marker scan
  uint64_t bad_blocks_truth = 0;   // what the card model marked (ground truth)
  uint64_t dies_exercised = 0, dies_skipped = 0;
  uint64_t pages_programmed = 0, pages_verified = 0, mismatches = 0;
  uint64_t program_failures = 0, read_failures = 0, erase_failures = 0;
  uint64_t corrected_bits = 0;
  LatencyStats accept, program, read, erase;
  DurNs elapsed_ns = 0;            // on the card's clock (virtual or wall)
  uint64_t bytes_programmed = 0, bytes_read = 0;
  bool ok() const { return mismatches == 0 && read_failures == 0; }
};

// Phase name and fraction done, called as work completes (at most ~100 times per phase).
using ProgressFn = std::function<void(const std::string& phase, double fraction)>;

// Runs the exercise on `card`, whose clock is `clock`. `drive(pred)` must run the clock
// until pred() holds (for a VirtualClock, RunUntilTrue; for a RealClock, its loop).
Result<ExerciseReport> RunExercise(simcard::SimCard& card, Clock& clock,
                                   const std::function<bool(std::function<bool()>)>& drive,
                                   const ExerciseOptions& opts, const ProgressFn& progress);

}  // namespace vsl::tools
