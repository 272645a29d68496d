// CosimCard: the controller RTL (rtl/ctrl/vsl_ctrl.sv, two pipes) Verilated into SystemC,
// with an AXI4 memory model standing for the device memory its pipes' masters reach, a
// pin-level four-LUN ONFI target (testbench/onfi/onfi_target.h, with its timing checker)
// on each pipe's channel, and the ECC engine's DPI-C model. It is a hw::RegMemPort: host
// code drives it exactly as it would a card behind XRT (vsl/hw/ctrl_pipe.h).
//
// SystemC allows one elaborated simulation per process, so Create succeeds once per
// process. Time: the simulation runs only inside Read32/Write32 (a few clock cycles each)
// and Advance (up to the host's time).
// This header does not include SystemC, so C++20 code can use the card.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "vsl/hw/port.h"

namespace vsl::tb {

class TargetStore;

// Controllers one card may have (each an FPGA with two pipes).
inline constexpr uint32_t kMaxControllers = 4;

// The board model behind each controller's sensor pins (SENSOR_* registers): a first-order
// thermal model like the simulated card's (vsl/simcard/thermal.h): static power plus the
// energy of each array operation the dies perform, heating a heat capacity through a
// thermal resistance to the ambient air.
struct BoardModel {
  double static_w = 10.0;
  double read_uj = 2.5, program_uj = 20.0, erase_uj = 150.0;
  double heat_capacity_j_per_c = 21.0;
  double r_c_per_w = 1.33;  // at 300 LFM
  double ambient_c = 25.0;
};

struct CosimOptions {
  // Controllers on the card, each its own vsl_ctrl with its own device memory and two
  // ONFI targets, all on one clock in one simulation (a duo card has two).
  uint32_t controllers = 1;
  double clock_ns = 5.0;       // controller clock (200 MHz)
  int onfi_mode = 5;           // the targets' timing mode; the checker measures it
  uint32_t luns = 4;           // per channel (= per pipe)
  uint32_t blocks = 16;        // per LUN
  uint32_t pages_per_block = 8;
  uint32_t page_data_bytes = 4096;
  uint32_t page_spare_bytes = 224;
  double t_r_us = 25, t_prog_us = 200, t_bers_us = 1500;
  uint64_t mem_bytes_per_pipe = 4 << 20;  // device memory; pipe p's region follows p - 1's
  uint32_t mem_latency_cycles = 8;        // first read beat after the address
  // Where each pipe's target keeps its pages, card-wide pipe order (controller * 2 +
  // pipe; not owned; must outlive the card); null: in memory, no errors
  // (testbench/onfi/target_store.h, testbench/cosim/image_store.h).
  TargetStore* stores[2 * kMaxControllers] = {};
  BoardModel board;
  std::string trace_fst;                  // non-empty: dump every RTL signal there (FST,
                                          // for GTKWave); the tests take VSL_COSIM_FST
};

// The card's own RegMemPort methods are controller 0's (a one-controller card); port(c)
// reaches any controller. Pipe indices of the fault hooks and counters are card-wide
// (controller * 2 + pipe); region_base is per controller (each has its own memory).
class CosimCard : public hw::RegMemPort {
 public:
  // Builds and resets the card (fails if one was already built in this process).
  static std::unique_ptr<CosimCard> Create(const CosimOptions& o);
  ~CosimCard() override;

  bool Read32(uint32_t offset, uint32_t* value) override;
  bool Write32(uint32_t offset, uint32_t value) override;
  uint64_t mem_base() const override;
  uint64_t mem_size() const override;
  void WriteMem(uint64_t addr, const void* src, std::size_t len) override;
  void ReadMem(uint64_t addr, void* dst, std::size_t len) override;
  void Advance(int64_t now_ns) override;
  bool InterruptPending() override;

  uint32_t controllers() const;
  hw::RegMemPort& port(uint32_t controller);

  // Pipe p's share of device memory: [region_base(p), region_base(p) + region_bytes()).
  uint64_t region_base(uint32_t pipe) const;
  uint64_t region_bytes() const;

  // Faults. A stuck LUN never becomes ready after its next READ (a dead die); the next
  // PROGRAM on a LUN can be made to fail; AXI bursts touching [addr, addr + len) of device
  // memory answer SLVERR.
  void StickLunOnNextRead(uint32_t pipe, uint32_t lun);
  // The LUN dies: from its next operation on it stays busy for ever (READ STATUS
  // ENHANCED says busy; the controller's RB_TIMEOUT reports it).
  void KillLun(uint32_t pipe, uint32_t lun);
  void FailNextProgram(uint32_t pipe, uint32_t lun);
  void FailDma(uint64_t addr, uint64_t len);
  void ClearDmaFailures();  // every range FailDma set answers OKAY again

  // The board's surroundings (its sensors follow from the next Advance on).
  void SetAmbient(double ambient_c, double r_c_per_w);

  // What the models saw.
  int timing_violations() const;                       // both targets' checkers
  std::map<std::string, int> violations() const;       // by name, both targets
  uint64_t array_reads(uint32_t pipe) const;
  uint64_t array_programs(uint32_t pipe) const;
  uint64_t array_erases(uint32_t pipe) const;
  uint64_t lun_resets(uint32_t pipe) const;
  uint64_t cycles() const;                             // clock cycles simulated
  int64_t now_ns() const;
  const CosimOptions& options() const;

 private:
  struct Ctrl;
  struct Impl;
  class Port;
  explicit CosimCard(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  std::vector<std::unique_ptr<Port>> ports_;
};

}  // namespace vsl::tb
