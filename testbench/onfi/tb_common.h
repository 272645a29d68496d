// What the co-simulation testbenches share: failure counting, the test LUN's identity and
// parameter page, and page contents that differ per LUN and page.
// C++17 (testbench).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "vsl/nand/onfi.h"

namespace vsl::tb {

// Counts failed expectations and prints each (a testbench exits non-zero if any).
struct TbChecks {
  int failures = 0;
  void Expect(bool ok, const std::string& what) {
    if (!ok) {
      ++failures;
      std::printf("FAIL: %s\n", what.c_str());
    }
  }
};

// READ ID 00h of the test target: JEDEC manufacturer and device ID, three more bytes.
inline std::vector<uint8_t> TestJedecId() { return {0x2C, 0xA1, 0x00, 0x15, 0x00}; }

// READ PARAMETER PAGE of the test target: three copies, encoded by the host's own code.
inline std::vector<uint8_t> TestParamPages() {
  nand::onfi::ParameterPage pp;
  pp.manufacturer = "OPENVSL";
  pp.model = "TB-LUN";
  pp.jedec_id = 0x2C;
  const auto one = nand::onfi::Encode(pp);
  std::vector<uint8_t> pages;
  for (int copy = 0; copy < 3; ++copy) pages.insert(pages.end(), one.begin(), one.end());
  return pages;
}

// Contents for page `page` of `lun`: every byte depends on both and on its position.
inline std::vector<uint8_t> TestPageData(uint32_t lun, uint32_t page, uint32_t bytes) {
  std::vector<uint8_t> d(bytes);
  for (size_t i = 0; i < d.size(); ++i) d[i] = static_cast<uint8_t>((lun * 131 + page * 31 + i * 7) ^ (i >> 8));
  return d;
}

}  // namespace vsl::tb
