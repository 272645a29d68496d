// KernelCosim: the Alveo kernel (rtl/alveo/vsl_kernel.sv: the controller of one FPGA with
// a NAND emulator on each pipe) Verilated into SystemC, with an AXI4 memory model standing
// for the card's HBM: one memory, reached by the kernel's four masters (m_axi_pipe0/1,
// m_axi_store0/1) through ports of their own. It is a hw::RegMemPort, as the XRT
// transport (vsl/hw/xrt_port.h) is: host code sets the kernel up and drives it exactly as
// on a card (vsl/hw/board.h, vsl/hw/ctrl_pipe.h); faults are injected through the
// emulators' registers, as a test on a card would.
//
// Memory layout (like the buffers XRT would allocate): pipe p's region (rings and bounce
// buffers) at region_base(p), its emulator's page store at store_base(p), above 4 GiB so
// the 64-bit addresses are used. Nothing sets the emulators up here: a host does
// (hw::SetUpEmulator with store_base(p)).
//
// SystemC allows one elaborated simulation per process: Create succeeds once per process,
// and not in a process that built a CosimCard. This header does not include SystemC.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "vsl/hw/port.h"

namespace vsl::tb {

struct KernelCosimOptions {
  double clock_ns = 5.0;                   // ap_clk
  uint32_t mem_latency_cycles = 24;        // first read beat after the address (HBM-like)
  uint64_t region_bytes = 4ull << 20;      // per pipe
  std::string trace_fst;                   // non-empty: every RTL signal into this FST file
  // Non-empty: the card memory and the emulators' next-page tables live in this file
  // (mapped shared, the tables copied after every simulation step), so the emulated NAND
  // keeps its pages and erase state across processes, and a killed process loses no
  // completed program or erase. Empty: in memory, gone with the process.
  std::string store_file;
};

class KernelCosim : public hw::RegMemPort {
 public:
  static std::unique_ptr<KernelCosim> Create(const KernelCosimOptions& o);
  ~KernelCosim() override;

  bool Read32(uint32_t offset, uint32_t* value) override;
  bool Write32(uint32_t offset, uint32_t value) override;
  uint64_t mem_base() const override;
  uint64_t mem_size() const override;
  void WriteMem(uint64_t addr, const void* src, std::size_t len) override;
  void ReadMem(uint64_t addr, void* dst, std::size_t len) override;
  void Advance(int64_t now_ns) override;
  bool InterruptPending() override;

  uint64_t region_base(uint32_t pipe) const;
  uint64_t region_bytes() const;
  uint64_t store_base(uint32_t pipe) const;
  uint64_t store_bytes() const;  // per pipe, from the emulators' GEOMETRY registers

  // AXI bursts touching [addr, addr + len) of card memory answer SLVERR.
  void FailMemory(uint64_t addr, uint64_t len);
  // Beats each master moved (pipe p's DMA: 2p, its emulator: 2p + 1).
  uint64_t read_beats(uint32_t master) const;
  uint64_t write_beats(uint32_t master) const;
  uint64_t cycles() const;
  int64_t now_ns() const;
  const KernelCosimOptions& options() const;
  // With a store_file: false when the file could not be mapped (Create then failed).
  bool persistent() const;

 private:
  struct Impl;
  explicit KernelCosim(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace vsl::tb
