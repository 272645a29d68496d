#include "vsl/simcard/ecc.h"

#include <fmt/format.h>

#include "hls/bch.h"

namespace vsl::simcard {

CodewordSpan Codeword(const nand::Geometry& g, uint32_t index) {
  const uint32_t last = g.codewords_per_page() - 1;
  CodewordSpan s;
  s.msg_offset = index * g.ecc_codeword_bytes;
  s.msg_bytes = g.ecc_codeword_bytes + (index == last ? g.meta_bytes_per_page() : 0);
  s.parity_offset = g.page_data_bytes + g.meta_bytes_per_page() + index * g.ecc_parity_bytes;
  return s;
}

Status CheckBitExactGeometry(const nand::Geometry& g) {
  const int t = static_cast<int>(g.ecc_t);
  if (!vslhls::BchSupportedT(t)) {
    return Status::InvalidArgument(fmt::format("bit-exact ECC: the codec corrects t = 4, 8 or 16 bits, not {}", t));
  }
  if (g.ecc_parity_bytes != static_cast<uint32_t>(vslhls::BchParityBytes(t))) {
    return Status::InvalidArgument(fmt::format("bit-exact ECC: t = {} needs {} parity bytes per codeword, the geometry has {}",
                                               t, vslhls::BchParityBytes(t), g.ecc_parity_bytes));
  }
  if (g.ecc_parity_bytes * g.codewords_per_page() > g.page_spare_bytes) {
    return Status::InvalidArgument("bit-exact ECC: the parity does not fit in the spare area");
  }
  const uint32_t longest = g.ecc_codeword_bytes + g.meta_bytes_per_page();
  if (longest > static_cast<uint32_t>(vslhls::BchMaxMessageBytes(t))) {
    return Status::InvalidArgument(fmt::format("bit-exact ECC: a {} B codeword (sector and metadata) is longer than "
                                               "the {} B a t = {} BCH code over GF(2^13) protects",
                                               longest, vslhls::BchMaxMessageBytes(t), t));
  }
  return Status::Ok();
}

void EncodeSlot(const nand::Geometry& g, uint8_t* slot) {
  for (uint32_t i = 0; i < g.codewords_per_page(); ++i) {
    const CodewordSpan s = Codeword(g, i);
    vslhls::BchEncode(static_cast<int>(g.ecc_t), slot + s.msg_offset, static_cast<int>(s.msg_bytes),
                      slot + s.parity_offset);
  }
}

}  // namespace vsl::simcard
