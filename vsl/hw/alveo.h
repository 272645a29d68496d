// Attaching the Alveo kernel as raw flash, on any transport: the board set-up
// (SetUpAlveoKernel with the page stores), then a ControllerPipe per pipe on its region,
// initialised (what a previous host left drained, the dies' parameter page read). The XRT
// transport (OpenAlveoCard, vsl/hw/xrt_port.h) and the co-simulated kernel's tests run this
// same code; only the port and where its buffers are differ.
#pragma once

#include <cstdint>
#include <memory>

#include "vsl/core/clock.h"
#include "vsl/core/function.h"
#include "vsl/core/status.h"
#include "vsl/hw/board.h"
#include "vsl/hw/ctrl_pipe.h"
#include "vsl/hw/port.h"

namespace vsl::hw {

// Where each pipe's buffers are in card memory.
struct AlveoBuffers {
  uint64_t region_base[2] = {0, 0};  // rings and bounce buffers (m_axi_pipeN)
  uint64_t region_bytes = 0;
  uint64_t store_base[2] = {0, 0};   // the emulator's pages (m_axi_storeN)
};

struct AlveoPipes {
  std::unique_ptr<ControllerPipe> pipes[2];
};

// `done` runs on the clock's engine (at once for an error before any command); the pipes
// use `port`, which must outlive them.
void AttachAlveoKernel(RegMemPort& port, const AlveoBuffers& b, const AlveoKernelSetup& setup, Clock& clock,
                       Function<void(Result<AlveoPipes>)> done);

}  // namespace vsl::hw
