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
// Accumulators and copies (register map 1.2, CAPS.ACCUMULATORS > 0): copy_accumulators()
// is the controller's count. A Copy is done inside the card: each segment is a windowed
// READ on its source die whose corrected codewords the controller writes into a staging
// page in card memory (never to the host), then a windowed PROGRAM on the destination
// die takes the page from there (the rest of the data area zeroed) with the host's
// metadata and, with `acc`, adds it to its accumulator; only descriptors, completions and
// metadata cross the host link. Staging pages are handed out in submission order (so a
// copy waiting for one never blocks one holding one). The controller applies
// accumulator operations when it starts a command, and a LUN's slot at a time, so the
// host orders them: a take or peek (or ACC_CLEAR) is issued only once every earlier
// operation on its accumulator has completed, an add only once every earlier take or
// peek has.
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
  // The controller's clock period, to turn a lease into PIPE.OWN_LEASE units (256 cycles).
  DurNs cycle_ns = 4;
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
  uint32_t copy_accumulators() const override { return staging_slots_ >= 2 ? accs_ : 0; }
  void ClearAccumulator(uint32_t acc) override;
  void Copy(const nand::CopyRequest& req, nand::FlashCallback accepted, nand::FlashCallback done) override;
  // Ownership through the PIPE block's OWNER registers (register map 1.3; an older
  // controller offers none). Descriptors carry this port's generation.
  bool offers_ownership() const override { return ownership_; }
  nand::ClaimReply Claim(uint32_t host, bool force, DurNs lease) override;
  bool Renew(DurNs lease) override;
  void Release() override;
  nand::PipeOwner owner() const override;

  struct Stats {
    uint64_t commands = 0, completions = 0, ticks = 0, corrected_bits = 0, uncorrectable = 0, timeouts = 0,
             aborted = 0, lun_resets = 0, stale_completions = 0;
    uint64_t reads = 0, programs = 0, erases = 0, program_fails = 0, erase_fails = 0;  // completed
    uint64_t copies = 0, copy_fails = 0, acc_takes = 0;                               // completed
    // Page data moved between host memory and card memory (the host link): a copy moves
    // none, a program its page, a read the sectors asked for.
    uint64_t link_data_bytes = 0;
  };
  const Stats& stats() const { return stats_; }
  // The pipe's ONFI row of a page (LUN bits above block bits above page bits).
  uint32_t Row(uint32_t die, uint32_t block, uint32_t page) const;

 private:
  struct CopyState;
  struct Cmd {
    uint8_t opc = 0;
    uint32_t row = 0;
    uint16_t col = 0, len = 0;
    nand::ReadRequest read;
    uint8_t* out = nullptr;             // ID / parameter bytes
    std::vector<uint8_t> page;          // program: data then metadata (a copy: metadata)
    bool zero_data = false;             // program: no data (zeros), only metadata
    nand::FlashCallback done;
    TimeNs submit_ns = 0;
    // Accumulator operation (acc_code) and its place among the accumulator's operations.
    uint32_t acc = nand::kNoAccumulator;
    uint8_t acc_op = 0;
    uint16_t acc_meta_at = 0, acc_meta_len = 0, acc_crc_at = 0;
    uint64_t order = 0;
    // A copy's segment read (into card memory at `stage_addr`, window `win_off`,
    // `win_bytes`) or its program (from its staging page once `copy->reads_left` is 0).
    std::shared_ptr<CopyState> copy;
    uint64_t stage_addr = 0;
    uint16_t win_off = 0, win_bytes = 0;
  };
  struct AccOpRef {
    uint64_t order;
    bool taker;  // take, peek or clear
  };
  ControllerPipe(RegMemPort& port, Clock& clock, uint32_t pipe, uint64_t region, uint64_t region_bytes,
                 CtrlPipeOptions o);
  void Drain(TimeNs since, Function<void(Status)> done);
  void ReadGeometry(uint32_t die, Function<void(Status)> done);
  void Enqueue(uint32_t die, Cmd c);
  void Issue(uint32_t die);
  void IssueAll();
  bool CanIssue(const Cmd& c) const;
  void AccDone(const Cmd& c);
  void StartCopy(const std::shared_ptr<CopyState>& cs);
  void CopyReadDone(const std::shared_ptr<CopyState>& cs, const nand::Completion& c);
  void CopyEnded(const std::shared_ptr<CopyState>& cs);
  uint64_t stage_buf(uint32_t slot) const;
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
  bool ownership_ = false;  // the controller has the OWNER registers
  uint16_t own_gen_ = 0;    // this port's last granted claim (PIPE.OWNER generation)
  uint32_t LeaseUnits(DurNs lease) const;
  nand::PipeTopology topology_;
  nand::onfi::ParameterPage pp_;
  bool ready_ = false;  // Init done
  uint32_t page_bits_ = 0, block_bits_ = 0, meta_bytes_ = 0, spare_bytes_ = 0;
  uint32_t accs_ = 0, staging_slots_ = 0;
  uint64_t next_order_ = 0;
  std::vector<std::deque<AccOpRef>> acc_ops_;        // per accumulator, in submission order
  std::vector<uint32_t> free_stage_;
  std::deque<std::shared_ptr<CopyState>> stage_wait_;  // copies waiting for a staging page
  std::vector<std::deque<Cmd>> queued_;
  std::vector<std::optional<Cmd>> inflight_;
  std::vector<uint16_t> gen_;
  uint32_t sq_tail_ = 0, cq_head_ = 0;
  // The tag written at each SQ index: a completion for a descriptor whose fetch failed
  // names only its index.
  std::vector<uint16_t> sq_tags_;
  bool cq_phase_ = true;
  uint32_t in_ring_ = 0;
  bool tick_armed_ = false;
  Stats stats_;
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace vsl::hw
