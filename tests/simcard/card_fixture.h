// Test fixture: a simulated card in a temporary directory on a VirtualClock, with
// synchronous wrappers that run virtual time until a command completes.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::testing {

using nand::Completion;
using nand::FlashStatus;
using nand::Ppa;

class CardFixture : public ::testing::Test {
 protected:
  void Make(const std::string& profile_name, simcard::CreateOptions copts = {},
            simcard::SimCardOptions sopts = {}) {
    auto p = simcard::FindProfile(profile_name);
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    profile_ = p.value();
    ASSERT_TRUE(simcard::SimCard::Create(dir(), profile_, copts).ok());
    sopts_ = sopts;
    Reopen();
  }
  void Reopen() {
    card_.reset();
    auto c = simcard::SimCard::Open(dir(), clock_, sopts_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    card_ = std::move(c).value();
  }
  std::string dir() const { return tmp_.Sub("card"); }
  const nand::Geometry& g() const { return card_->geometry(); }
  nand::FlashPipe& pipe(uint32_t i = 0) { return card_->pipe(i); }
  uint32_t page_bytes() const { return g().page_data_bytes; }
  uint32_t meta_bytes() const { return g().meta_bytes_per_page(); }

  // Runs virtual time until `*flag` is set; fails the test if the clock goes idle first.
  void RunUntil(const std::optional<Completion>& c) {
    ASSERT_TRUE(clock_.RunUntilTrue([&] { return c.has_value(); }))
        << "command never completed";
  }
  Completion Erase(uint32_t p, uint32_t die, uint32_t block) {
    std::optional<Completion> c;
    pipe(p).Erase(die, block, [&](const Completion& x) { c = x; });
    RunUntil(c);
    return c.value_or(Completion{FlashStatus::kAborted});
  }
  Completion Program(uint32_t p, Ppa ppa, const std::vector<uint8_t>& data,
                     const std::vector<uint8_t>* meta = nullptr,
                     std::optional<Completion>* accepted = nullptr) {
    std::optional<Completion> c, acc;
    nand::ProgramRequest req{ppa, data.data(), meta ? meta->data() : nullptr};
    pipe(p).Program(req, [&](const Completion& x) { acc = x; },
                    [&](const Completion& x) { c = x; });
    RunUntil(c);
    if (accepted) *accepted = acc;
    return c.value_or(Completion{FlashStatus::kAborted});
  }
  Completion Read(uint32_t p, Ppa ppa, std::vector<uint8_t>* data,
                  std::vector<uint8_t>* meta = nullptr, uint32_t first = 0,
                  uint32_t count = 0) {
    std::optional<Completion> c;
    const uint32_t n = count == 0 ? g().codewords_per_page() - first : count;
    if (data) data->assign(uint64_t{n} * g().ecc_codeword_bytes, 0);
    if (meta) meta->assign(meta_bytes(), 0);
    nand::ReadRequest req{ppa, first, count, data ? data->data() : nullptr,
                          meta ? meta->data() : nullptr};
    pipe(p).Read(req, [&](const Completion& x) { c = x; });
    RunUntil(c);
    return c.value_or(Completion{FlashStatus::kAborted});
  }
  std::vector<uint8_t> Pattern(uint64_t seed, uint32_t bytes) const {
    std::vector<uint8_t> v(bytes);
    Rng(seed).Fill(v.data(), bytes);
    return v;
  }
  std::vector<uint8_t> Meta(uint64_t seed) const {
    auto m = Pattern(seed ^ 0xABCDEF, meta_bytes());
    m[0] = 0xFF;  // bad-block marker position stays 0xFF
    return m;
  }
  // First block >= `from` of `die` that is not factory bad.
  uint32_t GoodBlock(uint32_t p, uint32_t die, uint32_t from = 0) {
    for (uint32_t b = from; b < g().blocks_per_lun; ++b) {
      if (!card_->block_info(p, die, b).factory_bad) return b;
    }
    ADD_FAILURE() << "no good block";
    return 0;
  }

  TempDir tmp_;
  VirtualClock clock_{1};
  simcard::Profile profile_;
  simcard::SimCardOptions sopts_;
  std::unique_ptr<simcard::SimCard> card_;
};

}  // namespace vsl::testing
