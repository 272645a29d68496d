// Failure classes of the power-fault literature (Zheng et al., "Understanding the
// robustness of SSDs under power fault", FAST '13), counted by the fault campaigns and
// reported by scripts/campaign (docs/campaign.md). Every count must be zero: a test that
// finds one also fails.
//
//   bit corruption       a sector holds bytes no write ever gave it
//   shorn write          a sector holds pieces (512 B) of different versions
//   flying write         a sector holds what was written to another address
//   unserializable write a sector holds an older version (or zeroes) after a newer one
//                        was acknowledged: the state matches no serial order of the
//                        acknowledged writes
//   metadata corruption  the device comes back but its metadata is refused or wrong
//                        (attach fails with Corruption, a checkpoint that cannot be read)
//   dead device          the device does not come back (attach fails otherwise, or it
//                        never settles)
//   read error           an acknowledged sector reads back as an error (not one of the
//                        five, counted beside them)
//
// A test run with VSL_CAMPAIGN_OUT=<file> appends one JSON object per line to it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace vsl::testing {

enum class FailureClass { kBitCorruption, kShornWrite, kFlyingWrite, kUnserializable, kMetadataCorruption, kDeadDevice, kReadError };

struct FailureCounts {
  std::map<std::string, uint64_t> exposures;  // what the campaign did (power cuts, kills, ...)
  uint64_t counts[7] = {};

  void Add(FailureClass c) { ++counts[static_cast<int>(c)]; }
  uint64_t total() const {
    uint64_t t = 0;
    for (uint64_t c : counts) t += c;
    return t;
  }
  // One JSON line for VSL_CAMPAIGN_OUT (nothing when it is unset).
  void Append(const std::string& component) const {
    const char* path = std::getenv("VSL_CAMPAIGN_OUT");
    if (path == nullptr || *path == 0) return;
    static const char* kNames[7] = {"bit_corruption", "shorn_writes", "flying_writes", "unserializable_writes",
                                    "metadata_corruption", "dead_device", "read_errors"};
    std::string line = "{\"component\": \"" + component + "\"";
    for (const auto& [k, v] : exposures) line += ", \"" + k + "\": " + std::to_string(v);
    for (int i = 0; i < 7; ++i) line += ", \"" + std::string(kNames[i]) + "\": " + std::to_string(counts[i]);
    line += "}\n";
    if (FILE* f = std::fopen(path, "a")) {
      std::fputs(line.c_str(), f);
      std::fclose(f);
    }
  }
};

// Classifies a sector that read `got` where one of `allowed` was due. `older` are the
// versions the sector held before (zeroes included when it was ever unwritten or
// trimmed); `elsewhere` says whether `got` is a version written to another sector.
inline FailureClass ClassifySector(const std::vector<uint8_t>& got, const std::vector<std::vector<uint8_t>>& allowed,
                                   const std::vector<std::vector<uint8_t>>& older,
                                   const std::function<bool(const std::vector<uint8_t>&)>& elsewhere) {
  for (const auto& o : older) {
    if (got == o) return FailureClass::kUnserializable;
  }
  // Every 512-byte piece from some version of this sector, but not all from one.
  constexpr std::size_t kPiece = 512;
  bool pieces = got.size() >= 2 * kPiece;
  for (std::size_t off = 0; pieces && off < got.size(); off += kPiece) {
    const std::size_t n = std::min(kPiece, got.size() - off);
    bool found = false;
    for (const auto* set : {&allowed, &older}) {
      for (const auto& v : *set) {
        if (v.size() == got.size() && std::equal(got.begin() + off, got.begin() + off + n, v.begin() + off)) found = true;
      }
    }
    pieces = found;
  }
  if (pieces) return FailureClass::kShornWrite;
  if (elsewhere && elsewhere(got)) return FailureClass::kFlyingWrite;
  return FailureClass::kBitCorruption;
}

}  // namespace vsl::testing
