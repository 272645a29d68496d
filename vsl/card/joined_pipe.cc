#include "vsl/card/joined_pipe.h"

#include <algorithm>
#include <memory>

namespace vsl::card {

using nand::Completion;
using nand::FlashCallback;
using nand::FlashStatus;

JoinedPipe::JoinedPipe(nand::FlashPipe& a, nand::FlashPipe& b) : pipes_{&a, &b} {
  topology_ = a.topology();
  topology_.pipe = 0;
  topology_.pipes_per_controller = 1;
  topology_.channels = a.topology().channels + b.topology().channels;
  dies_a_ = a.topology().dies();
  slots_ = std::min(a.stage_slots(), b.stage_slots());
  slot_pipe_.assign(slots_, -1);
  slot_gen_.assign(slots_, 0);
}

void JoinedPipe::Reject(FlashCallback done, FlashStatus st) {
  Completion c;
  c.status = st;
  done(c);
}

bool JoinedPipe::OlderUnaccepted(uint32_t p, uint64_t serial) const {
  if (!unaccepted_[p].empty() && unaccepted_[p].front() < serial) return true;
  for (const Held& h : held_[p]) {
    if (h.serial < serial && h.fenced) return true;  // a held program (fenced) older than it
  }
  // Unfenced held commands sit behind a fenced one, which is older still.
  return false;
}

void JoinedPipe::Submit(uint32_t p, bool fenced, Function<void()> issue) {
  const uint64_t serial = next_serial_++;
  if (held_[p].empty() && !(fenced && OlderUnaccepted(1 - p, serial))) {
    issue();
    return;
  }
  held_[p].push_back({serial, fenced, std::move(issue)});
}

void JoinedPipe::Release() {
  if (releasing_) return;
  releasing_ = true;
  bool progress = true;
  while (progress) {
    progress = false;
    for (uint32_t p = 0; p < 2; ++p) {
      while (!held_[p].empty()) {
        Held& h = held_[p].front();
        if (h.fenced && OlderUnaccepted(1 - p, h.serial)) break;
        Function<void()> issue = std::move(h.issue);
        held_[p].pop_front();
        issue();
        progress = true;
      }
    }
  }
  releasing_ = false;
}

void JoinedPipe::Read(const nand::ReadRequest& req, FlashCallback done) {
  if (!Valid(req.ppa.die)) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  const uint32_t p = PipeOf(req.ppa.die);
  nand::ReadRequest r = req;
  r.ppa = Local(req.ppa);
  Submit(p, false, [this, p, r, done = std::move(done)]() mutable {
    pipes_[p]->Read(r, std::move(done));
  });
}

void JoinedPipe::Program(const nand::ProgramRequest& req, FlashCallback accepted,
                         FlashCallback done) {
  if (!Valid(req.ppa.die)) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  const uint32_t p = PipeOf(req.ppa.die);
  nand::ProgramRequest r = req;
  r.ppa = Local(req.ppa);
  const uint64_t serial = next_serial_;  // the serial Submit gives it
  auto settle = [this, p, serial]() {
    auto& q = unaccepted_[p];
    auto it = std::find(q.begin(), q.end(), serial);
    if (it == q.end()) return;
    q.erase(it);
    Release();
  };
  Submit(p, req.fence,
         [this, p, r, serial, settle, accepted = std::move(accepted), done = std::move(done)]() mutable {
           unaccepted_[p].push_back(serial);
           pipes_[p]->Program(
               r,
               [settle, accepted = std::move(accepted)](const Completion& c) mutable {
                 settle();
                 if (accepted) accepted(c);
               },
               [settle, done = std::move(done)](const Completion& c) mutable {
                 settle();
                 done(c);
               });
         });
}

void JoinedPipe::Erase(uint32_t die, uint32_t block, FlashCallback done) {
  if (!Valid(die)) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  const uint32_t p = PipeOf(die);
  const uint32_t d = LocalDie(die);
  Submit(p, false, [this, p, d, block, done = std::move(done)]() mutable {
    pipes_[p]->Erase(d, block, std::move(done));
  });
}

void JoinedPipe::Reset(uint32_t die, FlashCallback done) {
  // Out of band, as on one pipe: not held behind anything.
  if (!Valid(die)) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  pipes_[PipeOf(die)]->Reset(LocalDie(die), std::move(done));
}

void JoinedPipe::ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len,
                        FlashCallback done) {
  if (!Valid(die)) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  const uint32_t p = PipeOf(die);
  const uint32_t d = LocalDie(die);
  Submit(p, false, [this, p, d, address, out, len, done = std::move(done)]() mutable {
    pipes_[p]->ReadId(d, address, out, len, std::move(done));
  });
}

void JoinedPipe::ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, FlashCallback done) {
  if (!Valid(die)) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  const uint32_t p = PipeOf(die);
  const uint32_t d = LocalDie(die);
  Submit(p, false, [this, p, d, out, len, done = std::move(done)]() mutable {
    pipes_[p]->ReadParameterPage(d, out, len, std::move(done));
  });
}

void JoinedPipe::Stage(uint32_t slot, const nand::ProgramRequest& req, FlashCallback accepted,
                       FlashCallback done) {
  if (slot >= slots_ || !Valid(req.ppa.die)) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  const uint32_t p = PipeOf(req.ppa.die);
  nand::ProgramRequest r = req;
  r.ppa = Local(req.ppa);
  // Stage images are always fenced: held like a fenced program. A clear of the slot
  // while it is held empties it: it then never lands (done kOk, never accepted).
  const uint64_t gen = slot_gen_[slot];
  Submit(p, true,
         [this, p, slot, r, gen, accepted = std::move(accepted), done = std::move(done)]() mutable {
           if (slot_gen_[slot] != gen) {
             Completion c;
             done(c);
             return;
           }
           if (slot_pipe_[slot] >= 0 && static_cast<uint32_t>(slot_pipe_[slot]) != p) {
             pipes_[static_cast<uint32_t>(slot_pipe_[slot])]->ClearStage(slot);
           }
           slot_pipe_[slot] = static_cast<int8_t>(p);
           pipes_[p]->Stage(slot, r, std::move(accepted), std::move(done));
         });
}

void JoinedPipe::ClearStage(uint32_t slot) {
  if (slot >= slots_) return;
  ++slot_gen_[slot];  // a stage still held here is dropped when its turn comes
  for (uint32_t p = 0; p < 2; ++p) pipes_[p]->ClearStage(slot);
  slot_pipe_[slot] = -1;
}

}  // namespace vsl::card
