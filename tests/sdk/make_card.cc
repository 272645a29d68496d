// Test helper: make_card DIR [PROFILE [BLOCKS]] creates a simulated card in DIR with every
// controller formatted in dual-pipe mode (for tests that drive the SDK from outside C++).
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tests/testutil/sim_of.h"
#include "vsl/card/card.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: make_card DIR [PROFILE [BLOCKS]]\n");
    return 2;
  }
  const std::string dir = argv[1];
  auto p = vsl::simcard::FindProfile(argc > 2 ? argv[2] : "duo-slc-small");
  if (!p.ok()) {
    std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
    return 2;
  }
  vsl::simcard::CreateOptions co;
  co.blocks_per_lun = argc > 3 ? static_cast<uint32_t>(std::atoi(argv[3])) : 24;
  if (auto s = vsl::simcard::SimCard::Create(dir, *p, co); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  auto c = vsl::card::Card::Open(dir, {});
  if (!c.ok()) {
    std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
    return 1;
  }
  for (uint32_t k = 0; k < (*c)->controllers(); ++k) {
    if (auto s = (*c)->FormatController(k, vsl::card::PipeMode::kDual, {}); !s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  return 0;
}
