// The simulated pipe's ownership (nand::FlashPipe::Claim, docs/raw-flash-contract.md
// "Ownership"): a port per host, claims, leases and the fencing of stale commands.
#include <algorithm>

#include "vsl/simcard/sim_pipe.h"

namespace vsl::simcard {

using nand::FlashCallback;
using nand::FlashStatus;

// ---- Ownership (nand::FlashPipe::Claim) ----

// One host's port on a SimPipe: its commands carry its generation.
class SimPipePort final : public nand::FlashPipe {
 public:
  explicit SimPipePort(SimPipe& p) : p_(p) {}
  const nand::PipeTopology& topology() const override { return p_.topology(); }
  nand::PlpState plp_state() const override { return p_.plp_state(); }
  void Read(const nand::ReadRequest& req, FlashCallback done) override {
    if (Refuse(done)) return;
    Stamp s(p_, gen_);
    p_.Read(req, std::move(done));
  }
  void Program(const nand::ProgramRequest& req, FlashCallback accepted, FlashCallback done) override {
    if (Refuse(done)) return;
    Stamp s(p_, gen_);
    p_.Program(req, std::move(accepted), std::move(done));
  }
  void Erase(uint32_t die, uint32_t block, FlashCallback done) override {
    if (Refuse(done)) return;
    Stamp s(p_, gen_);
    p_.Erase(die, block, std::move(done));
  }
  void Reset(uint32_t die, FlashCallback done) override {
    if (Refuse(done)) return;  // a reset would abort the owner's commands
    p_.Reset(die, std::move(done));
  }
  void ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len, FlashCallback done) override {
    p_.ReadId(die, address, out, len, std::move(done));  // identification: any host
  }
  void ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, FlashCallback done) override {
    p_.ReadParameterPage(die, out, len, std::move(done));
  }
  uint32_t stage_slots() const override { return p_.stage_slots(); }
  void Stage(uint32_t slot, const nand::ProgramRequest& req, FlashCallback accepted, FlashCallback done) override {
    if (Refuse(done)) return;
    Stamp s(p_, gen_);
    p_.Stage(slot, req, std::move(accepted), std::move(done));
  }
  void ClearStage(uint32_t slot) override {
    if (p_.Current(gen_)) p_.ClearStage(slot);
  }
  uint32_t copy_accumulators() const override { return p_.copy_accumulators(); }
  void ClearAccumulator(uint32_t acc) override {
    if (p_.Current(gen_)) p_.ClearAccumulator(acc);
  }
  void Copy(const nand::CopyRequest& req, FlashCallback accepted, FlashCallback done) override {
    if (Refuse(done)) return;
    Stamp s(p_, gen_);
    p_.Copy(req, std::move(accepted), std::move(done));
  }
  bool offers_ownership() const override { return true; }
  nand::ClaimReply Claim(uint32_t host, bool force, DurNs lease) override {
    nand::ClaimReply r = p_.ClaimFor(host, force, lease);
    if (r.granted) gen_ = r.owner.generation;
    return r;
  }
  bool Renew(DurNs lease) override { return p_.RenewFor(gen_, lease); }
  void Release() override { p_.ReleaseFor(gen_); }
  nand::PipeOwner owner() const override { return p_.owner_; }

 private:
  // Sets the pipe's submitting generation for one call.
  struct Stamp {
    Stamp(SimPipe& pipe, uint32_t g) : p(pipe), old(pipe.submit_gen_) { pipe.submit_gen_ = g; }
    ~Stamp() { p.submit_gen_ = old; }
    SimPipe& p;
    uint32_t old;
  };
  bool Refuse(FlashCallback& done) {
    if (p_.Current(gen_)) return false;
    ++p_.stats_.fenced;
    p_.Reject(std::move(done), FlashStatus::kFenced);
    return true;
  }
  SimPipe& p_;
  uint32_t gen_ = 0;  // its last granted claim's generation
};

std::unique_ptr<nand::FlashPipe> SimPipe::NewPort() { return std::make_unique<SimPipePort>(*this); }

nand::ClaimReply SimPipe::ClaimFor(uint32_t host, bool force, DurNs lease) {
  nand::ClaimReply r;
  const TimeNs now = Now();
  const bool open = owner_.host == 0 || now >= owner_.lease_until || owner_.host == host;
  if (host == 0 || (!open && !force)) {
    r.owner = owner_;
    return r;
  }
  ++owner_.generation;
  if (owner_.generation == 0 || owner_.generation == kUnchecked) owner_.generation = 1;
  owner_.host = host;
  owner_.lease_until = lease >= kTimeNever - now ? kTimeNever : now + lease;
  ++stats_.claims;
  FenceStale();
  r.granted = true;
  r.owner = owner_;
  return r;
}

bool SimPipe::RenewFor(uint32_t gen, DurNs lease) {
  if (gen == 0 || gen != owner_.generation || owner_.host == 0) return false;
  const TimeNs now = Now();
  owner_.lease_until = lease >= kTimeNever - now ? kTimeNever : now + lease;
  return true;
}

void SimPipe::ReleaseFor(uint32_t gen) {
  if (gen == 0 || gen != owner_.generation || owner_.host == 0) return;
  owner_.host = 0;
  owner_.lease_until = 0;
  FenceStale();
}

void SimPipe::FenceStale() {
  const uint32_t gen = owner_.generation;
  const bool released = owner_.host == 0;
  auto stale = [gen, released](const Op& op) {
    return op.gen != kUnchecked && (op.gen != gen || released);
  };
  // Programs (copies included) first: fencing a copy's program unlinks its source reads,
  // which are then fenced as plain reads; fencing a read first would let its copy go on
  // to program zeros.
  for (const bool programs : {true, false}) {
    std::vector<std::pair<Op*, uint64_t>> ops;
    for (Op& op : all_) {
      if (stale(op) && (op.kind == Op::Kind::kProgram) == programs) ops.emplace_back(&op, op.serial);
    }
    for (auto [op, serial] : ops) {
      if (op->serial != serial || op->started || op->dead_add || op->stage_slot >= 0) continue;
      if (op->kind == Op::Kind::kProgram && op->admitted) continue;  // in the write buffer: it goes to flash
      ReleaseBudget(op);
      ++stats_.fenced;
      Complete(op, FlashStatus::kFenced);
    }
  }
  for (uint32_t slot = 0; slot < stage_.size(); ++slot) ClearStage(slot);
  ClearAccumulators();
  RetryAdmission();
  for (uint32_t d = 0; d < dies_.size(); ++d) TryStartDie(d);
}

}  // namespace vsl::simcard
