#include "testbench/onfi/onfi_target.h"

#include <algorithm>

namespace vsl::tb {

namespace {
constexpr uint8_t kStatusFail = 0x01, kStatusArdy = 0x20, kStatusRdy = 0x40, kStatusWp = 0x80;

uint32_t BitsFor(uint32_t n) {
  uint32_t b = 0;
  while ((1u << b) < n) ++b;
  return b;
}
}  // namespace

uint32_t OnfiShape::page_bits() const { return BitsFor(pages_per_block); }
uint32_t OnfiShape::block_bits() const { return BitsFor(blocks); }

OnfiTarget::OnfiTarget(sc_module_name name, const OnfiTiming& t, const OnfiShape& shape,
                       std::vector<uint8_t> param_page, std::vector<uint8_t> id)
    : sc_module(name),
      t_(t),
      shape_(shape),
      param_page_(std::move(param_page)),
      id_(std::move(id)),
      luns_(shape.luns),
      own_store_(shape.luns, shape.blocks, shape.page_bytes),
      store_(&own_store_) {
  for (auto& l : luns_) l.page_reg.assign(shape_.page_bytes, 0xFF);
  SC_METHOD(OnPins);
  sensitive << ce_n << cle << ale << we_n << re_n << dq_o << dq_oe;
  dont_initialize();
  SC_THREAD(DriveThread);
  SC_METHOD(UpdateRb);  // the one driver of R/B# (the LUN threads signal it)
  sensitive << rb_ev_;
  for (uint32_t i = 0; i < shape_.luns; ++i) {
    sc_spawn([this, i] { LunThread(i); });
  }
}

int OnfiTarget::total_violations() const {
  int n = 0;
  for (const auto& [k, v] : violations_) n += v;
  return n;
}

uint32_t OnfiTarget::RowLun(uint32_t row) const {
  return (row >> (shape_.page_bits() + shape_.block_bits())) % shape_.luns;
}
uint32_t OnfiTarget::RowBlock(uint32_t row) const {
  return (row >> shape_.page_bits()) & ((1u << shape_.block_bits()) - 1);
}
uint32_t OnfiTarget::RowPage(uint32_t row) const { return row & ((1u << shape_.page_bits()) - 1); }

// Target-level operations (READ PARAMETER PAGE, GET/SET FEATURES) run on the first LUN
// that is not dead.
uint32_t OnfiTarget::FirstLiveLun() const {
  uint32_t lun = 0;
  while (lun + 1 < shape_.luns && ((dead_luns >> lun) & 1u)) ++lun;
  return lun;
}

uint8_t OnfiTarget::Status(uint32_t lun) const {
  const Lun& l = luns_[lun];
  return static_cast<uint8_t>(kStatusWp | (l.busy ? 0 : (kStatusRdy | kStatusArdy)) | l.status_fail);
}

void OnfiTarget::Check(const char* what, sc_time since, double min_ns) {
  // Time zero means the edge has not happened yet (reset holds the pins for cycles).
  if (since == SC_ZERO_TIME) return;
  // 1 ps of slack for the ns -> ps rounding of the clock period.
  if ((sc_time_stamp() - since).to_seconds() * 1e9 + 1e-3 < min_ns) ++violations_[what];
}

void OnfiTarget::OnPins() {
  const sc_time now = sc_time_stamp();
  const bool we = we_n.read(), re = re_n.read(), c = cle.read(), a = ale.read();
  const uint32_t dq = dq_o.read();
  if (ce_n.read()) {  // not selected: only track levels
    prev_we_ = we, prev_re_ = re, prev_cle_ = c, prev_ale_ = a, prev_dq_ = dq;
    return;
  }
  if (!we && !re) ++violations_["WE# and RE# low together"];
  // Holds: CLE, ALE and DQ must not change within tCLH / tALH / tDH of WE# rising.
  if (c != prev_cle_) {
    if (!c) Check("tCLH", we_rise_, t_.tCLH);
    if (c) cle_rise_ = now;
  }
  if (a != prev_ale_) {
    if (!a) Check("tALH", we_rise_, t_.tALH);
    if (a) ale_rise_ = now;
  }
  if (dq != prev_dq_ && dq_oe.read()) {
    if (we) Check("tDH", we_rise_, t_.tDH);
    dq_change_ = now;
  }
  if (we != prev_we_) {
    if (!we) {  // WE# falls
      Check("tWH", we_rise_, t_.tWH);
      Check("tWC", we_fall_, t_.tWC);
      we_fall_ = now;
    } else {    // WE# rises: the cycle latches
      Check("tWP", we_fall_, t_.tWP);
      if (c) Check("tCLS", cle_rise_, t_.tCLS);
      if (a) Check("tALS", ale_rise_, t_.tALS);
      Check("tDS", dq_change_, t_.tDS);
      we_rise_ = now;
      const auto byte = static_cast<uint8_t>(dq & 0xFF);
      if (c && !a) {
        Command(byte);
        after_cmd_or_addr_ = true;
        addr_pending_adl_ = false;
      } else if (a && !c) {
        Address(byte);
        after_cmd_or_addr_ = true;
        last_addr_rise_ = now;
        addr_pending_adl_ = true;
      } else if (!a && !c) {
        if (addr_pending_adl_) Check("tADL", last_addr_rise_, t_.tADL);
        addr_pending_adl_ = false;
        DataIn(byte);
      }
    }
  }
  if (re != prev_re_) {
    if (!re) {  // RE# falls: the next byte goes out tREA later
      Check("tREH", re_rise_, t_.tREH);
      Check("tRC", re_fall_, t_.tRC);
      if (after_cmd_or_addr_) Check("tWHR", we_rise_, t_.tWHR);
      // tRR: from R/B# rising to the first data out (a status read may come any time).
      if (after_ready_ && out_ != Out::kStatus) Check("tRR", rb_rise_, t_.tRR);
      after_cmd_or_addr_ = false;
      if (out_ != Out::kStatus) after_ready_ = false;
      re_fall_ = now;
      switch (out_) {
        case Out::kStatus:
          next_byte_ = Status(sel_);
          break;
        case Out::kId:
        case Out::kParam:
          if (out_ == Out::kParam && luns_[sel_].busy) ++violations_["data out of a busy LUN"];
          next_byte_ = fixed_pos_ < fixed_.size() ? fixed_[fixed_pos_] : 0x00;
          ++fixed_pos_;
          break;
        case Out::kData: {
          Lun& l = luns_[sel_];
          if (l.busy) ++violations_["data out of a busy LUN"];
          next_byte_ = l.column < l.page_reg.size() ? l.page_reg[l.column] : 0x00;
          ++l.column;
          break;
        }
        case Out::kNone:
          ++violations_["RE# with nothing to output"];
          next_byte_ = 0x00;
          break;
      }
      drive_ev_.notify(sc_time(t_.tREA, SC_NS));
    } else {
      Check("tRP", re_fall_, t_.tRP);
      re_rise_ = now;
    }
  }
  prev_we_ = we, prev_re_ = re, prev_cle_ = c, prev_ale_ = a, prev_dq_ = dq;
}

void OnfiTarget::Command(uint8_t c) {
  commands.push_back(c);
  if (pending_mode_ >= 0 && c != 0x70 && c != 0x78) {
    t_ = OnfiMode(pending_mode_);
    pending_mode_ = -1;
  }
  // A command after R/B# rose starts a flow with its own turnaround (tWHR): tRR is for
  // data out straight after waiting on R/B#.
  after_ready_ = false;
  // ONFI's multiple-LUN rules: target-level commands, and READ STATUS (70h, which does not
  // say which LUN answers), only while no other LUN runs an array operation. A LUN stuck
  // busy for ever (a dead die) is left out: the controller has written it off.
  auto other_busy = [&](int except) {
    for (uint32_t i = 0; i < shape_.luns; ++i) {
      if (static_cast<int>(i) != except && luns_[i].busy && !luns_[i].stick) return true;
    }
    return false;
  };
  if ((c == 0x90 || c == 0xEC || c == 0xEE || c == 0xEF) && other_busy(-1)) {
    ++violations_["target-level command while a LUN is busy"];
  }
  if (c == 0x70 && other_busy(static_cast<int>(sel_))) ++violations_["READ STATUS while another LUN is busy"];
  switch (c) {
    case 0xFF:  // RESET: every LUN
      for (uint32_t i = 0; i < shape_.luns; ++i) {
        luns_[i].stick = false;
        luns_[i].status_fail = 0;
        StartBusy(i, t_rst);
      }
      out_ = Out::kNone;
      break;
    case 0x70:  // READ STATUS
      if (out_ == Out::kParam || out_ == Out::kData) resume_ = out_;
      out_ = Out::kStatus;
      break;
    case 0xFA:  // RESET LUN: the row follows
      addr_.clear();
      out_ = Out::kNone;
      break;
    case 0x00:  // READ (first cycle), or back to the data output a status read interrupted
      addr_.clear();
      out_ = resume_;
      resume_ = Out::kData;
      break;
    case 0x30: {  // READ (second cycle): the LUN reads its page into its register
      if (addr_.size() < 5) {
        ++violations_["READ with fewer than 5 address cycles"];
        break;
      }
      const uint32_t col = addr_[0] | (uint32_t{addr_[1]} << 8);
      const uint32_t row = addr_[2] | (uint32_t{addr_[3]} << 8) | (uint32_t{addr_[4]} << 16);
      sel_ = RowLun(row);
      Lun& l = luns_[sel_];
      if (l.busy) {
        ++violations_["command to a busy LUN"];
        break;
      }
      l.page_reg.resize(shape_.page_bytes);
      store_->ReadPage(sel_, RowBlock(row), RowPage(row), l.page_reg.data());
      l.column = col;
      l.status_fail = 0;
      ++reads;
      if (static_cast<int>(sel_) == stuck_read_lun) l.stick = true;
      StartBusy(sel_, t_r);
      out_ = Out::kData;
      break;
    }
    case 0x05:  // CHANGE READ COLUMN
      addr_.clear();
      break;
    case 0xE0:
      if (addr_.size() >= 2) luns_[sel_].column = addr_[0] | (uint32_t{addr_[1]} << 8);
      out_ = Out::kData;
      break;
    case 0x80:  // PROGRAM (first cycle)
      addr_.clear();
      prog_buf_.assign(shape_.page_bytes, 0xFF);
      out_ = Out::kNone;
      break;
    case 0x10: {  // PROGRAM (confirm)
      if (addr_.size() < 5) {
        ++violations_["PROGRAM with fewer than 5 address cycles"];
        break;
      }
      const uint32_t row = addr_[2] | (uint32_t{addr_[3]} << 8) | (uint32_t{addr_[4]} << 16);
      const uint32_t lun = RowLun(row), block = RowBlock(row), page = RowPage(row);
      sel_ = lun;
      Lun& l = luns_[lun];
      if (l.busy) {
        ++violations_["command to a busy LUN"];
        break;
      }
      l.status_fail = 0;
      if (static_cast<int>(lun) == fail_next_program_lun) {
        fail_next_program_lun = -1;
        l.status_fail = kStatusFail;  // an injected program failure
      } else if (!store_->ProgramPage(lun, block, page, prog_buf_.data())) {
        l.status_fail = kStatusFail;  // not erased, out of order, or the array failed
      } else {
        l.prog_key = (uint64_t{lun} << 40) | (uint64_t{block} << 20) | page;
      }
      ++programs;
      StartBusy(lun, t_prog);
      break;
    }
    case 0x60:  // ERASE (first cycle)
      addr_.clear();
      out_ = Out::kNone;
      break;
    case 0xD0: {  // ERASE (confirm)
      if (addr_.size() < 3) {
        ++violations_["ERASE with fewer than 3 address cycles"];
        break;
      }
      const uint32_t row = addr_[0] | (uint32_t{addr_[1]} << 8) | (uint32_t{addr_[2]} << 16);
      const uint32_t lun = RowLun(row), block = RowBlock(row);
      sel_ = lun;
      if (luns_[lun].busy) {
        ++violations_["command to a busy LUN"];
        break;
      }
      luns_[lun].status_fail = store_->EraseBlock(lun, block) ? 0 : kStatusFail;
      ++erases;
      StartBusy(lun, t_bers);
      break;
    }
    case 0xEF:  // SET FEATURES: address, then four parameter bytes
      addr_.clear();
      prog_buf_.assign(4, 0);
      prog_col_ = 0;
      out_ = Out::kNone;
      break;
    case 0xEE:  // GET FEATURES: the address follows
    case 0x78:  // READ STATUS ENHANCED: the row follows
      if (out_ == Out::kParam || out_ == Out::kData) resume_ = out_;
      addr_.clear();
      out_ = Out::kNone;
      break;
    case 0x90:  // READ ID: the address follows
    case 0xEC:  // READ PARAMETER PAGE: the address follows
      addr_.clear();
      out_ = Out::kNone;
      break;
    default:
      ++violations_["unknown command"];
      break;
  }
  if (c != 0xFF) cmd_ = c;
}

void OnfiTarget::Address(uint8_t a) {
  addr_.push_back(a);
  switch (cmd_) {
    case 0x90:  // READ ID
      fixed_ = a == 0x20 ? std::vector<uint8_t>{'O', 'N', 'F', 'I'} : id_;
      fixed_pos_ = 0;
      out_ = Out::kId;
      break;
    case 0xEC: {  // READ PARAMETER PAGE: the first live LUN busy tR, then the copies
      const uint32_t lun = FirstLiveLun();
      fixed_ = param_page_;
      fixed_pos_ = 0;
      sel_ = lun;
      luns_[lun].stick = stuck;
      StartBusy(lun, t_r);
      out_ = Out::kParam;
      break;
    }
    case 0x80:
      if (addr_.size() == 2) prog_col_ = addr_[0] | (uint32_t{addr_[1]} << 8);
      break;
    case 0xEF:
      feat_addr_ = a;
      break;
    case 0xEE: {  // GET FEATURES: busy tFEAT, then P1..P4
      auto it = features_.find(a);
      fixed_ = it != features_.end() ? it->second : std::vector<uint8_t>(4, 0);
      fixed_pos_ = 0;
      sel_ = FirstLiveLun();
      StartBusy(sel_, t_feat);
      out_ = Out::kParam;
      break;
    }
    case 0xFA:  // RESET LUN: that LUN alone aborts what it does and resets (tRST)
      if (addr_.size() == 3) {
        const uint32_t row = addr_[0] | (uint32_t{addr_[1]} << 8) | (uint32_t{addr_[2]} << 16);
        const uint32_t lun = RowLun(row);
        Lun& l = luns_[lun];
        ++lun_resets;
        l.status_fail = 0;
        if (l.busy) {
          // A program cut short leaves its page half-programmed (torn): the second half
          // of what was sent reads back wrong.
          if (l.prog_key != UINT64_MAX) {
            store_->TearPage(static_cast<uint32_t>(l.prog_key >> 40), static_cast<uint32_t>(l.prog_key >> 20) & 0xFFFFF,
                             static_cast<uint32_t>(l.prog_key & 0xFFFFF));
          }
          l.aborted = true;
          l.abort.notify(SC_ZERO_TIME);
        } else {
          StartBusy(lun, t_rst);
        }
        l.prog_key = UINT64_MAX;
        sel_ = lun;
      }
      break;
    case 0x78:
      if (addr_.size() == 3) {
        const uint32_t row = addr_[0] | (uint32_t{addr_[1]} << 8) | (uint32_t{addr_[2]} << 16);
        sel_ = RowLun(row);
        out_ = Out::kStatus;
      }
      break;
    default:
      break;
  }
}

void OnfiTarget::DataIn(uint8_t b) {
  if (cmd_ == 0xEF) {  // SET FEATURES: busy tFEAT after P4
    if (prog_col_ < 4) prog_buf_[prog_col_] = b;
    if (++prog_col_ == 4) {
      features_[feat_addr_] = prog_buf_;
      // Feature 01h is the timing mode. It applies once the operation is over: status
      // reads polling for the end of tFEAT run in the old mode, and the checker holds the
      // bus to the new one from the first other command.
      if (feat_addr_ == 0x01 && (prog_buf_[0] & 0x0F) <= 5) pending_mode_ = prog_buf_[0] & 0x0F;
      sel_ = FirstLiveLun();
      StartBusy(sel_, t_feat);
    }
    return;
  }
  if (cmd_ != 0x80) {
    ++violations_["data in outside PROGRAM"];
    return;
  }
  // Bytes land at consecutive columns from the addressed one.
  if (prog_col_ < prog_buf_.size()) prog_buf_[prog_col_] = b;
  ++prog_col_;
}

void OnfiTarget::StartBusy(uint32_t lun, sc_time t) {
  Lun& l = luns_[lun];
  if ((dead_luns >> lun) & 1u) l.stick = true;
  l.busy = true;
  l.busy_for = t;
  l.done.notify(sc_time(t_.tWB / 2, SC_NS));  // R/B# falls within tWB
}

void OnfiTarget::LunThread(uint32_t lun) {
  Lun& l = luns_[lun];
  for (;;) {
    wait(l.done);
    rb_ev_.notify(SC_ZERO_TIME);
    if (l.stick) {
      for (;;) wait(sc_time(1, SC_SEC));  // never ready again
    }
    wait(l.busy_for, l.abort);
    if (l.aborted) {  // RESET LUN while busy: the operation stops, the reset takes tRST
      l.aborted = false;
      wait(t_rst);
    }
    l.prog_key = UINT64_MAX;
    l.busy = false;
    rb_ev_.notify(SC_ZERO_TIME);
    // tRR runs from the selected LUN becoming ready (R/B# rising, for a lone LUN) to its
    // first data out.
    if (lun == sel_) {
      rb_rise_ = sc_time_stamp();
      after_ready_ = true;
    }
  }
}

void OnfiTarget::UpdateRb() {
  bool any = false;
  for (const auto& l : luns_) any = any || l.busy;
  rb_n.write(!any);
}

void OnfiTarget::DriveThread() {
  for (;;) {
    wait(drive_ev_);
    dq_i.write(next_byte_);
  }
}

}  // namespace vsl::tb
