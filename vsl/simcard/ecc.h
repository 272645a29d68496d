// The controller's ECC on a page slot, for the bit-exact mode (SimCardOptions::ecc).
//
// Slot layout (docs/formats/card-image.md): page data, then the host metadata
// (meta_bytes_per_page), then one parity field of ecc_parity_bytes per codeword, codeword
// 0 first; the rest of the spare, if any, is zero. Codeword i protects data bytes
// [i * cw, (i + 1) * cw); the last codeword also protects the metadata, which follows its
// data directly in the slot, so every codeword's message is one contiguous range.
#pragma once

#include <cstdint>

#include "vsl/core/status.h"
#include "vsl/nand/geometry.h"
#include "vsl/simcard/image_format.h"

namespace vsl::simcard {

struct CodewordSpan {
  uint32_t msg_offset, msg_bytes;  // the message (data, plus metadata on the last)
  uint32_t parity_offset;          // its parity field
};
CodewordSpan Codeword(const nand::Geometry& g, uint32_t index);

// OK if the codec (hls/bch.h) supports `g`'s ECC: t = 4, 8 or 16, ecc_parity_bytes =
// ceil(13t / 8), the last codeword's message within the code's length and the parity
// fields within the spare area. InvalidArgument naming what does not fit otherwise.
Status CheckBitExactGeometry(const nand::Geometry& g);

// Writes the parity of every codeword of the slot into its parity field.
void EncodeSlot(const nand::Geometry& g, uint8_t* slot);

// Keeps kBlockParity true to its meaning when `page` of the block has just been
// programmed, with (`parity`) or without its parity: the first page after an erase sets
// it or not, any later page without parity clears it.
inline void NoteProgrammed(format::BlockRecord& rec, uint32_t page, bool parity) {
  if (page == 0 && parity) {
    rec.flags |= format::kBlockParity;
  } else if (page == 0 || !parity) {
    rec.flags &= static_cast<uint8_t>(~format::kBlockParity);
  }
}

}  // namespace vsl::simcard
