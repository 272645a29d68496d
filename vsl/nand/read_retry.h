// ReadRetryPipe: a FlashPipe that reads a page again when the controller reports it
// uncorrectable, up to `retries` more times, before passing the failure on.
//
// Read errors on NAND are largely a matter of where the read thresholds sit relative to
// cells that have drifted; the vendors' answer is read-retry (sense again, in hardware
// with shifted thresholds). The simulated card draws fresh raw errors on every read, so a
// retry there is a new sample; on a device whose errors persist, a retry costs a tR and
// the failure still reaches the caller (whose FlashBack parity or scan logic then acts).
// Every other command passes straight through. Owned by its user (the FTL) and used on
// the inner pipe's clock; it must outlive the reads it has in flight.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "vsl/nand/flash.h"

namespace vsl::nand {

class ReadRetryPipe final : public FlashPipe {
 public:
  static constexpr uint32_t kDefaultRetries = 3;
  explicit ReadRetryPipe(FlashPipe& inner, uint32_t retries = kDefaultRetries)
      : inner_(inner), retries_(retries) {}

  struct Stats {
    uint64_t retries = 0;    // extra reads issued
    uint64_t recovered = 0;  // reads that failed, then succeeded on a retry
    uint64_t exhausted = 0;  // reads still uncorrectable after every retry
  };
  const Stats& stats() const { return stats_; }
  FlashPipe& inner() { return inner_; }

  const PipeTopology& topology() const override { return inner_.topology(); }
  PlpState plp_state() const override { return inner_.plp_state(); }
  void Read(const ReadRequest& req, FlashCallback done) override { Attempt(req, std::move(done), 0, 0); }
  void Program(const ProgramRequest& req, FlashCallback accepted, FlashCallback done) override {
    inner_.Program(req, std::move(accepted), std::move(done));
  }
  void Erase(uint32_t die, uint32_t block, FlashCallback done) override {
    inner_.Erase(die, block, std::move(done));
  }
  void Reset(uint32_t die, FlashCallback done) override { inner_.Reset(die, std::move(done)); }
  void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len, FlashCallback done) override {
    inner_.ReadId(die, address, out, len, std::move(done));
  }
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, FlashCallback done) override {
    inner_.ReadParameterPage(die, out, len, std::move(done));
  }
  uint32_t stage_slots() const override { return inner_.stage_slots(); }
  void Stage(uint32_t slot, const ProgramRequest& req, FlashCallback accepted, FlashCallback done) override {
    inner_.Stage(slot, req, std::move(accepted), std::move(done));
  }
  void ClearStage(uint32_t slot) override { inner_.ClearStage(slot); }
  // A copy's source read is the controller's own: a failure ends the copy (its
  // destination holds nothing) and the host moves the page itself, FlashBack rebuilding
  // it, so nothing is retried here.
  uint32_t copy_accumulators() const override { return inner_.copy_accumulators(); }
  void ClearAccumulator(uint32_t acc) override { inner_.ClearAccumulator(acc); }
  void Copy(const CopyRequest& req, FlashCallback accepted, FlashCallback done) override {
    inner_.Copy(req, std::move(accepted), std::move(done));
  }

 private:
  // A read in flight. Pooled, so the pass-through costs no allocation per read once warm
  // (the callback then holds two pointers and stays within Function's inline storage).
  struct Pending {
    ReadRequest req;
    FlashCallback done;
    uint32_t attempt = 0;
    TimeNs first_submit = 0;
  };
  // The completion reports the first attempt's submit time, so the caller sees the whole
  // latency, retries included. The read's callback owns its Pending until it runs: a
  // callback dropped without running (a card closed with commands outstanding) frees it.
  void Attempt(const ReadRequest& req, FlashCallback done, uint32_t attempt, TimeNs first_submit) {
    std::unique_ptr<Pending> p;
    if (free_.empty()) {
      p = std::make_unique<Pending>();
    } else {
      p = std::move(free_.back());
      free_.pop_back();
    }
    p->req = req;
    p->done = std::move(done);
    p->attempt = attempt;
    p->first_submit = first_submit;
    inner_.Read(req, [this, p = std::move(p)](const Completion& c) mutable { Finish(std::move(p), c); });
  }
  void Finish(std::unique_ptr<Pending> p, const Completion& c) {
    const TimeNs submitted = p->attempt == 0 ? c.submit_ns : p->first_submit;
    FlashCallback done = std::move(p->done);
    const ReadRequest req = p->req;
    const uint32_t attempt = p->attempt;
    free_.push_back(std::move(p));
    if (c.status == FlashStatus::kUncorrectable && attempt < retries_) {
      ++stats_.retries;
      Attempt(req, std::move(done), attempt + 1, submitted);
      return;
    }
    if (attempt > 0) ++(c.ok() ? stats_.recovered : stats_.exhausted);
    Completion out = c;
    out.submit_ns = submitted;
    done(out);
  }

  FlashPipe& inner_;
  const uint32_t retries_;
  Stats stats_;
  std::vector<std::unique_ptr<Pending>> free_;
};

}  // namespace vsl::nand
