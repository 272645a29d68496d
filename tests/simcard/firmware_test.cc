// Controller firmware images: built, checked (damage, truncation, another model), loaded
// into a simulated controller only once checked, and kept across reopen.
#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"
#include "vsl/core/clock.h"
#include "vsl/simcard/firmware.h"
#include "vsl/simcard/sim_card.h"

namespace vsl::testing {
namespace {

TEST(FirmwareTest, CheckedBeforeLoadingAndKeptAcrossReopen) {
  TempDir tmp;
  auto p = simcard::FindProfile("test-small");
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(simcard::SimCard::Create(tmp.Sub("c"), *p, {}).ok());
  VirtualClock clock(1);
  auto card = simcard::SimCard::Open(tmp.Sub("c"), clock).value();
  const std::string model = card->image(0).identity().model;
  const std::string shipped = card->firmware_version(0);
  std::vector<uint8_t> payload(3000);
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<uint8_t>(i * 7);
  auto good = simcard::BuildFirmware("2.0.1", model, payload).value();
  EXPECT_TRUE(simcard::CheckFirmware(good, model).ok());

  auto bad = good;
  bad[500] ^= 1;
  EXPECT_EQ(card->UpdateFirmware(0, bad).code(), StatusCode::kCorruption) << "payload CRC";
  bad = good;
  bad[10] ^= 1;
  EXPECT_EQ(card->UpdateFirmware(0, bad).code(), StatusCode::kCorruption) << "header CRC";
  bad = good;
  bad.pop_back();
  EXPECT_EQ(card->UpdateFirmware(0, bad).code(), StatusCode::kCorruption) << "truncated";
  EXPECT_EQ(card->UpdateFirmware(0, {1, 2, 3}).code(), StatusCode::kCorruption) << "too short";
  auto other = simcard::BuildFirmware("2.0.1", "SOMETHING-ELSE", payload).value();
  EXPECT_EQ(card->UpdateFirmware(0, other).code(), StatusCode::kInvalidArgument) << "another model";
  EXPECT_FALSE(simcard::BuildFirmware(std::string(40, 'v'), model, payload).ok());
  EXPECT_EQ(card->firmware_version(0), shipped) << "nothing changed by refused images";

  ASSERT_TRUE(card->UpdateFirmware(0, good).ok());
  EXPECT_EQ(card->firmware_version(0), "2.0.1");
  EXPECT_EQ(card->Health(0).firmware_version, "2.0.1");
  card.reset();
  card = simcard::SimCard::Open(tmp.Sub("c"), clock).value();
  EXPECT_EQ(card->firmware_version(0), "2.0.1");
}

}  // namespace
}  // namespace vsl::testing
