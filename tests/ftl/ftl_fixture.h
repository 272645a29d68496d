// Test fixture: an FTL on pipe 0 of a simulated card, in virtual time, with synchronous
// wrappers and helpers for power cuts and reattach.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "vsl/core/clock.h"
#include "vsl/core/random.h"
#include "vsl/ftl/ftl.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::testing {

class FtlFixture : public ::testing::Test {
 protected:
  void MakeCard(const std::string& profile = "test-small", uint32_t blocks = 0) {
    auto p = simcard::FindProfile(profile);
    ASSERT_TRUE(p.ok());
    simcard::CreateOptions co;
    co.blocks_per_lun = blocks;
    ASSERT_TRUE(simcard::SimCard::Create(tmp_.Sub("card"), *p, co).ok());
    OpenCard();
  }
  void OpenCard() {
    TallyCard();
    auto c = simcard::SimCard::Open(tmp_.Sub("card"), clock_, card_opts_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    card_ = std::move(c).value();
  }
  Status Format(ftl::FormatOptions o = {}) {
    std::optional<Status> s;
    ftl::Ftl::Format(card_->pipe(0), clock_, o, [&](Status x) { s = x; });
    clock_.RunUntilTrue([&] { return s.has_value(); });
    return s.value_or(Status::Internal("format never finished"));
  }
  Status Attach(ftl::FtlOptions o = {}) {
    ftl_.reset();
    std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
    ftl::Ftl::Open(card_->pipe(0), clock_, o, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
    clock_.RunUntilTrue([&] { return r.has_value(); });
    if (!r.has_value()) return Status::Internal("open never finished");
    if (!r->ok()) return r->status();
    ftl_ = std::move(*r).value();
    return Status::Ok();
  }
  Status Sync(const std::function<void(ftl::Ftl::Done)>& op) {
    std::optional<Status> s;
    op([&](Status x) { s = x; });
    clock_.RunUntilTrue([&] { return s.has_value(); });
    return s.value_or(Status::Internal("never completed"));
  }
  Status Write(uint64_t lba, const std::vector<uint8_t>& data, bool fua = false) {
    const auto n = static_cast<uint32_t>(data.size() / ftl_->sector_bytes());
    return Sync([&](ftl::Ftl::Done d) { ftl_->Write(lba, n, data.data(), fua, std::move(d)); });
  }
  Status Read(uint64_t lba, uint32_t n, std::vector<uint8_t>* out) {
    out->assign(uint64_t{n} * ftl_->sector_bytes(), 0xAA);
    return Sync([&](ftl::Ftl::Done d) { ftl_->Read(lba, n, out->data(), std::move(d)); });
  }
  Status Trim(uint64_t lba, uint64_t n) {
    return Sync([&](ftl::Ftl::Done d) { ftl_->Trim(lba, n, std::move(d)); });
  }
  Status Shutdown() {
    Status s = Sync([&](ftl::Ftl::Done d) { ftl_->Shutdown(std::move(d)); });
    ftl_.reset();
    return s;
  }
  // Cuts power now, drops the host state, powers the card back on (a reopen).
  void PowerCycle() {
    card_->PowerCut();
    clock_.RunUntilIdle();
    TallyCard();
    ftl_.reset();
    card_.reset();
    OpenCard();
  }
  std::vector<uint8_t> Sector(uint64_t lba, uint64_t version, uint32_t n = 1) const {
    std::vector<uint8_t> v(uint64_t{n} * ftl_->sector_bytes());
    for (uint32_t i = 0; i < n; ++i) {
      Rng((lba + i) * 1000003 + version).Fill(v.data() + uint64_t{i} * ftl_->sector_bytes(),
                                               ftl_->sector_bytes());
    }
    return v;
  }

  // Adds the card's ECC counters (since it opened) to ecc_totals_: call it once per card
  // instance, just before the card goes (PowerCycle and OpenCard do).
  void TallyCard() {
    if (!card_) return;
    for (uint32_t p = 0; p < card_->pipe_count(); ++p) {
      const auto& st = card_->stats(p);
      ecc_totals_.ecc_codewords_decoded += st.ecc_codewords_decoded;
      ecc_totals_.corrected_bits += st.corrected_bits;
      ecc_totals_.uncorrectable_reads += st.uncorrectable_reads;
      ecc_totals_.miscorrected_reads += st.miscorrected_reads;
      ecc_totals_.copies += st.copies;
    }
  }

  TempDir tmp_;
  VirtualClock clock_{1};
  simcard::PipeStats ecc_totals_;  // ECC counters of every card instance so far (TallyCard)
  simcard::SimCardOptions card_opts_;
  std::unique_ptr<simcard::SimCard> card_;
  std::unique_ptr<ftl::Ftl> ftl_;
};

}  // namespace vsl::testing
