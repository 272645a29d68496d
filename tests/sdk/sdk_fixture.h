// Test fixture for the SDK: makes a simulated card with its LUNs formatted, in a
// temporary directory, closed again so an SDK (or vsld) can own it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "sdk/src/device.h"
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

// Opens LUN `lun` of the card in `dir` in-process on `clock` (waits run the clock);
// `*card` is the card, for power cuts. Returns vsl_open_card's result.
inline int OpenVirtual(const std::string& dir, uint32_t lun, VirtualClock& clock, uint64_t seed,
                       card::Card** card, vsl_dev** dev) {
  sdk::InProcessOptions o;
  o.clock = &clock;
  o.seed = seed;
  o.card_out = card;
  return sdk::OpenInProcess(dir, lun, o, dev);
}

// An atomic batch a crash test submits: its vectors, their buffers and, per sector, the
// version it writes (Pattern; 0 for a trim), and its answer (1 while there is none).
struct ModelBatch {
  std::vector<std::vector<uint8_t>> bufs;
  std::vector<vsl_vec> vecs;
  std::vector<std::pair<uint64_t, uint64_t>> sectors;
  int result = 1;

  // Adds a write of `n` sectors from `lba`, each a new version from ++*version.
  void Write(uint64_t lba, uint64_t n, uint64_t* version, uint32_t sb) {
    std::vector<uint8_t> buf;
    for (uint64_t k = 0; k < n; ++k) {
      auto p = Pattern(lba + k, ++*version, sb);
      buf.insert(buf.end(), p.begin(), p.end());
      sectors.emplace_back(lba + k, *version);
    }
    bufs.push_back(std::move(buf));  // moving keeps the bytes where earlier vectors point
    vecs.push_back({lba, n, bufs.back().data(), VSL_VEC_WRITE, 0});
  }
  void Trim(uint64_t lba, uint64_t n) {
    vecs.push_back({lba, n, nullptr, VSL_VEC_TRIM, 0});
    for (uint64_t k = 0; k < n; ++k) sectors.emplace_back(lba + k, 0);
  }
};

// Reads `b`'s sectors back after a crash: each must hold the batch's contents or, with
// `acked` (lba -> version, absent or 0: zeroes), what was acknowledged before. Counts
// them in *now and *old (sectors where the two are equal count for neither). Fails the
// test (fatally) on anything else; `where` names the round.
inline void CountNewAndOld(vsl_dev* dev, const ModelBatch& b, const std::map<uint64_t, uint64_t>& acked, uint32_t sb,
                           const std::string& where, uint64_t* now, uint64_t* old) {
  *now = *old = 0;
  std::vector<uint8_t> out(sb);
  for (const auto& [lba, v] : b.sectors) {
    ASSERT_EQ(vsl_read(dev, lba, 1, out.data()), 0) << where << " lba " << lba;
    const auto it = acked.find(lba);
    const uint64_t prev = it == acked.end() ? 0 : it->second;
    const auto want_new = v == 0 ? std::vector<uint8_t>(sb, 0) : Pattern(lba, v, sb);
    const auto want_old = prev == 0 ? std::vector<uint8_t>(sb, 0) : Pattern(lba, prev, sb);
    ASSERT_TRUE(out == want_new || out == want_old)
        << where << " lba " << lba << ": neither new version " << v << " nor old " << prev << " (read "
        << (out == std::vector<uint8_t>(sb, 0) ? "zeroes" : "other data") << "; batch answered " << b.result << ")";
    if (want_new == want_old) continue;
    *now += out == want_new;
    *old += out == want_old;
  }
}

}  // namespace vsl::testing
