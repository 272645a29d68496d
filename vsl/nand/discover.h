// Attach-time discovery of a pipe's geometry, as a host driver does it: READ ID at 20h
// must answer "ONFI" and the parameter page (first of its copies whose CRC checks) gives
// the page format; the controller's registers (PipeTopology) give the channel and LUN
// counts and the ECC. All dies must agree. A die that does not answer is reported (it
// is dead) but does not stop the attach while another die answers.
#pragma once

#include <memory>
#include <vector>

#include "vsl/core/function.h"
#include "vsl/core/status.h"
#include "vsl/nand/flash.h"
#include "vsl/nand/onfi.h"

namespace vsl::nand {

struct DiscoveredPipe {
  Geometry geometry;
  onfi::ParameterPage param;
  std::vector<uint32_t> silent_dies;          // dies that timed out
  std::vector<uint32_t> dies_on_backup_copy;  // dies whose first parameter page copy was bad
};

// Runs on the pipe's engine; `done` is called once, with the result or the reason it
// failed (Corruption: no valid parameter page or dies disagree; IOError: no die answered
// or READ ID is not ONFI).
void DiscoverPipe(FlashPipe& pipe, Function<void(Result<DiscoveredPipe>)> done);

}  // namespace vsl::nand
