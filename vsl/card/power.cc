#include "vsl/card/power.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace vsl::card {

using nand::Completion;
using nand::FlashCallback;
using nand::FlashStatus;

Status CheckPowerPolicy(const PowerPolicy& p, double static_w) {
  auto bad = [](double v) { return !std::isfinite(v) || v < 0; };
  if (bad(p.slot_limit_w) || bad(p.override_w) || bad(p.slot_capability_w) || p.slot_limit_w == 0) {
    return Status::InvalidArgument("power limits must be positive numbers of watts");
  }
  if (p.override_w > 0 && p.override_w > p.slot_capability_w) {
    return Status::InvalidArgument(fmt::format(
        "power override {:.2f} W is above what the slot is declared to supply ({:.2f} W): declare the "
        "slot's capability first (slot_capability_w, e.g. 75 for an x16 slot or with an external "
        "power cable)",
        p.override_w, p.slot_capability_w));
  }
  if (p.override_w == 0 && p.slot_limit_w > p.slot_capability_w) {
    return Status::InvalidArgument(fmt::format("slot limit {:.2f} W is above the slot's declared capability {:.2f} W",
                                               p.slot_limit_w, p.slot_capability_w));
  }
  if (p.limit_w() < static_w + 1.0) {
    return Status::InvalidArgument(fmt::format(
        "a limit of {:.2f} W leaves no power for flash work: the card's controllers draw {:.2f} W at rest",
        p.limit_w(), static_w));
  }
  if (p.window_ns < 10 * kMs) return Status::InvalidArgument("the power window must be at least 10 ms");
  if (!(p.throttle_c < p.shutdown_c) || !(p.resume_c < p.throttle_c)) {
    return Status::InvalidArgument("thermal thresholds must be resume < throttle < shutdown");
  }
  if (!(p.reduced_write_share > 0 && p.reduced_write_share <= 1)) {
    return Status::InvalidArgument("reduced_write_share must be in (0, 1]");
  }
  return Status::Ok();
}

std::string_view ThermalStateName(ThermalState s) {
  switch (s) {
    case ThermalState::kNormal: return "normal";
    case ThermalState::kThrottling: return "throttling";
    case ThermalState::kShutdown: return "shutdown";
  }
  return "?";
}

// ---- PowerGovernor ----

PowerGovernor::PowerGovernor(const model::Power& model, const nand::Geometry& g, const model::Timing& t,
                             const PowerPolicy& policy, bool unmetered)
    : model_(model),
      geo_(g),
      static_w_(model.static_w * g.controllers),
      full_write_w_(t.t_prog_ns > 0 ? g.controllers * g.pipes_per_controller * g.dies_per_pipe() *
                                          (model.program_uj * 1e-6 +
                                           (g.page_data_bytes + g.page_spare_bytes) * model.channel_nj_per_byte * 1e-9 +
                                           (g.page_data_bytes + g.meta_bytes_per_page()) * model.link_nj_per_byte * 1e-9) /
                                          (static_cast<double>(t.t_prog_ns) / 1e9)
                                    : 1e9),
      unmetered_(unmetered),
      policy_(policy) {
  Configure();
}

double PowerGovernor::ReadJ(uint32_t sectors, bool meta, bool data) const {
  const uint64_t m = meta ? geo_.meta_bytes_per_page() : 0;
  const uint64_t bus = uint64_t{sectors} * (geo_.ecc_codeword_bytes + geo_.ecc_parity_bytes) + m;
  const uint64_t link = (data ? uint64_t{sectors} * geo_.ecc_codeword_bytes : 0) + m;
  return model_.read_uj * 1e-6 + (bus * model_.channel_nj_per_byte + link * model_.link_nj_per_byte) * 1e-9;
}

double PowerGovernor::ProgramJ(bool data) const {
  const uint64_t bus = geo_.page_data_bytes + geo_.page_spare_bytes;
  const uint64_t link = (data ? geo_.page_data_bytes : 0) + geo_.meta_bytes_per_page();
  return model_.program_uj * 1e-6 + (bus * model_.channel_nj_per_byte + link * model_.link_nj_per_byte) * 1e-9;
}

double PowerGovernor::EraseJ() const { return model_.erase_uj * 1e-6; }

double PowerGovernor::CopyJ(const nand::CopyRequest& req) const {
  uint64_t reads = 1, cws = geo_.codewords_per_page();
  if (req.segment_count != 0) {
    reads = req.segment_count;
    cws = 0;
    for (uint32_t i = 0; i < req.segment_count && i < nand::kMaxCopySegments; ++i) cws += req.segments[i].cw_count;
  }
  const uint64_t bus = cws * (geo_.ecc_codeword_bytes + geo_.ecc_parity_bytes) + geo_.page_data_bytes +
                       geo_.page_spare_bytes;
  return (static_cast<double>(reads) * model_.read_uj + model_.program_uj) * 1e-6 +
         static_cast<double>(bus) * model_.channel_nj_per_byte * 1e-9;
}

// The bucket: over any window W, admitted energy <= burst + rate * (W + lag), and the
// energy spent in the window is at most what was admitted from lag before it. Choosing
// rate = (dyn * W - burst) / (W + lag) keeps the spent energy within dyn * W, so static
// plus NAND power averages at most the limit over the window.
void PowerGovernor::Configure() {
  const double dyn = std::max(0.0, policy_.limit_w() - static_w_) * budget_share_;
  const double w = static_cast<double>(policy_.window_ns) / 1e9;
  const double lag = static_cast<double>(kQueueLagNs) / 1e9;
  burst_j_ = std::max(dyn * 0.002, 8 * EraseJ());
  burst_j_ = std::min(burst_j_, dyn * w / 4);
  rate_w_ = std::max(0.0, (dyn * w - burst_j_) / (w + lag));
  reserve_j_ = burst_j_ / 4;
  tokens_ = std::min(tokens_, burst_j_);
  write_tokens_ = std::min(write_tokens_, burst_j_);
}

void PowerGovernor::Refill(TimeNs now) const {
  if (!started_) {
    started_ = true;
    at_ = now;
    tokens_ = burst_j_;
    write_tokens_ = burst_j_;
    return;
  }
  if (now <= at_) return;
  const double dt = static_cast<double>(now - at_) / 1e9;
  at_ = now;
  tokens_ = std::min(burst_j_, tokens_ + rate_w_ * dt);
  write_tokens_ = std::min(burst_j_, write_tokens_ + full_write_w_ * write_share_ * dt);
}

bool PowerGovernor::TakeLocked(double joules, bool write) {
  if (budget_share_ <= 0) {
    // This host holds no pipe of the shared card (its LUNs released or fenced): it has no
    // budget, and nothing it still sends is run by the card (which fences it). Holding it
    // would hold it for ever (nothing refills): it goes, and fails there.
    return true;
  }
  if (unmetered_) {
    ++(write ? stats_.writes : stats_.reads);
    (write ? stats_.write_j : stats_.read_j) += joules;
    return true;
  }
  if (write) {
    // Writes keep the read reserve and, when throttled, their own cap.
    if (tokens_ - joules < reserve_j_) return false;
    if (write_share_ < 1.0 && write_tokens_ < joules) return false;
    tokens_ -= joules;
    if (write_share_ < 1.0) write_tokens_ -= joules;
    ++stats_.writes;
    stats_.write_j += joules;
  } else {
    if (tokens_ < joules) return false;
    tokens_ -= joules;
    ++stats_.reads;
    stats_.read_j += joules;
  }
  return true;
}

bool PowerGovernor::TryTake(TimeNs now, double joules, bool write) {
  {
    std::lock_guard<std::mutex> l(mu_);
    Refill(now);
    if (!TakeLocked(joules, write)) return false;
  }
  NoteActivity();
  return true;
}

DurNs PowerGovernor::WaitHint(TimeNs now, double joules, bool write) const {
  std::lock_guard<std::mutex> l(mu_);
  Refill(now);
  double need = (write ? joules + reserve_j_ : joules) - tokens_;
  double secs = need > 0 && rate_w_ > 0 ? need / rate_w_ : 0;
  if (write && write_share_ < 1.0 && write_tokens_ < joules) {
    secs = std::max(secs, (joules - write_tokens_) / (full_write_w_ * write_share_));
  }
  return std::max<DurNs>(kUs, static_cast<DurNs>(std::ceil(secs * 1e9)));
}

void PowerGovernor::PostWriteHead(const void* who, uint64_t ticket, double joules, bool eligible) {
  std::lock_guard<std::mutex> l(mu_);
  for (auto it = heads_.begin(); it != heads_.end(); ++it) {
    if (it->who != who) continue;
    if (ticket == 0) {
      heads_.erase(it);
    } else {
      *it = {who, ticket, joules, eligible};
    }
    return;
  }
  if (ticket != 0) heads_.push_back({who, ticket, joules, eligible});
}

double PowerGovernor::OlderHeadsJ(const void* who, uint64_t ticket, bool* any) const {
  double j = 0;
  *any = false;
  for (const WriteHead& h : heads_) {
    if (h.who == who || !h.eligible || h.ticket >= ticket) continue;
    j += h.joules;
    *any = true;
  }
  return j;
}

bool PowerGovernor::TryTakeWrite(const void* who, uint64_t ticket, TimeNs now, double joules) {
  {
    std::lock_guard<std::mutex> l(mu_);
    bool older = false;
    OlderHeadsJ(who, ticket, &older);
    if (older) return false;
    Refill(now);
    if (!TakeLocked(joules, true)) return false;
  }
  NoteActivity();
  return true;
}

DurNs PowerGovernor::WriteWaitHint(const void* who, uint64_t ticket, TimeNs now, double joules) const {
  double older_j = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    bool any = false;
    older_j = OlderHeadsJ(who, ticket, &any);
  }
  return WaitHint(now, joules + older_j, true);
}

void PowerGovernor::NoteWait(bool write, DurNs waited) {
  std::lock_guard<std::mutex> l(mu_);
  if (write) {
    ++stats_.write_waits;
    stats_.write_wait_ns += waited;
  } else {
    ++stats_.read_waits;
  }
}

PowerPolicy PowerGovernor::policy() const {
  std::lock_guard<std::mutex> l(mu_);
  return policy_;
}

Status PowerGovernor::SetPolicy(const PowerPolicy& p) {
  VSL_RETURN_IF_ERROR(CheckPowerPolicy(p, static_w_));
  std::lock_guard<std::mutex> l(mu_);
  policy_ = p;
  Configure();
  return Status::Ok();
}

void PowerGovernor::SetBudgetShare(double share) {
  std::lock_guard<std::mutex> l(mu_);
  budget_share_ = std::clamp(share, 0.0, 1.0);
  Configure();
}

double PowerGovernor::budget_share() const {
  std::lock_guard<std::mutex> l(mu_);
  return budget_share_;
}

void PowerGovernor::SetWriteShare(double share) {
  std::lock_guard<std::mutex> l(mu_);
  write_share_ = std::clamp(share, 0.01, 1.0);
}

double PowerGovernor::write_share() const {
  std::lock_guard<std::mutex> l(mu_);
  return write_share_;
}

double PowerGovernor::refill_w() const {
  std::lock_guard<std::mutex> l(mu_);
  return rate_w_;
}

double PowerGovernor::burst_j() const {
  std::lock_guard<std::mutex> l(mu_);
  return burst_j_;
}

GovernorStats PowerGovernor::stats() const {
  std::lock_guard<std::mutex> l(mu_);
  return stats_;
}

// ---- GovernedPipe ----

GovernedPipe::GovernedPipe(nand::FlashPipe& inner, PowerGovernor& gov, Clock& clock)
    : inner_(inner), gov_(gov), clock_(&clock), dies_(inner.topology().dies()) {}

GovernedPipe::~GovernedPipe() {
  if (timer_ != 0) clock_->Cancel(timer_);
  gov_.PostWriteHead(this, 0, 0, false);  // what it held never goes: it keeps nobody waiting
}

bool GovernedPipe::BlockHasHeldWrite(uint32_t die, uint32_t block) const {
  return !held_blocks_.empty() && held_blocks_.count(BlockKey(die, block)) != 0;
}

void GovernedPipe::HoldBlock(uint32_t die, uint32_t block, int d) {
  const uint64_t k = BlockKey(die, block);
  if (d > 0) {
    ++held_blocks_[k];
  } else if (auto it = held_blocks_.find(k); it != held_blocks_.end() && --it->second == 0) {
    held_blocks_.erase(it);
  }
}

bool GovernedPipe::PipeWriteAllows(double joules) {
  if (write_share_ >= 1.0 || gov_.unmetered()) return true;
  const TimeNs now = clock_->Now();
  const double rate = gov_.full_write_w() * write_share_ /
                      static_cast<double>(std::max<uint32_t>(1, inner_.topology().controllers *
                                                                    inner_.topology().pipes_per_controller));
  const double burst = std::max(joules, rate * 0.002);
  if (now > pipe_at_) {
    pipe_tokens_ = std::min(burst, pipe_tokens_ + rate * static_cast<double>(now - pipe_at_) / 1e9);
    pipe_at_ = now;
  }
  return pipe_tokens_ >= joules;
}

void GovernedPipe::Issue(Held& h) {
  switch (h.kind) {
    case Held::kRead: inner_.Read(h.read, std::move(h.done)); break;
    case Held::kProgram: inner_.Program(h.program, std::move(h.accepted), std::move(h.done)); break;
    case Held::kErase: inner_.Erase(h.die, h.block, std::move(h.done)); break;
    case Held::kStage: inner_.Stage(h.slot, h.program, std::move(h.accepted), std::move(h.done)); break;
    case Held::kCopy:
      h.copy.meta = h.meta.empty() ? nullptr : h.meta.data();
      h.copy.fail_meta = h.fail_meta.empty() ? nullptr : h.fail_meta.data();
      inner_.Copy(h.copy, std::move(h.accepted), std::move(h.done));
      break;
  }
}

void GovernedPipe::Pump() {
  const TimeNs now = clock_->Now();
  // Reads first, each unless its die has an earlier write still held here.
  for (auto it = reads_.begin(); it != reads_.end();) {
    if (BlockHasHeldWrite(it->die, it->block)) {
      ++it;
      continue;
    }
    if (!gov_.TryTake(now, it->joules, false)) break;
    if (it->since != now) gov_.NoteWait(false, now - it->since);
    Held h = std::move(*it);
    it = reads_.erase(it);
    gov_.NoteHeld(-1);
    Issue(h);
  }
  // Writes in order (a die's writes must reach it in order, and a stage behind them).
  while (!writes_.empty()) {
    Held& h = writes_.front();
    if (h.joules > 0) {
      if (!PipeWriteAllows(h.joules)) {
        PostHead(false);  // held by this pipe's own cap: the others need not wait for it
        break;
      }
      if (!gov_.TryTakeWrite(this, h.ticket, now, h.joules)) {
        PostHead();
        break;
      }
      if (write_share_ < 1.0) pipe_tokens_ -= h.joules;
    }
    if (h.since != now) gov_.NoteWait(true, now - h.since);
    Held w = std::move(h);
    writes_.pop_front();
    gov_.NoteHeld(-1);
    HoldBlock(w.die, w.block, -1);
    Issue(w);
  }
  if (writes_.empty()) PostHead();
  // Reads that waited behind a write of their die may go now.
  if (!reads_.empty() && !writes_.empty()) {
    for (auto it = reads_.begin(); it != reads_.end();) {
      if (BlockHasHeldWrite(it->die, it->block) || !gov_.TryTake(now, it->joules, false)) {
        ++it;
        continue;
      }
      gov_.NoteWait(false, now - it->since);
      Held h = std::move(*it);
      it = reads_.erase(it);
      gov_.NoteHeld(-1);
      Issue(h);
    }
  }
  if (reads_.empty() && writes_.empty()) return;
  DurNs wait = kTimeNever;
  if (!writes_.empty()) wait = gov_.WriteWaitHint(this, writes_.front().ticket, now, writes_.front().joules);
  for (const Held& r : reads_) {
    if (!BlockHasHeldWrite(r.die, r.block)) {
      wait = std::min(wait, gov_.WaitHint(now, r.joules, false));
      break;
    }
  }
  if (wait == kTimeNever) wait = 10 * kUs;
  Arm(wait);
}

void GovernedPipe::Arm(DurNs delay) {
  if (timer_ != 0) clock_->Cancel(timer_);
  timer_ = clock_->After(delay, [this] {
    timer_ = 0;
    Pump();
  });
}

void GovernedPipe::Read(const nand::ReadRequest& req, FlashCallback done) {
  if (req.ppa.die >= dies_) return inner_.Read(req, std::move(done));
  // sector_count 0 reads the rest of the page from first_sector.
  const uint32_t cws = gov_.codewords_per_page();
  const uint32_t sectors = req.sector_count != 0 ? req.sector_count
                           : req.first_sector < cws ? cws - req.first_sector : 0;
  const double j = gov_.ReadJ(sectors, req.meta != nullptr, req.data != nullptr);
  const TimeNs now = clock_->Now();
  if (reads_.empty() && !BlockHasHeldWrite(req.ppa.die, req.ppa.block) && gov_.TryTake(now, j, false)) {
    return inner_.Read(req, std::move(done));
  }
  Held h{};
  h.kind = Held::kRead;
  h.die = req.ppa.die;
  h.block = req.ppa.block;
  h.joules = j;
  h.read = req;
  h.done = std::move(done);
  h.since = now;
  reads_.push_back(std::move(h));
  gov_.NoteHeld(1);
  if (timer_ == 0) Pump();
}

bool GovernedPipe::WriteGoesNow(TimeNs now, double joules) {
  if (!writes_.empty() || !PipeWriteAllows(joules) || !gov_.TryTakeWrite(this, UINT64_MAX, now, joules)) {
    return false;
  }
  if (write_share_ < 1.0) pipe_tokens_ -= joules;
  return true;
}

void GovernedPipe::PostHead(bool eligible) {
  if (writes_.empty()) {
    gov_.PostWriteHead(this, 0, 0, false);
    return;
  }
  const Held& h = writes_.front();
  gov_.PostWriteHead(this, h.joules > 0 ? h.ticket : 0, h.joules, eligible);
}

void GovernedPipe::HoldWrite(Held h) {
  HoldBlock(h.die, h.block, 1);
  h.ticket = gov_.NextTicket();
  writes_.push_back(std::move(h));
  gov_.NoteHeld(1);
  if (writes_.size() == 1) PostHead();
  if (timer_ == 0) Pump();
}

void GovernedPipe::Program(const nand::ProgramRequest& req, FlashCallback accepted, FlashCallback done) {
  if (req.ppa.die >= dies_) return inner_.Program(req, std::move(accepted), std::move(done));
  const double j = gov_.ProgramJ(req.data != nullptr);
  const TimeNs now = clock_->Now();
  if (WriteGoesNow(now, j)) {
    return inner_.Program(req, std::move(accepted), std::move(done));
  }
  Held h{};
  h.kind = Held::kProgram;
  h.die = req.ppa.die;
  h.block = req.ppa.block;
  h.joules = j;
  h.program = req;
  h.accepted = std::move(accepted);
  h.done = std::move(done);
  h.since = now;
  HoldWrite(std::move(h));
}

void GovernedPipe::Copy(const nand::CopyRequest& req, FlashCallback accepted, FlashCallback done) {
  if (req.dst.die >= dies_ || req.src.die >= dies_) return inner_.Copy(req, std::move(accepted), std::move(done));
  const double j = gov_.CopyJ(req);
  const TimeNs now = clock_->Now();
  if (WriteGoesNow(now, j)) {
    return inner_.Copy(req, std::move(accepted), std::move(done));
  }
  const uint32_t meta = gov_.meta_bytes();
  Held h{};
  h.kind = Held::kCopy;
  h.die = req.dst.die;
  h.block = req.dst.block;
  h.joules = j;
  h.copy = req;
  if (req.meta != nullptr) h.meta.assign(req.meta, req.meta + meta);
  if (req.fail_meta != nullptr) h.fail_meta.assign(req.fail_meta, req.fail_meta + meta);
  h.accepted = std::move(accepted);
  h.done = std::move(done);
  h.since = now;
  HoldWrite(std::move(h));
}

void GovernedPipe::Erase(uint32_t die, uint32_t block, FlashCallback done) {
  // An address outside the pipe: the controller refuses it; nothing to hold or charge.
  if (die >= dies_) return inner_.Erase(die, block, std::move(done));
  const double j = gov_.EraseJ();
  const TimeNs now = clock_->Now();
  if (WriteGoesNow(now, j)) {
    return inner_.Erase(die, block, std::move(done));
  }
  Held h{};
  h.kind = Held::kErase;
  h.die = die;
  h.block = block;
  h.joules = j;
  h.done = std::move(done);
  h.since = now;
  HoldWrite(std::move(h));
}

void GovernedPipe::Stage(uint32_t slot, const nand::ProgramRequest& req, FlashCallback accepted,
                         FlashCallback done) {
  // A staged image is programmed only at a power cut (on the card's stored energy): no
  // charge, but it keeps its place behind the writes held here.
  if (writes_.empty() || req.ppa.die >= dies_) {
    return inner_.Stage(slot, req, std::move(accepted), std::move(done));
  }
  Held h{};
  h.kind = Held::kStage;
  h.die = req.ppa.die;
  h.block = req.ppa.block;
  h.slot = slot;
  h.program = req;
  h.accepted = std::move(accepted);
  h.done = std::move(done);
  h.since = clock_->Now();
  HoldBlock(h.die, h.block, 1);
  h.ticket = gov_.NextTicket();
  writes_.push_back(std::move(h));
  gov_.NoteHeld(1);
}

void GovernedPipe::ClearStage(uint32_t slot) {
  // Images for the slot still held here never land: done kOk, accepted never.
  for (auto it = writes_.begin(); it != writes_.end();) {
    if (it->kind == Held::kStage && it->slot == slot) {
      HoldBlock(it->die, it->block, -1);
      FlashCallback d = std::move(it->done);
      it = writes_.erase(it);
      gov_.NoteHeld(-1);
      clock_->Post([d = std::move(d)]() mutable {
        Completion c;
        d(c);
      });
    } else {
      ++it;
    }
  }
  PostHead();
  inner_.ClearStage(slot);
}

void GovernedPipe::Reset(uint32_t die, FlashCallback done) {
  // What is held for the die is aborted with what the controller has queued.
  auto abort = [this, die](std::deque<Held>& q, bool writes) {
    for (auto it = q.begin(); it != q.end();) {
      if (it->die != die && !(it->kind == Held::kCopy && it->copy.src.die == die)) {
        ++it;
        continue;
      }
      if (writes) HoldBlock(it->die, it->block, -1);
      FlashCallback d = std::move(it->done);
      it = q.erase(it);
      gov_.NoteHeld(-1);
      clock_->Post([d = std::move(d)]() mutable {
        Completion c;
        c.status = FlashStatus::kAborted;
        d(c);
      });
    }
  };
  abort(reads_, false);
  abort(writes_, true);
  PostHead();
  inner_.Reset(die, std::move(done));
}

}  // namespace vsl::card
