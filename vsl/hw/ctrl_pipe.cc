// ControllerPipe (ctrl_pipe.h).
#include "vsl/hw/ctrl_pipe.h"

#include <algorithm>
#include <bit>
#include <cstring>

#include "vsl/core/log.h"
#include "vsl/hw/regmap.h"

namespace vsl::hw {
namespace {

namespace pr = regs::pipe;
namespace cr = regs::ctrl;

constexpr uint32_t kCw = 512, kParity = 13, kEccT = 8;
constexpr uint64_t kDieBufBytes = 20 << 10;  // a 16 KiB page and its spare, per LUN
constexpr uint64_t kStageBytes = 16 << 10;   // a copy's staging page (data area)
constexpr uint32_t kMaxStaging = 32;

// Row-address bits that number `n` things (the ONFI row layout; 0 for n <= 1).
uint32_t BitsFor(uint32_t n) { return n <= 1 ? 0 : static_cast<uint32_t>(std::bit_width(n - 1)); }

nand::FlashStatus Map(uint8_t st) {
  switch (st) {
    case cst::kOk: return nand::FlashStatus::kOk;
    case cst::kUncorrectable: return nand::FlashStatus::kUncorrectable;
    case cst::kProgramFail: return nand::FlashStatus::kProgramFail;
    case cst::kEraseFail: return nand::FlashStatus::kEraseFail;
    case cst::kTimeout: return nand::FlashStatus::kDieTimeout;
    case cst::kInvalid: return nand::FlashStatus::kInvalidAddress;
    case cst::kFail: return nand::FlashStatus::kProgramFail;
    case cst::kFenced: return nand::FlashStatus::kFenced;
    default: return nand::FlashStatus::kAborted;  // kAborted, kDmaError
  }
}

}  // namespace

// A copy on its way: its segment reads into its staging page, then its program.
struct ControllerPipe::CopyState {
  nand::CopyRequest req;
  std::vector<uint8_t> meta, fail_meta;
  nand::FlashCallback accepted, done;
  int64_t stage = -1;        // staging page, once handed out
  uint32_t reads_left = 0;   // segment reads not yet completed
  uint32_t bytes = 0;        // data bytes the segments fill
  nand::FlashStatus read_status = nand::FlashStatus::kOk;  // the first failed read's
  uint32_t corrected = 0;
  bool prog_done = false, ended = false;
  nand::Completion prog;
};

Result<std::unique_ptr<ControllerPipe>> ControllerPipe::Create(RegMemPort& port, Clock& clock, uint32_t pipe,
                                                               uint64_t region, uint64_t region_bytes,
                                                               CtrlPipeOptions o) {
  uint32_t id = 0, caps = 0;
  if (!port.Read32(cr::kId, &id) || id != 0x4F56534Cu) {
    return Status::NotFound(fmt::format("no OpenVSL controller behind the port (ID reads {:#010x})", id));
  }
  if (!port.Read32(cr::kCaps, &caps)) return Status::IOError("CAPS register read failed");
  const uint32_t pipes = cr::kCapsPipes.get(caps);
  if (pipe >= pipes) {
    return Status::InvalidArgument(fmt::format("pipe {} asked of a controller with {} pipes", pipe, pipes));
  }
  if (cr::kCapsEccT.get(caps) != kEccT) {
    return Status::NotSupported(fmt::format("controller ECC t={} (this host drives t=8)", cr::kCapsEccT.get(caps)));
  }
  if (o.ring_entries < 8 || (o.ring_entries & (o.ring_entries - 1)) != 0) {
    return Status::InvalidArgument("ring_entries must be a power of two >= 8");
  }
  const uint32_t luns = cr::kCapsLunsPerChannel.get(caps) * cr::kCapsChannelsPerPipe.get(caps);
  const uint64_t need = 4096 + uint64_t{o.ring_entries} * 80 + luns * kDieBufBytes;
  const uint32_t accs = cr::kCapsAccumulators.get(caps);
  uint32_t version = 0;
  if (!port.Read32(cr::kVersion, &version)) return Status::IOError("VERSION register read failed");
  if (region % 64 != 0 || region_bytes < need) {
    return Status::InvalidArgument(fmt::format("pipe region must be 64-byte aligned and at least {} bytes", need));
  }
  std::unique_ptr<ControllerPipe> p(new ControllerPipe(port, clock, pipe, region, region_bytes, o));
  p->topology_.controller = 0;
  p->topology_.pipe = pipe;
  p->topology_.controllers = 1;
  p->topology_.pipes_per_controller = pipes;
  p->topology_.channels = cr::kCapsChannelsPerPipe.get(caps);
  p->topology_.luns_per_channel = cr::kCapsLunsPerChannel.get(caps);
  p->topology_.ecc_codeword_bytes = kCw;
  p->topology_.ecc_parity_bytes = kParity;
  p->topology_.ecc_t = kEccT;
  const uint32_t dies = p->topology_.dies();
  p->queued_.resize(dies);
  p->inflight_.resize(dies);
  p->gen_.assign(dies, 0);
  // Accumulators (1.2) and the copies' staging pages after the LUNs' buffers.
  p->accs_ = accs;
  p->ownership_ = version >= 0x00010003u;  // OWNER registers since map 1.3
  p->acc_ops_.resize(accs);
  p->staging_slots_ = accs == 0 ? 0 : static_cast<uint32_t>(std::min<uint64_t>(kMaxStaging, (region_bytes - need) / kStageBytes));
  for (uint32_t i = p->staging_slots_; i > 0; --i) p->free_stage_.push_back(i - 1);
  // Rings: the submission ring at the region's start, the completion ring after it. The
  // controller keeps its ring indices across hosts (a host that crashed leaves them where
  // they were), so this host takes them over: the next completion lands at CQ_TAIL with
  // the phase of the current pass round the ring (the pass count follows from
  // COMPLETIONS, the ring size being the same for every host), and the completion ring is
  // filled so that nothing stale looks new. Descriptors a
  // previous host queued and the pipe has not fetched are dropped (SQ_TAIL = SQ_HEAD).
  const uint64_t sq = region, cq = region + uint64_t{o.ring_entries} * 64;
  bool ok = port.Write32(pr::At(pipe, pr::kPipeCtrl), 0);
  uint32_t head = 0, tail = 0, posted = 0;
  ok = ok && port.Read32(pr::At(pipe, pr::kSqHead), &head) && port.Read32(pr::At(pipe, pr::kCqTail), &tail) &&
       port.Read32(pr::At(pipe, pr::kCompletions), &posted);
  if (!ok) return Status::IOError(fmt::format("pipe {}: ring register access failed", pipe));
  if (tail != posted % o.ring_entries || head >= o.ring_entries) {
    return Status::FailedPrecondition(
        fmt::format("pipe {}: its rings were set up with another size (CQ_TAIL {}, {} completions posted); "
                    "a SOFT_RESET of the controller starts them afresh",
                    pipe, tail, posted));
  }
  p->cq_phase_ = (posted / o.ring_entries) % 2 == 0;
  std::vector<uint8_t> stale(uint64_t{o.ring_entries} * 16, 0);
  // Entries from CQ_TAIL on are written next with this pass's phase, those before it in
  // the following pass with the other: each holds the phase it must not be mistaken for.
  for (uint32_t i = 0; i < o.ring_entries; ++i) {
    const bool phase = i >= tail ? !p->cq_phase_ : p->cq_phase_;
    stale[i * 16 + 7] = phase ? 0x80 : 0x00;
  }
  port.WriteMem(cq, stale.data(), stale.size());
  ok = port.Write32(pr::At(pipe, pr::kSqBaseLo), static_cast<uint32_t>(sq));
  ok = ok && port.Write32(pr::At(pipe, pr::kSqBaseHi), static_cast<uint32_t>(sq >> 32));
  ok = ok && port.Write32(pr::At(pipe, pr::kSqSize), o.ring_entries);
  ok = ok && port.Write32(pr::At(pipe, pr::kCqBaseLo), static_cast<uint32_t>(cq));
  ok = ok && port.Write32(pr::At(pipe, pr::kCqBaseHi), static_cast<uint32_t>(cq >> 32));
  ok = ok && port.Write32(pr::At(pipe, pr::kCqSize), o.ring_entries);
  if (!ok) return Status::IOError(fmt::format("pipe {}: ring register access failed", pipe));
  p->sq_tail_ = head;
  p->cq_head_ = tail;
  ok = port.Write32(pr::At(pipe, pr::kSqTail), head) && port.Write32(pr::At(pipe, pr::kCqHead), tail);
  uint32_t ap = 0;
  ok = ok && port.Read32(cr::kApCtrl, &ap) && port.Write32(cr::kApCtrl, ap | 1u);
  ok = ok && port.Write32(pr::At(pipe, pr::kPipeCtrl), 1);
  uint32_t status = 0;
  ok = ok && port.Read32(pr::At(pipe, pr::kPipeStatus), &status);
  if (!ok) return Status::IOError(fmt::format("pipe {}: enabling failed", pipe));
  if (pr::kPipeStatusRingError.get(status)) return Status::Internal(fmt::format("pipe {}: ring rejected", pipe));
  return p;
}

ControllerPipe::ControllerPipe(RegMemPort& port, Clock& clock, uint32_t pipe, uint64_t region,
                               uint64_t region_bytes, CtrlPipeOptions o)
    : port_(port), clock_(clock), pipe_(pipe), region_(region), region_bytes_(region_bytes), o_(o) {}

ControllerPipe::~ControllerPipe() {
  *alive_ = false;
  port_.Write32(pr::At(pipe_, pr::kPipeCtrl), 0);
}

uint64_t ControllerPipe::data_buf(uint32_t die) const {
  return region_ + 4096 + uint64_t{o_.ring_entries} * 80 + die * kDieBufBytes;
}
uint64_t ControllerPipe::meta_buf(uint32_t die) const { return data_buf(die) + 16384; }
uint64_t ControllerPipe::stage_buf(uint32_t slot) const {
  return data_buf(topology_.dies()) + uint64_t{slot} * kStageBytes;
}

uint32_t ControllerPipe::Row(uint32_t die, uint32_t block, uint32_t page) const {
  const uint32_t lun = die % topology_.luns_per_channel;
  return (lun << (page_bits_ + block_bits_)) | (block << page_bits_) | page;
}

void ControllerPipe::Init(Function<void(Status)> done) {
  // Commands a previous host left in the pipe finish first; their completions are
  // consumed and dropped (no command of this host is in flight yet).
  Drain(clock_.Now(), std::move(done));
}

void ControllerPipe::Drain(TimeNs since, Function<void(Status)> done) {
  port_.Advance(clock_.Now());
  CompletionEntry e;
  bool consumed = false;
  while (NextCompletion(&e)) {
    consumed = true;
    ++stats_.stale_completions;
  }
  if (consumed) port_.Write32(pr::At(pipe_, pr::kCqHead), cq_head_);
  uint32_t st = 0;
  if (!port_.Read32(pr::At(pipe_, pr::kPipeStatus), &st)) {
    done(Status::IOError(fmt::format("pipe {}: PIPE_STATUS read failed", pipe_)));
    return;
  }
  if (!pr::kPipeStatusIdle.get(st)) {
    if (clock_.Now() - since > 1'000'000'000) {
      done(Status::TimedOut(fmt::format("pipe {}: still busy with a previous host's commands after 1 s", pipe_)));
      return;
    }
    auto alive = alive_;
    clock_.After(o_.tick_ns, [this, alive, since, done = std::move(done)]() mutable {
      if (*alive) Drain(since, std::move(done));
    });
    return;
  }
  ReadGeometry(0, std::move(done));
}

// Through die `die`'s queue; a die that does not answer (dead) passes it to the next.
void ControllerPipe::ReadGeometry(uint32_t die, Function<void(Status)> done) {
  auto buf = std::make_shared<std::vector<uint8_t>>(3 * nand::onfi::kParamPageBytes);
  auto d = std::make_shared<Function<void(Status)>>(std::move(done));
  ReadParameterPage(die, buf->data(), static_cast<uint32_t>(buf->size()), [this, buf, d, die](const nand::Completion& c) {
    if (!c.ok() && die + 1 < topology_.dies()) {
      ReadGeometry(die + 1, std::move(*d));
      return;
    }
    if (!c.ok()) {
      (*d)(Status::IOError(fmt::format("pipe {}: READ PARAMETER PAGE: {}", pipe_, nand::FlashStatusName(c.status))));
      return;
    }
    auto pp = nand::onfi::Decode(buf->data(), 3);
    if (!pp.ok()) {
      (*d)(pp.status());
      return;
    }
    pp_ = *pp;
    const uint32_t cws = pp_.data_bytes_per_page / kCw;
    if (pp_.data_bytes_per_page % kCw != 0 || pp_.spare_bytes_per_page < cws * kParity ||
        pp_.data_bytes_per_page + pp_.spare_bytes_per_page > kDieBufBytes - 512 ||
        (pp_.spare_bytes_per_page - cws * kParity) % 8 != 0 || pp_.spare_bytes_per_page % 8 != 0) {
      (*d)(Status::NotSupported(fmt::format("pipe {}: page format {}+{} does not fit the controller's ECC layout",
                                            pipe_, pp_.data_bytes_per_page, pp_.spare_bytes_per_page)));
      return;
    }
    page_bits_ = BitsFor(pp_.pages_per_block);
    block_bits_ = BitsFor(pp_.blocks_per_lun);
    spare_bytes_ = pp_.spare_bytes_per_page;
    meta_bytes_ = spare_bytes_ - cws * kParity;
    ready_ = true;
    (*d)(Status::Ok());
  });
}

bool ControllerPipe::ValidPpa(const nand::Ppa& p) const {
  return ready_ && p.die < topology_.dies() && p.block < pp_.blocks_per_lun && p.page < pp_.pages_per_block;
}

void ControllerPipe::Fail(nand::FlashCallback done, nand::FlashStatus s) {
  auto alive = alive_;
  clock_.Post([done = std::move(done), s, now = clock_.Now(), alive]() mutable {
    nand::Completion c;
    c.status = s;
    c.submit_ns = now;
    c.complete_ns = now;
    done(c);
  });
}

void ControllerPipe::Read(const nand::ReadRequest& req, nand::FlashCallback done) {
  const uint32_t cws = ready_ ? pp_.data_bytes_per_page / kCw : 0;
  if (!ValidPpa(req.ppa) || req.first_sector + req.sector_count > cws) {
    Fail(std::move(done), nand::FlashStatus::kInvalidAddress);
    return;
  }
  Cmd c;
  c.opc = opc::kRead;
  c.row = Row(req.ppa.die, req.ppa.block, req.ppa.page);
  c.read = req;
  if (req.sector_count == 0) c.read.sector_count = cws - req.first_sector;  // to the page's end
  c.done = std::move(done);
  Enqueue(req.ppa.die, std::move(c));
}

void ControllerPipe::Program(const nand::ProgramRequest& req, nand::FlashCallback accepted,
                             nand::FlashCallback done) {
  const bool with_acc = req.acc != nand::kNoAccumulator;
  const bool taker = with_acc && req.acc_op != nand::AccOp::kAdd;
  if (!ValidPpa(req.ppa) || (req.data == nullptr && !taker) || (with_acc && req.acc >= accs_)) {
    Fail(std::move(done), nand::FlashStatus::kInvalidAddress);
    return;
  }
  Cmd c;
  c.opc = opc::kProgram;
  c.row = Row(req.ppa.die, req.ppa.block, req.ppa.page);
  c.page.reserve(pp_.data_bytes_per_page + meta_bytes_);
  if (with_acc) {
    c.acc = req.acc;
    c.acc_op = req.acc_op == nand::AccOp::kAdd ? acc_code::kAdd
               : req.acc_op == nand::AccOp::kTake ? acc_code::kTake
                                                  : acc_code::kPeek;
    // The parity page's record of its members' metadata, as the contract has it (the
    // controller takes offsets it can handle in words: the FTL's are).
    if (taker && req.acc_meta_len != 0 && req.acc_meta_at + req.acc_meta_len <= meta_bytes_ &&
        req.acc_crc_at + 4u <= meta_bytes_) {
      if (req.acc_meta_at % 8 != 0 || req.acc_crc_at % 4 != 0) {
        Fail(std::move(done), nand::FlashStatus::kInvalidAddress);
        return;
      }
      c.acc_meta_at = req.acc_meta_at;
      c.acc_meta_len = req.acc_meta_len;
      c.acc_crc_at = req.acc_crc_at;
    }
  }
  if (req.data == nullptr) {
    c.zero_data = true;
  } else {
    c.page.assign(req.data, req.data + pp_.data_bytes_per_page);
  }
  if (req.meta) {
    c.page.insert(c.page.end(), req.meta, req.meta + meta_bytes_);
  } else {
    c.page.resize(c.page.size() + meta_bytes_, 0xFF);
  }
  c.done = std::move(done);
  Enqueue(req.ppa.die, std::move(c));
  // The page is in the host's queue (the controller has no protected buffer): accepted.
  if (!accepted) return;
  clock_.Post([accepted = std::move(accepted), now = clock_.Now()]() mutable {
    nand::Completion a;
    a.submit_ns = now;
    a.complete_ns = now;
    accepted(a);
  });
}

void ControllerPipe::Erase(uint32_t die, uint32_t block, nand::FlashCallback done) {
  if (!ValidPpa(nand::Ppa{die, block, 0})) {
    Fail(std::move(done), nand::FlashStatus::kInvalidAddress);
    return;
  }
  Cmd c;
  c.opc = opc::kErase;
  c.row = Row(die, block, 0);
  c.done = std::move(done);
  Enqueue(die, std::move(c));
}

void ControllerPipe::Reset(uint32_t die, nand::FlashCallback done) {
  if (die >= topology_.dies()) {
    Fail(std::move(done), nand::FlashStatus::kInvalidAddress);
    return;
  }
  // Queued commands never reach the die; the one in the controller is stopped by
  // LUN_RESET (it completes ABORTED); then RESET LUN runs in order behind it.
  while (!queued_[die].empty()) {
    AccDone(queued_[die].front());
    Fail(std::move(queued_[die].front().done), nand::FlashStatus::kAborted);
    queued_[die].pop_front();
  }
  if (inflight_[die]) {
    port_.Write32(pr::At(pipe_, pr::kLunReset), 1u << (die % topology_.luns_per_channel));
    ++stats_.lun_resets;
  }
  Cmd c;
  c.opc = opc::kResetLun;
  c.row = ready_ ? Row(die, 0, 0) : (die % topology_.luns_per_channel) << 16;
  c.done = std::move(done);
  Enqueue(die, std::move(c));
}

void ControllerPipe::ReadId(uint32_t die, uint8_t address, uint8_t* out, uint32_t len, nand::FlashCallback done) {
  if (die >= topology_.dies() || len == 0 || len > 4096 || out == nullptr) {
    Fail(std::move(done), nand::FlashStatus::kInvalidAddress);
    return;
  }
  Cmd c;
  c.opc = opc::kReadId;
  c.row = ready_ ? Row(die, 0, 0) : 0;
  c.col = address;
  c.len = static_cast<uint16_t>(len);
  c.out = out;
  c.done = std::move(done);
  Enqueue(die, std::move(c));
}

void ControllerPipe::ReadParameterPage(uint32_t die, uint8_t* out, uint32_t len, nand::FlashCallback done) {
  if (die >= topology_.dies() || len == 0 || len > 4096 || out == nullptr) {
    Fail(std::move(done), nand::FlashStatus::kInvalidAddress);
    return;
  }
  Cmd c;
  c.opc = opc::kReadParam;
  c.len = static_cast<uint16_t>(len);
  c.out = out;
  if (!ready_) {
    c.done = std::move(done);  // Init's own read: the layout is not known yet
  } else {
    // The parameter page is the target's: every LUN behind a CE answers with it, a dead
    // one too (through its live neighbours). The contract asks whether this die answers,
    // so a read of the LUN's first page follows; a LUN that never gets ready (dead) turns
    // the answer into kDieTimeout, as a silent die's is on any card.
    c.done = [this, die, done = std::move(done)](const nand::Completion& pc) mutable {
      if (!pc.ok()) return done(pc);
      nand::ReadRequest probe;
      probe.ppa.die = die;
      Read(probe, [pc, done = std::move(done)](const nand::Completion& rc) mutable {
        nand::Completion out_c = pc;
        if (rc.status == nand::FlashStatus::kDieTimeout) out_c.status = nand::FlashStatus::kDieTimeout;
        done(out_c);
      });
    };
  }
  Enqueue(die, std::move(c));
}

void ControllerPipe::ClearAccumulator(uint32_t acc) {
  if (acc >= accs_ || topology_.dies() == 0) return;
  Cmd c;
  c.opc = opc::kAccClear;
  c.acc = acc;
  c.row = ready_ ? Row(acc % topology_.dies(), 0, 0) : 0;
  c.done = [this, acc](const nand::Completion& cc) {
    if (!cc.ok()) {
      Logger("hw")->error("pipe {}: ACC_CLEAR of accumulator {}: {}", pipe_, acc, nand::FlashStatusName(cc.status));
    }
  };
  Enqueue(acc % topology_.dies(), std::move(c));
}

void ControllerPipe::Copy(const nand::CopyRequest& req, nand::FlashCallback accepted, nand::FlashCallback done) {
  const uint32_t cws = ready_ ? pp_.data_bytes_per_page / kCw : 0;
  bool ok = copy_accumulators() > 0 && ValidPpa(req.dst) && req.segment_count <= nand::kMaxCopySegments &&
            (req.acc == nand::kNoAccumulator || req.acc < accs_);
  uint32_t total = 0;
  if (ok && req.segment_count == 0) ok = ValidPpa(req.src);
  for (uint32_t i = 0; ok && i < req.segment_count; ++i) {
    const nand::CopySegment& g = req.segments[i];
    ok = ValidPpa(g.src) && g.cw_count > 0 && g.first_cw + g.cw_count <= cws;
    total += g.cw_count;
  }
  if (!ok || total > cws) {
    Fail(std::move(done), nand::FlashStatus::kInvalidAddress);
    return;
  }
  auto cs = std::make_shared<CopyState>();
  cs->req = req;
  cs->meta.assign(meta_bytes_, 0xFF);
  cs->fail_meta.assign(meta_bytes_, 0xFF);
  if (req.meta) std::memcpy(cs->meta.data(), req.meta, meta_bytes_);
  if (req.fail_meta) std::memcpy(cs->fail_meta.data(), req.fail_meta, meta_bytes_);
  cs->accepted = std::move(accepted);
  cs->done = std::move(done);
  Cmd p;
  p.opc = opc::kProgram;
  p.row = Row(req.dst.die, req.dst.block, req.dst.page);
  p.copy = cs;
  if (req.acc != nand::kNoAccumulator) {
    p.acc = req.acc;
    p.acc_op = acc_code::kAdd;
  }
  p.done = [this, cs](const nand::Completion& c) {
    cs->prog_done = true;
    cs->prog = c;
    CopyEnded(cs);
  };
  // Its place among the destination die's commands is taken now; it issues once its
  // segments are in its staging page.
  Enqueue(req.dst.die, std::move(p));
  if (stage_wait_.empty() && !free_stage_.empty()) {
    StartCopy(cs);
  } else {
    stage_wait_.push_back(cs);
  }
}

// The copy's segment reads, each ahead of its die's queued programs and erases.
void ControllerPipe::StartCopy(const std::shared_ptr<CopyState>& cs) {
  cs->stage = free_stage_.back();
  free_stage_.pop_back();
  const nand::CopyRequest& r = cs->req;
  nand::CopySegment whole{r.src, 0, pp_.data_bytes_per_page / kCw};
  const uint32_t n = r.segment_count == 0 ? 1 : r.segment_count;
  cs->reads_left = n;
  uint32_t off = 0;
  for (uint32_t i = 0; i < n; ++i) {
    const nand::CopySegment& g = r.segment_count == 0 ? whole : r.segments[i];
    Cmd c;
    c.opc = opc::kRead;
    c.row = Row(g.src.die, g.src.block, g.src.page);
    c.read.ppa = g.src;
    c.copy = cs;
    c.stage_addr = stage_buf(static_cast<uint32_t>(cs->stage)) + off;
    c.win_off = static_cast<uint16_t>(g.first_cw * kCw);
    c.win_bytes = static_cast<uint16_t>(g.cw_count * kCw);
    off += g.cw_count * kCw;
    c.done = [this, cs](const nand::Completion& rc) { CopyReadDone(cs, rc); };
    c.submit_ns = clock_.Now();
    ++stats_.commands;
    auto& q = queued_[g.src.die];
    auto at = std::find_if(q.begin(), q.end(), [](const Cmd& x) { return x.opc != opc::kRead; });
    q.insert(at, std::move(c));
    Issue(g.src.die);
  }
  cs->bytes = off;
}

void ControllerPipe::CopyReadDone(const std::shared_ptr<CopyState>& cs, const nand::Completion& c) {
  if (!c.ok() && cs->read_status == nand::FlashStatus::kOk) cs->read_status = c.status;
  cs->corrected += c.corrected_bits;
  if (--cs->reads_left > 0) return;
  if (!cs->prog_done) {
    if (cs->read_status == nand::FlashStatus::kOk && cs->accepted) {
      // Read and corrected, its program next in its die's order: what a program's
      // `accepted` means on this controller (no protected buffer).
      clock_.Post([accepted = std::move(cs->accepted), now = clock_.Now()]() mutable {
        nand::Completion a;
        a.submit_ns = now;
        a.complete_ns = now;
        accepted(a);
      });
    }
    Issue(cs->req.dst.die);
  }
  CopyEnded(cs);
}

// Once the program has completed and no read still writes the staging page: the page
// goes back to the pool (to the oldest waiting copy) and the host hears the outcome.
void ControllerPipe::CopyEnded(const std::shared_ptr<CopyState>& cs) {
  if (!cs->prog_done || cs->reads_left > 0 || cs->ended) return;
  cs->ended = true;
  if (cs->stage >= 0) {
    free_stage_.push_back(static_cast<uint32_t>(cs->stage));
  } else {
    stage_wait_.erase(std::remove(stage_wait_.begin(), stage_wait_.end(), cs), stage_wait_.end());
  }
  while (!stage_wait_.empty() && !free_stage_.empty()) {
    auto next = stage_wait_.front();
    stage_wait_.pop_front();
    StartCopy(next);
  }
  nand::Completion out = cs->prog;
  if (out.ok() && cs->read_status != nand::FlashStatus::kOk) out.status = cs->read_status;
  out.corrected_bits = cs->corrected;
  ++stats_.copies;
  if (!out.ok()) ++stats_.copy_fails;
  cs->done(out);
}

void ControllerPipe::Enqueue(uint32_t die, Cmd c) {
  c.submit_ns = clock_.Now();
  ++stats_.commands;
  if (c.acc != nand::kNoAccumulator) {
    c.order = next_order_++;
    acc_ops_[c.acc].push_back({c.order, c.opc == opc::kAccClear || c.acc_op != acc_code::kAdd});
  }
  queued_[die].push_back(std::move(c));
  if (!inflight_[die]) Issue(die);
}

// Whether a command may go into the ring now: a copy's program once its segments are
// read, an accumulator operation once the earlier ones it must follow have completed.
bool ControllerPipe::CanIssue(const Cmd& c) const {
  if (c.copy && c.opc == opc::kProgram && (c.copy->stage < 0 || c.copy->reads_left > 0)) return false;
  if (c.acc == nand::kNoAccumulator) return true;
  const bool taker = c.opc == opc::kAccClear || c.acc_op != acc_code::kAdd;
  for (const AccOpRef& r : acc_ops_[c.acc]) {
    if (r.order >= c.order) break;
    if (taker || r.taker) return false;
  }
  return true;
}

void ControllerPipe::AccDone(const Cmd& c) {
  if (c.acc == nand::kNoAccumulator) return;
  auto& v = acc_ops_[c.acc];
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it->order == c.order) {
      v.erase(it);
      return;
    }
  }
}

void ControllerPipe::IssueAll() {
  for (uint32_t d = 0; d < queued_.size(); ++d) Issue(d);
}

// Puts the die's next command into the submission ring.
void ControllerPipe::Issue(uint32_t die) {
  if (queued_[die].empty() || inflight_[die] || !CanIssue(queued_[die].front())) return;
  inflight_[die] = std::move(queued_[die].front());
  queued_[die].pop_front();
  Cmd& c = *inflight_[die];
  const uint8_t lun = static_cast<uint8_t>(die % topology_.luns_per_channel);
  gen_[die] = static_cast<uint16_t>((gen_[die] + 1) & 0xFFF);
  const uint16_t tag = static_cast<uint16_t>((gen_[die] << 4) | (die & 0xF));
  Descriptor d = Descriptor::Make(c.opc, tag, lun);
  d.Row(c.row, c.col, c.len).Buffers(data_buf(die), meta_buf(die));
  if (c.opc == opc::kRead || c.opc == opc::kProgram) {
    d.Page(static_cast<uint16_t>(pp_.data_bytes_per_page), static_cast<uint16_t>(meta_bytes_),
           static_cast<uint16_t>(spare_bytes_));
  }
  if (c.acc != nand::kNoAccumulator) d.Acc(static_cast<uint8_t>(c.acc), c.acc_op, c.acc_meta_at, c.acc_meta_len, c.acc_crc_at);
  if (c.opc == opc::kProgram && c.copy) {
    // From the staging page; a copy whose source failed programs zeros and fail_meta.
    const CopyState& cs = *c.copy;
    const bool ok = cs.read_status == nand::FlashStatus::kOk;
    d.Buffers(stage_buf(static_cast<uint32_t>(cs.stage)), meta_buf(die)).Window(0, static_cast<uint16_t>(ok ? cs.bytes : 0));
    if (meta_bytes_ > 0) port_.WriteMem(meta_buf(die), ok ? cs.meta.data() : cs.fail_meta.data(), meta_bytes_);
  } else if (c.opc == opc::kProgram) {
    if (c.zero_data) {
      d.Window(0, 0);
      if (meta_bytes_ > 0) port_.WriteMem(meta_buf(die), c.page.data(), meta_bytes_);
    } else {
      port_.WriteMem(data_buf(die), c.page.data(), pp_.data_bytes_per_page);
      stats_.link_data_bytes += pp_.data_bytes_per_page;
      if (meta_bytes_ > 0) port_.WriteMem(meta_buf(die), c.page.data() + pp_.data_bytes_per_page, meta_bytes_);
    }
    std::vector<uint8_t>().swap(c.page);
  } else if (c.opc == opc::kRead && c.copy) {
    d.Buffers(c.stage_addr, meta_buf(die)).Window(c.win_off, c.win_bytes).NoMetaOut();
  } else if (c.opc == opc::kRead && c.read.data == nullptr && accs_ > 0) {
    d.Window(0, 0);  // metadata only: no data goes out of the controller
  }
  d.Generation(own_gen_);
  if (sq_tags_.size() != o_.ring_entries) sq_tags_.assign(o_.ring_entries, 0xFFFF);
  sq_tags_[sq_tail_] = tag;
  port_.WriteMem(region_ + uint64_t{sq_tail_} * 64, &d, sizeof(d));
  sq_tail_ = (sq_tail_ + 1) & (o_.ring_entries - 1);
  port_.Write32(pr::At(pipe_, pr::kSqTail), sq_tail_);
  ++in_ring_;
  if (!tick_armed_) {
    tick_armed_ = true;
    auto alive = alive_;
    clock_.After(o_.tick_ns, [this, alive] {
      if (*alive) Tick();
    });
  }
}

// Takes the next completion off the ring if the pipe has posted one (its phase is this
// pass's), advancing the host's head and phase; the caller acknowledges with CQ_HEAD.
bool ControllerPipe::NextCompletion(CompletionEntry* e) {
  const uint64_t cq = region_ + uint64_t{o_.ring_entries} * 64;
  port_.ReadMem(cq + uint64_t{cq_head_} * 16, e, sizeof(*e));
  if (e->phase() != cq_phase_) return false;
  cq_head_ = (cq_head_ + 1) & (o_.ring_entries - 1);
  if (cq_head_ == 0) cq_phase_ = !cq_phase_;
  return true;
}

void ControllerPipe::Tick() {
  tick_armed_ = false;
  ++stats_.ticks;
  port_.Advance(clock_.Now());
  CompletionEntry e;
  bool consumed = false;
  while (NextCompletion(&e)) {
    consumed = true;
    ++stats_.completions;
    if (e.lun() == 0xFF && e.tag() == 0xFFFF && e.status() == cst::kDmaError) {
      // The descriptor at this SQ index could not be fetched: its command ends DMA_ERROR.
      const uint32_t index = e.corrected() & (o_.ring_entries - 1);
      const uint16_t tag = index < sq_tags_.size() ? sq_tags_[index] : 0xFFFF;
      Logger("hw")->error("pipe {}: the descriptor at SQ index {} could not be fetched (AXI error)", pipe_, index);
      e.w[0] = (e.w[0] & ~uint64_t{0x0000'FFFF'0000'FFFF}) | tag;  // its tag; no corrected bits
    }
    const uint32_t die = e.tag() & 0xF;
    if (die >= inflight_.size() || !inflight_[die] || (e.tag() >> 4) != gen_[die]) {
      Logger("hw")->error("pipe {}: completion with unknown tag {:#06x} (status {}) ignored", pipe_, e.tag(),
                          e.status());
      continue;
    }
    --in_ring_;
    Finish(die, e);
  }
  if (consumed) port_.Write32(pr::At(pipe_, pr::kCqHead), cq_head_);
  if (in_ring_ > 0 && !tick_armed_) {
    tick_armed_ = true;
    auto alive = alive_;
    clock_.After(o_.tick_ns, [this, alive] {
      if (*alive) Tick();
    });
  }
}

void ControllerPipe::Finish(uint32_t die, const CompletionEntry& e) {
  Cmd c = std::move(*inflight_[die]);
  inflight_[die].reset();
  nand::Completion out;
  out.status = Map(e.status());
  out.submit_ns = c.submit_ns;
  out.complete_ns = clock_.Now();
  if (e.status() == cst::kDmaError) Logger("hw")->error("pipe {} die {}: AXI error on the command's transfers", pipe_, die);
  if (out.status == nand::FlashStatus::kDieTimeout) ++stats_.timeouts;
  if (out.status == nand::FlashStatus::kAborted) ++stats_.aborted;
  if (c.opc == opc::kRead) ++stats_.reads;
  if (c.opc == opc::kProgram) {
    ++stats_.programs;
    if (!out.ok()) ++stats_.program_fails;
  }
  if (c.opc == opc::kErase) {
    ++stats_.erases;
    if (!out.ok()) ++stats_.erase_fails;
  }
  if (c.opc == opc::kProgram && c.acc_op == acc_code::kTake && out.ok()) ++stats_.acc_takes;
  AccDone(c);
  if (c.opc == opc::kRead) {
    out.corrected_bits = e.corrected();
    stats_.corrected_bits += e.corrected();
    if (out.status == nand::FlashStatus::kUncorrectable) ++stats_.uncorrectable;
    if (out.status == nand::FlashStatus::kOk || out.status == nand::FlashStatus::kUncorrectable) {
      if (c.read.data && c.read.sector_count > 0) {
        port_.ReadMem(data_buf(die) + uint64_t{c.read.first_sector} * kCw, c.read.data,
                      uint64_t{c.read.sector_count} * kCw);
        stats_.link_data_bytes += uint64_t{c.read.sector_count} * kCw;
      }
      if (c.read.meta && meta_bytes_ > 0) port_.ReadMem(meta_buf(die), c.read.meta, meta_bytes_);
    }
  } else if ((c.opc == opc::kReadId || c.opc == opc::kReadParam) && out.ok()) {
    port_.ReadMem(data_buf(die), c.out, c.len);
  }
  IssueAll();  // this die's next, and whatever waited on this command's accumulator
  c.done(out);
}

// ---- Ownership (PIPE.OWNER registers) ----

uint32_t ControllerPipe::LeaseUnits(DurNs lease) const {
  if (lease == kTimeNever || lease == 0) return 0;  // 0: no expiry
  const uint64_t units = lease / (std::max<DurNs>(o_.cycle_ns, 1) * 256);
  return static_cast<uint32_t>(std::clamp<uint64_t>(units, 1, UINT32_MAX));
}

nand::PipeOwner ControllerPipe::owner() const {
  nand::PipeOwner o;
  if (!ownership_) return o;
  uint32_t v = 0, left = 0;
  port_.Read32(pr::At(pipe_, pr::kOwner), &v);
  port_.Read32(pr::At(pipe_, pr::kOwnLeaseLeft), &left);
  o.host = pr::kOwnerHost.get(v);
  o.generation = pr::kOwnerGeneration.get(v);
  o.lease_until = left == 0 ? kTimeNever : clock_.Now() + uint64_t{left} * 256 * o_.cycle_ns;
  return o;
}

nand::ClaimReply ControllerPipe::Claim(uint32_t host, bool force, DurNs lease) {
  if (!ownership_) return FlashPipe::Claim(host, force, lease);
  nand::ClaimReply r;
  uint32_t st = 0;
  const bool ok = host != 0 && host <= 0xFFFF && port_.Write32(pr::At(pipe_, pr::kOwnLease), LeaseUnits(lease)) &&
                  port_.Write32(pr::At(pipe_, pr::kOwnClaim), host | (force ? 1u << 16 : 0u)) &&
                  port_.Read32(pr::At(pipe_, pr::kOwnStatus), &st);
  r.owner = owner();
  r.granted = ok && pr::kOwnStatusGranted.get(st) != 0 && r.owner.host == host;
  if (r.granted) own_gen_ = static_cast<uint16_t>(r.owner.generation);
  return r;
}

bool ControllerPipe::Renew(DurNs lease) {
  if (!ownership_) return true;
  uint32_t st = 0;
  return port_.Write32(pr::At(pipe_, pr::kOwnLease), LeaseUnits(lease)) &&
         port_.Write32(pr::At(pipe_, pr::kOwnRenew), own_gen_) && port_.Read32(pr::At(pipe_, pr::kOwnStatus), &st) &&
         pr::kOwnStatusRenewed.get(st) != 0;
}

void ControllerPipe::Release() {
  if (ownership_) port_.Write32(pr::At(pipe_, pr::kOwnRelease), own_gen_);
}

}  // namespace vsl::hw
