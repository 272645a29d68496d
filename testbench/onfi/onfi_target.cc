#include "testbench/onfi/onfi_target.h"

namespace vsl::tb {

namespace {
constexpr uint8_t kStatusReady = 0x60;  // RDY | ARDY
}  // namespace

OnfiTarget::OnfiTarget(sc_module_name name, const OnfiTiming& t, std::vector<uint8_t> param_page,
                       std::vector<uint8_t> id)
    : sc_module(name), t_(t), param_page_(std::move(param_page)), id_(std::move(id)) {
  SC_METHOD(OnPins);
  sensitive << ce_n << cle << ale << we_n << re_n << dq_o << dq_oe;
  dont_initialize();
  SC_THREAD(DriveThread);
  SC_THREAD(BusyThread);
}

int OnfiTarget::total_violations() const {
  int n = 0;
  for (const auto& [k, v] : violations_) n += v;
  return n;
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
  if (ce_n.read()) {  // not selected: only track edges
    prev_we_ = we, prev_re_ = re, prev_cle_ = c, prev_ale_ = a, prev_dq_ = dq;
    return;
  }
  if (!we && !re) ++violations_["WE# and RE# low together"];
  // Holds: CLE, ALE and DQ must not change within tCLH / tALH / tDH of WE# rising.
  if (c != prev_cle_) {
    if (!c) Check("tCLH", we_rise_, t_.tCLH);
    (c ? cle_rise_ : cle_fall_) = now;
  }
  if (a != prev_ale_) {
    if (!a) Check("tALH", we_rise_, t_.tALH);
    (a ? ale_rise_ : ale_fall_) = now;
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
      }
    }
  }
  if (re != prev_re_) {
    if (!re) {  // RE# falls: the next byte goes out tREA later
      Check("tREH", re_rise_, t_.tREH);
      Check("tRC", re_fall_, t_.tRC);
      if (after_cmd_or_addr_) Check("tWHR", we_rise_, t_.tWHR);
      if (after_ready_) Check("tRR", rb_rise_, t_.tRR);
      after_cmd_or_addr_ = false;
      after_ready_ = false;
      re_fall_ = now;
      if (busy_) {
        ++violations_["RE# while busy"];
      } else {
        next_byte_ = out_pos_ < out_.size() ? out_[out_pos_] : 0x00;
        ++out_pos_;
        drive_ev_.notify(sc_time(t_.tREA, SC_NS));
      }
    } else {
      Check("tRP", re_fall_, t_.tRP);
      re_rise_ = now;
    }
  }
  prev_we_ = we, prev_re_ = re, prev_cle_ = c, prev_ale_ = a, prev_dq_ = dq;
}

void OnfiTarget::Command(uint8_t c) {
  commands.push_back(c);
  cur_cmd_ = c;
  out_.clear();
  out_pos_ = 0;
  switch (c) {
    case 0xFF:  // RESET
      busy_for_ = t_rst;
      stick_ = false;
      busy_ev_.notify(sc_time(t_.tWB / 2, SC_NS));
      break;
    case 0x70:  // READ STATUS
      out_.assign(1, busy_ ? 0x00 : kStatusReady);
      break;
    default:
      break;
  }
}

void OnfiTarget::Address(uint8_t a) {
  switch (cur_cmd_) {
    case 0x90:  // READ ID
      if (a == 0x20) {
        out_ = {'O', 'N', 'F', 'I'};
      } else {
        out_ = id_;
      }
      out_pos_ = 0;
      break;
    case 0xEC:  // READ PARAMETER PAGE: busy tR, then the copies
      out_ = param_page_;
      out_pos_ = 0;
      busy_for_ = t_r;
      stick_ = stuck;
      busy_ev_.notify(sc_time(t_.tWB / 2, SC_NS));
      break;
    default:
      break;
  }
}

void OnfiTarget::DriveThread() {
  for (;;) {
    wait(drive_ev_);
    dq_i.write(next_byte_);
  }
}

void OnfiTarget::BusyThread() {
  rb_n.write(true);
  for (;;) {
    wait(busy_ev_);
    busy_ = true;
    rb_n.write(false);
    if (stick_) {
      wait();  // never again: no static sensitivity
    }
    wait(busy_for_);
    busy_ = false;
    rb_n.write(true);
    rb_rise_ = sc_time_stamp();
    after_ready_ = true;
  }
}

}  // namespace vsl::tb
