// Internal to the SDK: one request against a LUN.
#pragma once

#include "sdk/src/backend.h"
#include "vsl/card/card.h"

namespace vsl::sdk {

// Runs `op` against `lun`'s FTL and calls `done` once op->result (0, a count or -errno)
// and its outputs are set. Engine: call on the LUN's engine thread. A LUN that is not
// online answers -EIO.
void ExecuteOnLun(card::Lun& lun, Op* op, Function<void()> done);

}  // namespace vsl::sdk
