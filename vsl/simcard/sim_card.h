// SimCard: the software flash card, the embedded default backend of the raw-flash contract.
//
// A card is a directory holding one sparse image per controller (ctrl0.img, ctrl1.img...,
// see image_format.h). It models, per pipe: dies that execute their commands in order and
// are busy for tR / tPROG / tBERS; one shared bus per channel; the controller's host link
// (shared by its pipes); the protected write buffer with its hold-up budget; raw bit
// errors against the ECC's strength; factory and grown bad blocks; dead dies; resets; and
// power cuts at any instant. NAND rule violations by the host are refused and counted.
//
// Time: everything is scheduled on the Clock the card is given. With a VirtualClock the
// card runs in virtual time (deterministic from the clock's and the card's seeds); with a
// RealClock it is paced in real time; with null timing every operation completes at once
// (for measuring the host's CPU cost). All calls must be made on the clock's thread; a
// card opened with a clock per pipe (SimCardOptions::pipe_clocks) takes each pipe's calls
// on that pipe's clock's thread.
#pragma once

#include <cstdint>
#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "vsl/core/clock.h"
#include "vsl/core/status.h"
#include "vsl/nand/flash.h"
#include "vsl/simcard/image.h"
#include "vsl/simcard/image_format.h"
#include "vsl/simcard/profile.h"

namespace vsl::simcard {

using model::ControllerHealth;
using model::DieCounters;
using model::EccMode;
using model::EccModeName;
using model::Lifetime;
using model::ParseEccMode;
using model::PowerReading;
using model::SimCardOptions;

struct CreateOptions {
  std::string serial;      // empty: derived from the seed
  uint64_t seed = 1;       // draws the card id, serial and factory bad blocks
  uint32_t blocks_per_lun = 0;  // 0: the profile's; otherwise overrides it (smaller cards)
};

// Counters per pipe since the card was opened.
struct PipeStats {
  uint64_t reads = 0, programs = 0, erases = 0, resets = 0;
  uint64_t bytes_read = 0, bytes_programmed = 0;
  uint64_t corrected_bits = 0, uncorrectable_reads = 0;
  uint64_t program_fails = 0, erase_fails = 0, die_timeouts = 0, aborted = 0;
  uint64_t invalid_address = 0, violation_not_erased = 0, violation_out_of_order = 0;
  uint64_t admission_waits = 0;  // programs that waited for write-buffer room
  uint64_t stages = 0;           // parity images that landed in a stage slot
  uint64_t stages_flushed = 0;   // of those, programmed by a power-cut flush
  uint64_t copies = 0;           // controller-side copies programmed to their page
  uint64_t copy_bytes = 0;       // data they moved inside the controller
  uint64_t acc_pages = 0;        // pages and images that took an accumulator (parity formed here)
  uint64_t link_bytes = 0;       // bytes this pipe moved over the controller's host link
  uint64_t claims = 0;           // ownership claims granted (SimPipe::NewPort)
  uint64_t fenced = 0;           // commands refused or dropped for a stale generation
  // Time the channels' buses carried commands and data, and the dies spent from an
  // operation's start (which may wait for the bus) to its end, summed over channels and
  // dies: divided by the elapsed time and their count, how busy each resource was.
  uint64_t bus_busy_ns = 0, die_busy_ns = 0;
  // Of die_busy_ns: waiting for the channel before the die's own command or data crossed.
  uint64_t die_bus_wait_ns = 0;
  // Energy the pipe's NAND work spent (array operations, channel and link bytes), nJ:
  // over a window, the dynamic power the governor admitted.
  uint64_t energy_nj = 0;
  // Bit-exact ECC only: codewords decoded, and reads the decoder passed with wrong data (a
  // miscorrection: more than t raw errors landing within t of another codeword). Ground
  // truth the card knows and a real controller does not; the host's CRCs must catch them.
  uint64_t ecc_codewords_decoded = 0, miscorrected_reads = 0;
  uint64_t rule_violations() const { return violation_not_erased + violation_out_of_order; }
};

// Ground truth about one block, for tests and health summaries (not part of the contract).
struct BlockInfo {
  uint32_t erase_count = 0;
  uint32_t reads_since_erase = 0;
  uint32_t next_page = 0;
  bool factory_bad = false;
  bool grown_bad = false;
};

class SimPipe;
class PlpJournal;
class HeatSource;

class SimCard {
 public:
  // Creates a new card directory `dir` (created if missing; must hold no images) from
  // `profile`. Does not open it.
  static Status Create(const std::string& dir, const Profile& profile, const CreateOptions& opts);
  // Opens the card in `dir` on `clock`. Stores null and returns an error for a missing,
  // foreign, damaged or inconsistent card, with the reason.
  static Result<std::unique_ptr<SimCard>> Open(const std::string& dir, Clock& clock,
                                               const SimCardOptions& opts = {});
  // A clean close: the images are marked closed and synced. (After PowerCut they are left
  // marked open, so the next Open counts an unsafe power-off.) Commands still outstanding
  // are dropped without completion. The card's timers live on its clock: destroy a card
  // only when the clock holds none of its events (run the clock until idle first, as
  // after PowerCut), or destroy the clock with it.
  ~SimCard();
  SimCard(const SimCard&) = delete;
  SimCard& operator=(const SimCard&) = delete;

  const Profile& profile() const { return profile_; }
  const nand::Geometry& geometry() const { return geometry_; }
  const Timing& timing() const { return timing_; }
  EccMode ecc_mode() const { return opts_.ecc; }
  uint32_t pipe_count() const { return static_cast<uint32_t>(pipes_.size()); }
  // Pipe `index` = controller * pipes_per_controller + pipe-in-controller.
  nand::FlashPipe& pipe(uint32_t index);
  // A host's port on pipe `index` (ownership: nand::FlashPipe::Claim; SimPipe::NewPort).
  std::unique_ptr<nand::FlashPipe> NewPort(uint32_t index);
  const PipeStats& stats(uint32_t pipe) const;
  ControllerImage& image(uint32_t controller) { return *images_[controller]; }
  uint64_t card_id() const { return images_[0]->identity().card_id; }
  bool powered() const { return powered_; }

  // Test hook: the hosting process "dies" now. Destroying the card afterwards leaves the
  // images marked attached and the PLP journal as it is (as a SIGKILL would), and drops
  // outstanding commands; the clock's pending events must not run after (use a new one).
  void TEST_Abandon() { abandoned_ = true; }

  // --- Power ---
  // Cuts power now. Programs and erases running on a die finish if they end within the
  // hold-up budget (PLP healthy) and are torn otherwise; the protected buffer's accepted
  // programs are flushed in order within the budget; everything else is dropped. Every
  // outstanding command then completes with kAborted and the card stays off.
  void PowerCut();
  // Powers the card back on (as after a power cycle); counts an unsafe power-off.
  void PowerOn();
  void SetPlpState(nand::PlpState state);
  nand::PlpState plp_state() const;

  // --- Power and heat (profile.h, Power) ---
  // Any thread.
  PowerReading ReadPower(uint32_t controller) const;
  Environment environment() const;
  void SetEnvironment(const Environment& env);
  // The controller's low-power state (the host's choice in a thermal shutdown): static
  // power drops to standby_w.
  void SetLowPower(uint32_t controller, bool on);

  // --- Lifetime counters (image_format.h LifetimeRecord); any thread ---
  Lifetime lifetime(uint32_t controller) const;
  // The host's logical I/O through this controller, for its record.
  void AccountHostIo(uint32_t controller, uint64_t read_bytes, uint64_t write_bytes);
  void CountThermalShutdown(uint32_t controller);
  // Writes the counters into the image's record (done at power cuts, and at close for a
  // card on one clock; a card with a clock per pipe is saved by its owner before those
  // clocks stop).
  void SaveLifetime();

  // --- Controller configuration ---
  // The pipe mode register of `controller` (image_format.h ImageState::pipe_mode), kept
  // across power cycles. Set it only while none of the controller's pipes is in use.
  uint8_t pipe_mode(uint32_t controller) const;
  Status SetPipeMode(uint32_t controller, uint8_t mode);
  // Moves pipe `index` onto `clock` (e.g. both pipes of a controller onto one engine in
  // single-pipe mode). The pipe must have nothing outstanding.
  Status RebindPipe(uint32_t index, Clock& clock);
  // Loads a controller firmware image (firmware.h) into `controller`: checked first
  // (Corruption for a damaged image, InvalidArgument for another model: nothing changes),
  // then stored beside the card image (written to a new file, synced, renamed over the
  // old one) and only then made the active version. A failure at any step keeps the old.
  Status UpdateFirmware(uint32_t controller, const std::vector<uint8_t>& image);
  // The controller's active firmware version (an update's, else the shipped one).
  std::string firmware_version(uint32_t controller) const;
  // Reads the shape and the pipe modes of the card in `dir` without opening it (no
  // power-on counted): what a host needs to know before it lays out its engines.
  struct Probed {
    nand::Geometry geometry;
    std::vector<uint8_t> pipe_modes;  // per controller
  };
  static Result<Probed> Probe(const std::string& dir);

  // --- Fault injection (persistent where the real fault would be) ---
  void InjectDieFailure(uint32_t pipe, uint32_t die);
  void InjectProgramFail(uint32_t pipe, nand::Ppa ppa);            // next program there fails
  void InjectEraseFail(uint32_t pipe, uint32_t die, uint32_t block);  // next erase fails
  // A page's data decays past what ECC corrects: every read of its data codewords (and
  // every copy from it) is uncorrectable until its block is erased; its last codeword,
  // which carries the metadata, still reads.
  void InjectUncorrectable(uint32_t pipe, nand::Ppa ppa);
  void CorruptParameterPage(uint32_t pipe, uint32_t die, uint32_t copy_mask);
  void TEST_SetEraseCount(uint32_t pipe, uint32_t die, uint32_t block, uint32_t pe);

  // --- Ground truth ---
  BlockInfo block_info(uint32_t pipe, uint32_t die, uint32_t block) const;
  bool die_failed(uint32_t pipe, uint32_t die) const;
  // Counters over the dies of `pipe`: the pipe's engine changes them, so while the card
  // is in use call this on that engine's thread (Card::RunOnPipe).
  DieCounters PipeCounters(uint32_t pipe) const;
  // `per_pipe`: PipeCounters of each of the controller's pipes, in order. Empty: they are
  // read here, which is only safe while no engine of the controller runs.
  ControllerHealth Health(uint32_t controller, const std::vector<DieCounters>& per_pipe = {}) const;

 private:
  friend class SimPipe;
  SimCard(Clock& clock, const SimCardOptions& opts);
  void FinishJournal(uint32_t controller, uint32_t pipe, PlpJournal& j);
  bool abandoned_ = false;
  int lock_fd_ = -1;  // the card directory, flock'ed exclusively while open

  Clock& clock_;
  std::string dir_;
  SimCardOptions opts_;
  Profile profile_;
  nand::Geometry geometry_;
  Timing timing_;
  std::vector<std::unique_ptr<ControllerImage>> images_;
  std::vector<std::unique_ptr<SimPipe>> pipes_;
  std::vector<std::unique_ptr<PlpJournal>> journals_;  // per pipe (PlpJournal)
  // Per controller: when its host link is next free (its pipes may run on two threads).
  struct Link {
    std::mutex mu;
    TimeNs free_at = 0;
  };
  std::unique_ptr<Link[]> links_;
  // Takes `bytes` of the controller's host link from `now` on; returns when they are over.
  TimeNs TakeLink(uint32_t controller, TimeNs now, uint64_t bytes);
  bool single_clock() const { return opts_.pipe_clocks.empty(); }
  // Thermal state per controller: its static-power source and low-power flag; the
  // environment (under env_mu_) sets every source's thermal resistance.
  struct Thermal;
  std::unique_ptr<Thermal[]> thermal_;
  mutable std::mutex env_mu_;
  Environment env_;
  std::atomic<double> thermal_r_{1.0};
  double StaticWatts(uint32_t controller) const;
  // Per controller: the record as loaded at open, and this session's host-side additions.
  struct LifeBase {
    format::LifetimeRecord at_open{};
    std::atomic<uint64_t> host_read{0}, host_write{0}, thermal_shutdowns{0};
    std::atomic<int64_t> max_temp_mc{INT64_MIN};
    TimeNs opened_at = 0;
  };
  std::unique_ptr<LifeBase[]> life_;
  mutable std::mutex life_mu_;  // SaveLifetime
  TimeNs ControllerNow(uint32_t controller) const;
  std::vector<Clock*> ctrl_clocks_;  // per controller, fixed at Open (sensor time base)
  void SetStaticPowerAll();  // after powered_ changed
  std::atomic<bool> powered_{true};
};

}  // namespace vsl::simcard
