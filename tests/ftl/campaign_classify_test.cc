// The failure classifier the fault campaigns count with (tests/testutil/campaign.h): each
// class from a sector built to be one.
#include <gtest/gtest.h>

#include "tests/testutil/campaign.h"
#include "vsl/core/random.h"

namespace vsl::testing {
namespace {

std::vector<uint8_t> Version(uint64_t lba, uint64_t v) {
  std::vector<uint8_t> d(4096);
  Rng(lba * 1000003 + v).Fill(d.data(), d.size());
  return d;
}

TEST(CampaignClassifyTest, EachClassFromASectorBuiltToBeOne) {
  const std::vector<uint8_t> zero(4096, 0);
  const auto v1 = Version(7, 1), v2 = Version(7, 2), v3 = Version(7, 3);
  const std::vector<std::vector<uint8_t>> allowed{v3}, older{zero, v1, v2};
  auto elsewhere = [](const std::vector<uint8_t>& got) { return got == Version(8, 5); };
  EXPECT_EQ(ClassifySector(v1, allowed, older, elsewhere), FailureClass::kUnserializable);
  EXPECT_EQ(ClassifySector(zero, allowed, older, elsewhere), FailureClass::kUnserializable);
  auto torn = v3;
  std::copy(v2.begin() + 2048, v2.end(), torn.begin() + 2048);
  EXPECT_EQ(ClassifySector(torn, allowed, older, elsewhere), FailureClass::kShornWrite);
  auto half_zero = v3;
  std::fill(half_zero.begin() + 512, half_zero.end(), 0);
  EXPECT_EQ(ClassifySector(half_zero, allowed, older, elsewhere), FailureClass::kShornWrite);
  EXPECT_EQ(ClassifySector(Version(8, 5), allowed, older, elsewhere), FailureClass::kFlyingWrite);
  auto flipped = v3;
  flipped[100] ^= 0x10;
  EXPECT_EQ(ClassifySector(flipped, allowed, older, elsewhere), FailureClass::kBitCorruption);
  EXPECT_EQ(ClassifySector(Version(99, 1), allowed, older, nullptr), FailureClass::kBitCorruption);
}

TEST(CampaignClassifyTest, CountsAppendOneJsonLine) {
  const std::string path = ::testing::TempDir() + "/campaign.jsonl";
  std::remove(path.c_str());
  setenv("VSL_CAMPAIGN_OUT", path.c_str(), 1);
  FailureCounts fc;
  fc.exposures["power_cuts"] = 3;
  fc.Add(FailureClass::kShornWrite);
  fc.Append("unit");
  unsetenv("VSL_CAMPAIGN_OUT");
  FILE* f = std::fopen(path.c_str(), "r");
  ASSERT_NE(f, nullptr);
  char buf[512] = {};
  ASSERT_NE(std::fgets(buf, sizeof(buf), f), nullptr);
  std::fclose(f);
  const std::string line(buf);
  EXPECT_NE(line.find("\"component\": \"unit\""), std::string::npos) << line;
  EXPECT_NE(line.find("\"power_cuts\": 3"), std::string::npos) << line;
  EXPECT_NE(line.find("\"shorn_writes\": 1"), std::string::npos) << line;
  EXPECT_NE(line.find("\"bit_corruption\": 0"), std::string::npos) << line;
  EXPECT_EQ(fc.total(), 1u);
}

}  // namespace
}  // namespace vsl::testing
