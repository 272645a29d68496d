// Board set-up: what a host does to a controller before its pipes carry commands, shared
// by every transport (the co-simulated controller, the co-simulated Alveo kernel, a card
// behind XRT), so each runs the same code.
//
//   SetUpChannels    each channel's ONFI timing registers for the dies' SDR mode at the
//                    controller's clock, and the R/B# timeout after which a busy die is
//                    reported dead (TIMEOUT) instead of waited on
//   CheckController  the ID magic and the register map's major version
//   Emulator*        the Alveo kernel's NAND emulators (EMU blocks, rtl/emu/vsl_nand_emu.sv):
//                    where each keeps its pages, its array times, raw bit errors, faults
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>

#include "vsl/core/status.h"
#include "vsl/hw/port.h"

namespace vsl::hw {

struct ChannelSetup {
  int onfi_mode = 5;                     // the dies' SDR timing mode (0-5)
  double clock_ns = 5.0;                 // the controller's clock period
  int64_t rb_timeout_ns = 20'000'000;    // a die busy longer is dead (0: wait for ever)
};
Status SetUpChannels(RegMemPort& port, uint32_t channels, const ChannelSetup& s);

// The controller behind `port` answers with the OVSL magic and a register map whose major
// version is this host's; returns the CAPS register's pipe count in `pipes` (if non-null).
Status CheckController(RegMemPort& port, uint32_t* pipes = nullptr);

// What an emulator was built with (EMU GEOMETRY0/1).
struct EmulatorGeometry {
  uint32_t luns = 0, blocks = 0, pages = 0, stride = 0;  // stride: store bytes per page
  uint64_t store_bytes() const { return uint64_t{luns} * blocks * pages * stride; }
};
// NotFound when the pipe has no emulator (a card with NAND; the EMU block reads as zero
// or answers SLVERR).
Result<EmulatorGeometry> ReadEmulatorGeometry(RegMemPort& port, uint32_t pipe);

struct EmulatorSetup {
  uint64_t store_base = 0;  // card-memory address of the pipe's page store (store_bytes())
  double clock_ns = 5.0;    // the kernel clock, to turn the times into cycles
  double t_r_us = 25, t_prog_us = 200, t_bers_us = 1500, t_rst_us = 5;
  double rber = 0;          // raw bit error rate of reads (per bit), 0 for none
  uint32_t seed = 1;        // of the bit errors: a run replays from it
};
// Programs the emulator. It keeps its pages across host restarts (as NAND does): this
// does not erase them; FormatEmulator does.
Status SetUpEmulator(RegMemPort& port, uint32_t pipe, const EmulatorSetup& s);
// Erases every block of the emulated NAND (the next-page table cleared).
Status FormatEmulator(RegMemPort& port, uint32_t pipe);

// Injected faults, one bit per LUN: dead LUNs (busy for ever from their next operation),
// and a failure of the next PROGRAM / ERASE.
struct EmulatorFaults {
  uint32_t dead = 0, fail_program = 0, fail_erase = 0;
};
Status SetEmulatorFaults(RegMemPort& port, uint32_t pipe, const EmulatorFaults& f);
Result<EmulatorFaults> ReadEmulatorFaults(RegMemPort& port, uint32_t pipe);

struct EmulatorCounters {
  uint32_t reads = 0, programs = 0, erases = 0, flips = 0, errors = 0;
  bool store_error = false;  // an AXI error answered a store access
  uint32_t busy_luns = 0;
};
Result<EmulatorCounters> ReadEmulatorCounters(RegMemPort& port, uint32_t pipe);

// The Alveo kernel (rtl/alveo/vsl_kernel.sv) as a host attaches to it, on any transport
// (XrtPort on a card, KernelCosim in CI): the controller checked, its channels timed for
// the emulators, each pipe's emulator pointed at its page store with the array times and
// raw bit errors of `emulator` (its store_base ignored: store_base[p] is used; pipe p's
// bit errors seeded with emulator.seed + p). The emulated NAND keeps its pages.
struct AlveoKernelSetup {
  ChannelSetup channels;
  EmulatorSetup emulator;
};
Status SetUpAlveoKernel(RegMemPort& port, const uint64_t (&store_base)[2], const AlveoKernelSetup& s);

}  // namespace vsl::hw
