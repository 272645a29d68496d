#include "vsl/nand/onfi.h"

#include <cstring>

#include <fmt/format.h>

#include "vsl/core/crc.h"

namespace vsl::nand::onfi {
namespace {

void Put16(uint8_t* p, std::size_t at, uint16_t v) {
  p[at] = static_cast<uint8_t>(v);
  p[at + 1] = static_cast<uint8_t>(v >> 8);
}
void Put32(uint8_t* p, std::size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[at + i] = static_cast<uint8_t>(v >> (8 * i));
}
uint16_t Get16(const uint8_t* p, std::size_t at) {
  return static_cast<uint16_t>(p[at] | (p[at + 1] << 8));
}
uint32_t Get32(const uint8_t* p, std::size_t at) {
  return uint32_t{p[at]} | uint32_t{p[at + 1]} << 8 | uint32_t{p[at + 2]} << 16 |
         uint32_t{p[at + 3]} << 24;
}
void PutText(uint8_t* p, std::size_t at, std::size_t width, const std::string& s) {
  for (std::size_t i = 0; i < width; ++i) {
    p[at + i] = i < s.size() ? static_cast<uint8_t>(s[i]) : ' ';
  }
}
std::string GetText(const uint8_t* p, std::size_t at, std::size_t width) {
  std::string s(reinterpret_cast<const char*>(p + at), width);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\0')) s.pop_back();
  return s;
}

}  // namespace

bool operator==(const ParameterPage& a, const ParameterPage& b) {
  // Equal when they encode to the same bytes: the page is the source of truth.
  return Encode(a) == Encode(b);
}

PageBytes Encode(const ParameterPage& pp) {
  PageBytes b{};
  uint8_t* p = b.data();
  std::memcpy(p + off::kSignature, kOnfiSignature.data(), 4);
  Put16(p, off::kRevision, 0x007E);  // ONFI 1.0 .. 3.0
  Put16(p, off::kFeatures, 0x0008);  // multiple LUN operations
  PutText(p, off::kManufacturer, 12, pp.manufacturer);
  PutText(p, off::kModel, 20, pp.model);
  p[off::kJedecId] = pp.jedec_id;
  Put32(p, off::kDataBytesPerPage, pp.data_bytes_per_page);
  Put16(p, off::kSpareBytesPerPage, pp.spare_bytes_per_page);
  Put32(p, off::kPagesPerBlock, pp.pages_per_block);
  Put32(p, off::kBlocksPerLun, pp.blocks_per_lun);
  p[off::kLunsPerTarget] = pp.luns_per_target;
  p[off::kAddressCycles] =
      static_cast<uint8_t>((pp.column_address_cycles << 4) | (pp.row_address_cycles & 0xF));
  p[off::kBitsPerCell] = pp.bits_per_cell;
  Put16(p, off::kMaxBadBlocksPerLun, pp.max_bad_blocks_per_lun);
  uint64_t value = pp.endurance_cycles;
  uint8_t exp = 0;
  while (value > 255) {
    value /= 10;
    ++exp;
  }
  p[off::kEndurance] = static_cast<uint8_t>(value);
  p[off::kEndurance + 1] = exp;
  uint8_t plane_bits = 0;
  while ((1u << plane_bits) < pp.planes) ++plane_bits;
  p[off::kPlaneAddressBits] = plane_bits;
  p[off::kEccBits] = pp.ecc_bits;
  Put16(p, off::kSdrTimingModes, pp.sdr_timing_modes);
  Put16(p, off::kTprogMaxUs, pp.tprog_max_us);
  Put16(p, off::kTbersMaxUs, pp.tbers_max_us);
  Put16(p, off::kTrMaxUs, pp.tr_max_us);
  Put16(p, off::kTccsMinNs, pp.tccs_min_ns);
  Put16(p, off::kCrc, Crc16Onfi(p, off::kCrc));
  return b;
}

Result<ParameterPage> DecodeOne(const uint8_t* p) {
  if (std::memcmp(p + off::kSignature, kOnfiSignature.data(), 4) != 0) {
    return Status::Corruption("parameter page: no \"ONFI\" signature");
  }
  const uint16_t want = Get16(p, off::kCrc);
  const uint16_t got = Crc16Onfi(p, off::kCrc);
  if (want != got) {
    return Status::Corruption(
        fmt::format("parameter page: CRC-16 mismatch (stored {:04x}, computed {:04x})", want, got));
  }
  ParameterPage pp;
  pp.manufacturer = GetText(p, off::kManufacturer, 12);
  pp.model = GetText(p, off::kModel, 20);
  pp.jedec_id = p[off::kJedecId];
  pp.data_bytes_per_page = Get32(p, off::kDataBytesPerPage);
  pp.spare_bytes_per_page = Get16(p, off::kSpareBytesPerPage);
  pp.pages_per_block = Get32(p, off::kPagesPerBlock);
  pp.blocks_per_lun = Get32(p, off::kBlocksPerLun);
  pp.luns_per_target = p[off::kLunsPerTarget];
  pp.row_address_cycles = p[off::kAddressCycles] & 0xF;
  pp.column_address_cycles = p[off::kAddressCycles] >> 4;
  pp.bits_per_cell = p[off::kBitsPerCell];
  pp.max_bad_blocks_per_lun = Get16(p, off::kMaxBadBlocksPerLun);
  pp.endurance_cycles = p[off::kEndurance];
  for (int i = 0; i < p[off::kEndurance + 1] && i < 19; ++i) pp.endurance_cycles *= 10;
  if (p[off::kPlaneAddressBits] > 7) {
    return Status::Corruption("parameter page: plane address bits out of range");
  }
  pp.planes = static_cast<uint8_t>(1u << p[off::kPlaneAddressBits]);
  pp.ecc_bits = p[off::kEccBits];
  pp.sdr_timing_modes = Get16(p, off::kSdrTimingModes);
  pp.tprog_max_us = Get16(p, off::kTprogMaxUs);
  pp.tbers_max_us = Get16(p, off::kTbersMaxUs);
  pp.tr_max_us = Get16(p, off::kTrMaxUs);
  pp.tccs_min_ns = Get16(p, off::kTccsMinNs);
  return pp;
}

Result<ParameterPage> Decode(const uint8_t* pages, std::size_t copies, std::size_t* copy_used) {
  std::string faults;
  for (std::size_t i = 0; i < copies; ++i) {
    auto r = DecodeOne(pages + i * kParamPageBytes);
    if (r.ok()) {
      if (copy_used != nullptr) *copy_used = i;
      return r;
    }
    faults += fmt::format("{}copy {}: {}", i == 0 ? "" : "; ", i, r.status().message());
  }
  return Status::Corruption(
      fmt::format("no valid parameter page among {} copies ({})", copies, faults));
}

std::array<uint8_t, 5> JedecIdBytes(uint8_t jedec_id, uint8_t device_id) {
  return {jedec_id, device_id, 0x00, 0x95, 0x00};
}

}  // namespace vsl::nand::onfi
