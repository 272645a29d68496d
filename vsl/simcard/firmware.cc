#include "vsl/simcard/firmware.h"

#include <cstring>

#include <fmt/format.h>

#include "vsl/core/crc.h"

namespace vsl::simcard {
namespace {
constexpr char kFwMagic[8] = {'O', 'V', 'S', 'L', 'F', 'W', '0', '1'};

std::string Field(const char* p, std::size_t n) { return std::string(p, strnlen(p, n)); }
}  // namespace

Result<std::vector<uint8_t>> BuildFirmware(const std::string& version, const std::string& model,
                                           const std::vector<uint8_t>& payload) {
  FirmwareHeader h{};
  if (version.empty() || version.size() >= sizeof(h.version) || model.empty() || model.size() >= sizeof(h.model)) {
    return Status::InvalidArgument("firmware version and model must be 1 to 31 characters");
  }
  std::memcpy(h.magic, kFwMagic, sizeof(h.magic));
  std::memcpy(h.version, version.data(), version.size());
  std::memcpy(h.model, model.data(), model.size());
  h.payload_bytes = payload.size();
  h.payload_crc = Crc32c(payload.data(), payload.size());
  h.header_crc = Crc32c(&h, sizeof(h));
  std::vector<uint8_t> out(sizeof(h));
  std::memcpy(out.data(), &h, sizeof(h));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Result<FirmwareInfo> CheckFirmware(const std::vector<uint8_t>& image, const std::string& model) {
  FirmwareHeader h;
  if (image.size() < sizeof(h)) {
    return Status::Corruption(fmt::format("{} bytes is too short for a firmware image", image.size()));
  }
  std::memcpy(&h, image.data(), sizeof(h));
  if (std::memcmp(h.magic, kFwMagic, sizeof(h.magic)) != 0) {
    return Status::Corruption("not an OpenVSL controller firmware image (bad magic)");
  }
  const uint32_t want = h.header_crc;
  h.header_crc = 0;
  if (Crc32c(&h, sizeof(h)) != want) return Status::Corruption("firmware image header is damaged (CRC)");
  if (h.payload_bytes != image.size() - sizeof(h)) {
    return Status::Corruption(fmt::format("firmware image is truncated or extended: header says {} payload bytes, "
                                          "the file has {}",
                                          h.payload_bytes, image.size() - sizeof(h)));
  }
  if (Crc32c(image.data() + sizeof(h), h.payload_bytes) != h.payload_crc) {
    return Status::Corruption("firmware image payload is damaged (CRC)");
  }
  FirmwareInfo info{Field(h.version, sizeof(h.version)), Field(h.model, sizeof(h.model)), h.payload_bytes};
  if (info.model != model) {
    return Status::InvalidArgument(
        fmt::format("firmware image is for controller model {}, this controller is {}", info.model, model));
  }
  return info;
}

}  // namespace vsl::simcard
