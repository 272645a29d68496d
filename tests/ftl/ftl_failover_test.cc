// Failover of a pipe between two hosts at the FTL level (docs/raw-flash-contract.md,
// "Ownership"): host A's FTL writes through its port; host B force-claims the pipe in the
// middle of A's writes and attaches its own FTL from flash. Every write A had
// acknowledged is there for B; A, fenced, fails what it had not acknowledged and stops;
// nothing A submits afterwards reaches the flash.
#include <cstdio>
#include <map>
#include <set>

#include "tests/ftl/ftl_fixture.h"

namespace vsl::testing {
namespace {

class FtlFailoverTest : public FtlFixture, public ::testing::WithParamInterface<int> {
 protected:
  Result<std::unique_ptr<ftl::Ftl>> OpenOn(nand::FlashPipe& port) {
    std::optional<Result<std::unique_ptr<ftl::Ftl>>> r;
    ftl::Ftl::Open(port, clock_, {}, [&](Result<std::unique_ptr<ftl::Ftl>> x) { r = std::move(x); });
    clock_.RunUntilTrue([&] { return r.has_value(); });
    if (!r.has_value()) return Status::Internal("open never finished");
    return std::move(*r);
  }
};

// The claim lands after GetParam() tenths of A's writes were answered.
TEST_P(FtlFailoverTest, TheNewOwnerFindsEveryAcknowledgedWriteAndTheOldOneIsFenced) {
  MakeCard();
  ASSERT_TRUE(Format().ok());
  auto a = card_->NewPort(0);
  auto b = card_->NewPort(0);
  ASSERT_TRUE(a->Claim(1, false, 10 * kSec).granted);
  auto fa = OpenOn(*a);
  ASSERT_TRUE(fa.ok()) << fa.status().ToString();
  ftl_ = std::move(fa).value();
  const uint32_t sb = ftl_->sector_bytes();
  // A writes distinct sectors, a few at a time, and keeps writing when B takes over.
  const uint64_t kSectors = ftl_->sectors() * 3 / 4;
  ASSERT_GE(kSectors, 400u);
  std::vector<std::vector<uint8_t>> data(kSectors);
  std::map<uint64_t, Status> answers;
  std::set<uint64_t> after_claim;
  bool claimed = false;
  uint64_t next = 0;
  std::function<void()> issue = [&] {
    while (next < kSectors && next < answers.size() + 32) {
      const uint64_t lba = next++;
      data[lba] = Sector(lba, 1);
      if (claimed) after_claim.insert(lba);
      ftl_->Write(lba, 1, data[lba].data(), lba % 7 == 0, [&, lba](Status s) {
        answers.emplace(lba, s);
        issue();
      });
    }
  };
  issue();
  ASSERT_TRUE(clock_.RunUntilTrue([&] { return answers.size() >= kSectors * GetParam() / 10; }));
  for (const auto& [lba, s] : answers) ASSERT_TRUE(s.ok()) << lba << ": " << s.ToString();
  const nand::ClaimReply rb = b->Claim(2, true, 10 * kSec);
  ASSERT_TRUE(rb.granted);
  claimed = true;
  clock_.RunUntilIdle();
  for (uint64_t l = 0; l < next; ++l) {
    if (answers.count(l) == 0) ADD_FAILURE() << "write " << l << " never answered" << (after_claim.count(l) ? " (issued after the claim)" : "");
  }
  ASSERT_EQ(answers.size(), next) << "every write A issued is answered";
  uint64_t acked = 0, failed = 0;
  for (const auto& [lba, s] : answers) (s.ok() ? acked : failed)++;
  EXPECT_GE(acked, kSectors * GetParam() / 10);
  EXPECT_GT(failed, 0u);  // A is fenced: what was not yet accepted fails
  for (uint64_t lba : after_claim) EXPECT_FALSE(answers.at(lba).ok()) << lba;
  // A's FTL is done for: a new write fails at once.
  EXPECT_FALSE(Write(kSectors + 1, Sector(kSectors + 1, 1)).ok());
  ftl_.reset();
  // B attaches from flash (a scan: A never wrote a clean checkpoint) and finds every
  // acknowledged sector; an unacknowledged one holds its data or nothing, and nothing A
  // wrote after the claim.
  auto fb = OpenOn(*b);
  ASSERT_TRUE(fb.ok()) << fb.status().ToString();
  ftl_ = std::move(fb).value();
  EXPECT_FALSE(ftl_->attach_info().from_checkpoint);
  std::vector<uint8_t> got;
  uint64_t present_unacked = 0;
  for (const auto& [lba, s] : answers) {
    ASSERT_TRUE(Read(lba, 1, &got).ok()) << lba;
    if (s.ok()) {
      ASSERT_EQ(got, data[lba]) << "acknowledged sector " << lba << " lost";
    } else if (got == data[lba]) {
      ++present_unacked;
      EXPECT_EQ(after_claim.count(lba), 0u) << "sector " << lba << " written after the claim reached flash";
    } else {
      EXPECT_EQ(got, std::vector<uint8_t>(sb, 0)) << lba;
    }
  }
  // B serves on: it writes and reads back.
  ASSERT_TRUE(Write(5, Sector(5, 2)).ok());
  ASSERT_TRUE(Read(5, 1, &got).ok());
  EXPECT_EQ(got, Sector(5, 2));
  EXPECT_GT(card_->stats(0).fenced, 0u);
  std::printf("claim after %d/10: %llu acknowledged, %llu failed (%llu of those on flash all the same), "
              "%llu commands fenced\n", GetParam(), static_cast<unsigned long long>(acked),
              static_cast<unsigned long long>(failed), static_cast<unsigned long long>(present_unacked),
              static_cast<unsigned long long>(card_->stats(0).fenced));
}

INSTANTIATE_TEST_SUITE_P(ClaimPoints, FtlFailoverTest, ::testing::Values(1, 3, 5, 7, 9));

}  // namespace
}  // namespace vsl::testing
