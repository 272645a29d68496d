// The FTL harness both co-simulated cards run (the controller with C++ dies, and the
// Alveo kernel with its RTL NAND emulators): per pipe an FTL (512-byte sectors in seed 1,
// 4 KiB with FlashBack in the others), rounds of writes, trims, reads and flushes in
// flight together, checked against a reference model after every round, with clean
// restarts (checkpoint attach) and host crashes (the FTL and the host's side of the pipe
// dropped without a shutdown, commands possibly still in the controller: a new
// ControllerPipe takes the rings over and the attach scans). The card keeps running
// across restarts, as a card does when only the host restarts. In the last seed (of two or
// more) a die of pipe 0 dies mid-run: the controller reports it by RB_TIMEOUT and
// FlashBack must lose nothing.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "vsl/core/clock.h"
#include "vsl/hw/ctrl_pipe.h"
#include "vsl/hw/port.h"

namespace vsl::testing {

struct HarnessCard {
  hw::RegMemPort& port;
  uint64_t region_base[2];
  uint64_t region_bytes;
  std::function<void(uint32_t pipe, uint32_t lun)> kill_lun;  // the die dies (busy for ever)
};

struct HarnessTotals {
  uint64_t acked = 0, checked = 0, host_crashes = 0, rebuilt = 0;
  bool die_failed = false;
};

// Runs `seeds` seeds on the two opened pipes (they may be replaced: host crashes). Fails
// the calling test through gtest assertions; the caller checks HasFatalFailure().
void RunFtlHarness(HarnessCard& card, VirtualClock& clock, std::unique_ptr<hw::ControllerPipe> (&pipes)[2],
                   int seeds, HarnessTotals* totals);

// VSL_COSIM_SEEDS, or 2.
int HarnessSeeds();

}  // namespace vsl::testing
