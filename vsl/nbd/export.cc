#include "vsl/nbd/export.h"

#include <cstring>

#include <fmt/format.h>

namespace vsl::nbd {

void MemoryExport::Read(uint64_t offset, uint32_t length, uint8_t* out, Done done) {
  std::memcpy(out, data_.data() + offset, length);
  done(Status::Ok());
}

void MemoryExport::Write(uint64_t offset, uint32_t length, const uint8_t* data, bool, Done done) {
  std::memcpy(data_.data() + offset, data, length);
  done(Status::Ok());
}

void MemoryExport::Trim(uint64_t offset, uint64_t length, Done done) {
  std::memset(data_.data() + offset, 0, length);
  done(Status::Ok());
}

std::vector<ExportInfo> StaticCatalog::List() {
  std::vector<ExportInfo> v;
  for (const Entry& e : entries_) v.push_back(e.info);
  return v;
}

Result<std::shared_ptr<BlockExport>> StaticCatalog::Open(const std::string& name) {
  for (const Entry& e : entries_) {
    if (name.empty() || e.info.name == name) return e.exp;
  }
  return Status::NotFound(fmt::format("no export named '{}'", name));
}

}  // namespace vsl::nbd
