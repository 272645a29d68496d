// Co-simulation of the ONFI channel engine (rtl/onfi/vsl_onfi_phy.sv, Verilated as a
// SystemC module) against the pin-level target model and its timing checker.
//
//   onfi_phy_tb [--mode N] [--clock-ns P] [--bad] [--stuck] [--interleave] [--trace FILE.vcd]
//
// Runs RESET, READ STATUS, READ ID (00h and 20h) and READ PARAMETER PAGE (three copies,
// 768 bytes) with the channel registers set for ONFI mode N at a clock of P ns; checks
// the data, the checker's silence and the bus rate of the parameter-page burst against
// the mode's byte rate (1 / tRC). --bad programs the WE# and RE# pulses one cycle short of
// mode N and expects the checker to fire; --stuck makes the LUN stay busy after READ
// PARAMETER PAGE and expects the R/B# timeout to report it. --interleave then erases,
// programs and reads back pages on four LUNs: one LUN at a time (R/B#), and interleaved
// (READ started on every LUN, each polled and selected with READ STATUS ENHANCED 78h
// before its data out), checking every byte and the speed-up. Exit 0 when the run shows what it should, 1
// otherwise; the figures go to stdout.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <systemc.h>

#include "Vvsl_onfi_phy.h"
#include "testbench/onfi/onfi_target.h"
#include "testbench/onfi/tb_common.h"
#include "testbench/onfi/onfi_timing.h"
#include "vsl/nand/onfi.h"

namespace vsl::tb {
namespace {

constexpr uint32_t kOpCmd = 0, kOpAddr = 1, kOpDin = 2, kOpDout = 3, kOpWait = 4, kOpWaitRb = 5, kOpCe = 6;
constexpr uint32_t kWaitWhr = 0, kWaitAdl = 1, kWaitWb = 2, kWaitRr = 3;

struct Options {
  int mode = 0;
  double clock_ns = 5;
  bool bad = false, stuck = false, interleave = false;
  std::string trace;
};

constexpr uint32_t kPagesPerLun = 8;  // pages read per LUN in the interleaving measurement

struct Driver : sc_module, TbChecks {
  sc_in<bool> clk;
  sc_out<bool> rst_n, op_valid, din_valid;
  sc_out<uint32_t> op_kind, op_byte, op_count, din_data;
  sc_in<bool> op_ready, op_done, done_timeout, din_ready, dout_valid;
  sc_in<uint32_t> dout_data;

  std::vector<uint8_t> received;
  bool timed_out = false;
  sc_time burst_start, burst_end;
  bool done = false;
  bool stuck = false;
  std::vector<uint8_t> param_page, id;

  bool interleave = false;
  OnfiShape shape;
  double single_ns_per_page = 0, interleaved_ns_per_page = 0;
  std::vector<uint8_t> din_buf;
  size_t din_idx = 0;

  SC_CTOR(Driver) {
    SC_THREAD(Run);
    sensitive << clk.pos();
    SC_METHOD(Collect);
    sensitive << clk.pos();
    dont_initialize();
    SC_METHOD(Feed);
    sensitive << clk.pos();
  }

  // The data-in stream: a byte moves when valid and ready meet at a clock edge (both as
  // they were before it).
  void Feed() {
    if (din_valid.read() && din_ready.read()) ++din_idx;
    const bool more = din_idx < din_buf.size();
    din_valid.write(more);
    din_data.write(more ? din_buf[din_idx] : 0);
  }

  void Collect() {
    if (dout_valid.read()) received.push_back(static_cast<uint8_t>(dout_data.read()));
  }
  // One op: present it, wait for acceptance and completion.
  void Op(uint32_t kind, uint32_t byte = 0, uint32_t count = 0) {
    op_kind.write(kind);
    op_byte.write(byte);
    op_count.write(count);
    op_valid.write(true);
    do { wait(); } while (!op_ready.read());
    op_valid.write(false);
    do { wait(); } while (!op_done.read());
    if (done_timeout.read()) timed_out = true;
  }
  std::vector<uint8_t> Dout(uint32_t n) {
    received.clear();
    Op(kOpDout, 0, n);
    return received;
  }
  uint32_t Row(uint32_t lun, uint32_t block, uint32_t page) const {
    return (lun << (shape.page_bits() + shape.block_bits())) | (block << shape.page_bits()) | page;
  }
  void Addr5(uint32_t col, uint32_t row) {
    Op(kOpAddr, col & 0xFF);
    Op(kOpAddr, (col >> 8) & 0xFF);
    Op(kOpAddr, row & 0xFF);
    Op(kOpAddr, (row >> 8) & 0xFF);
    Op(kOpAddr, (row >> 16) & 0xFF);
  }
  uint8_t StatusOf(uint32_t row) {  // READ STATUS ENHANCED
    Op(kOpCmd, 0x78);
    Op(kOpAddr, row & 0xFF);
    Op(kOpAddr, (row >> 8) & 0xFF);
    Op(kOpAddr, (row >> 16) & 0xFF);
    Op(kOpWait, kWaitWhr);
    auto st = Dout(1);
    return st.empty() ? 0 : st[0];
  }
  std::vector<uint8_t> PageData(uint32_t lun, uint32_t page) const { return TestPageData(lun, page, shape.page_bytes); }
  void Erase(uint32_t lun, uint32_t block) {
    const uint32_t row = Row(lun, block, 0);
    Op(kOpCmd, 0x60);
    Op(kOpAddr, row & 0xFF);
    Op(kOpAddr, (row >> 8) & 0xFF);
    Op(kOpAddr, (row >> 16) & 0xFF);
    Op(kOpCmd, 0xD0);
    Op(kOpWait, kWaitWb);
    Op(kOpWaitRb);
  }
  void Program(uint32_t lun, uint32_t block, uint32_t page, const std::vector<uint8_t>& data) {
    Op(kOpCmd, 0x80);
    Addr5(0, Row(lun, block, page));
    Op(kOpWait, kWaitAdl);
    din_buf = data;
    din_idx = 0;
    Op(kOpDin, 0, static_cast<uint32_t>(data.size()));
    din_buf.clear();
    din_idx = 0;
    Op(kOpCmd, 0x10);
    Op(kOpWait, kWaitWb);
    Op(kOpWaitRb);
    Op(kOpCmd, 0x70);
    Op(kOpWait, kWaitWhr);
    auto st = Dout(1);
    Expect(st.size() == 1 && (st[0] & 0x01) == 0, "PROGRAM status: no FAIL");
  }
  // READ on one LUN, waiting on R/B#.
  std::vector<uint8_t> ReadPage(uint32_t lun, uint32_t block, uint32_t page) {
    Op(kOpCmd, 0x00);
    Addr5(0, Row(lun, block, page));
    Op(kOpCmd, 0x30);
    Op(kOpWait, kWaitWb);
    Op(kOpWaitRb);
    Op(kOpWait, kWaitRr);
    return Dout(shape.page_bytes);
  }
  // Erase, program kPagesPerLun pages on every LUN, then read them back: one LUN at a
  // time, and interleaved (a READ started on every LUN, each polled with READ STATUS
  // ENHANCED, which also selects it for its data out).
  void Interleave() {
    for (uint32_t lun = 0; lun < shape.luns; ++lun) Erase(lun, 1);
    for (uint32_t lun = 0; lun < shape.luns; ++lun) {
      for (uint32_t p = 0; p < kPagesPerLun; ++p) Program(lun, 1, p, PageData(lun, p));
    }
    sc_time t0 = sc_time_stamp();
    for (uint32_t p = 0; p < kPagesPerLun; ++p) {
      Expect(ReadPage(0, 1, p) == PageData(0, p), "single-LUN read returns what was programmed");
    }
    single_ns_per_page = (sc_time_stamp() - t0).to_seconds() * 1e9 / kPagesPerLun;
    // Interleaved: a READ on every LUN; then, LUN by LUN, wait for it (78h), take its
    // page and start its next READ at once, so each tR runs under the other LUNs'
    // transfers.
    auto start_read = [this](uint32_t lun, uint32_t p) {
      Op(kOpCmd, 0x00);
      Addr5(0, Row(lun, 1, p));
      Op(kOpCmd, 0x30);
    };
    t0 = sc_time_stamp();
    for (uint32_t lun = 0; lun < shape.luns; ++lun) start_read(lun, 0);
    for (uint32_t p = 0; p < kPagesPerLun; ++p) {
      for (uint32_t lun = 0; lun < shape.luns; ++lun) {
        while (!(StatusOf(Row(lun, 1, p)) & 0x40)) {
        }
        Op(kOpCmd, 0x00);  // back to data output, from the LUN the status selected
        Op(kOpWait, kWaitWhr);
        Expect(Dout(shape.page_bytes) == PageData(lun, p), "interleaved read returns what was programmed");
        if (p + 1 < kPagesPerLun) start_read(lun, p + 1);
      }
    }
    interleaved_ns_per_page = (sc_time_stamp() - t0).to_seconds() * 1e9 / (kPagesPerLun * shape.luns);
  }

  void Run() {
    rst_n.write(false);
    op_valid.write(false);
    for (int i = 0; i < 4; ++i) wait();
    rst_n.write(true);
    wait();
    Op(kOpCe, 0);  // select the target
    // RESET, then wait for ready.
    Op(kOpCmd, 0xFF);
    Op(kOpWait, kWaitWb);
    Op(kOpWaitRb);
    Expect(!timed_out, "RESET: R/B# timeout");
    // READ STATUS: ready.
    Op(kOpCmd, 0x70);
    Op(kOpWait, kWaitWhr);
    auto st = Dout(1);
    Expect(st.size() == 1 && st[0] == 0xE0, "READ STATUS after RESET reads E0h (ready, not write-protected)");
    // READ ID 00h and 20h.
    Op(kOpCmd, 0x90);
    Op(kOpAddr, 0x00);
    Op(kOpWait, kWaitWhr);
    auto jedec = Dout(static_cast<uint32_t>(id.size()));
    Expect(jedec == id, "READ ID 00h returns the JEDEC bytes");
    Op(kOpCmd, 0x90);
    Op(kOpAddr, 0x20);
    Op(kOpWait, kWaitWhr);
    auto onfi = Dout(4);
    Expect(onfi == std::vector<uint8_t>({'O', 'N', 'F', 'I'}), "READ ID 20h returns ONFI");
    // READ PARAMETER PAGE: busy tR, then three copies, timed as one burst.
    Op(kOpCmd, 0xEC);
    Op(kOpAddr, 0x00);
    Op(kOpWait, kWaitWb);
    Op(kOpWaitRb);
    if (stuck) {
      Expect(timed_out, "a LUN that never becomes ready is reported (R/B# timeout)");
      done = true;
      return;
    }
    Op(kOpWait, kWaitRr);
    burst_start = sc_time_stamp();
    auto page = Dout(static_cast<uint32_t>(param_page.size()));
    burst_end = sc_time_stamp();
    Expect(page == param_page, "READ PARAMETER PAGE returns the three copies");
    Expect(vsl::nand::onfi::Decode(page.data(), page.size() / 256).ok(), "the parameter page decodes (CRC)");
    if (interleave) Interleave();
    Op(kOpCe, 1);
    done = true;
  }
};

int Run(const Options& o) {
  const OnfiTiming mode = OnfiMode(o.mode);
  TimingRegs r = RegsFor(mode, o.clock_ns);
  if (o.bad) {  // one cycle short on both strobes (WE# low covers tWP and the setups)
    auto shorter = [](uint32_t v) { return v > 1 ? v - 1 : 1u; };
    r.twp = shorter(r.twp);
    r.tcls = shorter(r.tcls);
    r.tals = shorter(r.tals);
    r.trp = shorter(r.trp);
  }
  const std::vector<uint8_t> page = TestParamPages();
  const std::vector<uint8_t> id = TestJedecId();

  sc_clock clk("clk", sc_time(o.clock_ns, SC_NS));
  sc_signal<bool> rst_n, op_valid, op_ready, op_done, done_timeout, din_valid, din_ready, dout_valid, busy, rb_sampled;
  sc_signal<uint32_t> op_kind, op_byte, op_count, din_data, dout_data;
  sc_signal<uint32_t> t_wp, t_wh, t_rp, t_reh, t_cls, t_als, t_whr, t_adl, t_wb, t_rr, t_sample, rb_timeout;
  sc_signal<bool> ce_n, cle, ale, we_n, re_n, wp_n, dq_oe, rb_n;
  sc_signal<uint32_t> dq_o, dq_i;

  Vvsl_onfi_phy phy("phy");
  phy.clk(clk);
  phy.rst_n(rst_n);
  phy.t_wp(t_wp), phy.t_wh(t_wh), phy.t_rp(t_rp), phy.t_reh(t_reh), phy.t_cls(t_cls), phy.t_als(t_als);
  phy.t_whr(t_whr), phy.t_adl(t_adl), phy.t_wb(t_wb), phy.t_rr(t_rr), phy.t_sample(t_sample);
  phy.rb_timeout(rb_timeout);
  phy.op_valid(op_valid), phy.op_ready(op_ready), phy.op_kind(op_kind), phy.op_byte(op_byte);
  phy.op_count(op_count), phy.op_done(op_done), phy.done_timeout(done_timeout);
  phy.din_data(din_data), phy.din_valid(din_valid), phy.din_ready(din_ready);
  phy.dout_data(dout_data), phy.dout_valid(dout_valid), phy.busy(busy), phy.rb_sampled(rb_sampled);
  phy.ce_n(ce_n), phy.cle(cle), phy.ale(ale), phy.we_n(we_n), phy.re_n(re_n), phy.wp_n(wp_n);
  phy.dq_o(dq_o), phy.dq_oe(dq_oe), phy.dq_i(dq_i), phy.rb_n(rb_n);

  OnfiShape shape;
  OnfiTarget lun("lun", mode, shape, page, id);
  // Shorter program and erase than the array's 200 us and 1.5 ms: the test measures reads.
  lun.t_prog = sc_time(20, SC_US);
  lun.t_bers = sc_time(150, SC_US);
  lun.ce_n(ce_n), lun.cle(cle), lun.ale(ale), lun.we_n(we_n), lun.re_n(re_n), lun.dq_oe(dq_oe);
  lun.dq_o(dq_o), lun.dq_i(dq_i), lun.rb_n(rb_n);
  lun.stuck = o.stuck;

  Driver drv("drv");
  drv.clk(clk), drv.rst_n(rst_n), drv.op_valid(op_valid), drv.din_valid(din_valid);
  drv.op_kind(op_kind), drv.op_byte(op_byte), drv.op_count(op_count), drv.din_data(din_data);
  drv.op_ready(op_ready), drv.op_done(op_done), drv.done_timeout(done_timeout), drv.din_ready(din_ready);
  drv.dout_valid(dout_valid), drv.dout_data(dout_data);
  drv.param_page = page;
  drv.id = id;
  drv.stuck = o.stuck;
  drv.interleave = o.interleave;
  drv.shape = shape;

  t_wp.write(r.twp), t_wh.write(r.twh), t_rp.write(r.trp), t_reh.write(r.treh), t_cls.write(r.tcls);
  t_als.write(r.tals), t_whr.write(r.twhr), t_adl.write(r.tadl), t_wb.write(r.twb), t_rr.write(r.trr);
  t_sample.write(r.tsample);
  rb_timeout.write(static_cast<uint32_t>(2e6 / o.clock_ns));  // 2 ms: longer than any busy time here

  sc_trace_file* tf = nullptr;
  if (!o.trace.empty()) {
    tf = sc_create_vcd_trace_file(o.trace.c_str());
    sc_trace(tf, clk, "clk");
    sc_trace(tf, ce_n, "ce_n"), sc_trace(tf, cle, "cle"), sc_trace(tf, ale, "ale");
    sc_trace(tf, we_n, "we_n"), sc_trace(tf, re_n, "re_n"), sc_trace(tf, dq_o, "dq_o");
    sc_trace(tf, dq_oe, "dq_oe"), sc_trace(tf, dq_i, "dq_i"), sc_trace(tf, rb_n, "rb_n");
  }
  const auto wall0 = std::chrono::steady_clock::now();
  const sc_time limit(50, SC_MS);
  while (!drv.done && sc_time_stamp() < limit) sc_start(sc_time(10, SC_US));
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  if (tf) sc_close_vcd_trace_file(tf);

  int bad = drv.failures;
  if (!drv.done) {
    std::printf("FAIL: the sequence did not finish in %s of simulated time\n", limit.to_string().c_str());
    ++bad;
  }
  const double cycles = sc_time_stamp().to_seconds() * 1e9 / o.clock_ns;
  std::printf("mode %d at %.2f ns: tWP %u tWH %u tRP %u tREH %u tSAMPLE %u tWHR %u tADL %u cycles%s\n", o.mode,
              o.clock_ns, r.twp, r.twh, r.trp, r.treh, r.tsample, r.twhr, r.tadl, o.bad ? " (made too short)" : "");
  std::printf("commands latched:");
  for (uint8_t c : lun.commands) std::printf(" %02Xh", c);
  std::printf("\ntiming violations: %d\n", lun.total_violations());
  for (const auto& [k, v] : lun.violations()) std::printf("  %s: %d\n", k.c_str(), v);
  if (!o.stuck && drv.done) {
    const double ns = (drv.burst_end - drv.burst_start).to_seconds() * 1e9;
    const double rate = page.size() / (ns * 1e-9) / 1e6;
    const double mode_rate = 1e3 / mode.tRC;  // MB/s
    std::printf("parameter page burst: %zu bytes in %.0f ns = %.1f MB/s, %.1f%% of mode %d's %.1f MB/s\n", page.size(), ns,
                rate, 100 * rate / mode_rate, o.mode, mode_rate);
  }
  if (o.interleave && drv.done) {
    const double ratio = drv.single_ns_per_page / drv.interleaved_ns_per_page;
    std::printf("reads of %u-byte pages (tR %.0f us): one LUN %.2f us per page, %u LUNs interleaved %.2f us per page: "
                "%.2fx\n",
                shape.page_bytes, lun.t_r.to_seconds() * 1e6, drv.single_ns_per_page / 1e3, shape.luns,
                drv.interleaved_ns_per_page / 1e3, ratio);
    std::printf("target: %llu reads, %llu programs, %llu erases\n", static_cast<unsigned long long>(lun.reads),
                static_cast<unsigned long long>(lun.programs), static_cast<unsigned long long>(lun.erases));
    // One LUN pays tR + the transfer per page; interleaved, the bus is the limit once the
    // other LUNs' transfers cover a tR: the ideal is (tR + X) / max(X, (tR + X) / LUNs),
    // X = the page's bus time. Commands, polling and turnarounds take the rest.
    const double x_ns = shape.page_bytes * (r.trp + r.treh) * o.clock_ns;
    const double tr_ns = lun.t_r.to_seconds() * 1e9;
    const double ideal = (tr_ns + x_ns) / std::max(x_ns, (tr_ns + x_ns) / shape.luns);
    std::printf("ideal %.2fx (page bus time %.2f us): %.0f%% of it\n", ideal, x_ns / 1e3, 100 * ratio / ideal);
    if (ratio < 0.85 * ideal) {
      std::printf("FAIL: interleaving %u LUNs gave %.2fx, under 85%% of the ideal %.2fx\n", shape.luns, ratio, ideal);
      ++bad;
    }
  }
  std::printf("simulated %.0f cycles in %.2f s wall: %.0f cycles/s\n", cycles, wall_s, cycles / wall_s);
  if (o.bad) {
    if (lun.total_violations() == 0) {
      std::printf("FAIL: timings one cycle short and the checker stayed silent\n");
      return 1;
    }
    std::printf("OK: the checker flagged the short timings\n");
    return 0;
  }
  if (lun.total_violations() != 0) ++bad;
  std::printf("%s\n", bad == 0 ? "OK" : "FAILED");
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace vsl::tb

int sc_main(int argc, char** argv) {
  vsl::tb::Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) {
      o.mode = std::atoi(argv[++i]);
    } else if (a == "--clock-ns" && i + 1 < argc) {
      o.clock_ns = std::atof(argv[++i]);
    } else if (a == "--bad") {
      o.bad = true;
    } else if (a == "--interleave") {
      o.interleave = true;
    } else if (a == "--stuck") {
      o.stuck = true;
    } else if (a == "--trace" && i + 1 < argc) {
      o.trace = argv[++i];
    } else {
      std::fprintf(stderr, "usage: onfi_phy_tb [--mode N] [--clock-ns P] [--bad] [--stuck] [--interleave] [--trace FILE.vcd]\n");
      return 2;
    }
  }
  return vsl::tb::Run(o);
}
