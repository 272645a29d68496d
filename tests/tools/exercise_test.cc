// The raw-flash exercise behind `vslflash exercise` (the main job).
#include "tools/vslflash/exercise.h"

#include <gtest/gtest.h>

#include "tests/testutil/temp_dir.h"

namespace vsl::tools {
namespace {

struct CardRun {
  testing::TempDir tmp;
  VirtualClock clock{1};
  std::unique_ptr<simcard::SimCard> card;
  std::function<bool(std::function<bool()>)> drive = [this](std::function<bool()> p) {
    return clock.RunUntilTrue(p);
  };
  explicit CardRun(const std::string& profile, uint32_t blocks = 0) {
    simcard::CreateOptions o;
    o.blocks_per_lun = blocks;
    o.seed = 3;
    EXPECT_TRUE(simcard::SimCard::Create(tmp.Sub("c"), *simcard::FindProfile(profile), o).ok());
    card = std::move(simcard::SimCard::Open(tmp.Sub("c"), clock).value());
  }
};

TEST(ExerciseTest, VerifiesEveryDieAndFindsExactlyTheMarkedBadBlocks) {
  CardRun r("duo-slc-small", 16);
  std::vector<std::string> phases;
  ExerciseOptions o;
  o.pages_per_die = 4;
  auto rep = RunExercise(*r.card, r.clock, r.drive, o, [&](const std::string& ph, double f) {
    if (f == 0.0) phases.push_back(ph);
  });
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_TRUE(rep->ok());
  EXPECT_EQ(rep->pipes.size(), 4u);
  EXPECT_EQ(rep->dies_exercised, 96u);
  EXPECT_EQ(rep->pages_verified, 96u * 4);
  EXPECT_EQ(rep->mismatches, 0u);
  EXPECT_EQ(rep->bad_blocks_found, rep->bad_blocks_truth);
  EXPECT_EQ(phases, (std::vector<std::string>{"scan", "write+verify"}));
  EXPECT_GT(rep->elapsed_ns, 0u);
}

TEST(ExerciseTest, DeadDieIsSkippedNotFatal) {
  CardRun r("test-small");
  r.card->InjectDieFailure(1, 2);
  auto rep = RunExercise(*r.card, r.clock, r.drive, {}, nullptr);
  ASSERT_TRUE(rep.ok()) << rep.status().ToString();
  EXPECT_EQ(rep->dies_skipped, 1u);
  EXPECT_EQ(rep->dies_exercised, 7u);  // test-small: 2 pipes x 4 dies
  EXPECT_TRUE(rep->ok());
}

TEST(ExerciseTest, RepeatedRunsSpreadWearOverBlocks) {
  CardRun r("test-small");
  ExerciseOptions o;
  o.scan_bad_blocks = false;
  ASSERT_TRUE(RunExercise(*r.card, r.clock, r.drive, o, nullptr).ok());
  r.card.reset();
  r.card = std::move(simcard::SimCard::Open(r.tmp.Sub("c"), r.clock).value());
  ASSERT_TRUE(RunExercise(*r.card, r.clock, r.drive, o, nullptr).ok());
  const auto h = r.card->Health(0);
  EXPECT_EQ(h.max_erase_count, 2u) << "each run erases its block twice, on another block";
}

}  // namespace
}  // namespace vsl::tools
