// The card model: what every card backend reports in the same terms, whatever is under
// it (the simulated card, the co-simulated RTL controller, the co-simulated Alveo kernel, a
// card behind XRT): array timing and power figures the governor plans with, the reliability
// figures health is rated against, the environment, and the readings, counters and
// lifetime records of a controller. Also the simulated card's options, which a card opened
// on that backend passes through. Plain data, no behaviour beyond small helpers.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/status.h"
#include "vsl/core/time.h"
#include "vsl/nand/flash.h"

namespace vsl::model {

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
  // Rber's terms of wear alone: Rber(pe, r) == RberOfWear(pe) + rber_read_disturb * r,
  // exactly (so a model may keep it per erase count).
  double RberOfWear(uint32_t pe) const;
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

// How the card decides what a read returns when the NAND has flipped bits.
enum class EccMode : uint8_t {
  // Per codeword read, Binomial(bits, rber) raw errors are drawn; up to t are counted as
  // corrected, more make the read uncorrectable with those bits flipped in the data. No
  // codec runs: fast, and the default.
  kStatistical,
  // The controller's codec (hls/bch.h) for real: programs store BCH parity in the spare
  // area, each read flips Binomial(bits, rber) distinct raw bits of the stored codewords
  // (data, metadata and parity) and runs the decoder; corrected counts, erased-page
  // detection, uncorrectable results and (rare) miscorrections come from it. Needs a
  // geometry the codec supports (t = 4, 8 or 16, parity bytes = ceil(13t / 8)).
  kBitExact,
};
const char* EccModeName(EccMode m);
Result<EccMode> ParseEccMode(const std::string& s);  // "statistical" | "bit-exact"

struct SimCardOptions {
  bool null_timing = false;
  EccMode ecc = EccMode::kStatistical;
  uint64_t seed = 1;  // draws bit errors, wear failures and torn-page outcomes
  // Replaces the profile's power-loss protection (hold-up budget, buffer size), e.g. to
  // model a card with smaller capacitors.
  std::optional<Plp> plp;
  // Replaces the profile's reliability model, e.g. to run a campaign with no random
  // program or erase failures (one injected fault at a time).
  std::optional<Reliability> reliability;
  // Per pipe (indexed as pipe()): the clock that pipe runs on, for a card whose pipes are
  // served by engines on their own threads (each pipe's commands, completions and fault
  // injections then belong to that clock's thread). Empty: every pipe on the card's
  // clock. The pipes of a controller share its host link (under a lock); PowerCut,
  // PowerOn and SetPlpState act on every pipe at once and need a single clock.
  std::vector<Clock*> pipe_clocks;
  // Replaces the profile's power and thermal model (e.g. a smaller heat capacity so a
  // test sees thermal effects in seconds rather than minutes).
  std::optional<Power> power;
  Environment environment;  // changeable later with SetEnvironment
  // Replaces the profile's copy accumulators (FlashPipe::Copy); 0: a controller that
  // offers no copy, so the host relocates through its memory.
  std::optional<uint32_t> copy_accumulators;
};

struct ControllerHealth {
  uint32_t controller = 0;
  std::string serial, model, profile, firmware_version;
  uint32_t dies = 0, failed_dies = 0;
  uint64_t blocks = 0, factory_bad_blocks = 0, grown_bad_blocks = 0;
  uint32_t min_erase_count = 0, max_erase_count = 0;
  double mean_erase_count = 0;
  uint64_t programmed_pages = 0, torn_pages = 0;
  uint64_t power_on_count = 0, unsafe_power_offs = 0;
  nand::PlpState plp = nand::PlpState::kHealthy;
  uint64_t image_bytes = 0, image_allocated_bytes = 0;
  double rated_pe_used_percent = 0;  // mean erase count / endurance
};

// Block and page counters over a pipe's dies (SimCard::PipeCounters).
struct DieCounters {
  uint32_t failed_dies = 0;
  uint64_t blocks = 0, factory_bad_blocks = 0, grown_bad_blocks = 0;
  uint32_t min_erase_count = UINT32_MAX, max_erase_count = 0;
  uint64_t pe_sum = 0;
  uint64_t programmed_pages = 0, torn_pages = 0;
};

// What a controller's sensors read: its power monitor (energy since the card opened,
// static and NAND work) and its die temperature.
struct PowerReading {
  double temperature_c = 0;
  double energy_j = 0;
  double nand_energy_j = 0;  // of which NAND operations and their transfers
  TimeNs at = 0;             // when, on the controller's first pipe's clock
  bool low_power = false;
};

// A controller's lifetime counters (its record in the image plus what this session added).
struct Lifetime {
  uint64_t host_read_bytes = 0, host_write_bytes = 0;
  uint64_t nand_read_bytes = 0, nand_program_bytes = 0, erases = 0;
  uint64_t uncorrectable_reads = 0, program_fails = 0, erase_fails = 0;
  DurNs powered_ns = 0;
  double max_temperature_c = 0;
  uint64_t thermal_shutdowns = 0;
  // A card's totals over its controllers (powered time and temperature: the largest).
  Lifetime& operator+=(const Lifetime& o) {
    host_read_bytes += o.host_read_bytes;
    host_write_bytes += o.host_write_bytes;
    nand_read_bytes += o.nand_read_bytes;
    nand_program_bytes += o.nand_program_bytes;
    erases += o.erases;
    uncorrectable_reads += o.uncorrectable_reads;
    program_fails += o.program_fails;
    erase_fails += o.erase_fails;
    powered_ns = powered_ns > o.powered_ns ? powered_ns : o.powered_ns;
    max_temperature_c = max_temperature_c > o.max_temperature_c ? max_temperature_c : o.max_temperature_c;
    thermal_shutdowns += o.thermal_shutdowns;
    return *this;
  }
};

}  // namespace vsl::model
