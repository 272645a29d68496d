// RegMemPort: how host code reaches one controller (vsl_ctrl): its AXI4-Lite registers
// and the device memory its pipes' AXI4 masters use. The controller protocol
// (vsl/hw/ctrl_pipe.h) is written against this alone, so the co-simulated controller
// (testbench/cosim) and a card behind XRT differ only in their port.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstddef>
#include <cstdint>

namespace vsl::hw {

class RegMemPort {
 public:
  virtual ~RegMemPort() = default;

  // 32-bit register access at a byte offset of the register map (docs/register-map.md).
  // A register access completes before the call returns (it is posted to the device and
  // acknowledged); false if the device answered with an error response (SLVERR).
  virtual bool Read32(uint32_t offset, uint32_t* value) = 0;
  virtual bool Write32(uint32_t offset, uint32_t value) = 0;

  // Device memory: [mem_base(), mem_base() + mem_size()). Copies are coherent with the
  // device once they return (a host write is visible to the next DMA read; a DMA write
  // that completed before the completion entry that announces it is visible to ReadMem).
  virtual uint64_t mem_base() const = 0;
  virtual uint64_t mem_size() const = 0;
  virtual void WriteMem(uint64_t addr, const void* src, std::size_t len) = 0;
  virtual void ReadMem(uint64_t addr, void* dst, std::size_t len) = 0;

  // Lets the device run up to the host's time `now_ns` (on the host's Clock). A
  // simulated device advances its own clock to it; hardware runs by itself and ignores
  // it. Never moves the device's time backwards.
  virtual void Advance(int64_t now_ns) = 0;
  // The controller's interrupt line.
  virtual bool InterruptPending() = 0;
};

}  // namespace vsl::hw
