// OnfiTarget: a pin-level ONFI target (one CE#, several LUNs) in SystemC, with an ONFI
// timing checker.
//
// Pins as the controller sees them: CE#, CLE, ALE, WE#, RE#, DQ out/in with the
// controller's output enable, R/B# (the wired-AND of the LUNs: low while any is busy).
// Commands and addresses latch on WE# rising edges; each data byte goes out tREA after
// RE# falls and is held until tREA after the next fall. Address: two column cycles, then
// three row cycles, row = {LUN, block, page} with the page in the low bits.
// Commands: RESET (FFh), RESET LUN (FAh + row: that LUN alone; a program it cuts short
// leaves a torn page), READ ID (90h at 00h and 20h), READ PARAMETER PAGE (ECh),
// READ STATUS (70h: the selected LUN), READ STATUS ENHANCED (78h + row: that LUN's status,
// and it becomes the selected LUN for data out), READ (00h + 5 + 30h; 00h alone returns
// to data output after a status read), CHANGE READ COLUMN (05h + 2 + E0h), PROGRAM
// (80h + 5 + data + 10h), ERASE (60h + 3 + D0h), SET FEATURES (EFh + address + 4 bytes)
// and GET FEATURES (EEh + address, 4 bytes out). Each LUN runs on its own: operations
// on several LUNs overlap (multi-LUN interleaving). Pages live in a TargetStore (in
// memory by default; the co-simulated card uses the simulated card's image and error
// model); an erased page reads 0xFF; programming a page twice or out of order fails
// (status FAIL).
//
// The checker measures every setup, hold, pulse and cycle time the ONFI SDR table
// constrains, in the timing mode given at construction or set since by SET FEATURES 01h
// (from the first command after it other than a status read)
// (a simplification: a real die returns to mode 0 on RESET; this one keeps its mode), (tWP, tWH, tWC, tCLS, tALS, tDS, tCLH, tALH, tDH, tRP, tREH, tRC, tWHR, tADL,
// tRR), and protocol errors (data out of a busy LUN, WE#
// and RE# low together), counting each by name.
// C++17 (testbench).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <systemc.h>

#include "testbench/onfi/onfi_timing.h"
#include "testbench/onfi/target_store.h"

namespace vsl::tb {

struct OnfiShape {
  uint32_t luns = 4;
  uint32_t blocks = 16;          // per LUN
  uint32_t pages_per_block = 64;
  uint32_t page_bytes = 512 + 16;  // data + spare
  uint32_t page_bits() const;      // row bits of the page number
  uint32_t block_bits() const;
};

SC_MODULE(OnfiTarget) {
  sc_in<bool> ce_n, cle, ale, we_n, re_n, dq_oe;
  sc_in<uint32_t> dq_o;  // from the controller (8 bits)
  sc_out<uint32_t> dq_i; // to the controller
  sc_out<bool> rb_n;

  OnfiTarget(sc_module_name name, const OnfiTiming& t, const OnfiShape& shape, std::vector<uint8_t> param_page,
             std::vector<uint8_t> id);
  SC_HAS_PROCESS(OnfiTarget);

  // Array times; `stuck` keeps a LUN busy for ever after its next READ PARAMETER PAGE
  // (a LUN that never becomes ready).
  sc_time t_rst{5, SC_US}, t_r{25, SC_US}, t_prog{200, SC_US}, t_bers{1500, SC_US}, t_feat{1, SC_US};
  bool stuck = false;
  int stuck_read_lun = -1;  // this LUN never becomes ready after its next READ
  uint32_t dead_luns = 0;   // bit l: LUN l is dead: every operation leaves it busy for ever

  const std::map<std::string, int>& violations() const { return violations_; }
  int total_violations() const;
  std::vector<uint8_t> commands;  // every command byte latched, in order
  uint64_t reads = 0, programs = 0, erases = 0, lun_resets = 0;
  // Keeps the pages in `store` (it must outlive the target) instead of in memory.
  void set_store(TargetStore* store) { store_ = store; }
  // Makes the next PROGRAM on `lun` fail (status FAIL, page unchanged) when set.
  int fail_next_program_lun = -1;

 private:
  struct Lun {
    bool busy = false;
    uint8_t status_fail = 0;
    std::vector<uint8_t> page_reg;  // the page register (read result or program data)
    uint32_t column = 0;
    sc_event done;
    sc_time busy_for;
    bool stick = false;
    sc_event abort;          // RESET LUN while busy
    bool aborted = false;
    uint64_t prog_key = UINT64_MAX;  // the page a program in progress writes
  };
  void OnPins();
  void DriveThread();
  void LunThread(uint32_t lun);
  void Check(const char* what, sc_time since, double min_ns);
  void Command(uint8_t c);
  void Address(uint8_t a);
  void DataIn(uint8_t b);
  void StartBusy(uint32_t lun, sc_time t);
  void UpdateRb();
  uint8_t Status(uint32_t lun) const;
  uint32_t FirstLiveLun() const;
  uint32_t RowLun(uint32_t row) const;
  uint32_t RowBlock(uint32_t row) const;
  uint32_t RowPage(uint32_t row) const;

  OnfiTiming t_;
  OnfiShape shape_;
  std::vector<uint8_t> param_page_, id_;
  std::map<std::string, int> violations_;
  std::vector<Lun> luns_;
  MemoryStore own_store_;
  TargetStore* store_;
  // Last edge times.
  sc_time we_fall_, we_rise_, re_fall_, re_rise_, cle_rise_, ale_rise_, dq_change_, rb_rise_;
  sc_time last_addr_rise_;
  bool addr_pending_adl_ = false;  // data-in expected after an address cycle (tADL)
  bool after_cmd_or_addr_ = false; // next RE# falling must respect tWHR
  bool after_ready_ = false;       // next RE# falling must respect tRR
  bool prev_we_ = true, prev_re_ = true, prev_cle_ = false, prev_ale_ = false;
  uint32_t prev_dq_ = 0;
  // Command state.
  uint8_t cmd_ = 0;
  std::vector<uint8_t> addr_;
  uint32_t sel_ = 0;  // the selected LUN (data out, READ STATUS)
  enum class Out { kNone, kStatus, kId, kParam, kData } out_ = Out::kNone;
  Out resume_ = Out::kData;  // what 00h returns to after a status read
  int pending_mode_ = -1;    // a timing mode set by SET FEATURES, applied at the next command
  uint8_t feat_addr_ = 0;
  std::vector<uint8_t> fixed_;  // ID / parameter page bytes
  size_t fixed_pos_ = 0;
  uint32_t prog_lun_ = 0;
  std::vector<uint8_t> prog_buf_;
  uint32_t prog_col_ = 0;
  std::map<uint8_t, std::vector<uint8_t>> features_;  // feature address -> P1..P4
  sc_event drive_ev_, rb_ev_;
  uint8_t next_byte_ = 0;
};

}  // namespace vsl::tb
