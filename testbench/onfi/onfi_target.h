// OnfiTarget: a pin-level ONFI target (one CE#) in SystemC, with an ONFI timing checker.
//
// Pins as the controller sees them: CE#, CLE, ALE, WE#, RE#, DQ out/in with the
// controller's output enable, R/B#. Commands latch on WE# rising edges; data goes out
// tREA after each RE# falling edge and is held until tREA after the next one. Supported so
// far: RESET (FFh), READ ID (90h, addresses 00h and 20h), READ PARAMETER PAGE (ECh),
// READ STATUS (70h). One LUN; busy times are parameters.
//
// The checker measures every setup, hold, pulse and cycle time the ONFI SDR table
// constrains (tWP, tWH, tWC, tCLS, tALS, tDS, tCLH, tALH, tDH, tRP, tREH, tRC, tWHR, tADL,
// tRR) against the mode it was given, and counts each violation by name.
// C++17 (testbench).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <systemc.h>

#include "testbench/onfi/onfi_timing.h"

namespace vsl::tb {

SC_MODULE(OnfiTarget) {
  sc_in<bool> ce_n, cle, ale, we_n, re_n, dq_oe;
  sc_in<uint32_t> dq_o;  // from the controller (8 bits)
  sc_out<uint32_t> dq_i; // to the controller
  sc_out<bool> rb_n;

  OnfiTarget(sc_module_name name, const OnfiTiming& t, std::vector<uint8_t> param_page, std::vector<uint8_t> id);
  SC_HAS_PROCESS(OnfiTarget);

  // Busy time of RESET and of READ PARAMETER PAGE (tR); `stuck` keeps R/B# low for ever
  // after READ PARAMETER PAGE (a LUN that never becomes ready).
  sc_time t_rst{5, SC_US}, t_r{25, SC_US};
  bool stuck = false;

  const std::map<std::string, int>& violations() const { return violations_; }
  int total_violations() const;
  std::vector<uint8_t> commands;  // every command byte latched, in order

 private:
  void OnWe();
  void OnRe();
  void OnPins();
  void DriveThread();
  void BusyThread();
  void Check(const char* what, sc_time since, double min_ns);
  void Command(uint8_t c);
  void Address(uint8_t a);

  OnfiTiming t_;
  std::vector<uint8_t> param_page_, id_;
  std::map<std::string, int> violations_;
  // Last edge times.
  sc_time we_fall_, we_rise_, re_fall_, re_rise_, cle_rise_, cle_fall_, ale_rise_, ale_fall_, dq_change_, rb_rise_;
  sc_time last_addr_rise_;
  bool addr_pending_adl_ = false;  // data-in expected after an address cycle (tADL)
  bool after_cmd_or_addr_ = false; // next RE# falling must respect tWHR
  bool after_ready_ = false;       // next RE# falling must respect tRR
  bool prev_we_ = true, prev_re_ = true, prev_cle_ = false, prev_ale_ = false;
  uint32_t prev_dq_ = 0;
  // Output state.
  std::vector<uint8_t> out_;
  size_t out_pos_ = 0;
  uint8_t cur_cmd_ = 0;
  bool busy_ = false;
  sc_event drive_ev_, busy_ev_;
  sc_time busy_for_;
  bool stick_ = false;  // this busy period never ends
  uint8_t next_byte_ = 0;
};

}  // namespace vsl::tb
