// Internal to the SDK: one request against a LUN.
#pragma once

#include "sdk/src/backend.h"
#include "vsl/card/card.h"

namespace vsl::sdk {

// Runs `op` against `lun`'s FTL and calls `op->done` exactly once, when op->result (0, a
// count or -errno) and its outputs are set; `done` is moved out of the op before it runs,
// so it may free or reuse the op. Engine: call on the LUN's engine thread. A LUN that is
// not online answers -EIO.
void ExecuteOnLun(card::Lun& lun, Op* op);
// The capabilities of an attached LUN, as the SDK reports them. Any thread but the
// LUN's engine. FailedPrecondition when the LUN is not attached.
Status LunCaps(card::Lun& lun, vsl_caps* caps);
// Requests larger than this are refused (-EINVAL); a caller splits them.
inline constexpr uint32_t kMaxIoBytes = 32u << 20;

}  // namespace vsl::sdk
