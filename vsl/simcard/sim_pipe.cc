#include "vsl/simcard/sim_pipe.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "hls/bch.h"
#include "vsl/core/crc.h"
#include "vsl/core/log.h"
#include "vsl/core/xor.h"
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
      virtual_clock_(clock.is_virtual()),
      controller_(controller),
      first_die_(pipe_in_ctrl * card.geometry_.dies_per_pipe()),
      g_(card.geometry_),
      t_(card.timing_),
      rel_(card.profile_.reliability),
      dies_(card.geometry_.dies_per_pipe()),
      channels_(card.geometry_.channels_per_pipe),
      scratch_(uint64_t{card.geometry_.page_data_bytes} + card.geometry_.page_spare_bytes),
      stage_(card.profile_.plp.present ? card.profile_.plp.stage_slots : 0, nullptr),
      acc_(card.profile_.copy_accumulators,
           std::vector<uint8_t>(card.geometry_.page_data_bytes + card.geometry_.meta_bytes_per_page(), 0)),
      acc_zero_(card.profile_.copy_accumulators, 1),
      acc_takers_(card.profile_.copy_accumulators) {
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
  op->gen = submit_gen_;
  op->first_sector = op->sector_count = 0;
  op->data = op->meta = nullptr;
  op->src_data = op->src_meta = nullptr;
  op->admitted = op->data_ready = op->started = false;
  op->stage_slot = -1;
  op->journal = -1;
  op->held = nullptr;
  op->qseq = 0;
  op->fence = false;
  op->parity = false;
  op->copy_to = nullptr;
  op->copy_reads.clear();
  op->internal = false;
  op->acc = nand::kNoAccumulator;
  op->acc_op = nand::AccOp::kAdd;
  op->acc_meta_at = op->acc_meta_len = op->acc_crc_at = 0;
  op->acc_pending = false;
  op->acc_order = op->serial;
  op->counted = false;
  op->dead_add = false;
  op->meta_only = false;
  op->corrected = 0;
  op->copy_failed = FlashStatus::kOk;
  op->submit_ns = Now();
  op->bus_start_ns = op->array_end_ns = 0;
  op->bus_wait = false;
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
  if (!op->counted) {
    switch (status) {
      case FlashStatus::kUncorrectable: ++stats_.uncorrectable_reads; LifeCounters::Add(life_.uncorrectable_reads, 1); break;
      case FlashStatus::kProgramFail: ++stats_.program_fails; LifeCounters::Add(life_.program_fails, 1); break;
      case FlashStatus::kEraseFail: ++stats_.erase_fails; LifeCounters::Add(life_.erase_fails, 1); break;
      case FlashStatus::kDieTimeout: ++stats_.die_timeouts; break;
      case FlashStatus::kAborted: ++stats_.aborted; break;
      default: break;
    }
  }
  if (op->copy_to != nullptr) {
    // A copy's source read: the copy goes on (or ends) with its program once every
    // segment is read; the first failure is the copy's.
    Op* prog = op->copy_to;
    op->copy_to = nullptr;
    auto& rs = prog->copy_reads;
    rs.erase(std::find(rs.begin(), rs.end(), op));
    if (prog->copy_failed == FlashStatus::kOk) prog->copy_failed = status;
    prog->corrected += corrected;
    FreeOp(op);
    if (rs.empty()) CopyReadDone(prog);
    return;
  }
  for (Op* rd : op->copy_reads) {
    // A copy's program ended first: its reads run on, with nowhere to put their data.
    rd->copy_to = nullptr;
    rd->data = nullptr;
  }
  op->copy_reads.clear();
  DropTaker(op);
  if (op->dead_add) {
    auto it = std::find(dead_adds_.begin(), dead_adds_.end(), op);
    if (it != dead_adds_.end()) dead_adds_.erase(it);
  }
  if (op->internal && corrected == 0) corrected = op->corrected;
  Completion c{status, corrected, op->submit_ns, Now()};
  FlashCallback cb = std::move(op->done);
  FreeOp(op);
  if (cb) Deliver(std::move(cb), c);  // a copy's read has no callback of its own
}

void SimPipe::CopyReadDone(Op* prog) {
  if (prog->copy_failed != FlashStatus::kOk) {
    // The destination is programmed all the same (its die's later pages may be queued
    // behind it), holding nothing: zeros and the host's fail_meta, which is what the
    // accumulator takes in. No `accepted` fires.
    prog->accepted.Reset();
    uint8_t* s = prog->held;
    std::memset(s, 0, g_.page_data_bytes);
    const uint32_t meta = g_.meta_bytes_per_page();
    if (prog->fail_meta.size() == meta) {
      std::memcpy(s + g_.page_data_bytes, prog->fail_meta.data(), meta);
    } else {
      std::memset(s + g_.page_data_bytes, 0xFF, meta);
    }
  }
  if (!cutting_) RetryAdmission();  // the page may enter the buffer now
}

void SimPipe::AccLanded(Op* op, uint8_t* slot, bool data_unset) {
  if (op->acc == nand::kNoAccumulator) return;
  std::vector<uint8_t>& a = acc_[op->acc];
  uint8_t& zero = acc_zero_[op->acc];
  if (op->acc_op == nand::AccOp::kAdd) {
    // Data and metadata as they will be programmed (the slot holds both, in order).
    if (zero) {
      std::memcpy(a.data(), slot, a.size());
      zero = 0;
    } else {
      XorInto(a.data(), slot, a.size());
    }
    return;
  }
  // The page's data is the host's XOR the accumulator: the accumulator alone when the
  // host sent none (the slot's data area was left unset for it).
  if (data_unset) {
    if (zero) {
      std::memset(slot, 0, g_.page_data_bytes);
    } else {
      std::memcpy(slot, a.data(), g_.page_data_bytes);
    }
  } else if (!zero) {
    XorInto(slot, a.data(), g_.page_data_bytes);
  }
  const uint32_t meta = g_.meta_bytes_per_page();
  if (op->acc_meta_len != 0 && op->acc_meta_at + op->acc_meta_len <= meta && op->acc_crc_at + 4u <= meta) {
    uint8_t* m = slot + g_.page_data_bytes;
    if (!zero) XorInto(m + op->acc_meta_at, a.data() + g_.page_data_bytes, op->acc_meta_len);
    const uint32_t crc = Crc32c(m, op->acc_crc_at);
    std::memcpy(m + op->acc_crc_at, &crc, 4);
  }
  if (op->acc_op == nand::AccOp::kTake) zero = 1;
  ++stats_.acc_pages;
  DropTaker(op);
}

void SimPipe::DropTaker(Op* op) {
  if (!op->acc_pending) return;
  op->acc_pending = false;
  auto& v = acc_takers_[op->acc];
  auto it = std::find(v.begin(), v.end(), op->acc_order);
  if (it != v.end()) v.erase(it);
  // Adds held behind it (landed or ended: a take to a dead die) may go now.
  if (!cutting_) clock_->Post([this] { RetryAdmission(); });
}

bool SimPipe::AddMustWait(const Op* op) const {
  if (op->acc == nand::kNoAccumulator || op->acc_op != nand::AccOp::kAdd) return false;
  for (uint64_t s : acc_takers_[op->acc]) {
    if (s < op->acc_order) return true;
  }
  return false;
}

void SimPipe::LandThenTimeOut(Op* op) {
  op->dead_add = true;
  if (static_cast<QueueHook*>(op)->is_linked()) dies_[op->ppa.die].queue.erase(OpQueue::s_iterator_to(*op));
  ReleaseBudget(op);  // out of its die's admission queue
  op->admitted = false;
  op->accepted.Reset();  // a program to a dead die is never accepted
  dead_adds_.push_back(op);
  LandDeadAdds();
}

void SimPipe::LandDeadAdds() {
  for (std::size_t i = 0; i < dead_adds_.size();) {
    Op* op = dead_adds_[i];
    if (AddMustWait(op)) {
      ++i;
      continue;
    }
    dead_adds_.erase(dead_adds_.begin() + static_cast<std::ptrdiff_t>(i));
    const uint64_t serial = op->serial, order = op->acc_order;
    dead_landing_.push_back(order);
    const TimeNs link = TakeLink(uint64_t{g_.page_data_bytes} + g_.meta_bytes_per_page());
    clock_->At(link, [this, op, serial, order] {
      auto it = std::find(dead_landing_.begin(), dead_landing_.end(), order);
      if (it == dead_landing_.end()) return;  // a power cut came first
      dead_landing_.erase(it);
      if (!cutting_) clock_->Post([this] { RetryAdmission(); });  // fences waiting for it
      if (op->serial != serial) return;
      std::vector<uint8_t>& a = acc_[op->acc];
      if (acc_zero_[op->acc]) std::fill(a.begin(), a.end(), 0);
      acc_zero_[op->acc] = 0;
      XorInto(a.data(), op->src_data, g_.page_data_bytes);
      const uint32_t mb = g_.meta_bytes_per_page();
      if (op->src_meta != nullptr) {
        XorInto(a.data() + g_.page_data_bytes, op->src_meta, mb);
      } else {
        for (uint32_t b = 0; b < mb; ++b) a[g_.page_data_bytes + b] ^= 0xFF;  // programmed as 0xFF
      }
      clock_->After(t_.die_timeout_ns, [this, op, serial] {
        if (op->serial == serial) Complete(op, FlashStatus::kDieTimeout);
      });
    });
  }
}

void SimPipe::ClearAccumulator(uint32_t acc) {
  if (acc < acc_.size()) acc_zero_[acc] = 1;
}

TimeNs SimPipe::TakeLink(uint64_t bytes) {
  stats_.link_bytes += bytes;
  return card_.TakeLink(controller_, Now(), bytes);
}

SimPipe::WearTerms SimPipe::WearAt(uint32_t pe) {
  static constexpr uint32_t kMaxCached = 1u << 20;  // erase counts beyond: computed each time
  if (pe >= kMaxCached) return {rel_.FailProbability(pe), rel_.RberOfWear(pe)};
  if (pe >= wear_terms_.size()) wear_terms_.resize(std::max<std::size_t>(pe + 1, wear_terms_.size() * 2));
  WearTerms& w = wear_terms_[pe];
  if (w.fail < 0) w = {rel_.FailProbability(pe), rel_.RberOfWear(pe)};
  return w;
}

void SimPipe::Deliver(FlashCallback cb, const Completion& c) {
  DeliveryPool& pool = *deliveries_;
  Delivery* d;
  if (pool.free.empty()) {
    d = &pool.all.emplace_back();
  } else {
    d = pool.free.back();
    pool.free.pop_back();
  }
  d->cb = std::move(cb);
  d->c = c;
  clock_->Post([pool = deliveries_, d] {
    FlashCallback run = std::move(d->cb);
    const Completion done = d->c;
    d->cb.Reset();
    pool->free.push_back(d);
    run(done);
  });
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
  CommandTime command_time(*this);
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
  CommandTime command_time(*this);
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  const bool acc = req.acc != nand::kNoAccumulator;
  const bool taker = acc && req.acc_op != nand::AccOp::kAdd;
  if (!ValidPpa(req.ppa) || (req.data == nullptr && !taker) || (acc && req.acc >= acc_.size())) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  Op* op = NewOp(Op::Kind::kProgram, std::move(done));
  op->ppa = req.ppa;
  op->src_data = req.data;
  op->src_meta = req.meta;
  op->accepted = std::move(accepted);
  op->fence = req.fence || taker;
  op->meta_only = req.data == nullptr;
  op->flush_cost_ns = ProgramCostNs();
  op->flush_xfer_ns = ProgramXferNs();
  if (acc) {
    op->acc = req.acc;
    op->acc_op = req.acc_op;
    op->acc_meta_at = req.acc_meta_at;
    op->acc_meta_len = req.acc_meta_len;
    op->acc_crc_at = req.acc_crc_at;
    if (taker) {
      op->acc_pending = true;
      op->acc_order = op->serial;
      acc_takers_[req.acc].push_back(op->acc_order);
    }
  }
  if (DieFailed(op->ppa.die) && op->acc != nand::kNoAccumulator && op->acc_op == nand::AccOp::kAdd) {
    op->qseq = next_qseq_++;
    all_.push_back(*op);
    return LandThenTimeOut(op);
  }
  Enqueue(op);
  // A dead die took the op off its queue to time out: it never enters the buffer.
  if (DieFailed(op->ppa.die)) return;
  Die& d = dies_[op->ppa.die];
  if (!d.admit_wait.empty() || !TryAdmit(op)) {
    ++stats_.admission_waits;
    d.admit_wait.push_back(op);
  }
}

void SimPipe::Copy(const nand::CopyRequest& req, FlashCallback accepted, FlashCallback done) {
  CommandTime command_time(*this);
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  const uint32_t cws = g_.codewords_per_page();
  nand::CopySegment whole[1] = {{req.src, 0, cws}};
  const nand::CopySegment* segs = req.segment_count == 0 ? whole : req.segments;
  const uint32_t nsegs = req.segment_count == 0 ? 1 : req.segment_count;
  bool valid = !acc_.empty() && ValidPpa(req.dst) && nsegs <= nand::kMaxCopySegments &&
               (req.acc == nand::kNoAccumulator || req.acc < acc_.size());
  uint32_t total = 0;
  for (uint32_t i = 0; valid && i < nsegs; ++i) {
    const nand::CopySegment& g = segs[i];
    valid = ValidPpa(g.src) && g.cw_count != 0 && g.first_cw < cws && g.cw_count <= cws - g.first_cw &&
            g.cw_count <= cws - total;
    total += g.cw_count;
  }
  if (!valid) return Reject(std::move(done), FlashStatus::kInvalidAddress);
  Op* prog = NewOp(Op::Kind::kProgram, std::move(done));
  prog->ppa = req.dst;
  prog->internal = true;
  prog->accepted = std::move(accepted);
  prog->flush_cost_ns = ProgramCostNs();
  prog->flush_xfer_ns = ProgramXferNs();
  if (!prog->slot) prog->slot = std::make_unique<uint8_t[]>(scratch_.size());
  uint8_t* s = prog->held = prog->slot.get();
  const uint32_t meta = g_.meta_bytes_per_page();
  const uint64_t cw_bytes = g_.ecc_codeword_bytes;
  std::memset(s + total * cw_bytes, 0, g_.page_data_bytes - total * cw_bytes);
  if (req.meta != nullptr) {
    std::memcpy(s + g_.page_data_bytes, req.meta, meta);
  } else {
    std::memset(s + g_.page_data_bytes, 0xFF, meta);
  }
  std::memset(s + g_.page_data_bytes + meta, 0, g_.page_spare_bytes - meta);
  if (req.fail_meta != nullptr) {
    prog->fail_meta.assign(req.fail_meta, req.fail_meta + meta);
  } else {
    prog->fail_meta.clear();
  }
  prog->acc = req.acc;  // an add, if any
  // The reads first: with a source on the destination's die, the program waits behind it.
  uint64_t at = 0;
  for (uint32_t i = 0; i < nsegs; ++i) {
    Op* rd = NewOp(Op::Kind::kRead, FlashCallback{});
    rd->ppa = segs[i].src;
    rd->first_sector = segs[i].first_cw;
    rd->sector_count = segs[i].cw_count;
    rd->data = s + at;
    rd->internal = true;
    rd->copy_to = prog;
    prog->copy_reads.push_back(rd);
    at += uint64_t{segs[i].cw_count} * cw_bytes;
  }
  // Queue them all before any can end (nothing ends synchronously: a dead die times out
  // later), so the program is still ours after the loop. Queued from a copy of the list:
  // a read that ends takes itself out of it.
  Op* reads[nand::kMaxCopySegments];
  std::copy(prog->copy_reads.begin(), prog->copy_reads.end(), reads);
  for (uint32_t i = 0; i < nsegs; ++i) EnqueueCopyRead(reads[i]);
  Enqueue(prog);
  if (DieFailed(prog->ppa.die)) return;  // it left the queue to time out
  // Its place in the die's admission order is taken now: later programs of the die
  // enter the buffer after it (TryAdmit holds it until its reads are done).
  dies_[prog->ppa.die].admit_wait.push_back(prog);
}

void SimPipe::Erase(uint32_t die, uint32_t block, FlashCallback done) {
  CommandTime command_time(*this);
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

// A copy's source read goes ahead of its die's queued programs and erases (after the
// running command and earlier copy reads): the copy's program, and every fenced parity
// page submitted after it, wait for it, so it must not sit behind the die's program
// backlog. Safe because a source page is already programmed and the host erases no
// source block while copies from it are outstanding.
void SimPipe::EnqueueCopyRead(Op* op) {
  op->qseq = next_qseq_++;
  all_.push_back(*op);
  OpQueue& q = dies_[op->ppa.die].queue;
  auto it = q.begin();
  while (it != q.end() && (it->started || (it->kind == Op::Kind::kRead && it->internal))) ++it;
  q.insert(it, *op);
  TryStartDie(op->ppa.die);
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
  if (!op->copy_reads.empty()) return false;  // a copy whose sources are still being read
  if (AddMustWait(op)) return false;           // an older take or peek of its accumulator
  const uint64_t slot_bytes = scratch_.size();
  const bool buffer_empty = buffer_used_bytes_ == stage_bytes_;
  if (!buffer_empty && buffer_used_bytes_ + slot_bytes > card_.profile_.plp.buffer_bytes_per_pipe) {
    return false;
  }
  if (op->fence) {
    // Adds to a dead die still on their way into an accumulator count as earlier programs.
    for (const Op* d : dead_adds_) {
      if (d->acc_order < op->acc_order) return false;
    }
    for (uint64_t s : dead_landing_) {
      if (s < op->acc_order) return false;
    }
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
    DurNs die_left = d.busy_until > now ? d.busy_until - now : 0;
    if (d.busy && !d.queue.empty() && d.queue.front().bus_wait) {
      // Its die's op waits for the bus (bus_left and the channel's queued transfers
      // count the wait): the die's own part of it, from when the bus takes it. A read is
      // dropped at a cut.
      const Op& f = d.queue.front();
      die_left = f.kind == Op::Kind::kProgram ? t_.cmd_overhead_ns + f.flush_xfer_ns + t_.t_prog_ns
                 : f.kind == Op::Kind::kErase ? t_.cmd_overhead_ns + t_.t_erase_ns
                                              : 0;
    }
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
  // Host-link DMA into the controller buffer; the page is accepted when it lands. A
  // copy's page is in the controller already (read and corrected there): it lands now.
  TimeNs link =
      op->internal ? now
                   : TakeLink((op->src_data != nullptr ? uint64_t{g_.page_data_bytes} : 0) + g_.meta_bytes_per_page());
  if (op->fence && link <= last_landing_) link = last_landing_ + 1;
  last_landing_ = std::max(last_landing_, link);
  const uint64_t serial = op->serial;
  AtStage(link, [this, op, serial] {
    if (op->serial != serial) return;
    const bool staged = op->stage_slot >= 0;
    // A host page is built in its journal record; a copy's is in `slot` already.
    bool reserved = false, refused = false;
    if (!op->internal && journal_ != nullptr && op->journal < 0) {
      op->held = journal_->Reserve(&op->journal);
      reserved = op->held != nullptr;
      refused = !reserved;  // full: the page goes unrecorded, counted once (not tried again below)
    }
    if (op->held == nullptr) {
      if (!op->slot) op->slot = std::make_unique<uint8_t[]>(scratch_.size());
      op->held = op->slot.get();
    }
    uint8_t* s = op->held;
    // A take or peek of the accumulator alone: AccLanded fills the data area.
    const bool acc_alone = !op->internal && op->src_data == nullptr && op->acc != nand::kNoAccumulator &&
                           op->acc_op != nand::AccOp::kAdd;
    if (!op->internal) {
      if (op->src_data != nullptr) {
        std::memcpy(s, op->src_data, g_.page_data_bytes);
      } else if (!acc_alone) {
        std::memset(s, 0, g_.page_data_bytes);
      }
      const uint32_t meta = g_.meta_bytes_per_page();
      if (op->src_meta != nullptr) {
        std::memcpy(s + g_.page_data_bytes, op->src_meta, meta);
      } else {
        std::memset(s + g_.page_data_bytes, 0xFF, meta);
      }
      std::memset(s + g_.page_data_bytes + meta, 0, g_.page_spare_bytes - meta);
    }
    AccLanded(op, s, acc_alone);
    // The controller's ECC encoder runs as the page enters its buffer, so the protected
    // copy (and the PLP journal's) is what reaches the array.
    op->parity = card_.opts_.ecc == EccMode::kBitExact;
    if (op->parity) EncodeSlot(g_, s);
    op->src_data = op->src_meta = nullptr;
    op->data_ready = true;
    const auto kind = staged ? PlpJournal::Kind::kStage : PlpJournal::Kind::kProgram;
    if (reserved) {
      journal_->Commit(op->journal, kind, op->qseq, op->ppa.die, op->ppa.block, op->ppa.page, 0);
    } else if (journal_ != nullptr && op->journal < 0 && !refused) {
      op->journal = journal_->Add(kind, op->qseq, op->ppa.die, op->ppa.block, op->ppa.page, 0, s);
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
  CommandTime command_time(*this);
  if (!card_.powered_) return Reject(std::move(done), FlashStatus::kAborted);
  const bool acc = req.acc != nand::kNoAccumulator;
  if (slot >= stage_.size() || !ValidPpa(req.ppa) || (req.data == nullptr && !acc) ||
      (acc && req.acc >= acc_.size())) {
    return Reject(std::move(done), FlashStatus::kInvalidAddress);
  }
  Op* op = NewOp(Op::Kind::kProgram, std::move(done));
  op->stage_slot = static_cast<int32_t>(slot);
  if (acc) {
    op->acc = req.acc;
    op->acc_op = nand::AccOp::kPeek;  // a stage never consumes it
    op->acc_meta_at = req.acc_meta_at;
    op->acc_meta_len = req.acc_meta_len;
    op->acc_crc_at = req.acc_crc_at;
    op->acc_pending = true;
    op->acc_order = op->serial;
    acc_takers_[req.acc].push_back(op->acc_order);
  }
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
  if (!dead_adds_.empty()) LandDeadAdds();
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
      if (!op->started || op->bus_wait) {
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
    // A dead die: every command waits out the controller's timeout; a host add not in
    // the buffer yet lands first (LandThenTimeOut).
    while (!d.queue.empty()) {
      Op* op = &d.queue.front();
      if (op->kind == Op::Kind::kProgram && !op->internal && !op->admitted && op->stage_slot < 0 &&
          op->acc != nand::kNoAccumulator && op->acc_op == nand::AccOp::kAdd) {
        LandThenTimeOut(op);
        continue;
      }
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
  stats_.energy_nj += static_cast<uint64_t>(joules * 1e9 + 0.5);
  heat_.Deposit(Now(), joules, card_.thermal_r_.load(std::memory_order_relaxed), pw.heat_capacity_j_per_c);
}

void SimPipe::StartRead(Op* op) {
  {
    // The array read, the codewords over the channel and the payload over the link.
    const Power& pw = card_.profile_.power;
    const uint64_t meta = op->meta != nullptr ? g_.meta_bytes_per_page() : 0;
    const uint64_t bus = uint64_t{op->sector_count} * (g_.ecc_codeword_bytes + g_.ecc_parity_bytes) + meta;
    const uint64_t link = op->internal ? 0 : (op->data != nullptr ? uint64_t{op->sector_count} * g_.ecc_codeword_bytes : 0) + meta;
    Spend(pw.read_uj * 1e-6 + (bus * pw.channel_nj_per_byte + link * pw.link_nj_per_byte) * 1e-9);
  }
  op->started = true;
  RequestBus(op, Op::BusUse::kReadCmd);
}

void SimPipe::ReadDataOut(Op* op, uint64_t serial) {
  if (op->serial != serial) return;
  RequestBus(op, Op::BusUse::kReadOut);
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
  // With no data buffer (a metadata-only read) the codewords stay in the controller.
  const uint64_t host_bytes = (op->data != nullptr ? uint64_t{op->sector_count} * g_.ecc_codeword_bytes : 0) +
                              (op->meta != nullptr ? g_.meta_bytes_per_page() : 0);
  LifeCounters::Add(life_.nand_read_bytes, host_bytes);
  if (op->internal) {
    // A copy's source: corrected in the controller, never sent to the host.
    const uint32_t die = op->ppa.die;
    Complete(op, st, corrected);
    TryStartDie(die);
    return;
  }
  stats_.bytes_read += host_bytes;
  const TimeNs link = TakeLink(host_bytes);
  AtStage(link, [this, op, serial, st, corrected] {
    if (op->serial == serial) Complete(op, st, corrected);
  });
  TryStartDie(op->ppa.die);
}

void SimPipe::StartProgram(Op* op) {
  {
    const Power& pw = card_.profile_.power;
    const uint64_t bus = g_.page_data_bytes + g_.page_spare_bytes;
    const uint64_t link = op->internal  ? 0
                          : op->meta_only ? g_.meta_bytes_per_page()
                                          : g_.page_data_bytes + g_.meta_bytes_per_page();
    Spend(pw.program_uj * 1e-6 + (bus * pw.channel_nj_per_byte + link * pw.link_nj_per_byte) * 1e-9);
  }
  op->started = true;
  // Not on the die until the channel takes its data (AbortDie tears nothing before; the
  // hold-up estimate counts its own part while it waits, TryAdmit).
  op->bus_start_ns = std::numeric_limits<TimeNs>::max();
  RequestBus(op, Op::BusUse::kProgram);
}

void SimPipe::ProgramFinish(Op* op, uint64_t serial) {
  if (op->serial != serial) return;
  FlashStatus st = ApplyProgram(op);
  if (op->internal && st == FlashStatus::kOk) {
    if (op->copy_failed != FlashStatus::kOk) {
      st = op->copy_failed;  // the page holds nothing: the copy reports its read
      op->counted = true;    // counted as the read's
    } else {
      ++stats_.copies;
      stats_.copy_bytes += g_.page_data_bytes;
    }
  }
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
  op->started = true;
  op->bus_start_ns = std::numeric_limits<TimeNs>::max();
  RequestBus(op, Op::BusUse::kErase);
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

}  // namespace vsl::simcard
