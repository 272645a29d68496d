// The simulated pipe's channel arbiter: which waiting die's command or data crosses a
// channel's bus next (docs/simcard.md, "Timing").
#include <algorithm>

#include "vsl/simcard/sim_pipe.h"

namespace vsl::simcard {

void SimPipe::RequestBus(Op* op, Op::BusUse use) {
  const uint32_t c = g_.ChannelOf(op->ppa.die);
  Channel& ch = channels_[c];
  op->bus_use = use;
  op->bus_req_ns = Now();
  if (ch.waiters.empty() && ch.bus_free <= Now()) return GrantBus(op);
  op->bus_wait = true;
  ch.waiters.emplace_back(op, op->serial);
  if (ch.waiters.size() == 1) ScheduleBusDispatch(c);
}

void SimPipe::ScheduleBusDispatch(uint32_t c) {
  Channel& ch = channels_[c];
  const uint64_t n = ++bus_dispatch_seq_;
  ch.dispatch = n;
  AtStage(std::max(Now(), ch.bus_free), [this, c, n] {
    if (channels_[c].dispatch == n) DispatchBus(c);
  });
}

void SimPipe::DispatchBus(uint32_t c) {
  Channel& ch = channels_[c];
  auto& w = ch.waiters;
  std::erase_if(w, [](const std::pair<Op*, uint64_t>& e) { return e.first->serial != e.second || !e.first->bus_wait; });
  if (w.empty()) return;
  if (ch.bus_free > Now()) return ScheduleBusDispatch(c);
  // As the RTL pipe chooses its channel work (rtl/pipe/vsl_pipe.sv, docs/rtl.md
  // "Scheduling"): a command's start (a READ's or ERASE's command, a PROGRAM's with its
  // data) before a ready read's data out, each kind round the dies from the one served
  // last. Before 2026-12-07 the model served the channel in request order: the RTL's
  // order keeps more dies in array time (stock steady state with the override +1.5%).
  const uint32_t n = static_cast<uint32_t>(dies_.size());
  auto rank = [&](const Op* op) {
    return std::pair<bool, uint32_t>(op->bus_use == Op::BusUse::kReadOut, (op->ppa.die + n - ch.last_die - 1) % n);
  };
  std::size_t pick = 0;
  for (std::size_t i = 1; i < w.size(); ++i) {
    if (rank(w[i].first) < rank(w[pick].first)) pick = i;
  }
  Op* op = w[pick].first;
  w.erase(w.begin() + static_cast<std::ptrdiff_t>(pick));
  GrantBus(op);
  if (!w.empty()) ScheduleBusDispatch(c);
}

// The op's channel work starts now: its command (and a program's data) or a read's data
// out; the die's busy time counts from its request, the wait for the bus included.
void SimPipe::GrantBus(Op* op) {
  Channel& ch = channels_[g_.ChannelOf(op->ppa.die)];
  Die& d = dies_[op->ppa.die];
  const TimeNs now = Now();
  const DurNs waited = now - op->bus_req_ns;
  op->bus_wait = false;
  ch.last_die = op->ppa.die;
  stats_.die_bus_wait_ns += waited;
  const uint64_t serial = op->serial;
  switch (op->bus_use) {
    case Op::BusUse::kReadCmd:
      ch.bus_free = now + t_.cmd_overhead_ns;
      stats_.bus_busy_ns += t_.cmd_overhead_ns;
      op->array_end_ns = ch.bus_free + t_.t_read_ns;
      stats_.die_busy_ns += op->array_end_ns - op->bus_req_ns;
      d.busy_until = op->array_end_ns;
      AtStage(op->array_end_ns, [this, op, serial] { ReadDataOut(op, serial); });
      break;
    case Op::BusUse::kReadOut: {
      uint64_t bytes = uint64_t{op->sector_count} * (g_.ecc_codeword_bytes + g_.ecc_parity_bytes);
      if (op->meta != nullptr) bytes += g_.meta_bytes_per_page();
      ch.bus_free = now + TransferNs(bytes, t_.bus_bytes_per_sec);
      stats_.bus_busy_ns += ch.bus_free - now;
      stats_.die_busy_ns += ch.bus_free - op->bus_req_ns;
      d.busy_until = ch.bus_free;
      AtStage(ch.bus_free, [this, op, serial] { ReadFinish(op, serial); });
      break;
    }
    case Op::BusUse::kProgram:
      ch.bus_free = now + t_.cmd_overhead_ns + op->flush_xfer_ns;
      stats_.bus_busy_ns += ch.bus_free - now;
      op->bus_start_ns = now;
      op->array_end_ns = ch.bus_free + t_.t_prog_ns;
      stats_.die_busy_ns += op->array_end_ns - op->bus_req_ns;
      d.busy_until = op->array_end_ns;
      ch.flush_xfer_ns -= op->flush_xfer_ns;
      AtStage(op->array_end_ns, [this, op, serial] { ProgramFinish(op, serial); });
      break;
    case Op::BusUse::kErase:
      ch.bus_free = now + t_.cmd_overhead_ns;
      stats_.bus_busy_ns += t_.cmd_overhead_ns;
      op->bus_start_ns = now;
      op->array_end_ns = ch.bus_free + t_.t_erase_ns;
      stats_.die_busy_ns += op->array_end_ns - op->bus_req_ns;
      d.busy_until = op->array_end_ns;
      AtStage(op->array_end_ns, [this, op, serial] { EraseFinish(op, serial); });
      break;
  }
}

}  // namespace vsl::simcard
