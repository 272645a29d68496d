// ControllerBackend: a card made of RTL controllers (vsl_ctrl) reached through
// RegMemPorts, each pipe a ControllerPipe (vsl/hw/ctrl_pipe.h). The rtl:, kernel: and xrt:
// backends are this with a different board under the ports (BoardHost).
//
// The card's metadata lives in the card directory's controller images
// (vsl/simcard/image.h, the simulated card's format): identity, the pipe-mode register,
// power-on and unsafe power-off counts, lifetime counters, bad blocks and failed dies; for
// the rtl: backend also every page (the ONFI die models keep them there). Identity and
// capabilities are read from the controller's ID/VERSION/CAPS registers; temperature and
// power from its SENSOR registers (or the board's own sensors where the board has them).
//
// Threads: a co-simulation is one single-threaded simulator, so every pipe runs on one
// engine (one_engine()); register and memory accesses happen only there. What other
// threads ask for (sensors, environment) goes through a cache the engine refreshes.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vsl/card/backend.h"
#include "vsl/card/card.h"
#include "vsl/hw/ctrl_pipe.h"
#include "vsl/hw/port.h"
#include "vsl/simcard/image.h"
#include "vsl/simcard/profile.h"

namespace vsl::backend {

// The board under a ControllerBackend: its controllers' ports and the pipes' memory
// regions, fault hooks and sensors. Lives as long as the board is powered: for a
// co-simulation, the rest of the process (SystemC elaborates once per process), so a host
// that closes the card and opens it again finds it running, as a driver restart would.
class BoardHost {
 public:
  virtual ~BoardHost() = default;
  virtual uint32_t controllers() const = 0;
  virtual hw::RegMemPort& port(uint32_t controller) = 0;
  virtual uint64_t region_base(uint32_t controller, uint32_t pipe) const = 0;
  virtual uint64_t region_bytes() const = 0;
  // The device's own time (a simulator's), for pacing; 0 on hardware.
  virtual int64_t device_ns() const = 0;
  virtual uint64_t cycles() const = 0;
  // Kills die `die` of card-wide pipe `pipe` through the board's fault path.
  virtual Status KillDie(uint32_t pipe, uint32_t die) = 0;
  // The surroundings (co-simulation only: the board model's ambient and airflow).
  virtual void SetEnvironment(const model::Environment& env) = 0;
  // Board sensors outside the controller (XRT's, an emulator board's); false: none, the
  // controller's SENSOR registers are the source.
  virtual bool BoardSensors(uint32_t controller, double* temp_c, double* power_w) {
    (void)controller, (void)temp_c, (void)power_w;
    return false;
  }
  // Last steps before the first ControllerPipe of a start (emulator set-up); engine.
  virtual Status Prepare(Clock& clock) {
    (void)clock;
    return Status::Ok();
  }
  virtual std::string hardware() const = 0;
  virtual std::string ecc() const = 0;
};

class ControllerBackend : public card::CardBackend {
 public:
  // `host_for` makes (or finds) the board once the images are open.
  using HostFactory = Function<Result<BoardHost*>(std::vector<simcard::ControllerImage*>& images,
                                                  const simcard::Profile& profile)>;
  static Result<std::unique_ptr<card::CardBackend>> Make(const std::string& kind, const std::string& dir,
                                                        const card::CardOptions& opts, HostFactory host_for);
  ~ControllerBackend() override;

  std::string kind() const override { return kind_; }
  std::string spec() const override { return kind_ + ":" + dir_; }
  const nand::Geometry& geometry() const override { return profile_.geometry; }
  const model::Timing& timing() const override { return profile_.timing; }
  const model::Power& power_model() const override { return profile_.power; }
  const model::Reliability& reliability() const override { return profile_.reliability; }
  std::string ecc_mode() const override;
  bool one_engine() const override { return true; }

  Status Start(const std::vector<Clock*>& pipe_clocks, card::PipeRunner& run) override;
  void Stop() override;
  nand::FlashPipe& pipe(uint32_t index) override { return *pipes_.at(index); }
  Status RebindPipe(uint32_t index, Clock& clock) override;
  uint8_t pipe_mode(uint32_t controller) const override;
  Status SetPipeMode(uint32_t controller, uint8_t mode) override;
  nand::PlpState plp_state() const override { return nand::PlpState::kAbsent; }
  card::ControllerIdentity identity(uint32_t controller) const override;

  model::PowerReading ReadPower(uint32_t controller) const override;
  model::Environment environment() const override;
  Status SetEnvironment(const model::Environment& env) override;
  void SetLowPower(uint32_t controller, bool on) override;

  model::Lifetime lifetime(uint32_t controller) const override;
  void AccountHostIo(uint32_t controller, uint64_t read_bytes, uint64_t write_bytes) override;
  void CountThermalShutdown(uint32_t controller) override;
  void SaveLifetime() override;
  PowerCycles power_cycles(uint32_t controller) const override;

  model::DieCounters PipeCounters(uint32_t pipe) const override;
  model::ControllerHealth Health(uint32_t controller, const std::vector<model::DieCounters>& per_pipe) const override;
  Status InjectDieFailure(uint32_t pipe, uint32_t die) override;

  uint64_t device_cycles() const override { return cycles_.load(); }
  // Each pipe's counters (engine).
  const hw::ControllerPipe& controller_pipe(uint32_t index) const { return *pipes_.at(index); }

 private:
  class PacedPort;
  ControllerBackend() = default;
  void Poll();  // engine: sensors refreshed, environment applied
  std::string kind_, dir_;
  card::CardOptions opts_;
  simcard::Profile profile_;
  std::vector<std::unique_ptr<simcard::ControllerImage>> images_;
  int lock_fd_ = -1;
  HostFactory host_for_;
  BoardHost* host_ = nullptr;
  Clock* clock_ = nullptr;
  std::vector<std::unique_ptr<PacedPort>> ports_;
  std::vector<std::unique_ptr<hw::ControllerPipe>> pipes_;
  std::vector<card::ControllerIdentity> ids_;
  TimerId poll_timer_ = 0;
  std::atomic<uint64_t> cycles_{0};
  std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);

  mutable std::mutex mu_;  // what follows
  struct Sensed {
    double temp_c = 0, power_w = 0, energy_j = 0, max_temp_c = -1e9;
    TimeNs at = 0;
    bool low_power = false;
  };
  std::vector<Sensed> sensed_;
  model::Environment env_;
  bool env_dirty_ = false;
  std::vector<uint64_t> host_read_, host_write_, thermal_shutdowns_;
  std::vector<model::Lifetime> base_;       // per controller: the record at open
  TimeNs started_at_ = 0;
  std::vector<model::Lifetime> pipe_life_;  // per pipe: this session's counts (engine, copied)
};

}  // namespace vsl::backend
