// PsaLayout (vsl/ftl/psa.h): the packing is part of the on-flash format.
#include <gtest/gtest.h>

#include "vsl/ftl/psa.h"

namespace vsl::ftl {
namespace {

TEST(PsaLayoutTest, PacksAndUnpacksEveryField) {
  const PsaLayout a(24, 128, 2);  // duo-slc, 4 KiB sectors
  EXPECT_EQ(a.slots_per_leb(), 24u * 128 * 2);
  for (uint32_t leb : {0u, 1u, 16383u}) {
    for (uint32_t die : {0u, 23u}) {
      for (uint32_t page : {0u, 127u}) {
        for (uint32_t slot : {0u, 1u}) {
          const Psa p = a.Make(leb, die, page, slot);
          EXPECT_EQ(a.LebOf(p), leb);
          EXPECT_EQ(a.DieOf(p), die);
          EXPECT_EQ(a.PageOf(p), page);
          EXPECT_EQ(a.SlotOf(p), slot);
          EXPECT_EQ(a.SlotInLeb(p), (die * 128 + page) * 2 + slot);
        }
      }
    }
  }
  // Fixed by the format (docs/formats/ftl.md): ((leb * dies + die) * pages + page) * spp + slot.
  EXPECT_EQ(a.Make(3, 5, 7, 1), ((3u * 24 + 5) * 128 + 7) * 2 + 1);
  EXPECT_LT(a.End(16384) - 1, uint64_t{kUnmapped});  // the largest PSA is not the unmapped mark
}

}  // namespace
}  // namespace vsl::ftl
