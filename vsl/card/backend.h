// CardBackend: the seam between the host product and the card under it. A Card (card.h)
// opens one backend and asks it only for what differs between cards: the controllers and
// their pipes (each a raw-flash FlashPipe), the pipe-mode register, power-loss protection,
// identity (serial, model, firmware or bitstream version), sensors (temperature per
// controller, board power where the backend has it), lifetime counters, die counters for
// health, and fault injection where the backend can inject faults. The FTL, FlashBack,
// the power governor, the thermal monitor, health, volumes, the daemon, NBD and the SDK run
// unchanged above it.
//
// Backends (docs/backends.md): "sim" (vsl/card/sim_backend.h, the simulated card, the
// default), "rtl" (the Verilated controller driving ONFI die models), "kernel" (the
// Verilated Alveo kernel with its NAND emulators), "xrt" (an Alveo board through XRT); the
// last three live in vsl/backend/ (they need the co-simulation or XRT libraries).
//
// Life: a backend is made (its geometry and pipe modes known, nothing running), then the
// card builds its engines and calls Start with each pipe's clock; from then on each pipe's
// calls come on that pipe's clock's thread (a backend with one_engine() gets one clock for
// every pipe). Stop is called before the card's engines stop; then the backend is
// destroyed.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/function.h"
#include "vsl/core/status.h"
#include "vsl/nand/card_model.h"
#include "vsl/nand/flash.h"
#include "vsl/nand/geometry.h"

namespace vsl::card {

// A card spec as the tools take it: "DIR" or "sim:DIR", "rtl:DIR", "kernel:DIR",
// "xrt:DEVICE[:XCLBIN]", "shared:DIR" (a card served by `vslflash serve`, shared_card.h).
struct CardSpec {
  std::string kind;  // "sim", "rtl", "kernel", "xrt", "shared"
  std::string path;  // the card directory, or the XRT device index / BDF
  std::string extra;  // xrt: the xclbin path (may be empty)
  std::string ToString() const;
};
Result<CardSpec> ParseCardSpec(std::string_view spec);

// Who the controller says it is.
struct ControllerIdentity {
  std::string serial, model, profile, firmware_version;
  std::string hardware;  // what is under it, e.g. "simulated", "vsl_ctrl 1.3 (Verilated)"
};

// How a backend runs an asynchronous operation on pipe `pipe`'s engine during Start and
// waits for the status it reports (the card's engines run by then; with a virtual clock
// the call runs that clock until the operation completes).
class PipeRunner {
 public:
  virtual ~PipeRunner() = default;
  virtual Status Call(uint32_t pipe, Function<void(Function<void(Status)>)> op) = 0;
};

class CardBackend {
 public:
  virtual ~CardBackend() = default;

  virtual std::string kind() const = 0;
  virtual std::string spec() const = 0;  // as ParseCardSpec reads it
  virtual const nand::Geometry& geometry() const = 0;
  uint32_t pipe_count() const { return geometry().controllers * geometry().pipes_per_controller; }
  // What the governor plans with and health is rated against.
  virtual const model::Timing& timing() const = 0;
  virtual const model::Power& power_model() const = 0;
  virtual const model::Reliability& reliability() const = 0;
  virtual std::string ecc_mode() const = 0;  // e.g. "statistical", "bit-exact", "rtl-bch"
  // A zero-time card (benchmarking mode, docs/bench.md): NAND operations complete as soon
  // as their data has moved; only the simulated card offers it.
  virtual bool zero_time() const { return false; }
  // Every pipe must run on one engine (a co-simulation is one single-threaded simulator).
  virtual bool one_engine() const { return false; }

  // `pipe_clocks[p]`: pipe p's clock. Brings the card up (power-on, controller checks,
  // rings set up, the dies identified), running what must run on an engine through `run`.
  virtual Status Start(const std::vector<Clock*>& pipe_clocks, PipeRunner& run) = 0;
  // Before the pipes' clocks stop: the lifetime counters saved, nothing left to run.
  virtual void Stop() {}
  virtual nand::FlashPipe& pipe(uint32_t index) = 0;
  // Another host's port on pipe `index` (a dual-ported card; shared_card.h): its own
  // commands, its own claims (nand::FlashPipe::Claim). On the pipe's engine. NotSupported
  // where the controller offers one host path per pipe.
  virtual Result<std::unique_ptr<nand::FlashPipe>> NewPort(uint32_t index);
  // Moves pipe `index` onto `clock`; it has nothing outstanding.
  virtual Status RebindPipe(uint32_t index, Clock& clock) = 0;

  // The pipe-mode register of `controller` (kept across power cycles).
  virtual uint8_t pipe_mode(uint32_t controller) const = 0;
  virtual Status SetPipeMode(uint32_t controller, uint8_t mode) = 0;
  virtual nand::PlpState plp_state() const = 0;

  virtual ControllerIdentity identity(uint32_t controller) const = 0;
  // NotSupported where the backend cannot load firmware.
  virtual Status UpdateFirmware(uint32_t controller, const std::vector<uint8_t>& image);

  // --- sensors and power (any thread) ---
  virtual model::PowerReading ReadPower(uint32_t controller) const = 0;
  virtual model::Environment environment() const = 0;
  // NotSupported where the environment is not the backend's to set (a real board).
  virtual Status SetEnvironment(const model::Environment& env) = 0;
  virtual void SetLowPower(uint32_t controller, bool on) = 0;

  // --- lifetime (any thread) ---
  virtual model::Lifetime lifetime(uint32_t controller) const = 0;
  virtual void AccountHostIo(uint32_t controller, uint64_t read_bytes, uint64_t write_bytes) = 0;
  virtual void CountThermalShutdown(uint32_t controller) = 0;
  virtual void SaveLifetime() = 0;
  struct PowerCycles {
    uint64_t power_on_count = 0, unsafe_power_offs = 0;
  };
  virtual PowerCycles power_cycles(uint32_t controller) const = 0;

  // --- health ---
  // Counters over pipe `pipe`'s dies; on that pipe's engine while the card runs.
  virtual model::DieCounters PipeCounters(uint32_t pipe) const = 0;
  // `per_pipe`: PipeCounters of each of the controller's pipes, in order.
  virtual model::ControllerHealth Health(uint32_t controller,
                                         const std::vector<model::DieCounters>& per_pipe) const = 0;

  // Controller clock cycles simulated so far (a co-simulated backend; 0 otherwise), as of
  // the backend's last sensor poll. Any thread.
  virtual uint64_t device_cycles() const { return 0; }

  // --- faults, through the backend's real fault path; on the pipe's engine ---
  // Die `die` of pipe `pipe` dies now (stays busy, answers nothing). NotSupported where
  // the backend has no such path (a board with real NAND).
  virtual Status InjectDieFailure(uint32_t pipe, uint32_t die);
};

}  // namespace vsl::card
