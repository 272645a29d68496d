// ONFI-style identification: READ ID bytes and the 256-byte parameter page.
//
// The parameter page layout follows ONFI (offsets below); only the fields this stack uses
// are filled, the rest are zero. A device returns at least three copies back to back; the
// host takes the first copy whose CRC-16 (polynomial 0x8005, initial 0x4F4E, over bytes
// 0..253, stored little-endian at 254) checks. Multi-byte fields are little-endian.
// Header shared with the testbench (the SystemC die model serves the same page): keep it
// C++17-clean.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "vsl/core/status.h"

namespace vsl::nand::onfi {

inline constexpr std::size_t kParamPageBytes = 256;
inline constexpr std::size_t kParamPageCopies = 3;
inline constexpr uint8_t kReadIdJedecAddr = 0x00;
inline constexpr uint8_t kReadIdOnfiAddr = 0x20;
inline constexpr std::array<uint8_t, 4> kOnfiSignature = {'O', 'N', 'F', 'I'};

// Byte offsets inside the parameter page.
namespace off {
inline constexpr std::size_t kSignature = 0;      // "ONFI"
inline constexpr std::size_t kRevision = 4;       // u16 bitfield of supported revisions
inline constexpr std::size_t kFeatures = 6;       // u16
inline constexpr std::size_t kManufacturer = 32;  // 12 ASCII, space padded
inline constexpr std::size_t kModel = 44;         // 20 ASCII, space padded
inline constexpr std::size_t kJedecId = 64;       // u8
inline constexpr std::size_t kDataBytesPerPage = 80;   // u32
inline constexpr std::size_t kSpareBytesPerPage = 84;  // u16
inline constexpr std::size_t kPagesPerBlock = 92;      // u32
inline constexpr std::size_t kBlocksPerLun = 96;       // u32
inline constexpr std::size_t kLunsPerTarget = 100;     // u8
inline constexpr std::size_t kAddressCycles = 101;     // u8: [3:0] row, [7:4] column
inline constexpr std::size_t kBitsPerCell = 102;       // u8
inline constexpr std::size_t kMaxBadBlocksPerLun = 103;  // u16
inline constexpr std::size_t kEndurance = 105;  // u8 value, u8 decimal exponent
inline constexpr std::size_t kPlaneAddressBits = 110;  // u8
inline constexpr std::size_t kEccBits = 112;           // u8, bits per 512 B
inline constexpr std::size_t kSdrTimingModes = 129;    // u16 bitfield
inline constexpr std::size_t kTprogMaxUs = 133;        // u16
inline constexpr std::size_t kTbersMaxUs = 135;        // u16
inline constexpr std::size_t kTrMaxUs = 137;           // u16
inline constexpr std::size_t kTccsMinNs = 139;         // u16
inline constexpr std::size_t kCrc = 254;               // u16
}  // namespace off

// What a parameter page says about one LUN's target.
struct ParameterPage {
  std::string manufacturer;  // up to 12 chars
  std::string model;         // up to 20 chars
  uint8_t jedec_id = 0;
  uint32_t data_bytes_per_page = 0;
  uint16_t spare_bytes_per_page = 0;
  uint32_t pages_per_block = 0;
  uint32_t blocks_per_lun = 0;
  uint8_t luns_per_target = 0;
  uint8_t row_address_cycles = 3;
  uint8_t column_address_cycles = 2;
  uint8_t bits_per_cell = 1;
  uint16_t max_bad_blocks_per_lun = 0;
  uint64_t endurance_cycles = 0;  // encoded as value x 10^exp, rounded down to 2 digits
  uint8_t planes = 1;             // a power of two
  uint8_t ecc_bits = 0;
  uint16_t sdr_timing_modes = 0x003F;  // modes 0..5
  uint16_t tprog_max_us = 0;
  uint16_t tbers_max_us = 0;
  uint16_t tr_max_us = 0;
  uint16_t tccs_min_ns = 500;
};
bool operator==(const ParameterPage& a, const ParameterPage& b);
inline bool operator!=(const ParameterPage& a, const ParameterPage& b) { return !(a == b); }

using PageBytes = std::array<uint8_t, kParamPageBytes>;

// Serializes `p` with its CRC.
PageBytes Encode(const ParameterPage& p);
// Decodes one copy; Corruption if the signature or CRC is wrong.
Result<ParameterPage> DecodeOne(const uint8_t* page);
// Decodes the first good copy among `copies` back-to-back pages; Corruption naming every
// copy's fault when none is good. `*copy_used` (optional) receives the index taken.
Result<ParameterPage> Decode(const uint8_t* pages, std::size_t copies,
                             std::size_t* copy_used = nullptr);

// The READ ID answer at address 00h: JEDEC manufacturer ID, device ID, then 3 more bytes.
std::array<uint8_t, 5> JedecIdBytes(uint8_t jedec_id, uint8_t device_id);

}  // namespace vsl::nand::onfi
