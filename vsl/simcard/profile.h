// Profiles of the simulated card: shape, timing, reliability and power-loss protection.
// Every number is documented with its source in docs/simcard.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "vsl/core/status.h"
#include "vsl/core/time.h"
#include "vsl/nand/geometry.h"
#include "vsl/nand/onfi.h"

namespace vsl::simcard {

struct Timing {
  DurNs t_read_ns = 25 * kUs;       // tR: array to data register
  DurNs t_prog_ns = 200 * kUs;      // tPROG
  DurNs t_erase_ns = 1500 * kUs;    // tBERS
  DurNs t_reset_ns = 5 * kUs;       // tRST on an idle die
  DurNs cmd_overhead_ns = 1 * kUs;  // command/address cycles on the channel per op
  uint64_t bus_bytes_per_sec = 200'000'000;         // per channel (NV-DDR class)
  uint64_t link_bytes_per_sec = 1'600'000'000;      // host link payload per controller
  DurNs die_timeout_ns = 1 * kMs;   // how long the controller waits on a silent die

  // All durations zero and bandwidths unmodelled: ops complete at once ("null timing").
  static Timing Null();
};

// Raw bit error rate per bit read, as a function of wear and read disturb:
//   rber = base + wear * (pe / endurance)^wear_exp + read_disturb * reads_since_erase
// and the chance that a program or erase reports FAIL:
//   p_fail = fail_base + fail_wear * (pe / endurance)^fail_exp
struct Reliability {
  uint32_t endurance_cycles = 100'000;
  double rber_base = 1e-8;
  double rber_wear = 1e-5;
  double rber_wear_exp = 3.0;
  double rber_read_disturb = 1e-11;
  double fail_base = 1e-7;
  double fail_wear = 1e-4;
  double fail_exp = 4.0;
  double factory_bad_fraction = 0.005;  // per die, drawn at card creation
  uint32_t max_bad_blocks_per_lun = 0;  // 0: 2% of blocks (ONFI parameter page field)
  double torn_reads_as_garbage = 0.25;  // share of torn pages that ECC passes as garbage

  double Rber(uint32_t pe, uint32_t reads_since_erase) const;
  double FailProbability(uint32_t pe) const;
};


struct Plp {
  bool present = true;
  // Energy the capacitors hold, as time the controller can keep its dies programming
  // after the supply drops. Admission to the write buffer keeps the worst-case flush of
  // everything accepted within this budget.
  DurNs holdup_ns = 5 * kMs;
  uint64_t buffer_bytes_per_pipe = 4 << 20;  // controller DRAM for accepted programs
  uint32_t stage_slots = 4;  // per pipe: parity staging slots (FlashPipe::Stage)
};

// Power and heat of one controller (docs/power.md gives the sources). The card charges a
// NAND operation's energy when its die starts it; static power flows while the card is
// powered. Heat: a first-order model per controller,
//   C dT/dt = P - (T - ambient) / R(airflow),  R(lfm) = r_sink + r_air / (1 + lfm / lfm_knee)
// so the time constant R*C is about 28 s at 300 LFM.
struct Power {
  double static_w = 10.0;    // FPGA, DRAM, board and idle link, per controller
  double standby_w = 3.0;    // in its low-power state (thermal shutdown: NAND idle, DRAM self-refresh)
  double read_uj = 2.5;      // a page read (array busy ~0.1 W for tR)
  double program_uj = 20.0;  // a page program (~0.1 W for tPROG)
  double erase_uj = 150.0;   // a block erase (~0.1 W for tBERS)
  double channel_nj_per_byte = 0.25;  // ONFI bus I/O, per byte moved on a channel
  double link_nj_per_byte = 0.1;      // PCIe and DMA, per payload byte
  double heat_capacity_j_per_c = 21.0;
  double r_sink_c_per_w = 0.6;
  double r_air_c_per_w = 4.4;
  double lfm_knee = 60.0;
  double ThermalResistance(double airflow_lfm) const {
    return r_sink_c_per_w + r_air_c_per_w / (1.0 + airflow_lfm / lfm_knee);
  }
};

// Where the card sits: inlet air temperature and airflow over it (linear feet per minute).
// The supported envelope of the reference card is up to 55 C at 300 LFM.
struct Environment {
  double ambient_c = 25.0;
  double airflow_lfm = 300.0;
};

struct Profile {
  std::string name;
  std::string description;
  nand::Geometry geometry;
  Timing timing;
  Reliability reliability;
  Plp plp;
  Power power;
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
