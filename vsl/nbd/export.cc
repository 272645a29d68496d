#include "vsl/nbd/export.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace vsl::nbd {

namespace {
constexpr uint64_t kZeroChunk = 1 << 20;

void ZeroFrom(BlockExport& e, std::shared_ptr<const std::vector<uint8_t>> zeroes, uint64_t off, uint64_t left,
              bool fua, BlockExport::Done done) {
  const auto n = static_cast<uint32_t>(std::min(kZeroChunk, left));
  e.Write(off, n, zeroes->data(), fua && n == left,
          [&e, zeroes, off, n, left, fua, done = std::move(done)](Status s) mutable {
            if (!s.ok() || n == left) return done(s);
            ZeroFrom(e, std::move(zeroes), off + n, left - n, fua, std::move(done));
          });
}
}  // namespace

void WriteZeroes(BlockExport& e, uint64_t offset, uint64_t length, bool fua, BlockExport::Done done) {
  static const auto zeroes = std::make_shared<const std::vector<uint8_t>>(kZeroChunk);
  if (length == 0) return done(Status::Ok());
  ZeroFrom(e, zeroes, offset, length, fua, std::move(done));
}

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
