#include "vsl/simcard/sim_pipe.h"

#include <algorithm>
#include <cstring>

#include "hls/bch.h"
#include "vsl/core/log.h"
#include "vsl/nand/onfi.h"
#include "vsl/simcard/ecc.h"

namespace vsl::simcard {

using nand::Completion;
using nand::FlashCallback;
using nand::FlashStatus;
using format::PageState;

SimPipe::SimPipe(SimCard& card, Clock& clock, uint32_t controller, uint32_t pipe_in_ctrl,
                 uint64_t seed)
    : card_(card),
      clock_(&clock),
      controller_(controller),
      first_die_(pipe_in_ctrl * card.geometry_.dies_per_pipe()),
      g_(card.geometry_),
      t_(card.timing_),
      rel_(card.profile_.reliability),
      dies_(card.geometry_.dies_per_pipe()),
      channels_(card.geometry_.channels_per_pipe),
      scratch_(uint64_t{card.geometry_.page_data_bytes} + card.geometry_.page_spare_bytes),
      stage_(card.profile_.plp.present ? card.profile_.plp.stage_slots : 0, nullptr) {
  topology_.controller = controller;
  topology_.pipe = pipe_in_ctrl;
  topology_.controllers = g_.controllers;
  topology_.pipes_per_controller = g_.pipes_per_controller;
  topology_.channels = g_.channels_per_pipe;
  topology_.luns_per_channel = g_.luns_per_channel;
  topology_.ecc_codeword_bytes = g_.ecc_codeword_bytes;
  topology_.ecc_parity_bytes = g_.ecc_parity_bytes;
  topology_.ecc_t = g_.ecc_t;
  Rng base(seed);
  for (uint32_t d = 0; d < dies_.size(); ++d) {
    die_rng_.push_back(base.Fork((uint64_t{controller} << 40) | (uint64_t{pipe_in_ctrl} << 32) | d));
  }
}

SimPipe::~SimPipe() {
  // Commands still outstanding when the card closes are dropped without completion
  // (their callbacks are destroyed, not called).
  for (auto& d : dies_) d.queue.clear();
  all_.clear_and_dispose([](Op* op) { delete op; });
}

nand::PlpState SimPipe::plp_state() const { return card_.plp_state(); }

DurNs SimPipe::ProgramXferNs() const {
  return TransferNs(uint64_t{g_.page_data_bytes} + g_.page_spare_bytes, t_.bus_bytes_per_sec);
}
DurNs SimPipe::ProgramCostNs() const {
  return t_.cmd_overhead_ns + ProgramXferNs() + t_.t_prog_ns;
}
DurNs SimPipe::EraseCostNs() const { return t_.cmd_overhead_ns + t_.t_erase_ns; }

bool SimPipe::DieFailed(uint32_t die) const {
  return (card_.images_[controller_]->die(image_die(die)).flags & format::kDieFailed) != 0;
}

Op* SimPipe::NewOp(Op::Kind kind, FlashCallback done) {
  Op* op;
  if (pool_.empty()) {
    op = new Op();
  } else {
    op = pool_.back().release();
    pool_.pop_back();
  }
  op->kind = kind;
  op->serial = next_serial_++;
  op->first_sector = op->sector_count = 0;
  op->data = op->meta = nullptr;
  op->src_data = op->src_meta = nullptr;
  op->admitted = op->data_ready = op->started = false;
  op->stage_slot = -1;
  op->journal = -1;
  op->qseq = 0;
  op->fence = false;
  op->parity = false;
  op->submit_ns = Now();
  op->bus_start_ns = op->array_end_ns = 0;
  op->flush_cost_ns = op->flush_xfer_ns = 0;
  op->done = std::move(done);
  return op;
}

void SimPipe::FreeOp(Op* op) {
  op->serial = 0;
  op->accepted.Reset();
  op->done.Reset();
  pool_.emplace_back(op);
}

void SimPipe::Complete(Op* op, FlashStatus status, uint32_t corrected) {
  if (op->journal >= 0) {
    journal_->Remove(op->journal);  // applied, aborted, timed out or superseded
    op->journal = -1;
  }
  if (static_cast<QueueHook*>(op)->is_linked()) {
    dies_[op->ppa.die].queue.erase(OpQueue::s_iterator_to(*op));
  }
  if (static_cast<AllHook*>(op)->is_linked()) all_.erase(OpList::s_iterator_to(*op));
  switch (status) {
    case FlashStatus::kUncorrectable: ++stats_.uncorrectable_reads; life_.uncorrectable_reads += 1; break;
    case FlashStatus::kProgramFail: ++stats_.program_fails; life_.program_fails += 1; break;
    case FlashStatus::kEraseFail: ++stats_.erase_fails; life_.erase_fails += 1; break;
    case FlashStatus::kDieTimeout: ++stats_.die_timeouts; break;
    case FlashStatus::kAborted: ++stats_.aborted; break;
    default: break;
  }
  Completion c{status, corrected, op->submit_ns, Now()};
  FlashCallback cb = std::move(op->done);
  FreeOp(op);
  clock_->Post([cb = std::move(cb), c]() mutable { cb(c); });
}

void SimPipe::Reject(FlashCallback done, FlashStatus status) {
  if (status == FlashStatus::kInvalidAddress) ++stats_.invalid_address;
  if (status == FlashStatus::kAborted) ++stats_.aborted;
  Completion c{status, 0, Now(), Now()};
  clock_->Post([cb = std::move(done), c]() mutable { cb(c); });
}

bool SimPipe::ValidPpa(const nand::Ppa& p) const {
  return p.die < dies_.size() && p.block < g_.blocks_per_lun && p.page < g_.pages_per_block;
}

// ---- Submission ----

void SimPipe::Read(const nand::ReadRequest& req, FlashCallback done) {
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  const uint32_t cws = g_.codewords_per_page();
  const uint32_t count = req.sector_count == 0 ? cws - req.first_sector : req.sector_count;
  if (!ValidPpa(req.ppa) || req.first_sector >= cws || count > cws - req.first_sector) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  Op* op = NewOp(Op::Kind::kRead, std::move(done));
  op->ppa = req.ppa;
  op->first_sector = req.first_sector;
  op->sector_count = count;
  op->data = req.data;
  op->meta = req.meta;
  Enqueue(op);
}

void SimPipe::Program(const nand::ProgramRequest& req, FlashCallback accepted,
                      FlashCallback done) {
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  if (!ValidPpa(req.ppa) || req.data == nullptr) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  Op* op = NewOp(Op::Kind::kProgram, std::move(done));
  op->ppa = req.ppa;
  op->src_data = req.data;
  op->src_meta = req.meta;
  op->accepted = std::move(accepted);
  op->fence = req.fence;
  op->flush_cost_ns = ProgramCostNs();
  op->flush_xfer_ns = ProgramXferNs();
  Enqueue(op);
  // A dead die took the op off its queue to time out: it never enters the buffer.
  if (DieFailed(op->ppa.die)) return;
  Die& d = dies_[op->ppa.die];
  if (!d.admit_wait.empty() || !TryAdmit(op)) {
    ++stats_.admission_waits;
    d.admit_wait.push_back(op);
  }
}

void SimPipe::Erase(uint32_t die, uint32_t block, FlashCallback done) {
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  if (!ValidPpa({die, block, 0})) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  Op* op = NewOp(Op::Kind::kErase, std::move(done));
  op->ppa = {die, block, 0};
  op->flush_cost_ns = EraseCostNs();
  if (journal_ != nullptr && !DieFailed(die)) {
    // The erase count the block has once this erase (and any queued ahead of it) is done.
    uint32_t after = image().block(image_die(die), block).erase_count + 1;
    for (const Op& q : dies_[die].queue) after += q.kind == Op::Kind::kErase && q.ppa.block == block;
    op->journal = journal_->Add(PlpJournal::Kind::kErase, next_qseq_, die, block, 0, after, nullptr);
  }
  Enqueue(op);
}

void SimPipe::Enqueue(Op* op) {
  op->qseq = next_qseq_++;
  all_.push_back(*op);
  dies_[op->ppa.die].queue.push_back(*op);
  TryStartDie(op->ppa.die);
}

// Flush work a power cut does on `d` before `op`: the queued, unstarted programs ahead
// of it that are in the buffer, and the erases ahead of those. A staged image (not in
// the queue) goes after all accepted programs; the erases it needs beyond them (its own
// block's) are in its flush cost, see StageErasesNs.
DurNs SimPipe::FlushWorkAhead(const Die& d, const Op* op) const {
  DurNs work = 0, erases = 0;
  for (const Op& q : d.queue) {
    if (&q == op) return work + erases;
    if (q.started) continue;
    if (q.kind == Op::Kind::kErase) {
      erases += q.flush_cost_ns;
    } else if (q.kind == Op::Kind::kProgram && q.admitted) {
      work += erases + q.flush_cost_ns;
      erases = 0;
    }
  }
  return work;
}

// Erases queued behind the die's last accepted program up to the last erase of the
// staged page's block: the flush must do them before programming the image.
DurNs SimPipe::StageErasesNs(const Die& d, const Op* op) const {
  DurNs need = 0, erases = 0;
  for (const Op& q : d.queue) {
    if (q.started) continue;
    if (q.kind == Op::Kind::kErase) {
      erases += q.flush_cost_ns;
      if (q.ppa.block == op->ppa.block) {
        need += erases;
        erases = 0;
      }
    } else if (q.kind == Op::Kind::kProgram && q.admitted) {
      need = erases = 0;
    }
  }
  return need;
}

// Admission to the protected write buffer. While PLP is healthy a program is admitted only
// if the worst-case time to flush everything it depends on still fits in the hold-up
// budget: the die's running op, the buffered programs and needed erases ahead of it, the
// die's staged images, every queued transfer on its channel and the bus time already
// reserved there. This bound is never below what PowerCut's flush takes, so an accepted
// page always reaches flash. With nothing but staged images buffered, a program is always
// admitted (progress; the profiles' hold-up covers one program plus the stage slots).
bool SimPipe::TryAdmit(Op* op) {
  const uint64_t slot_bytes = scratch_.size();
  const bool buffer_empty = buffer_used_bytes_ == stage_bytes_;
  if (!buffer_empty && buffer_used_bytes_ + slot_bytes > card_.profile_.plp.buffer_bytes_per_pipe) {
    return false;
  }
  if (op->fence) {
    // Every die's waiting programs are in submission order: the fronts are the oldest.
    for (const Die& o : dies_) {
      if (!o.admit_wait.empty() && o.admit_wait.front() != op &&
          o.admit_wait.front()->serial < op->serial) {
        return false;
      }
    }
  }
  Die& d = dies_[op->ppa.die];
  Channel& ch = channels_[g_.ChannelOf(op->ppa.die)];
  const TimeNs now = Now();
  if (op->stage_slot >= 0) op->flush_cost_ns = ProgramCostNs() + StageErasesNs(d, op);
  if (card_.plp_state() == nand::PlpState::kHealthy && !buffer_empty) {
    const DurNs die_left = d.busy_until > now ? d.busy_until - now : 0;
    const DurNs bus_left = ch.bus_free > now ? ch.bus_free - now : 0;
    const DurNs estimate = die_left + FlushWorkAhead(d, op) + d.stage_work_ns + bus_left +
                           ch.flush_xfer_ns + op->flush_cost_ns;
    if (estimate > card_.profile_.plp.holdup_ns) return false;
  }
  op->admitted = true;
  ch.flush_xfer_ns += op->flush_xfer_ns;
  buffer_used_bytes_ += slot_bytes;
  if (op->stage_slot >= 0) {
    d.stage_work_ns += op->flush_cost_ns;
    stage_bytes_ += slot_bytes;
  }
  // Host-link DMA into the controller buffer; the page is accepted when it lands.
  const TimeNs link =
      card_.TakeLink(controller_, now, uint64_t{g_.page_data_bytes} + g_.meta_bytes_per_page());
  const uint64_t serial = op->serial;
  clock_->At(link, [this, op, serial] {
    if (op->serial != serial) return;
    if (!op->slot) op->slot = std::make_unique<uint8_t[]>(scratch_.size());
    uint8_t* s = op->slot.get();
    std::memcpy(s, op->src_data, g_.page_data_bytes);
    const uint32_t meta = g_.meta_bytes_per_page();
    if (op->src_meta != nullptr) {
      std::memcpy(s + g_.page_data_bytes, op->src_meta, meta);
    } else {
      std::memset(s + g_.page_data_bytes, 0xFF, meta);
    }
    std::memset(s + g_.page_data_bytes + meta, 0, g_.page_spare_bytes - meta);
    // The controller's ECC encoder runs as the page enters its buffer, so the protected
    // copy (and the PLP journal's) is what reaches the array.
    op->parity = card_.opts_.ecc == EccMode::kBitExact;
    if (op->parity) EncodeSlot(g_, s);
    op->src_data = op->src_meta = nullptr;
    op->data_ready = true;
    const bool staged = op->stage_slot >= 0;
    if (journal_ != nullptr && op->journal < 0) {
      op->journal = journal_->Add(staged ? PlpJournal::Kind::kStage : PlpJournal::Kind::kProgram, op->qseq,
                                  op->ppa.die, op->ppa.block, op->ppa.page, 0, s);
    }
    if (staged) {
      InstallStage(op);
    } else {
      RetireStagesFor(op->ppa);
    }
    if (op->accepted) {
      FlashCallback cb = std::move(op->accepted);
      cb(Completion{FlashStatus::kOk, 0, op->submit_ns, Now()});
    }
    if (!staged && op->serial == serial) TryStartDie(op->ppa.die);
  });
  return true;
}

// ---- Parity staging ----

void SimPipe::Stage(uint32_t slot, const nand::ProgramRequest& req, FlashCallback accepted,
                    FlashCallback done) {
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  if (slot >= stage_.size() || !ValidPpa(req.ppa) || req.data == nullptr) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  Op* op = NewOp(Op::Kind::kProgram, std::move(done));
  op->stage_slot = static_cast<int32_t>(slot);
  op->qseq = next_qseq_++;
  op->fence = true;
  op->ppa = req.ppa;
  op->src_data = req.data;
  op->src_meta = req.meta;
  op->accepted = std::move(accepted);
  op->flush_cost_ns = ProgramCostNs();
  op->flush_xfer_ns = ProgramXferNs();
  all_.push_back(*op);
  if (DieFailed(op->ppa.die)) return TimeOutStage(op);
  Die& d = dies_[op->ppa.die];
  if (!d.admit_wait.empty() || !TryAdmit(op)) {
    ++stats_.admission_waits;
    d.admit_wait.push_back(op);
  }
}

void SimPipe::ClearStage(uint32_t slot) {
  if (slot >= stage_.size()) return;
  // Images for the slot still on their way in are void too.
  std::vector<Op*> gone;
  for (Op& op : all_) {
    if (op.stage_slot == static_cast<int32_t>(slot)) gone.push_back(&op);
  }
  for (Op* op : gone) {
    op->serial = next_serial_++;  // a landing in flight is void
    op->accepted.Reset();
    RetireStage(op, FlashStatus::kOk);
  }
}

void SimPipe::InstallStage(Op* op) {
  ++stats_.stages;
  Op*& cur = stage_[static_cast<uint32_t>(op->stage_slot)];
  Op* old = cur;
  cur = op;
  if (old != nullptr) RetireStage(old, FlashStatus::kOk);
}

void SimPipe::RetireStage(Op* op, FlashStatus status) {
  Op*& cur = stage_[static_cast<uint32_t>(op->stage_slot)];
  if (cur == op) cur = nullptr;
  ReleaseBudget(op);
  op->admitted = false;
  Complete(op, status);
  RetryAdmission();
}

void SimPipe::RetireStagesFor(const nand::Ppa& ppa) {
  for (Op* op : stage_) {
    if (op != nullptr && op->ppa.die == ppa.die && op->ppa.block == ppa.block &&
        op->ppa.page == ppa.page) {
      RetireStage(op, FlashStatus::kOk);
    }
  }
}

// A staged image for a dead die never reaches flash: it leaves the buffer and reports a
// timeout, like a program would.
void SimPipe::TimeOutStage(Op* op) {
  if (op->stage_slot >= 0 && stage_[static_cast<uint32_t>(op->stage_slot)] == op) {
    stage_[static_cast<uint32_t>(op->stage_slot)] = nullptr;
  }
  ReleaseBudget(op);
  op->admitted = false;
  op->accepted.Reset();
  op->serial = next_serial_++;  // a landing still in flight is void
  const uint64_t serial = op->serial;
  clock_->After(t_.die_timeout_ns, [this, op, serial] {
    if (op->serial == serial) Complete(op, FlashStatus::kDieTimeout);
  });
}

// Retries waiting programs on every die: room freed on one channel also frees write-buffer
// bytes that a die on another channel may be waiting for. Each die keeps its FIFO order.
void SimPipe::RetryAdmission() {
  // Until nothing more goes in: a fenced program may be waiting on a die visited earlier.
  for (bool more = true; more;) {
    more = false;
    for (Die& d : dies_) {
      while (!d.admit_wait.empty() && TryAdmit(d.admit_wait.front())) {
        d.admit_wait.pop_front();
        more = true;
      }
    }
  }
}

void SimPipe::ReleaseBudget(Op* op) {
  Die& d = dies_[op->ppa.die];
  Channel& ch = channels_[g_.ChannelOf(op->ppa.die)];
  if (op->kind == Op::Kind::kProgram) {
    if (op->admitted) {
      buffer_used_bytes_ -= scratch_.size();
      if (op->stage_slot >= 0) {
        d.stage_work_ns -= op->flush_cost_ns;
        stage_bytes_ -= scratch_.size();
      }
      if (!op->started) {
        ch.flush_xfer_ns -= op->flush_xfer_ns;
      }
    } else {
      auto it = std::find(d.admit_wait.begin(), d.admit_wait.end(), op);
      if (it != d.admit_wait.end()) d.admit_wait.erase(it);
    }
  }
}

// ---- Execution ----

void SimPipe::TryStartDie(uint32_t die) {
  Die& d = dies_[die];
  if (d.busy || d.queue.empty() || !card_.powered_) return;
  if (DieFailed(die)) {
    // A dead die: every command waits out the controller's timeout.
    while (!d.queue.empty()) {
      Op* op = &d.queue.front();
      d.queue.pop_front();
      ReleaseBudget(op);
      op->admitted = false;
      const uint64_t serial = op->serial;
      clock_->After(t_.die_timeout_ns, [this, op, serial] {
        if (op->serial == serial) Complete(op, FlashStatus::kDieTimeout);
      });
    }
    return;
  }
  Op* op = &d.queue.front();
  if (op->kind == Op::Kind::kProgram && !op->data_ready) return;
  d.busy = true;
  switch (op->kind) {
    case Op::Kind::kRead: StartRead(op); break;
    case Op::Kind::kProgram: StartProgram(op); break;
    case Op::Kind::kErase: StartErase(op); break;
  }
}

void SimPipe::Spend(double joules) {
  const Power& pw = card_.profile_.power;
  heat_.Deposit(Now(), joules, card_.thermal_r_.load(std::memory_order_relaxed), pw.heat_capacity_j_per_c);
}

void SimPipe::StartRead(Op* op) {
  {
    // The array read, the codewords over the channel and the payload over the link.
    const Power& pw = card_.profile_.power;
    const uint64_t meta = op->meta != nullptr ? g_.meta_bytes_per_page() : 0;
    const uint64_t bus = uint64_t{op->sector_count} * (g_.ecc_codeword_bytes + g_.ecc_parity_bytes) + meta;
    const uint64_t link = uint64_t{op->sector_count} * g_.ecc_codeword_bytes + meta;
    Spend(pw.read_uj * 1e-6 + (bus * pw.channel_nj_per_byte + link * pw.link_nj_per_byte) * 1e-9);
  }
  Channel& ch = channels_[g_.ChannelOf(op->ppa.die)];
  const TimeNs start = std::max(Now(), ch.bus_free);
  ch.bus_free = start + t_.cmd_overhead_ns;
  op->started = true;
  op->array_end_ns = ch.bus_free + t_.t_read_ns;
  dies_[op->ppa.die].busy_until = op->array_end_ns;
  const uint64_t serial = op->serial;
  clock_->At(op->array_end_ns, [this, op, serial] { ReadDataOut(op, serial); });
}

void SimPipe::ReadDataOut(Op* op, uint64_t serial) {
  if (op->serial != serial) return;
  Channel& ch = channels_[g_.ChannelOf(op->ppa.die)];
  uint64_t bytes = uint64_t{op->sector_count} * (g_.ecc_codeword_bytes + g_.ecc_parity_bytes);
  if (op->meta != nullptr) bytes += g_.meta_bytes_per_page();
  const TimeNs start = std::max(Now(), ch.bus_free);
  ch.bus_free = start + TransferNs(bytes, t_.bus_bytes_per_sec);
  dies_[op->ppa.die].busy_until = ch.bus_free;
  clock_->At(ch.bus_free, [this, op, serial] { ReadFinish(op, serial); });
}

void SimPipe::ReadFinish(Op* op, uint64_t serial) {
  if (op->serial != serial) return;
  uint32_t corrected = 0;
  const FlashStatus st = DoRead(op, &corrected);
  Die& d = dies_[op->ppa.die];
  d.queue.erase(OpQueue::s_iterator_to(*op));
  d.busy = false;
  ++stats_.reads;
  stats_.corrected_bits += corrected;
  const uint64_t host_bytes = uint64_t{op->sector_count} * g_.ecc_codeword_bytes +
                              (op->meta != nullptr ? g_.meta_bytes_per_page() : 0);
  stats_.bytes_read += host_bytes;
  life_.nand_read_bytes += host_bytes;
  const TimeNs link = card_.TakeLink(controller_, Now(), host_bytes);
  clock_->At(link, [this, op, serial, st, corrected] {
    if (op->serial == serial) Complete(op, st, corrected);
  });
  TryStartDie(op->ppa.die);
}

void SimPipe::StartProgram(Op* op) {
  {
    const Power& pw = card_.profile_.power;
    const uint64_t bus = g_.page_data_bytes + g_.page_spare_bytes;
    const uint64_t link = g_.page_data_bytes + g_.meta_bytes_per_page();
    Spend(pw.program_uj * 1e-6 + (bus * pw.channel_nj_per_byte + link * pw.link_nj_per_byte) * 1e-9);
  }
  Die& d = dies_[op->ppa.die];
  Channel& ch = channels_[g_.ChannelOf(op->ppa.die)];
  const TimeNs start = std::max(Now(), ch.bus_free);
  ch.bus_free = start + t_.cmd_overhead_ns + op->flush_xfer_ns;
  op->started = true;
  op->bus_start_ns = start;
  op->array_end_ns = ch.bus_free + t_.t_prog_ns;
  d.busy_until = op->array_end_ns;
  ch.flush_xfer_ns -= op->flush_xfer_ns;
  const uint64_t serial = op->serial;
  clock_->At(op->array_end_ns, [this, op, serial] { ProgramFinish(op, serial); });
}

void SimPipe::ProgramFinish(Op* op, uint64_t serial) {
  if (op->serial != serial) return;
  const FlashStatus st = ApplyProgram(op);
  Die& d = dies_[op->ppa.die];
  d.busy = false;
  ReleaseBudget(op);
  const uint32_t die = op->ppa.die;
  Complete(op, st);
  TryStartDie(die);
  RetryAdmission();
}

void SimPipe::StartErase(Op* op) {
  Spend(card_.profile_.power.erase_uj * 1e-6);
  Die& d = dies_[op->ppa.die];
  Channel& ch = channels_[g_.ChannelOf(op->ppa.die)];
  const TimeNs start = std::max(Now(), ch.bus_free);
  ch.bus_free = start + t_.cmd_overhead_ns;
  op->started = true;
  op->bus_start_ns = start;
  op->array_end_ns = ch.bus_free + t_.t_erase_ns;
  d.busy_until = op->array_end_ns;
  const uint64_t serial = op->serial;
  clock_->At(op->array_end_ns, [this, op, serial] { EraseFinish(op, serial); });
}

void SimPipe::EraseFinish(Op* op, uint64_t serial) {
  if (op->serial != serial) return;
  const FlashStatus st = ApplyErase(op->ppa.die, op->ppa.block);
  dies_[op->ppa.die].busy = false;
  const uint32_t die = op->ppa.die;
  Complete(op, st);
  TryStartDie(die);
  RetryAdmission();
}

// ---- Effects on the image ----

FlashStatus SimPipe::ApplyProgram(Op* op) {
  const nand::Ppa& p = op->ppa;
  const uint32_t idie = image_die(p.die);
  auto& rec = image().block(idie, p.block);
  if (rec.flags & (format::kBlockFactoryBad | format::kBlockGrownBad)) {
    if (rec.flags & format::kBlockGrownBad && p.page >= rec.next_page) {
      image().set_page_state(idie, p.block, p.page, PageState::kTornUncorrectable);
      rec.next_page = static_cast<uint16_t>(p.page + 1);
    }
    return FlashStatus::kProgramFail;
  }
  if (p.page < rec.next_page) {
    ++stats_.violation_not_erased;
    Logger("simcard")->warn("rule violation: program of non-erased page pipe={} die={} block={} page={}",
                            topology_.pipe, p.die, p.block, p.page);
    return FlashStatus::kRuleViolation;
  }
  if (p.page > rec.next_page) {
    ++stats_.violation_out_of_order;
    Logger("simcard")->warn("rule violation: out-of-order program pipe={} die={} block={} page={} expected={}",
                            topology_.pipe, p.die, p.block, p.page, rec.next_page);
    return FlashStatus::kRuleViolation;
  }
  ++stats_.programs;
  rec.next_page = static_cast<uint16_t>(p.page + 1);
  const bool injected = inject_program_fail_.erase(Key(p)) > 0;
  if (injected || die_rng_[p.die].Bernoulli(rel_.FailProbability(rec.erase_count))) {
    rec.flags |= format::kBlockGrownBad;
    image().set_page_state(idie, p.block, p.page, PageState::kTornUncorrectable);
    return FlashStatus::kProgramFail;
  }
  if (Status s = image().WriteSlot(idie, p.block, p.page, op->slot.get()); !s.ok()) {
    Logger("simcard")->error("card image write failed: {}", s.ToString());
    image().set_page_state(idie, p.block, p.page, PageState::kTornUncorrectable);
    return FlashStatus::kProgramFail;
  }
  image().set_page_state(idie, p.block, p.page, PageState::kProgrammed);
  NoteProgrammed(rec, p.page, op->parity);
  stats_.bytes_programmed += g_.page_data_bytes;
  life_.nand_program_bytes += g_.page_data_bytes;
  return FlashStatus::kOk;
}

FlashStatus SimPipe::ApplyErase(uint32_t die, uint32_t block) {
  const uint32_t idie = image_die(die);
  auto& rec = image().block(idie, block);
  if (rec.flags & (format::kBlockFactoryBad | format::kBlockGrownBad)) {
    return FlashStatus::kEraseFail;
  }
  ++stats_.erases;
  life_.erases += 1;
  ++rec.erase_count;
  const bool injected = inject_erase_fail_.erase(Key({die, block, 0})) > 0;
  if (injected || die_rng_[die].Bernoulli(rel_.FailProbability(rec.erase_count))) {
    rec.flags |= format::kBlockGrownBad;
    return FlashStatus::kEraseFail;
  }
  rec.reads_since_erase = 0;
  rec.next_page = 0;
  rec.flags &= static_cast<uint8_t>(~format::kBlockParity);
  image().EraseBlockPages(idie, block);
  return FlashStatus::kOk;
}

void SimPipe::ApplyTornProgram(const nand::Ppa& p) {
  const uint32_t idie = image_die(p.die);
  auto& rec = image().block(idie, p.block);
  if (rec.flags & format::kBlockFactoryBad || p.page != rec.next_page) return;
  rec.next_page = static_cast<uint16_t>(p.page + 1);
  const bool garbage = die_rng_[p.die].Bernoulli(rel_.torn_reads_as_garbage);
  image().set_page_state(idie, p.block, p.page,
                         garbage ? PageState::kTornGarbage : PageState::kTornUncorrectable);
}

void SimPipe::ApplyTornErase(uint32_t die, uint32_t block) {
  const uint32_t idie = image_die(die);
  auto& rec = image().block(idie, block);
  if (rec.flags & format::kBlockFactoryBad) return;
  ++rec.erase_count;
  rec.reads_since_erase = 0;
  // Half-erased cells: every page reads uncorrectable until the block is erased again.
  for (uint32_t pg = 0; pg < g_.pages_per_block; ++pg) {
    image().set_page_state(idie, block, pg, PageState::kTornUncorrectable);
  }
  rec.next_page = static_cast<uint16_t>(g_.pages_per_block);
}

FlashStatus SimPipe::DoRead(Op* op, uint32_t* corrected) {
  const nand::Ppa& p = op->ppa;
  const uint32_t idie = image_die(p.die);
  auto& rec = image().block(idie, p.block);
  const uint32_t cw = g_.ecc_codeword_bytes;
  const uint32_t meta_bytes = g_.meta_bytes_per_page();
  const uint64_t data_off = uint64_t{op->first_sector} * cw;
  const uint64_t data_len = uint64_t{op->sector_count} * cw;
  Rng& rng = die_rng_[p.die];
  const PageState state = image().page_state(idie, p.block, p.page);
  ++rec.reads_since_erase;
  switch (state) {
    case PageState::kErased:
      if (card_.opts_.ecc == EccMode::kBitExact) return ReadBitExact(op, state, rec, corrected);
      if (op->data) std::memset(op->data, 0xFF, data_len);
      if (op->meta) std::memset(op->meta, 0xFF, meta_bytes);
      return FlashStatus::kOk;
    case PageState::kTornUncorrectable:
    case PageState::kTornGarbage:
      if (op->data) rng.Fill(op->data, data_len);
      if (op->meta) rng.Fill(op->meta, meta_bytes);
      return state == PageState::kTornGarbage ? FlashStatus::kOk : FlashStatus::kUncorrectable;
    case PageState::kProgrammed:
      break;
    default:
      // A page-state byte this build does not know: damaged metadata, never trusted.
      if (op->data) rng.Fill(op->data, data_len);
      if (op->meta) rng.Fill(op->meta, meta_bytes);
      return FlashStatus::kUncorrectable;
  }
  if (card_.opts_.ecc == EccMode::kBitExact) return ReadBitExact(op, state, rec, corrected);
  Status s = Status::Ok();
  if (op->data) s = image().ReadSlotRange(idie, p.block, p.page, data_off, data_len, op->data);
  if (s.ok() && op->meta) {
    s = image().ReadSlotRange(idie, p.block, p.page, g_.page_data_bytes, meta_bytes, op->meta);
  }
  if (!s.ok()) {
    Logger("simcard")->error("card image read failed: {}", s.ToString());
    return FlashStatus::kUncorrectable;
  }
  // Statistical ECC: each codeword read sees Binomial(bits, rber) raw bit errors; up to t
  // are corrected (and counted), more make the read uncorrectable and the codeword comes
  // back with those bits flipped. The last codeword also carries the host metadata.
  const double rber = rel_.Rber(rec.erase_count, rec.reads_since_erase);
  const uint32_t last = g_.codewords_per_page() - 1;
  const bool need_last = op->meta != nullptr && op->first_sector + op->sector_count <= last;
  FlashStatus st = FlashStatus::kOk;
  for (uint32_t i = 0; i < op->sector_count + (need_last ? 1 : 0); ++i) {
    const uint32_t cwi = i < op->sector_count ? op->first_sector + i : last;
    const uint32_t extra = cwi == last ? meta_bytes : 0;
    const uint64_t bits = uint64_t{cw + g_.ecc_parity_bytes + extra} * 8;
    const uint64_t k = rng.Binomial(bits, rber);
    if (k <= g_.ecc_t) {
      *corrected += static_cast<uint32_t>(k);
      continue;
    }
    st = FlashStatus::kUncorrectable;
    for (uint64_t e = 0; e < k; ++e) {
      const uint64_t bit = rng.Below(uint64_t{cw + extra} * 8);
      const uint64_t byte = bit / 8;
      if (byte < cw) {
        if (i < op->sector_count && op->data) op->data[uint64_t{i} * cw + byte] ^= uint8_t(1u << (bit % 8));
      } else if (op->meta) {
        op->meta[byte - cw] ^= uint8_t(1u << (bit % 8));
      }
    }
  }
  return st;
}

FlashStatus SimPipe::ReadBitExact(Op* op, PageState state, const format::BlockRecord& rec, uint32_t* corrected) {
  const nand::Ppa& p = op->ppa;
  const uint32_t idie = image_die(p.die);
  const uint32_t cw = g_.ecc_codeword_bytes;
  const uint32_t slot_bytes = g_.page_data_bytes + g_.page_spare_bytes;
  if (raw_.size() != slot_bytes) raw_.resize(slot_bytes);
  uint8_t* raw = raw_.data();
  // The page as the array holds it: erased cells read as ones; a programmed page as
  // written, with its parity (computed now from the data if the block was programmed
  // in statistical mode: what the controller would have stored).
  if (state == PageState::kErased) {
    std::memset(raw, 0xFF, slot_bytes);
  } else {
    if (Status s = image().ReadSlot(idie, p.block, p.page, raw); !s.ok()) {
      Logger("simcard")->error("card image read failed: {}", s.ToString());
      return FlashStatus::kUncorrectable;
    }
    if (!(rec.flags & format::kBlockParity)) EncodeSlot(g_, raw);
  }
  // Each codeword sensed sees Binomial(bits, rber) raw errors at distinct positions of its
  // message and parity; the decoder then corrects, flags or (rarely) miscorrects.
  const double rber = rel_.Rber(rec.erase_count, rec.reads_since_erase);
  const uint32_t last = g_.codewords_per_page() - 1;
  const bool need_last = op->meta != nullptr && op->first_sector + op->sector_count <= last;
  Rng& rng = die_rng_[p.die];
  FlashStatus st = FlashStatus::kOk;
  bool miscorrected = false;
  std::vector<uint32_t> pos;
  std::vector<uint8_t> truth;
  for (uint32_t i = 0; i < op->sector_count + (need_last ? 1 : 0); ++i) {
    const uint32_t cwi = i < op->sector_count ? op->first_sector + i : last;
    const CodewordSpan span = Codeword(g_, cwi);
    uint8_t* msg = raw + span.msg_offset;
    uint8_t* parity = raw + span.parity_offset;
    const uint32_t msg_bits = 8 * span.msg_bytes;
    const uint32_t bits = msg_bits + 8 * g_.ecc_parity_bytes;
    const uint64_t k = std::min<uint64_t>(rng.Binomial(bits, rber), bits);
    if (k > g_.ecc_t) {  // beyond the code: keep the truth to recognise a miscorrection
      truth.assign(msg, msg + span.msg_bytes);
      truth.insert(truth.end(), parity, parity + g_.ecc_parity_bytes);
    }
    pos.clear();
    while (pos.size() < k) {
      const auto b = static_cast<uint32_t>(rng.Below(bits));
      if (std::find(pos.begin(), pos.end(), b) != pos.end()) continue;
      pos.push_back(b);
      uint8_t* byte = b < msg_bits ? msg + b / 8 : parity + (b - msg_bits) / 8;
      *byte ^= static_cast<uint8_t>(0x80u >> (b % 8));
    }
    const vslhls::BchResult r =
        vslhls::BchDecode(static_cast<int>(g_.ecc_t), msg, static_cast<int>(span.msg_bytes), parity);
    ++stats_.ecc_codewords_decoded;
    if (r.status == vslhls::BchStatus::kUncorrectable) {
      st = FlashStatus::kUncorrectable;
      continue;
    }
    *corrected += r.bits;
    if (k > g_.ecc_t && (std::memcmp(truth.data(), msg, span.msg_bytes) != 0 ||
                         std::memcmp(truth.data() + span.msg_bytes, parity, g_.ecc_parity_bytes) != 0)) {
      miscorrected = true;
    }
  }
  if (miscorrected) {
    ++stats_.miscorrected_reads;
    Logger("simcard")->warn("ECC miscorrection (model ground truth): pipe={} die={} block={} page={} passed with wrong data",
                            topology_.pipe, p.die, p.block, p.page);
  }
  if (op->data) std::memcpy(op->data, raw + uint64_t{op->first_sector} * cw, uint64_t{op->sector_count} * cw);
  if (op->meta) std::memcpy(op->meta, raw + g_.page_data_bytes, g_.meta_bytes_per_page());
  return st;
}

// ---- Reset, identification, power, faults ----

void SimPipe::AbortDie(uint32_t die) {
  Die& d = dies_[die];
  // Everything of this die that is outstanding, in submission order.
  std::vector<Op*> ops;
  for (Op& op : all_) {
    if (op.ppa.die == die) ops.push_back(&op);
  }
  for (Op* op : ops) {
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

void SimPipe::ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len,
                     FlashCallback done) {
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  if (die >= dies_.size() || out == nullptr ||
      (address != nand::onfi::kReadIdJedecAddr && address != nand::onfi::kReadIdOnfiAddr)) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  const TimeNs submit = Now();
  if (DieFailed(die)) {
    clock_->After(t_.die_timeout_ns, [this, cb = std::move(done), submit]() mutable {
      ++stats_.die_timeouts;
      cb(Completion{FlashStatus::kDieTimeout, 0, submit, Now()});
    });
    return;
  }
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
  if (DieFailed(die)) {
    clock_->After(t_.die_timeout_ns, [this, cb = std::move(done), submit]() mutable {
      ++stats_.die_timeouts;
      cb(Completion{FlashStatus::kDieTimeout, 0, submit, Now()});
    });
    return;
  }
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
    if (op->started && op->kind == Op::Kind::kProgram) ApplyTornProgram(op->ppa);
    if (op->started && op->kind == Op::Kind::kErase) ApplyTornErase(op->ppa.die, op->ppa.block);
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
        if (op.started) {
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
}

void SimPipe::PowerOn() {
  const TimeNs now = Now();
  for (auto& ch : channels_) ch.bus_free = now;
  for (auto& d : dies_) d.busy_until = now;
}

}  // namespace vsl::simcard
