// Co-simulation of the controller so far (rtl/ctrl/vsl_ctrl_top.sv: the AXI4-Lite
// register block over one ONFI channel) driven the way the host will drive it: through
// registers, with the addresses and fields of the generated vsl/hw/regmap.h.
//
//   ctrl_tb
//
// Checks: ID, VERSION and CAPS; SCRATCH with byte strobes; SLVERR (and 0) for an address
// this build does not have and for a misaligned one, nothing written; read-only registers
// ignore writes; the channel's timing comes from CHAN 0's registers: mode 5 programmed,
// READ ID and READ PARAMETER PAGE right with the timing checker silent, then mode 0's
// write pulse made short through TIMING0 and the checker fires; a stuck LUN with a short
// RB_TIMEOUT sets CHAN_STATUS.TIMEOUT and STATUS.ERROR, raises ISR.ERROR and the
// interrupt line (GIE, IER), ISR toggles clear on a 1 written; SOFT_RESET clears the
// sticky timeout. Exit 0 when all hold.
#include <cstdio>
#include <string>
#include <vector>

#include <systemc.h>

#include "Vvsl_ctrl_top.h"
#include "testbench/onfi/onfi_target.h"
#include "testbench/onfi/tb_common.h"
#include "testbench/onfi/onfi_timing.h"
#include "vsl/hw/regmap.h"
#include "vsl/nand/onfi.h"

namespace vsl::tb {
namespace {

namespace regs = vsl::hw::regs;
constexpr uint32_t kOkay = 0, kSlverr = 2;

struct HostBus : sc_module, TbChecks {
  sc_in<bool> clk;
  sc_out<bool> rst_n;
  sc_out<uint32_t> awaddr, wdata, wstrb, araddr;
  sc_out<bool> awvalid, wvalid, bready, arvalid, rready;
  sc_in<bool> awready, wready, bvalid, arready, rvalid, irq;
  sc_in<uint32_t> bresp, rdata, rresp;
  // channel requests
  sc_out<bool> req_valid;
  sc_out<uint32_t> req_op, req_row, req_col, req_len;
  sc_in<bool> req_ready, resp_valid, resp_timeout, dout_valid;
  sc_in<uint32_t> resp_status, dout_data;

  OnfiTarget* target = nullptr;
  std::vector<uint8_t> param_page, id, received;
  bool done = false;

  SC_CTOR(HostBus) {
    SC_THREAD(Run);
    sensitive << clk.pos();
    SC_METHOD(Collect);
    sensitive << clk.pos();
    dont_initialize();
  }
  void Collect() {
    if (dout_valid.read()) received.push_back(static_cast<uint8_t>(dout_data.read()));
  }
  uint32_t Write(uint32_t addr, uint32_t value, uint32_t strb = 0xF) {
    awaddr.write(addr), wdata.write(value), wstrb.write(strb);
    awvalid.write(true), wvalid.write(true), bready.write(true);
    do { wait(); } while (!(awready.read() && wready.read()));
    awvalid.write(false), wvalid.write(false);
    while (!bvalid.read()) wait();
    const uint32_t resp = bresp.read();
    wait();
    bready.write(false);
    return resp;
  }
  uint32_t Read(uint32_t addr, uint32_t* resp = nullptr) {
    araddr.write(addr), arvalid.write(true), rready.write(true);
    do { wait(); } while (!arready.read());
    arvalid.write(false);
    while (!rvalid.read()) wait();
    const uint32_t v = rdata.read();
    if (resp) *resp = rresp.read();
    wait();
    rready.write(false);
    return v;
  }
  std::vector<uint8_t> Request(uint32_t op, uint32_t row, uint32_t col, uint32_t len, bool* timed_out = nullptr) {
    received.clear();
    req_op.write(op), req_row.write(row), req_col.write(col), req_len.write(len);
    req_valid.write(true);
    do { wait(); } while (!req_ready.read());
    req_valid.write(false);
    do { wait(); } while (!resp_valid.read());
    if (timed_out) *timed_out = resp_timeout.read();
    return received;
  }
  void SetTiming(const TimingRegs& r, uint32_t rb_timeout) {
    using namespace regs::chan;
    uint32_t t0 = 0, t1 = 0, t2 = 0;
    t0 = kTiming0Twp.put(t0, r.twp), t0 = kTiming0Twh.put(t0, r.twh);
    t0 = kTiming0Trp.put(t0, r.trp), t0 = kTiming0Treh.put(t0, r.treh);
    t1 = kTiming1Tcls.put(t1, r.tcls), t1 = kTiming1Tals.put(t1, r.tals);
    t1 = kTiming1Twhr.put(t1, r.twhr), t1 = kTiming1Tadl.put(t1, r.tadl);
    t2 = kTiming2Twb.put(t2, r.twb), t2 = kTiming2Trr.put(t2, r.trr), t2 = kTiming2Tsample.put(t2, r.tsample);
    Expect(Write(At(0, kTiming0), t0) == kOkay && Write(At(0, kTiming1), t1) == kOkay &&
               Write(At(0, kTiming2), t2) == kOkay && Write(At(0, kRbTimeout), rb_timeout) == kOkay,
           "CHAN 0 timing writes");
    Expect(Read(At(0, kTiming0)) == t0 && Read(At(0, kTiming2)) == t2, "CHAN 0 timing reads back");
  }
  void Run() {
    rst_n.write(false);
    awvalid.write(false), wvalid.write(false), arvalid.write(false), bready.write(false), rready.write(false);
    req_valid.write(false);
    for (int i = 0; i < 4; ++i) wait();
    rst_n.write(true);
    wait();
    using namespace regs;
    // Identity.
    Expect(Read(ctrl::At(ctrl::kId)) == ctrl::kIdReset, "ID reads OVSL");
    Expect(Read(ctrl::At(ctrl::kVersion)) == ((kRegmapMajor << 16) | kRegmapMinor), "VERSION is the map's");
    const uint32_t caps = Read(ctrl::At(ctrl::kCaps));
    Expect(ctrl::kCapsChannelsPerPipe.get(caps) == 1 && ctrl::kCapsLunsPerChannel.get(caps) == 4 &&
               ctrl::kCapsEccT.get(caps) == 8 && ctrl::kCapsPipes.get(caps) == 0 &&
               ctrl::kCapsAccumulators.get(caps) == 0,
           "CAPS: 1 channel, 4 LUNs, t = 8, no pipes (so no accumulators) in this build");
    Expect((Read(ctrl::At(ctrl::kApCtrl)) & ctrl::kApCtrlReady.mask()) != 0, "AP_CTRL READY");
    // SCRATCH with byte strobes.
    Write(ctrl::At(ctrl::kScratch), 0x11223344);
    Write(ctrl::At(ctrl::kScratch), 0xAABBCCDD, 0x5);  // bytes 0 and 2
    Expect(Read(ctrl::At(ctrl::kScratch)) == 0x11BB33DD, "SCRATCH honours WSTRB");
    // Bad addresses: SLVERR, nothing written; read-only registers ignore writes.
    uint32_t resp = 0;
    Expect(Read(pipe::At(0, pipe::kSqBaseLo), &resp) == 0 && resp == kSlverr, "PIPE block (absent) reads SLVERR");
    Expect(Write(pipe::At(0, pipe::kSqBaseLo), 1) == kSlverr, "PIPE block (absent) writes SLVERR");
    Expect(Read(0x2000, &resp) == 0 && resp == kSlverr, "unmapped address reads SLVERR");
    Expect(Write(ctrl::At(ctrl::kScratch) + 1, 0) == kSlverr && Read(ctrl::At(ctrl::kScratch)) == 0x11BB33DD,
           "misaligned write SLVERR, nothing written");
    Read(ctrl::At(ctrl::kScratch) + 2, &resp);
    Expect(resp == kSlverr, "misaligned read SLVERR");
    Expect(Write(ctrl::At(ctrl::kId), 0) == kOkay && Read(ctrl::At(ctrl::kId)) == ctrl::kIdReset,
           "a write to ID is ignored");
    // Mode 5 through the registers: the channel's bus timing follows them.
    SetTiming(RegsFor(OnfiMode(5), 5.0), 2'000'000 / 5);
    bool to = false;
    Request(0, 0, 0, 0, &to);  // RESET
    Expect(!to, "RESET");
    Expect(Request(1, 0, 0, 5) == id, "READ ID with mode 5 from the registers");
    auto pp = Request(2, 0, 0, static_cast<uint32_t>(param_page.size()));
    Expect(pp == param_page, "READ PARAMETER PAGE with mode 5 from the registers");
    Expect(target->total_violations() == 0, "checker silent at mode 5");
    // The die to mode 0 (SET FEATURES 01h), then mode 0 with the write pulse one cycle
    // short, through TIMING0 (and the setups).
    Request(7, 0, 0x01, 4, &to);  // SET FEATURES: P1..P4 from the din stream (all zero: mode 0)
    Expect(!to, "SET FEATURES to mode 0");
    Expect(target->total_violations() == 0, "checker silent through SET FEATURES");
    TimingRegs bad = RegsFor(OnfiMode(0), 5.0);
    bad.twp -= 1, bad.tcls -= 1, bad.tals -= 1;
    SetTiming(bad, 2'000'000 / 5);
    Request(1, 0, 0, 5);
    Expect(target->violations().count("tWP") == 1, "checker fires on the short pulse from TIMING0");
    // A stuck LUN with a short RB_TIMEOUT: CHAN_STATUS.TIMEOUT, STATUS.ERROR, ISR, irq.
    SetTiming(RegsFor(OnfiMode(0), 5.0), 20'000);  // 100 us
    Write(ctrl::At(ctrl::kGie), 1);
    Write(ctrl::At(ctrl::kIer), ctrl::kIerError.mask());
    target->stuck_read_lun = 1;
    Request(3, 1u << 10, 0, 16, &to);  // READ on LUN 1 (row: LUN above 4 block and 6 page bits)
    Expect(to, "the stuck LUN's request ends with the timeout");
    wait();
    const uint32_t cs = Read(chan::At(0, chan::kChanStatus));
    Expect(chan::kChanStatusTimeout.get(cs) == 1, "CHAN_STATUS.TIMEOUT set");
    Expect(ctrl::kStatusError.get(Read(ctrl::At(ctrl::kStatus))) == 1, "STATUS.ERROR set");
    Expect(ctrl::kIsrError.get(Read(ctrl::At(ctrl::kIsr))) == 1 && irq.read(), "ISR.ERROR and the interrupt line");
    Write(ctrl::At(ctrl::kIsr), ctrl::kIsrError.mask());  // toggle: clear
    wait();
    Expect(ctrl::kIsrError.get(Read(ctrl::At(ctrl::kIsr))) == 0 && !irq.read(), "ISR cleared by writing 1");
    Write(ctrl::At(ctrl::kSoftReset), ctrl::kSoftResetReset.mask());
    Expect(chan::kChanStatusTimeout.get(Read(chan::At(0, chan::kChanStatus))) == 0, "SOFT_RESET clears the timeout");
    done = true;
  }
};

}  // namespace
}  // namespace vsl::tb

int sc_main(int, char**) {
  using namespace vsl::tb;
  const std::vector<uint8_t> page = TestParamPages();
  const std::vector<uint8_t> id = TestJedecId();

  sc_clock clk("clk", sc_time(5, SC_NS));
  sc_signal<bool> rst_n, awvalid, awready, wvalid, wready, bvalid, bready, arvalid, arready, rvalid, rready, irq;
  sc_signal<uint32_t> awaddr, wdata, wstrb, bresp, araddr, rdata, rresp;
  sc_signal<bool> req_valid, req_ready, resp_valid, resp_timeout, din_valid, din_ready, dout_valid;
  sc_signal<uint32_t> req_op, req_row, req_col, req_len, resp_status, din_data, dout_data, dq_o, dq_i;
  sc_signal<bool> ce_n, cle, ale, we_n, re_n, wp_n, dq_oe, rb_n;

  Vvsl_ctrl_top top("top");
  top.clk(clk), top.rst_n(rst_n);
  top.s_awaddr(awaddr), top.s_awvalid(awvalid), top.s_awready(awready), top.s_wdata(wdata), top.s_wstrb(wstrb);
  top.s_wvalid(wvalid), top.s_wready(wready), top.s_bresp(bresp), top.s_bvalid(bvalid), top.s_bready(bready);
  top.s_araddr(araddr), top.s_arvalid(arvalid), top.s_arready(arready), top.s_rdata(rdata), top.s_rresp(rresp);
  top.s_rvalid(rvalid), top.s_rready(rready), top.irq(irq);
  top.req_valid(req_valid), top.req_ready(req_ready), top.req_op(req_op), top.req_row(req_row);
  top.req_col(req_col), top.req_len(req_len), top.resp_valid(resp_valid), top.resp_status(resp_status);
  top.resp_timeout(resp_timeout), top.din_data(din_data), top.din_valid(din_valid), top.din_ready(din_ready);
  top.dout_data(dout_data), top.dout_valid(dout_valid);
  top.ce_n(ce_n), top.cle(cle), top.ale(ale), top.we_n(we_n), top.re_n(re_n), top.wp_n(wp_n);
  top.dq_o(dq_o), top.dq_oe(dq_oe), top.dq_i(dq_i), top.rb_n(rb_n);

  OnfiShape shape;
  OnfiTarget target("target", OnfiMode(5), shape, page, id);
  target.ce_n(ce_n), target.cle(cle), target.ale(ale), target.we_n(we_n), target.re_n(re_n);
  target.dq_oe(dq_oe), target.dq_o(dq_o), target.dq_i(dq_i), target.rb_n(rb_n);

  HostBus host("host");
  host.clk(clk), host.rst_n(rst_n), host.awaddr(awaddr), host.wdata(wdata), host.wstrb(wstrb), host.araddr(araddr);
  host.awvalid(awvalid), host.wvalid(wvalid), host.bready(bready), host.arvalid(arvalid), host.rready(rready);
  host.awready(awready), host.wready(wready), host.bvalid(bvalid), host.arready(arready), host.rvalid(rvalid);
  host.irq(irq), host.bresp(bresp), host.rdata(rdata), host.rresp(rresp);
  host.req_valid(req_valid), host.req_op(req_op), host.req_row(req_row), host.req_col(req_col), host.req_len(req_len);
  host.req_ready(req_ready), host.resp_valid(resp_valid), host.resp_timeout(resp_timeout);
  host.dout_valid(dout_valid), host.resp_status(resp_status), host.dout_data(dout_data);
  host.target = &target;
  host.param_page = page;
  host.id = id;
  // The only data-in here is SET FEATURES with P1..P4 = 0 (mode 0): a stream of zeros.
  din_valid.write(true);
  din_data.write(0);

  const sc_time limit(20, SC_MS);
  while (!host.done && sc_time_stamp() < limit) sc_start(sc_time(10, SC_US));
  int bad = host.failures;
  if (!host.done) {
    std::printf("FAIL: did not finish in %s of simulated time\n", limit.to_string().c_str());
    ++bad;
  }
  std::printf("timing violations seen (the short-pulse step makes some): %d\n", target.total_violations());
  for (const auto& [k, v] : target.violations()) std::printf("  %s: %d\n", k.c_str(), v);
  std::printf("%s\n", bad == 0 ? "OK" : "FAILED");
  return bad == 0 ? 0 : 1;
}
