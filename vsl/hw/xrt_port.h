// XrtPort: the Alveo transport: a RegMemPort over XRT (libxrt, 2.13). The kernel's
// registers through xrt::ip (a user-managed RTL kernel: XRT never starts it, the host's
// ring protocol drives it), device memory as xrt::bo buffers in the banks the kernel's
// masters reach (per pipe: its rings and bounce buffers, and its emulator's page store).
// Everything above this port — the board set-up (vsl/hw/board.h) and the controller
// protocol (vsl/hw/ctrl_pipe.h) — is the code the co-simulated kernel runs in CI.
//
// Without a card: ListAlveoCards returns an empty list, Open fails with NotFound and a
// message that says so; InspectXclbin works on any xclbin file (no card needed).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/function.h"
#include "vsl/core/status.h"
#include "vsl/hw/board.h"
#include "vsl/hw/ctrl_pipe.h"
#include "vsl/hw/port.h"

namespace vsl::hw {

inline constexpr const char* kAlveoKernelName = "vsl_kernel";

struct AlveoCard {
  uint32_t index = 0;
  std::string name, bdf;
  std::string xclbin_uuid;  // what is loaded now (empty: nothing)
};
// The cards XRT sees (an empty list when there are none). An error when XRT itself cannot
// enumerate (its shim library missing).
Result<std::vector<AlveoCard>> ListAlveoCards();
// A line for people when there is no card: what XRT saw and what to check.
std::string NoAlveoCardMessage();

// What `vslctl alveo-cards` and `vsld --list-alveo` print: a line per card (index, name,
// PCIe BDF, the xclbin loaded and, given `xclbin`, whether it is that one). With `xclbin`
// it is checked first (InspectXclbin's error if it does not match this host); with no card
// the error is NotFound with NoAlveoCardMessage().
Result<std::vector<std::string>> DescribeAlveoCards(const std::string& xclbin = "");

// The kernel's interface as an xclbin describes it.
struct KernelImage {
  std::string uuid, ip_name;
  struct Arg {
    std::string name;
    uint64_t offset = 0;
    int32_t mem_index = -1;  // the memory bank its master is connected to (-1: none)
  };
  std::vector<Arg> args;
  const Arg* arg(const std::string& name) const;
};
// Reads an xclbin file and checks it holds this build's kernel: an IP named vsl_kernel
// whose arguments pipe0_ring, pipe1_ring, store0 and store1 sit at the register map's
// offsets (PIPE p SQ_BASE, EMU p STORE_BASE). Every mismatch is named in the error.
Result<KernelImage> InspectXclbin(const std::string& path);

struct XrtOptions {
  uint32_t device = 0;                 // XRT device index
  std::string xclbin;                  // loaded unless the card already has it
  uint64_t region_bytes = 4ull << 20;  // per pipe: rings and bounce buffers
};

// The board's sensors as XRT reports them (xrt::info::device::thermal and ::electrical,
// the JSON `xbutil examine -r thermal,electrical` prints): the FPGA's temperature (the
// "fpga0" sensor, else the hottest present one) and the board's power. NotFound when the
// report has no such reading.
Result<double> ParseXrtFpgaTemperature(const std::string& thermal_json);
Result<double> ParseXrtBoardPower(const std::string& electrical_json);

class XrtPort final : public RegMemPort {
 public:
  // Opens the card, loads (or finds) the xclbin, checks the controller's identity and
  // allocates each pipe's region and page store in the banks the xclbin connects.
  static Result<std::unique_ptr<XrtPort>> Open(const XrtOptions& o);
  ~XrtPort() override;

  bool Read32(uint32_t offset, uint32_t* value) override;
  bool Write32(uint32_t offset, uint32_t value) override;
  uint64_t mem_base() const override;
  uint64_t mem_size() const override;
  void WriteMem(uint64_t addr, const void* src, std::size_t len) override;
  void ReadMem(uint64_t addr, void* dst, std::size_t len) override;
  void Advance(int64_t) override {}  // the card runs by itself
  bool InterruptPending() override;

  uint64_t region_base(uint32_t pipe) const;
  uint64_t region_bytes() const;
  uint64_t store_base(uint32_t pipe) const;
  // The board's temperature (C) and power (W) from XRT's device sensors.
  Status ReadBoardSensors(double* temp_c, double* power_w);

 private:
  struct Impl;
  explicit XrtPort(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// An Alveo card as raw flash (the FlashPipe contract, vsl/nand/flash.h): the card opened
// (XrtPort::Open), the kernel set up as every transport does it (SetUpAlveoKernel with the
// card's page stores), and a ControllerPipe per pipe created on its region and
// initialised (parameter page, geometry). `done` runs on the clock's engine (at once for
// an error found before any command: no card, a bad xclbin); on error nothing is left open. The pipes use the port: keep them together.
struct AlveoCardPipes {
  std::unique_ptr<XrtPort> port;
  std::unique_ptr<ControllerPipe> pipes[2];
};
void OpenAlveoCard(const XrtOptions& o, const AlveoKernelSetup& setup, Clock& clock,
                   Function<void(Result<AlveoCardPipes>)> done);

}  // namespace vsl::hw
