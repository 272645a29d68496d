// Co-simulation of one ONFI channel (rtl/onfi/vsl_onfi_channel.sv: the LUN operation
// sequencer over the pin engine, Verilated as a SystemC module) against the four-LUN
// target model and its timing checker.
//
//   onfi_channel_tb [--mode N] [--clock-ns P] [--stuck-lun L]
//
// Every request the sequencer knows, on every LUN where it is per LUN: RESET, READ ID
// (00h, 20h), READ PARAMETER PAGE, SET/GET FEATURES (timing mode), and on each of the four
// LUNs ERASE, PROGRAM of four pages, READ back of each (every byte checked), READ STATUS;
// the error paths: PROGRAM of a page already programmed (status FAIL reported), and with
// --stuck-lun L a LUN that never becomes ready after a READ (the request ends with
// resp_timeout; the other LUNs still work). Exit 0 when all of it holds and the timing
// checker is silent.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <systemc.h>

#include "Vvsl_onfi_channel.h"
#include "testbench/onfi/onfi_target.h"
#include "testbench/onfi/tb_common.h"
#include "testbench/onfi/onfi_timing.h"
#include "vsl/nand/onfi.h"

namespace vsl::tb {
namespace {

enum Req : uint32_t { kReset = 0, kReadId, kReadParam, kRead, kProgram, kErase, kStatus, kSetFeat, kGetFeat };

struct Host : sc_module, TbChecks {
  sc_in<bool> clk;
  sc_out<bool> rst_n, req_valid, din_valid;
  sc_out<uint32_t> req_op, req_row, req_col, req_len, din_data;
  sc_in<bool> req_ready, resp_valid, resp_timeout, din_ready, dout_valid;
  sc_in<uint32_t> resp_status, dout_data;

  OnfiShape shape;
  std::vector<uint8_t> param_page, id;
  int stuck_lun = -1;
  OnfiTarget* target = nullptr;  // to make a LUN hang on cue
  bool done = false;
  uint64_t requests = 0;
  std::vector<uint8_t> received, din_buf;
  size_t din_idx = 0;
  uint8_t status = 0;
  bool timed_out = false;

  SC_CTOR(Host) {
    SC_THREAD(Run);
    sensitive << clk.pos();
    SC_METHOD(Edge);
    sensitive << clk.pos();
    dont_initialize();
  }

  void Edge() {  // streams: a byte moves when valid and ready meet at an edge
    if (dout_valid.read()) received.push_back(static_cast<uint8_t>(dout_data.read()));
    if (din_valid.read() && din_ready.read()) ++din_idx;
    const bool more = din_idx < din_buf.size();
    din_valid.write(more);
    din_data.write(more ? din_buf[din_idx] : 0);
  }
  uint32_t Row(uint32_t lun, uint32_t block, uint32_t page) const {
    return (lun << (shape.page_bits() + shape.block_bits())) | (block << shape.page_bits()) | page;
  }
  // One request; returns the bytes it read out.
  std::vector<uint8_t> Request(Req op, uint32_t row = 0, uint32_t col = 0, uint32_t len = 0,
                               const std::vector<uint8_t>& in = {}) {
    received.clear();
    din_buf = in;
    din_idx = 0;
    req_op.write(op), req_row.write(row), req_col.write(col), req_len.write(len);
    req_valid.write(true);
    do { wait(); } while (!req_ready.read());
    req_valid.write(false);
    do { wait(); } while (!resp_valid.read());
    status = static_cast<uint8_t>(resp_status.read());
    timed_out = resp_timeout.read();
    ++requests;
    din_buf.clear();
    return received;
  }
  std::vector<uint8_t> PageData(uint32_t lun, uint32_t page) const { return TestPageData(lun, page, shape.page_bytes); }
  void Run() {
    rst_n.write(false);
    req_valid.write(false);
    for (int i = 0; i < 4; ++i) wait();
    rst_n.write(true);
    wait();
    Request(kReset);
    Expect(!timed_out, "RESET completes");
    Expect(Request(kReadId, 0, 0x00, 5) == id, "READ ID 00h");
    Expect(Request(kReadId, 0, 0x20, 4) == std::vector<uint8_t>({'O', 'N', 'F', 'I'}), "READ ID 20h");
    auto pp = Request(kReadParam, 0, 0, static_cast<uint32_t>(param_page.size()));
    Expect(pp == param_page && nand::onfi::Decode(pp.data(), pp.size() / 256).ok(), "READ PARAMETER PAGE");
    Request(kSetFeat, 0, 0x01, 4, {0x05, 0, 0, 0});  // timing mode 5
    Expect(!timed_out, "SET FEATURES completes");
    Expect(Request(kGetFeat, 0, 0x01, 4) == std::vector<uint8_t>({0x05, 0, 0, 0}), "GET FEATURES returns what was set");
    for (uint32_t lun = 0; lun < shape.luns; ++lun) {
      const std::string l = "LUN " + std::to_string(lun) + ": ";
      Request(kErase, Row(lun, 2, 0));
      Expect(!timed_out && (status & 0x41) == 0x40, l + "ERASE ready, no FAIL");
      for (uint32_t p = 0; p < 4; ++p) {
        Request(kProgram, Row(lun, 2, p), 0, shape.page_bytes, PageData(lun, p));
        Expect(!timed_out && (status & 0x41) == 0x40, l + "PROGRAM page " + std::to_string(p) + " ready, no FAIL");
      }
      for (uint32_t p = 0; p < 4; ++p) {
        Expect(Request(kRead, Row(lun, 2, p), 0, shape.page_bytes) == PageData(lun, p) && !timed_out,
               l + "READ page " + std::to_string(p) + " returns what was programmed");
      }
      // A partial read from a column (CHANGE READ COLUMN is not needed: READ takes one).
      const auto part = Request(kRead, Row(lun, 2, 1), 100, 32);
      const auto want = PageData(lun, 1);
      Expect(part == std::vector<uint8_t>(want.begin() + 100, want.begin() + 132), l + "READ from column 100");
      Request(kStatus, Row(lun, 2, 0));
      Expect(!timed_out && (status & 0x40), l + "READ STATUS ENHANCED ready");
      // Error path: programming a page again fails, and the status says so.
      Request(kProgram, Row(lun, 2, 0), 0, shape.page_bytes, PageData(lun, 9));
      Expect(!timed_out && (status & 0x01), l + "PROGRAM of a programmed page reports FAIL");
      Expect(Request(kRead, Row(lun, 2, 0), 0, shape.page_bytes) == PageData(lun, 0), l + "the failed program changed nothing");
    }
    if (stuck_lun >= 0) {
      target->stuck_read_lun = stuck_lun;
      Request(kRead, Row(static_cast<uint32_t>(stuck_lun), 2, 0), 0, 16);
      Expect(timed_out, "a LUN that never becomes ready ends its request with a timeout");
      // The others still answer (the stuck one keeps R/B# low, so they are polled by 78h).
      const uint32_t other = (static_cast<uint32_t>(stuck_lun) + 1) % shape.luns;
      Expect(Request(kRead, Row(other, 2, 3), 0, shape.page_bytes) == PageData(other, 3) && !timed_out,
             "another LUN still reads while one is stuck");
    }
    done = true;
  }
};

int Run(int mode_n, double clock_ns, int stuck_lun) {
  const OnfiTiming mode = OnfiMode(mode_n);
  const TimingRegs r = RegsFor(mode, clock_ns);
  const std::vector<uint8_t> page = TestParamPages();
  const std::vector<uint8_t> id = TestJedecId();

  sc_clock clk("clk", sc_time(clock_ns, SC_NS));
  sc_signal<bool> rst_n, req_valid, req_ready, resp_valid, resp_timeout, din_valid, din_ready, dout_valid, busy;
  sc_signal<uint32_t> timing0, timing1, timing2, rb_timeout, req_op, req_row, req_col, req_len, resp_status;
  sc_signal<uint32_t> din_data, dout_data, dq_o, dq_i;
  sc_signal<bool> ce_n, cle, ale, we_n, re_n, wp_n, dq_oe, rb_n;

  Vvsl_onfi_channel ch("ch");
  ch.clk(clk), ch.rst_n(rst_n), ch.timing0(timing0), ch.timing1(timing1), ch.timing2(timing2);
  ch.rb_timeout(rb_timeout), ch.req_valid(req_valid), ch.req_ready(req_ready), ch.req_op(req_op);
  ch.req_row(req_row), ch.req_col(req_col), ch.req_len(req_len), ch.resp_valid(resp_valid);
  ch.resp_status(resp_status), ch.resp_timeout(resp_timeout), ch.din_data(din_data), ch.din_valid(din_valid);
  ch.din_ready(din_ready), ch.dout_data(dout_data), ch.dout_valid(dout_valid), ch.busy(busy);
  ch.ce_n(ce_n), ch.cle(cle), ch.ale(ale), ch.we_n(we_n), ch.re_n(re_n), ch.wp_n(wp_n);
  ch.dq_o(dq_o), ch.dq_oe(dq_oe), ch.dq_i(dq_i), ch.rb_n(rb_n);

  OnfiShape shape;
  OnfiTarget target("target", mode, shape, page, id);
  target.ce_n(ce_n), target.cle(cle), target.ale(ale), target.we_n(we_n), target.re_n(re_n);
  target.dq_oe(dq_oe), target.dq_o(dq_o), target.dq_i(dq_i), target.rb_n(rb_n);
  target.t_prog = sc_time(20, SC_US);
  target.t_bers = sc_time(150, SC_US);

  Host host("host");
  host.clk(clk), host.rst_n(rst_n), host.req_valid(req_valid), host.din_valid(din_valid);
  host.req_op(req_op), host.req_row(req_row), host.req_col(req_col), host.req_len(req_len);
  host.din_data(din_data), host.req_ready(req_ready), host.resp_valid(resp_valid);
  host.resp_timeout(resp_timeout), host.din_ready(din_ready), host.dout_valid(dout_valid);
  host.resp_status(resp_status), host.dout_data(dout_data);
  host.shape = shape;
  host.param_page = page;
  host.id = id;
  host.stuck_lun = stuck_lun;
  host.target = &target;

  timing0.write(r.twp | (r.twh << 8) | (r.trp << 16) | (r.treh << 24));
  timing1.write(r.tcls | (r.tals << 8) | (r.twhr << 16) | (r.tadl << 24));
  timing2.write(r.twb | (r.trr << 8) | (r.tsample << 16));
  rb_timeout.write(static_cast<uint32_t>(1e6 / clock_ns));  // 1 ms of busy at most

  const auto wall0 = std::chrono::steady_clock::now();
  const sc_time limit(100, SC_MS);
  while (!host.done && sc_time_stamp() < limit) sc_start(sc_time(10, SC_US));
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - wall0).count();
  int bad = host.failures;
  if (!host.done) {
    std::printf("FAIL: the requests did not finish in %s of simulated time\n", limit.to_string().c_str());
    ++bad;
  }
  const double cycles = sc_time_stamp().to_seconds() * 1e9 / clock_ns;
  std::printf("mode %d at %.2f ns: %llu requests; target: %llu reads, %llu programs, %llu erases\n", mode_n, clock_ns,
              static_cast<unsigned long long>(host.requests), static_cast<unsigned long long>(target.reads),
              static_cast<unsigned long long>(target.programs), static_cast<unsigned long long>(target.erases));
  std::printf("timing violations: %d\n", target.total_violations());
  for (const auto& [k, v] : target.violations()) std::printf("  %s: %d\n", k.c_str(), v);
  if (target.total_violations() != 0) ++bad;
  std::printf("simulated %.0f cycles in %.2f s wall: %.0f cycles/s\n", cycles, wall_s, cycles / wall_s);
  std::printf("%s\n", bad == 0 ? "OK" : "FAILED");
  return bad == 0 ? 0 : 1;
}

}  // namespace
}  // namespace vsl::tb

int sc_main(int argc, char** argv) {
  int mode = 0, stuck = -1;
  double clock_ns = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--mode" && i + 1 < argc) {
      mode = std::atoi(argv[++i]);
    } else if (a == "--clock-ns" && i + 1 < argc) {
      clock_ns = std::atof(argv[++i]);
    } else if (a == "--stuck-lun" && i + 1 < argc) {
      stuck = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: onfi_channel_tb [--mode N] [--clock-ns P] [--stuck-lun L]\n");
      return 2;
    }
  }
  return vsl::tb::Run(mode, clock_ns, stuck);
}
