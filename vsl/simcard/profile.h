// Profiles of the simulated card: shape, timing, reliability and power-loss protection.
// Every number is documented with its source in docs/simcard.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vsl/core/status.h"
#include "vsl/core/time.h"
#include "vsl/nand/card_model.h"
#include "vsl/nand/geometry.h"
#include "vsl/nand/onfi.h"

namespace vsl::simcard {

// The model's types (vsl/nand/card_model.h), by their simulated-card names.
using model::Environment;
using model::Plp;
using model::Power;
using model::Reliability;
using model::Timing;

struct Profile {
  std::string name;
  std::string description;
  nand::Geometry geometry;
  Timing timing;
  Reliability reliability;
  Plp plp;
  Power power;
  // Controller-side copy (FlashPipe::Copy): the XOR accumulators each pipe has for the
  // parity of rows with copied members, each one page of data and metadata in controller
  // DRAM. 0: the controller offers no copy (the host relocates through its memory). A row
  // holds one from its first member until its parity page enters the protected buffer,
  // which under a full buffer is many rows later: with 4, half the groomer's copies found
  // none free (ftl_copy_relocation_test) and went through host memory.
  uint32_t copy_accumulators = 16;
  std::string manufacturer = "OPENVSL";
  std::string model;
  uint8_t jedec_id = 0x2C;
  uint8_t device_id = 0xA1;
  std::string firmware_version = "1.0.0";

  nand::onfi::ParameterPage ParameterPage() const;
};

// The built-in profiles: "duo-slc" (the reference card), "duo-slc-small" (its shape with
// few blocks), "test-small", "test-tiny" and "test-wear" (accelerated wear-out).
std::vector<std::string> ProfileNames();
Result<Profile> FindProfile(const std::string& name);

}  // namespace vsl::simcard
