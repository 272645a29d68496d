// ControllerPipe: one pipe of the RTL controller (rtl/pipe/vsl_pipe.sv) as a raw-flash
// FlashPipe (vsl/nand/flash.h), over a RegMemPort. The same code drives the co-simulated
// controller and, with an XRT port, a card.
//
// Protocol (docs/rtl.md, "Pipes"): 64-byte descriptors in a submission ring and 16-byte
// completions in a completion ring, both in the pipe's region of device memory, with a
// bounce buffer per LUN for page data and metadata. The controller holds one command per
// LUN, so the host keeps one per LUN in the ring and queues the rest per die (commands to
// one die run in submission order; dies overlap). Completions are found by polling the
// completion ring every `tick` of the host's Clock while commands are in flight (the
// port's Advance lets a simulated device run up to that time).
//
// A host that goes away (a crash) leaves the controller's rings where they were; the next
// ControllerPipe takes them over: unfetched descriptors are dropped, commands already in
// the pipe finish and their completions are discarded by Init before anything new is
// issued.
//
// Contract notes: the controller has no power-loss protection and no stage slots, so
// plp_state() is kAbsent and `accepted` means "copied into the host's queue" (posted
// right after the call); a program breaking a NAND rule completes kProgramFail (the die
// answers FAIL; the controller cannot tell why); an AXI error completes kAborted. After
// Init, ReadParameterPage(die) also reads the die's first page: the parameter page is the
// target's (a dead LUN's live neighbours answer it), so that read is what tells a dead die
// (kDieTimeout) at discovery, as a silent die is on any card.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/status.h"
#include "vsl/hw/descriptor.h"
#include "vsl/hw/port.h"
#include "vsl/nand/flash.h"
#include "vsl/nand/onfi.h"

namespace vsl::hw {

struct CtrlPipeOptions {
  uint32_t ring_entries = 64;  // both rings; more than the LUNs ever in flight
  DurNs tick_ns = 1000;        // completion polling period while commands are in flight
};

class ControllerPipe final : public nand::FlashPipe {
 public:
  // Pipe `pipe` of the controller behind `port`, its rings and buffers in
  // [region, region + region_bytes) of device memory. Checks the controller's identity and
  // capabilities, sets up and enables the rings (AP_CTRL.START too).
  static Result<std::unique_ptr<ControllerPipe>> Create(RegMemPort& port, Clock& clock, uint32_t pipe,
                                                        uint64_t region, uint64_t region_bytes,
                                                        CtrlPipeOptions o = {});
  ~ControllerPipe() override;

  // Waits until commands a previous host left in the pipe have finished (dropping their
  // completions), then reads the dies' parameter page (LUN 0) for the row address layout
  // and the page format; Read, Program and Erase need it. `done` runs on the clock's
  // engine.
  void Init(Function<void(Status)> done);
  const nand::onfi::ParameterPage& parameter_page() const { return pp_; }

  const nand::PipeTopology& topology() const override { return topology_; }
  nand::PlpState plp_state() const override { return nand::PlpState::kAbsent; }
  void Read(const nand::ReadRequest& req, nand::FlashCallback done) override;
  void Program(const nand::ProgramRequest& req, nand::FlashCallback accepted, nand::FlashCallback done) override;
  void Erase(uint32_t die, uint32_t block, nand::FlashCallback done) override;
  void Reset(uint32_t die, nand::FlashCallback done) override;
  void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len, nand::FlashCallback done) override;
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, nand::FlashCallback done) override;

  struct Stats {
    uint64_t commands = 0, completions = 0, ticks = 0, corrected_bits = 0, uncorrectable = 0, timeouts = 0,
             aborted = 0, lun_resets = 0, stale_completions = 0;
    uint64_t reads = 0, programs = 0, erases = 0, program_fails = 0, erase_fails = 0;  // completed
  };
  const Stats& stats() const { return stats_; }
  // The pipe's ONFI row of a page (LUN bits above block bits above page bits).
  uint32_t Row(uint32_t die, uint32_t block, uint32_t page) const;

 private:
  struct Cmd {
    uint8_t opc = 0;
    uint32_t row = 0;
    uint16_t col = 0, len = 0;
    nand::ReadRequest read;
    uint8_t* out = nullptr;             // ID / parameter bytes
    std::vector<uint8_t> page;          // program: data then metadata
    nand::FlashCallback done;
    TimeNs submit_ns = 0;
  };
  ControllerPipe(RegMemPort& port, Clock& clock, uint32_t pipe, uint64_t region, uint64_t region_bytes,
                 CtrlPipeOptions o);
  void Drain(TimeNs since, Function<void(Status)> done);
  void ReadGeometry(uint32_t die, Function<void(Status)> done);
  void Enqueue(uint32_t die, Cmd c);
  void Issue(uint32_t die);
  void Tick();
  bool NextCompletion(CompletionEntry* e);
  void Finish(uint32_t die, const CompletionEntry& e);
  void Fail(nand::FlashCallback done, nand::FlashStatus s);
  uint32_t reg(uint32_t off) const;
  uint64_t data_buf(uint32_t die) const;
  uint64_t meta_buf(uint32_t die) const;
  bool ValidPpa(const nand::Ppa& p) const;

  RegMemPort& port_;
  Clock& clock_;
  const uint32_t pipe_;
  const uint64_t region_, region_bytes_;
  const CtrlPipeOptions o_;
  nand::PipeTopology topology_;
  nand::onfi::ParameterPage pp_;
  bool ready_ = false;  // Init done
  uint32_t page_bits_ = 0, block_bits_ = 0, meta_bytes_ = 0, spare_bytes_ = 0;
  std::vector<std::deque<Cmd>> queued_;
  std::vector<std::optional<Cmd>> inflight_;
  std::vector<uint16_t> gen_;
  uint32_t sq_tail_ = 0, cq_head_ = 0;
  bool cq_phase_ = true;
  uint32_t in_ring_ = 0;
  bool tick_armed_ = false;
  Stats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace vsl::hw
