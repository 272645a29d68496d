// AxiLiteMaster: the host's side of a Verilated AXI4-Lite slave (a register block): one
// 32-bit access at a time, address and data valid together and held until the response
// (a slave may take them in any order and answer one transaction at a time).
// C++17 (testbench).
#pragma once

#include <cstdint>

#include <systemc.h>

namespace vsl::tb {

struct AxiLiteMaster {
  sc_signal<uint32_t> awaddr, wdata, wstrb, araddr, bresp, rdata, rresp;
  sc_signal<bool> awvalid, awready, wvalid, wready, bvalid, bready, arvalid, arready, rvalid, rready;

  // `cycle()` advances the simulation by one clock. False on SLVERR or no answer within
  // 64 cycles.
  template <class Cycle>
  bool Write(uint32_t offset, uint32_t value, Cycle cycle) {
    awaddr.write(offset), wdata.write(value), wstrb.write(0xF);
    awvalid.write(true), wvalid.write(true), bready.write(true);
    for (int i = 0; i < 64 && !bvalid.read(); ++i) cycle();
    awvalid.write(false), wvalid.write(false);
    const bool ok = bvalid.read() && bresp.read() == 0;
    cycle();
    bready.write(false);
    return ok;
  }
  template <class Cycle>
  bool Read(uint32_t offset, uint32_t* value, Cycle cycle) {
    araddr.write(offset), arvalid.write(true), rready.write(true);
    for (int i = 0; i < 64 && !rvalid.read(); ++i) cycle();
    arvalid.write(false);
    const bool ok = rvalid.read() && rresp.read() == 0;
    *value = rdata.read();
    cycle();
    rready.write(false);
    return ok;
  }
};

}  // namespace vsl::tb
