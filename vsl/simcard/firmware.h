// Controller firmware images (docs/formats/firmware.md): a 128-byte header naming the
// version and the controller model it is for, with CRCs of itself and of the payload.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vsl/core/status.h"

namespace vsl::simcard {

#pragma pack(push, 1)
struct FirmwareHeader {
  char magic[8];          // "OVSLFW01"
  char version[32];       // NUL-padded, e.g. "1.1.0"
  char model[32];         // the controller model it runs on (ImageIdentity::model)
  uint64_t payload_bytes;
  uint32_t payload_crc;   // CRC32C of the payload
  uint32_t flags;         // zero
  uint8_t reserved[36];   // zero
  uint32_t header_crc;    // CRC32C of the header with this field zero
};
#pragma pack(pop)
static_assert(sizeof(FirmwareHeader) == 128, "FirmwareHeader size is part of the format");

// Builds an image (for tests and release tooling). InvalidArgument for a version or model
// that does not fit.
Result<std::vector<uint8_t>> BuildFirmware(const std::string& version, const std::string& model,
                                           const std::vector<uint8_t>& payload);
struct FirmwareInfo {
  std::string version, model;
  uint64_t payload_bytes = 0;
};
// Checks an image against the controller model `model`: Corruption for a damaged image
// (magic, size, either CRC), InvalidArgument for an image made for another model.
Result<FirmwareInfo> CheckFirmware(const std::vector<uint8_t>& image, const std::string& model);

}  // namespace vsl::simcard
