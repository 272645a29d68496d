// The boards under the controller backends (vsl/backend/ctrl_backend.h).
#pragma once

#include <string>
#include <vector>

#include "vsl/backend/ctrl_backend.h"
#include "vsl/core/status.h"
#include "vsl/simcard/image.h"
#include "vsl/simcard/profile.h"

namespace vsl::backend {

// Whether this build has the co-simulated boards (verilator and SystemC were found).
bool HaveCosim();
// The co-simulated board of card `kind`:`dir` ("rtl" or "kernel"), made on first use and
// kept for the rest of the process; Busy for a second, different card.
Result<BoardHost*> CosimHost(const std::string& kind, const std::string& dir,
                             std::vector<simcard::ControllerImage*>& images, const simcard::Profile& profile);
// Alveo board `device` (an XRT index) with the vsl_kernel xclbin; NotFound with one clear
// line when XRT sees no device.
Result<BoardHost*> XrtBoard(const std::string& device, const std::string& xclbin, const simcard::Profile& profile);

}  // namespace vsl::backend
