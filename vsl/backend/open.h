// Opening and creating a card by its spec, on any backend (vsl/card/backend.h):
//   DIR | sim:DIR         the simulated card (vsl/card/sim_backend.h)
//   rtl:DIR               the Verilated controller (rtl/ctrl/vsl_ctrl.sv, both pipes per
//                         FPGA, four LUNs per channel) driving ONFI die models whose pages
//                         live in DIR; two controllers make the duo card
//   kernel:DIR            the Verilated Alveo kernel (rtl/alveo/vsl_kernel.sv) with its
//                         NAND emulators, set up by the board code a real Alveo gets
//   xrt:DEVICE[:XCLBIN]   an Alveo board through XRT
// docs/backends.md sets them side by side.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vsl/card/backend.h"
#include "vsl/card/card.h"
#include "vsl/core/status.h"

namespace vsl::backend {

// The backend of `spec`, made (not started).
Result<std::unique_ptr<card::CardBackend>> MakeBackend(const std::string& spec, const card::CardOptions& opts);
// Card::Open on the backend of `spec`.
Result<std::unique_ptr<card::Card>> OpenCard(const std::string& spec, const card::CardOptions& opts);

struct CreateArgs {
  std::string profile;  // empty: the backend's default shape (DefaultProfile)
  std::string serial;   // empty: derived from the seed
  uint64_t seed = 1;
  uint32_t blocks_per_lun = 0;  // 0: the profile's
};
// Creates a new card at `spec` (a directory that holds no card yet). A co-simulated card's
// profile must have the controller's shape (two pipes of one channel of four LUNs).
Status CreateCard(const std::string& spec, const CreateArgs& args);
// "test-small"-like defaults per backend: sim "duo-slc-small", rtl "rtl-duo", kernel
// "kernel-emu".
std::string DefaultProfile(const std::string& kind);
// The backends this build has ("sim", "rtl", "kernel", "xrt").
std::vector<std::string> Backends();

}  // namespace vsl::backend
