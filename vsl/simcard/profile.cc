#include "vsl/simcard/profile.h"

#include <cmath>

#include <fmt/format.h>

namespace vsl::model {

Timing Timing::Null() {
  Timing t;
  t.t_read_ns = t.t_prog_ns = t.t_erase_ns = t.t_reset_ns = t.cmd_overhead_ns = 0;
  t.bus_bytes_per_sec = t.link_bytes_per_sec = 0;
  t.die_timeout_ns = 0;
  return t;
}

double Reliability::RberOfWear(uint32_t pe) const {
  const double wear = static_cast<double>(pe) / endurance_cycles;
  return rber_base + rber_wear * std::pow(wear, rber_wear_exp);
}

double Reliability::Rber(uint32_t pe, uint32_t reads_since_erase) const {
  return RberOfWear(pe) + rber_read_disturb * reads_since_erase;
}

double Reliability::FailProbability(uint32_t pe) const {
  const double wear = static_cast<double>(pe) / endurance_cycles;
  return fail_base + fail_wear * std::pow(wear, fail_exp);
}

}  // namespace vsl::model

namespace vsl::simcard {

nand::onfi::ParameterPage Profile::ParameterPage() const {
  nand::onfi::ParameterPage p;
  const auto& g = geometry;
  p.manufacturer = manufacturer;
  p.model = model;
  p.jedec_id = jedec_id;
  p.data_bytes_per_page = g.page_data_bytes;
  p.spare_bytes_per_page = static_cast<uint16_t>(g.page_spare_bytes);
  p.pages_per_block = g.pages_per_block;
  p.blocks_per_lun = g.blocks_per_lun;
  p.luns_per_target = static_cast<uint8_t>(g.luns_per_channel);
  p.bits_per_cell = 1;
  p.max_bad_blocks_per_lun = static_cast<uint16_t>(
      reliability.max_bad_blocks_per_lun ? reliability.max_bad_blocks_per_lun
                                         : std::max<uint32_t>(1, g.blocks_per_lun / 50));
  p.endurance_cycles = reliability.endurance_cycles;
  p.planes = static_cast<uint8_t>(g.planes_per_lun);
  p.ecc_bits = static_cast<uint8_t>(g.ecc_t);
  auto us = [](DurNs ns) { return static_cast<uint16_t>(std::min<DurNs>((ns + 999) / 1000, 65535)); };
  p.tprog_max_us = us(timing.t_prog_ns);
  p.tbers_max_us = us(timing.t_erase_ns);
  p.tr_max_us = us(timing.t_read_ns);
  return p;
}

namespace {

// The reference card's shape (models.md): 2 controllers x 2 pipes x 6 channels x 4 LUNs,
// 8 KiB + 448 B pages, 128 pages per block, SLC timings, BCH t=8 per 512 B.
Profile DuoSlc(uint32_t blocks_per_lun) {
  Profile p;
  auto& g = p.geometry;
  g.controllers = 2;
  g.pipes_per_controller = 2;
  g.channels_per_pipe = 6;
  g.luns_per_channel = 4;
  g.planes_per_lun = 2;
  g.blocks_per_lun = blocks_per_lun;
  g.pages_per_block = 128;
  g.page_data_bytes = 8192;
  g.page_spare_bytes = 448;
  g.ecc_codeword_bytes = 512;
  g.ecc_parity_bytes = 13;
  g.ecc_t = 8;
  p.model = "OVSL-SLC-16G";
  p.timing = Timing{};
  p.reliability = Reliability{};
  return p;
}

// A small card for unit tests: 1 controller x 2 pipes x 2 channels x 2 LUNs, 4 KiB pages.
Profile TestSmall() {
  Profile p;
  auto& g = p.geometry;
  g.controllers = 1;
  g.pipes_per_controller = 2;
  g.channels_per_pipe = 2;
  g.luns_per_channel = 2;
  g.planes_per_lun = 2;
  g.blocks_per_lun = 32;
  g.pages_per_block = 16;
  g.page_data_bytes = 4096;
  g.page_spare_bytes = 224;  // typical for 4 KiB-page SLC; 120 B host metadata
  g.ecc_codeword_bytes = 512;
  g.ecc_parity_bytes = 13;
  g.ecc_t = 8;
  p.model = "OVSL-TEST-S";
  p.plp.buffer_bytes_per_pipe = 256 << 10;
  return p;
}

// The co-simulated cards' shape: the RTL controller's pipes (one channel of four LUNs
// each), small blocks, and array times scaled down (5/25/100 us) so a pin-level
// co-simulation moves data at a usable pace. The controller has no power-loss protection.
Profile CosimShape(uint32_t controllers, uint32_t blocks, uint32_t pages) {
  Profile p = TestSmall();
  auto& g = p.geometry;
  g.controllers = controllers;
  g.pipes_per_controller = 2;
  g.channels_per_pipe = 1;
  g.luns_per_channel = 4;
  g.planes_per_lun = 1;
  g.blocks_per_lun = blocks;
  g.pages_per_block = pages;
  p.timing.t_read_ns = 5 * kUs;
  p.timing.t_prog_ns = 25 * kUs;
  p.timing.t_erase_ns = 100 * kUs;
  p.timing.bus_bytes_per_sec = 50'000'000;  // ONFI SDR mode 5: a byte per 20 ns
  p.timing.link_bytes_per_sec = 800'000'000;
  p.timing.die_timeout_ns = 1 * kMs;
  p.reliability.rber_base = 1e-6;
  p.reliability.factory_bad_fraction = 0.01;
  p.plp.present = false;
  p.plp.stage_slots = 0;
  return p;
}

}  // namespace

std::vector<std::string> ProfileNames() {
  return {"duo-slc", "duo-slc-small", "test-small", "test-tiny", "test-wear", "bench-waf", "rtl-duo", "kernel-emu"};
}

Result<Profile> FindProfile(const std::string& name) {
  Profile p;
  if (name == "duo-slc") {
    p = DuoSlc(16384);
    p.description = "ioDrive2 Duo SLC shape: 4 LUNs x 24 dies x 16 GiB (1.5 TiB raw)";
  } else if (name == "duo-slc-small") {
    p = DuoSlc(64);
    p.description = "duo-slc shape and timing with 64 blocks per die (6 GiB raw)";
  } else if (name == "test-small") {
    p = TestSmall();
    p.description = "unit-test card: 1 controller, 2 pipes of 2x2 dies, 32 blocks of 16 pages";
  } else if (name == "test-tiny") {
    p = TestSmall();
    p.geometry.pipes_per_controller = 1;
    p.geometry.channels_per_pipe = 1;
    p.geometry.blocks_per_lun = 8;
    p.geometry.pages_per_block = 4;
    p.model = "OVSL-TEST-T";
    p.description = "smallest card: 1 pipe of 2 dies on one channel, 8 blocks of 4 pages";
  } else if (name == "test-wear") {
    p = TestSmall();
    p.reliability.endurance_cycles = 100;
    p.reliability.rber_wear = 2e-4;
    p.reliability.fail_wear = 1e-3;
    p.model = "OVSL-TEST-W";
    p.description = "test-small with endurance 100 cycles, for wear-out tests";
  } else if (name == "bench-waf") {
    // For write-amplification measurements: many LEBs of many pages, no bad blocks, no
    // wear-out, so only the FTL's policy shows.
    p = TestSmall();
    p.geometry.pipes_per_controller = 1;
    p.geometry.blocks_per_lun = 512;
    p.geometry.pages_per_block = 64;
    p.reliability.factory_bad_fraction = 0;
    p.reliability.fail_base = 0;
    p.reliability.fail_wear = 0;
    p.reliability.rber_base = 0;
    p.reliability.rber_wear = 0;
    p.reliability.rber_read_disturb = 0;
    p.model = "OVSL-BENCH-W";
    p.description = "1 pipe of 2x2 dies, 512 blocks of 64 x 4 KiB pages, no faults (WAF bench)";
  } else if (name == "rtl-duo") {
    p = CosimShape(2, 128, 32);
    p.model = "OVSL-RTL-DUO";
    p.description = "co-simulated RTL duo: 2 controllers x 2 pipes of 4 dies, 128 blocks of 32 x 4 KiB pages";
  } else if (name == "kernel-emu") {
    // The emulator's page store is sized by the kernel's build parameters (rtl/alveo).
    p = CosimShape(1, 16, 8);
    p.model = "OVSL-ALVEO-EMU";
    p.description = "co-simulated Alveo kernel: 1 controller x 2 pipes of 4 emulated dies, 16 blocks of 8 pages";
  } else {
    return Status::NotFound(fmt::format("no card profile named '{}' (known: duo-slc, "
                                        "duo-slc-small, test-small, test-tiny, test-wear, "
                                        "bench-waf, rtl-duo, kernel-emu)",
                                        name));
  }
  p.name = name;
  return p;
}

}  // namespace vsl::simcard
