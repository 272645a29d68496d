// Test fixture for the SDK: makes a simulated card with its LUNs formatted, in a
// temporary directory, closed again so an SDK (or vsld) can own it.
#pragma once

#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "vsl/card/card.h"
#include "vsl/core/random.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::testing {

inline void MakeFormattedCard(const std::string& dir, const std::string& profile, uint32_t blocks,
                              const ftl::FormatOptions& fo) {
  auto p = simcard::FindProfile(profile);
  ASSERT_TRUE(p.ok());
  simcard::CreateOptions co;
  co.blocks_per_lun = blocks;
  ASSERT_TRUE(simcard::SimCard::Create(dir, *p, co).ok());
  auto c = card::Card::Open(dir, {});
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  for (uint32_t k = 0; k < (*c)->controllers(); ++k) {
    ASSERT_TRUE((*c)->FormatController(k, card::PipeMode::kDual, fo).ok());
  }
}

// Deterministic contents of sector `lba` at `version`.
inline std::vector<uint8_t> Pattern(uint64_t lba, uint64_t version, uint32_t sb, uint32_t n = 1) {
  std::vector<uint8_t> v(uint64_t{n} * sb);
  for (uint32_t i = 0; i < n; ++i) Rng((lba + i) * 7919 + version).Fill(v.data() + uint64_t{i} * sb, sb);
  return v;
}

}  // namespace vsl::testing
