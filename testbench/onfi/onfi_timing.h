// The ONFI SDR timing tables live with the host (vsl/hw/onfi_timing.h), which programs
// a board's channels from them; the testbench uses them under its own namespace.
// C++17 (testbench).
#pragma once

#include "vsl/hw/onfi_timing.h"

namespace vsl::tb {
using hw::OnfiMode;
using hw::OnfiTiming;
using hw::RegsFor;
using hw::TimingRegs;
}  // namespace vsl::tb
