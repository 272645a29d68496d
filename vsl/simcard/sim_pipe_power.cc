// The simulated pipe's reset, parameter page, injected die failures, power cut and power-on.
#include <algorithm>
#include <cstring>

#include "hls/bch.h"
#include "vsl/core/log.h"
#include "vsl/nand/onfi.h"
#include "vsl/simcard/ecc.h"
#include "vsl/simcard/sim_pipe.h"

namespace vsl::simcard {

using nand::Completion;
using nand::FlashCallback;
using nand::FlashStatus;
using format::PageState;

// ---- Reset, identification, power, faults ----

void SimPipe::AbortDie(uint32_t die) {
  Die& d = dies_[die];
  // Everything of this die that is outstanding, in submission order.
  // (Ending a copy's read ends its program too, which may be on this die: each op is
  // checked against its serial before it is touched.)
  std::vector<std::pair<Op*, uint64_t>> ops;
  for (Op& op : all_) {
    if (op.ppa.die == die) ops.emplace_back(&op, op.serial);
  }
  for (auto [op, serial] : ops) {
    if (op->serial != serial) continue;
    if (op->started && d.busy && !d.queue.empty() && &d.queue.front() == op) {
      if (op->kind == Op::Kind::kProgram && Now() >= op->bus_start_ns) ApplyTornProgram(op->ppa);
      if (op->kind == Op::Kind::kErase && Now() >= op->bus_start_ns) {
        ApplyTornErase(op->ppa.die, op->ppa.block);
      }
    }
    ReleaseBudget(op);
    Complete(op, FlashStatus::kAborted);
  }
  d.admit_wait.clear();
  d.busy = false;
  d.busy_until = Now();
}

void SimPipe::Reset(uint32_t die, FlashCallback done) {
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  if (die >= dies_.size()) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  ++stats_.resets;
  if (DieFailed(die)) {
    ++stats_.die_timeouts;
    const TimeNs submit = Now();
    clock_->After(t_.die_timeout_ns, [this, cb = std::move(done), submit]() mutable {
      cb(Completion{FlashStatus::kDieTimeout, 0, submit, Now()});
    });
    return;
  }
  AbortDie(die);
  RetryAdmission();
  Die& d = dies_[die];
  d.busy = true;
  d.busy_until = Now() + t_.t_reset_ns;
  const uint64_t rs = ++d.reset_serial;
  const TimeNs submit = Now();
  clock_->At(d.busy_until, [this, die, rs, submit, cb = std::move(done)]() mutable {
    Die& dd = dies_[die];
    if (dd.reset_serial != rs || !card_.powered_) {
      cb(Completion{FlashStatus::kAborted, 0, submit, Now()});
      return;
    }
    dd.busy = false;
    cb(Completion{FlashStatus::kOk, 0, submit, Now()});
    TryStartDie(die);
  });
}

void SimPipe::TimeOutOnDeadDie(FlashCallback done) {
  const TimeNs submit = Now();
  clock_->After(t_.die_timeout_ns, [this, cb = std::move(done), submit]() mutable {
    ++stats_.die_timeouts;
    cb(Completion{FlashStatus::kDieTimeout, 0, submit, Now()});
  });
}

void SimPipe::ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len,
                     FlashCallback done) {
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  if (die >= dies_.size() || out == nullptr ||
      (address != nand::onfi::kReadIdJedecAddr && address != nand::onfi::kReadIdOnfiAddr)) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  const TimeNs submit = Now();
  if (DieFailed(die)) return TimeOutOnDeadDie(std::move(done));
  std::memset(out, 0, len);
  if (address == nand::onfi::kReadIdOnfiAddr) {
    std::memcpy(out, nand::onfi::kOnfiSignature.data(), std::min<uint32_t>(len, 4));
  } else {
    const auto id = nand::onfi::JedecIdBytes(card_.profile_.jedec_id, card_.profile_.device_id);
    std::memcpy(out, id.data(), std::min<uint32_t>(len, static_cast<uint32_t>(id.size())));
  }
  clock_->After(t_.cmd_overhead_ns, [this, cb = std::move(done), submit]() mutable {
    cb(Completion{FlashStatus::kOk, 0, submit, Now()});
  });
}

void SimPipe::ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, FlashCallback done) {
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  if (die >= dies_.size() || out == nullptr) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  const TimeNs submit = Now();
  if (DieFailed(die)) return TimeOutOnDeadDie(std::move(done));
  const uint8_t* page = image().header().param_page;
  const uint32_t bad = image().die(image_die(die)).param_page_bad_mask;
  constexpr uint32_t kPage = nand::onfi::kParamPageBytes;
  for (uint32_t off = 0; off < len; off += kPage) {
    const uint32_t n = std::min(kPage, len - off);
    std::memcpy(out + off, page, n);
    const uint32_t copy = off / kPage;
    if (copy < 32 && (bad >> copy & 1) != 0) {
      for (uint32_t i = 0; i < n; i += 17) out[off + i] ^= 0x5A;  // damaged copy
    }
  }
  const DurNs dur = t_.cmd_overhead_ns + t_.t_read_ns + TransferNs(len, t_.bus_bytes_per_sec);
  clock_->After(dur, [this, cb = std::move(done), submit]() mutable {
    cb(Completion{FlashStatus::kOk, 0, submit, Now()});
  });
}

void SimPipe::InjectDieFailure(uint32_t die) {
  image().die(image_die(die)).flags |= format::kDieFailed;
  Die& d = dies_[die];
  // The running program or erase dies with the die; queued work times out.
  if (d.busy && !d.queue.empty()) {
    Op* op = &d.queue.front();
    const bool on_die = op->started && !op->bus_wait;
    if (on_die && op->kind == Op::Kind::kProgram) ApplyTornProgram(op->ppa);
    if (on_die && op->kind == Op::Kind::kErase) ApplyTornErase(op->ppa.die, op->ppa.block);
    if (op->started) {
      // Leave the dead op to time out like the rest.
      op->serial = next_serial_++;
    }
  }
  d.busy = false;
  // Staged images for the die (landed or waiting for room) time out; its queued programs
  // do so through TryStartDie.
  std::vector<Op*> staged;
  for (Op* op : d.admit_wait) {
    if (op->stage_slot >= 0) staged.push_back(op);
  }
  for (Op* op : stage_) {
    if (op != nullptr && op->ppa.die == die) staged.push_back(op);
  }
  for (Op* op : staged) TimeOutStage(op);
  d.admit_wait.clear();
  TryStartDie(die);
  RetryAdmission();
}

void SimPipe::PowerCut(DurNs budget_ns) {
  cutting_ = true;
  const TimeNs now = Now();
  const TimeNs deadline = now + budget_ns;
  for (uint32_t c = 0; c < g_.channels_per_pipe; ++c) {
    struct Lane {
      uint32_t die;
      std::vector<Op*> todo;  // accepted programs and erases not yet started, in order
      TimeNs free_at;
      bool stopped;
    };
    std::vector<Lane> lanes;
    for (uint32_t l = 0; l < g_.luns_per_channel; ++l) {
      const uint32_t die = c * g_.luns_per_channel + l;
      Die& d = dies_[die];
      Lane lane{die, {}, now, DieFailed(die)};
      for (Op& op : d.queue) {
        if (op.started && !op.bus_wait) {
          // Running on the die: finishes within the budget or is torn.
          if (op.kind == Op::Kind::kRead || lane.stopped) continue;
          if (op.array_end_ns <= deadline) {
            if (op.kind == Op::Kind::kProgram) {
              const FlashStatus st = ApplyProgram(&op);
              (void)st;
            } else {
              (void)ApplyErase(op.ppa.die, op.ppa.block);
            }
            lane.free_at = op.array_end_ns;
          } else {
            if (op.kind == Op::Kind::kProgram) ApplyTornProgram(op.ppa);
            else ApplyTornErase(op.ppa.die, op.ppa.block);
            lane.stopped = true;
          }
        } else if ((op.kind == Op::Kind::kProgram && op.data_ready) ||
                   op.kind == Op::Kind::kErase) {
          lane.todo.push_back(&op);
        }
      }
      // Staged parity images go after the die's last accepted program and the last
      // erase of their own block (their pages follow every page the die holds for that
      // block), ahead of other erases queued behind, which nothing accepted needs.
      for (Op* op : stage_) {
        if (op == nullptr || op->ppa.die != die) continue;
        std::size_t at = 0;
        for (std::size_t i = 0; i < lane.todo.size(); ++i) {
          const Op* q = lane.todo[i];
          if (q->kind == Op::Kind::kProgram || q->ppa.block == op->ppa.block) at = i + 1;
        }
        lane.todo.insert(lane.todo.begin() + static_cast<std::ptrdiff_t>(at), op);
        ++stats_.stages_flushed;
      }
      lanes.push_back(std::move(lane));
    }
    // Flush the protected buffer: dies work in parallel, transfers share the channel bus;
    // at each step the die that can start soonest goes next.
    TimeNs bus_free = std::max(now, channels_[c].bus_free);
    std::vector<std::size_t> next(lanes.size(), 0);
    for (;;) {
      int pick = -1;
      for (std::size_t i = 0; i < lanes.size(); ++i) {
        if (lanes[i].stopped || next[i] >= lanes[i].todo.size()) continue;
        if (pick < 0 || lanes[i].free_at < lanes[static_cast<std::size_t>(pick)].free_at) {
          pick = static_cast<int>(i);
        }
      }
      if (pick < 0) break;
      Lane& lane = lanes[static_cast<std::size_t>(pick)];
      Op* op = lane.todo[next[static_cast<std::size_t>(pick)]++];
      const TimeNs start = std::max(lane.free_at, bus_free);
      const bool prog = op->kind == Op::Kind::kProgram;
      const TimeNs bus_end = start + t_.cmd_overhead_ns + (prog ? op->flush_xfer_ns : 0);
      const TimeNs end = bus_end + (prog ? t_.t_prog_ns : t_.t_erase_ns);
      if (end <= deadline) {
        if (prog) (void)ApplyProgram(op);
        else (void)ApplyErase(op->ppa.die, op->ppa.block);
        lane.free_at = end;
        bus_free = bus_end;
      } else {
        if (start < deadline) {
          if (prog) ApplyTornProgram(op->ppa);
          else ApplyTornErase(op->ppa.die, op->ppa.block);
        }
        lane.stopped = true;
      }
    }
  }
  // Power is gone: every outstanding command ends aborted.
  std::fill(stage_.begin(), stage_.end(), nullptr);
  while (!all_.empty()) {
    Op* op = &all_.front();
    ReleaseBudget(op);
    op->accepted.Reset();
    Complete(op, FlashStatus::kAborted);
  }
  for (auto& d : dies_) {
    d.busy = false;
    d.busy_until = now;
    d.stage_work_ns = 0;
    d.admit_wait.clear();
    ++d.reset_serial;
  }
  for (auto& ch : channels_) ch = Channel{};
  buffer_used_bytes_ = 0;
  stage_bytes_ = 0;
  ClearAccumulators();  // controller DRAM is gone
  for (auto& t : acc_takers_) t.clear();
  dead_adds_.clear();
  dead_landing_.clear();
  cutting_ = false;
}

void SimPipe::PowerOn() {
  const TimeNs now = Now();
  for (auto& ch : channels_) ch.bus_free = now;
  for (auto& d : dies_) d.busy_until = now;
}

}  // namespace vsl::simcard
