// CosimCard (cosim_card.h): the Verilated controller, its AXI memory, two ONFI targets.
// C++17 (testbench).
#include "testbench/cosim/cosim_card.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <vector>

#include <systemc.h>

#include "Vvsl_ctrl.h"
#include "testbench/cosim/axi_port.h"
#include "testbench/cosim/axil_master.h"
#include "testbench/cosim/sim_start.h"
#include "testbench/onfi/onfi_target.h"
#include "testbench/onfi/onfi_timing.h"
#include "testbench/onfi/tb_common.h"
#include "vsl/simcard/thermal.h"
#include "vsl/hw/board.h"
#include "vsl/hw/regmap.h"

namespace vsl::tb {
namespace {

constexpr uint32_t kPipes = 2;
constexpr uint64_t kMemBase = 0x4'0000'0000ull;  // above 4 GiB: the masters' 64-bit addresses are used

// The device memory and an AXI4 slave per pipe (INCR bursts of 8-byte beats; one read and
// one write burst at a time per port; the first read beat `latency` cycles after the
// address). Bursts touching a failing range answer SLVERR and write nothing.
SC_MODULE(AxiMem) {
  sc_in<bool> clk;
  sc_in<sc_bv<128>> awaddr, wdata, araddr;
  sc_in<uint32_t> awlen, awvalid, wstrb, wlast, wvalid, bready, arlen, arvalid, rready;
  sc_out<uint32_t> awready, wready, bresp, bvalid, arready, rresp, rlast, rvalid;
  sc_out<sc_bv<128>> rdata;

  DeviceMemory mem;
  uint32_t latency = 8;

  struct Port {
    bool r_active = false, w_active = false, b_pending = false;
    uint64_t r_addr = 0, w_addr = 0;
    uint32_t r_left = 0, r_wait = 0;
    bool r_err = false, w_err = false;
    bool rvalid = false, awready = true, arready = true, wready = false, bvalid = false, rlast = false;
    uint64_t rdata = 0;
  } ports[kPipes];

  SC_CTOR(AxiMem) {
    SC_METHOD(Tick);
    sensitive << clk.pos();
    dont_initialize();
  }

  // Word access, not range(): a range proxy walks the vector bit by bit.
  static uint64_t Slice64(const sc_bv<128>& v, uint32_t p) {
    return uint64_t{v.get_word(static_cast<int>(2 * p))} | uint64_t{v.get_word(static_cast<int>(2 * p + 1))} << 32;
  }
  static uint32_t Bit(uint32_t v, uint32_t p) { return (v >> p) & 1u; }

  // The read data last driven (per port), and the vector built from it: the vector is
  // rebuilt and written only when a port's word changes, not every clock (an sc_bv
  // built per clock was a quarter of a co-simulated card's host CPU).
  uint64_t driven_rdata[kPipes] = {};
  sc_bv<128> rdata_bv;

  bool driven = false;  // the outputs have been written once (before that they read 0)

  // Every port idle and no request offered: this clock changes neither state nor outputs.
  bool Idle() const {
    if (!driven) return false;
    for (const Port& s : ports) {
      if (s.r_active || s.w_active || s.rvalid || s.bvalid || !s.awready || !s.arready) return false;
    }
    return (arvalid.read() | awvalid.read()) == 0;
  }

  void Tick() {
    if (Idle()) return;
    uint32_t o_awready = 0, o_wready = 0, o_bvalid = 0, o_arready = 0, o_rvalid = 0, o_rlast = 0;
    uint32_t o_bresp = 0, o_rresp = 0;
    bool rdata_changed = false;
    for (uint32_t p = 0; p < kPipes; ++p) {
      Port& s = ports[p];
      // Read channel: handshakes seen at this edge use the values driven before it.
      if (s.arready && Bit(arvalid.read(), p)) {
        s.r_active = true;
        s.arready = false;
        s.r_addr = Slice64(araddr.read(), p);
        s.r_left = ((arlen.read() >> (8 * p)) & 0xFF) + 1;
        s.r_wait = latency;
        s.r_err = mem.Fails(s.r_addr, uint64_t{s.r_left} * 8);
      } else if (s.rvalid && Bit(rready.read(), p)) {
        s.rvalid = false;
        s.r_addr += 8;
        if (--s.r_left == 0) {
          s.r_active = false;
          s.arready = true;
        }
      }
      if (s.r_active && !s.rvalid) {
        if (s.r_wait > 0) {
          --s.r_wait;
        } else {
          s.rvalid = true;
          s.rdata = s.r_err ? 0 : mem.Word(s.r_addr);
          s.rlast = s.r_left == 1;
        }
      }
      // Write channel.
      if (s.awready && Bit(awvalid.read(), p)) {
        s.w_active = true;
        s.awready = false;
        s.wready = true;
        s.w_addr = Slice64(awaddr.read(), p);
        s.w_err = mem.Fails(s.w_addr, uint64_t{((awlen.read() >> (8 * p)) & 0xFF) + 1} * 8);
      } else if (s.wready && Bit(wvalid.read(), p)) {
        if (!s.w_err) {
          const uint64_t d = Slice64(wdata.read(), p);
          const uint32_t strb = (wstrb.read() >> (8 * p)) & 0xFF;
          for (int b = 0; b < 8; ++b) {
            if (strb & (1u << b)) mem.bytes[s.w_addr - mem.base + b] = static_cast<uint8_t>(d >> (8 * b));
          }
        }
        s.w_addr += 8;
        if (Bit(wlast.read(), p)) {
          s.wready = false;
          s.bvalid = true;
        }
      } else if (s.bvalid && Bit(bready.read(), p)) {
        s.bvalid = false;
        s.w_active = false;
        s.awready = true;
      }
      o_awready |= uint32_t{s.awready} << p;
      o_wready |= uint32_t{s.wready} << p;
      o_bvalid |= uint32_t{s.bvalid} << p;
      o_bresp |= (s.w_err ? 2u : 0u) << (2 * p);
      o_arready |= uint32_t{s.arready} << p;
      o_rvalid |= uint32_t{s.rvalid} << p;
      o_rlast |= uint32_t{s.rlast} << p;
      o_rresp |= (s.r_err ? 2u : 0u) << (2 * p);
      if (s.rdata != driven_rdata[p]) {
        driven_rdata[p] = s.rdata;
        rdata_bv.set_word(static_cast<int>(2 * p), static_cast<sc_digit>(s.rdata));
        rdata_bv.set_word(static_cast<int>(2 * p + 1), static_cast<sc_digit>(s.rdata >> 32));
        rdata_changed = true;
      }
    }
    awready.write(o_awready), wready.write(o_wready), bvalid.write(o_bvalid), bresp.write(o_bresp);
    arready.write(o_arready), rvalid.write(o_rvalid), rlast.write(o_rlast), rresp.write(o_rresp);
    if (rdata_changed) rdata.write(rdata_bv);
    driven = true;
  }
};

// Splits the controller's pin vectors into each target's pins and merges theirs back.
SC_MODULE(PinGlue) {
  sc_in<uint32_t> ce_n, cle, ale, we_n, re_n, dq_o, dq_oe;
  sc_out<uint32_t> dq_i, rb_n;
  sc_signal<bool> t_ce_n[kPipes], t_cle[kPipes], t_ale[kPipes], t_we_n[kPipes], t_re_n[kPipes], t_dq_oe[kPipes];
  sc_signal<uint32_t> t_dq_o[kPipes], t_dq_i[kPipes];
  sc_signal<bool> t_rb_n[kPipes];

  SC_CTOR(PinGlue) {
    SC_METHOD(Split);
    sensitive << ce_n << cle << ale << we_n << re_n << dq_o << dq_oe;
    SC_METHOD(Merge);
    for (uint32_t p = 0; p < kPipes; ++p) sensitive << t_dq_i[p] << t_rb_n[p];
  }
  void Split() {
    for (uint32_t p = 0; p < kPipes; ++p) {
      t_ce_n[p].write((ce_n.read() >> p) & 1u);
      t_cle[p].write((cle.read() >> p) & 1u);
      t_ale[p].write((ale.read() >> p) & 1u);
      t_we_n[p].write((we_n.read() >> p) & 1u);
      t_re_n[p].write((re_n.read() >> p) & 1u);
      t_dq_oe[p].write((dq_oe.read() >> p) & 1u);
      t_dq_o[p].write((dq_o.read() >> (8 * p)) & 0xFFu);
    }
  }
  void Merge() {
    uint32_t dq = 0, rb = 0;
    for (uint32_t p = 0; p < kPipes; ++p) {
      dq |= (t_dq_i[p].read() & 0xFFu) << (8 * p);
      rb |= uint32_t{t_rb_n[p].read()} << p;
    }
    dq_i.write(dq);
    rb_n.write(rb);
  }
};

}  // namespace

// One controller: the Verilated vsl_ctrl, its device memory and its two ONFI targets.
struct CosimCard::Ctrl {
  // AXI4-Lite
  AxiLiteMaster s;
  sc_signal<bool> irq;
  // AXI4 masters
  sc_signal<sc_bv<128>> m_awaddr, m_wdata, m_araddr, m_rdata;
  sc_signal<uint32_t> m_awlen, m_awsize, m_awburst, m_awvalid, m_awready, m_wstrb, m_wlast, m_wvalid, m_wready,
      m_bresp, m_bvalid, m_bready, m_arlen, m_arsize, m_arburst, m_arvalid, m_arready, m_rresp, m_rlast, m_rvalid,
      m_rready;
  // ONFI
  sc_signal<uint32_t> ce_n, cle, ale, we_n, re_n, wp_n, dq_o, dq_oe, dq_i, rb_n;
  // The board's sensors, and the model behind them (Sense).
  sc_signal<bool> sensor_present;
  sc_signal<uint32_t> sensor_temp_mc, sensor_power_mw;
  BoardModel board;
  simcard::HeatSource heat;
  double nand_j = 0, avg_w = 0;
  int64_t sensed_at_ns = 0;

  Vvsl_ctrl top;
  AxiMem mem;
  PinGlue glue;
  std::vector<std::unique_ptr<OnfiTarget>> targets;  // this controller's pipes

  Ctrl(uint32_t index, const CosimOptions& opt, sc_clock& clk, sc_signal<bool>& rst_n)
      : top(sc_gen_unique_name("ctrl")), mem(sc_gen_unique_name("mem")), glue(sc_gen_unique_name("glue")) {
    top.clk(clk);
    top.rst_n(rst_n);
    top.s_awaddr(s.awaddr), top.s_awvalid(s.awvalid), top.s_awready(s.awready), top.s_wdata(s.wdata);
    top.s_wstrb(s.wstrb), top.s_wvalid(s.wvalid), top.s_wready(s.wready), top.s_bresp(s.bresp);
    top.s_bvalid(s.bvalid), top.s_bready(s.bready), top.s_araddr(s.araddr), top.s_arvalid(s.arvalid);
    top.s_arready(s.arready), top.s_rdata(s.rdata), top.s_rresp(s.rresp), top.s_rvalid(s.rvalid);
    top.s_rready(s.rready), top.irq(irq);
    top.m_awaddr(m_awaddr), top.m_awlen(m_awlen), top.m_awsize(m_awsize), top.m_awburst(m_awburst);
    top.m_awvalid(m_awvalid), top.m_awready(m_awready), top.m_wdata(m_wdata), top.m_wstrb(m_wstrb);
    top.m_wlast(m_wlast), top.m_wvalid(m_wvalid), top.m_wready(m_wready), top.m_bresp(m_bresp);
    top.m_bvalid(m_bvalid), top.m_bready(m_bready), top.m_araddr(m_araddr), top.m_arlen(m_arlen);
    top.m_arsize(m_arsize), top.m_arburst(m_arburst), top.m_arvalid(m_arvalid), top.m_arready(m_arready);
    top.m_rdata(m_rdata), top.m_rresp(m_rresp), top.m_rlast(m_rlast), top.m_rvalid(m_rvalid);
    top.m_rready(m_rready);
    top.ce_n(ce_n), top.cle(cle), top.ale(ale), top.we_n(we_n), top.re_n(re_n), top.wp_n(wp_n);
    top.dq_o(dq_o), top.dq_oe(dq_oe), top.dq_i(dq_i), top.rb_n(rb_n);
    top.sensor_present(sensor_present), top.sensor_temp_mc(sensor_temp_mc), top.sensor_power_mw(sensor_power_mw);
    board = opt.board;
    sensor_present.write(true);

    mem.clk(clk);
    mem.awaddr(m_awaddr), mem.wdata(m_wdata), mem.araddr(m_araddr), mem.awlen(m_awlen), mem.awvalid(m_awvalid);
    mem.wstrb(m_wstrb), mem.wlast(m_wlast), mem.wvalid(m_wvalid), mem.bready(m_bready), mem.arlen(m_arlen);
    mem.arvalid(m_arvalid), mem.rready(m_rready), mem.awready(m_awready), mem.wready(m_wready);
    mem.bresp(m_bresp), mem.bvalid(m_bvalid), mem.arready(m_arready), mem.rresp(m_rresp), mem.rlast(m_rlast);
    mem.rvalid(m_rvalid), mem.rdata(m_rdata);
    mem.mem.base = kMemBase;
    mem.mem.bytes.assign(opt.mem_bytes_per_pipe * kPipes, 0);
    mem.latency = opt.mem_latency_cycles;

    glue.ce_n(ce_n), glue.cle(cle), glue.ale(ale), glue.we_n(we_n), glue.re_n(re_n), glue.dq_o(dq_o);
    glue.dq_oe(dq_oe), glue.dq_i(dq_i), glue.rb_n(rb_n);

    OnfiShape shape;
    shape.luns = opt.luns;
    shape.blocks = opt.blocks;
    shape.pages_per_block = opt.pages_per_block;
    shape.page_bytes = opt.page_data_bytes + opt.page_spare_bytes;
    const auto params = CardParamPages(opt);
    for (uint32_t p = 0; p < kPipes; ++p) {
      auto t = std::make_unique<OnfiTarget>(sc_gen_unique_name("target"), OnfiMode(opt.onfi_mode), shape, params,
                                            TestJedecId());
      t->t_r = sc_time(opt.t_r_us, SC_US);
      t->t_prog = sc_time(opt.t_prog_us, SC_US);
      t->t_bers = sc_time(opt.t_bers_us, SC_US);
      t->ce_n(glue.t_ce_n[p]), t->cle(glue.t_cle[p]), t->ale(glue.t_ale[p]), t->we_n(glue.t_we_n[p]);
      t->re_n(glue.t_re_n[p]), t->dq_oe(glue.t_dq_oe[p]), t->dq_o(glue.t_dq_o[p]), t->dq_i(glue.t_dq_i[p]);
      t->rb_n(glue.t_rb_n[p]);
      TargetStore* store = opt.stores[index * kPipes + p];
      if (store != nullptr) t->set_store(store);
      targets.push_back(std::move(t));
    }
  }

  // The sensors at `now_ns`: the array operations since the last call charged, the
  // temperature and the average power over the last millisecond on the sensor pins.
  void Sense(int64_t now_ns) {
    double ops_j = 0;
    for (const auto& t : targets) {
      ops_j += 1e-6 * (static_cast<double>(t->reads) * board.read_uj + static_cast<double>(t->programs) * board.program_uj +
                       static_cast<double>(t->erases) * board.erase_uj);
    }
    const double r = board.r_c_per_w, c = board.heat_capacity_j_per_c;
    if (sensed_at_ns == 0) heat.SetPower(now_ns, board.static_w, r, c);
    if (ops_j > nand_j) heat.Deposit(now_ns, ops_j - nand_j, r, c);
    const double dt = static_cast<double>(now_ns - sensed_at_ns) / 1e9;
    if (dt > 0) {
      const double w = board.static_w + (ops_j - nand_j) / dt;
      const double k = std::min(1.0, dt / 1e-3);
      avg_w = sensed_at_ns == 0 ? w : avg_w + k * (w - avg_w);
    }
    nand_j = ops_j;
    sensed_at_ns = now_ns;
    const double temp = board.ambient_c + heat.Read(now_ns, r, c).rise_c;
    sensor_temp_mc.write(static_cast<uint32_t>(static_cast<int32_t>(temp * 1000.0)));
    sensor_power_mw.write(static_cast<uint32_t>(avg_w * 1000.0));
  }

  // The dies' parameter page: the card's geometry, encoded by the host's own code, three
  // copies.
  static std::vector<uint8_t> CardParamPages(const CosimOptions& o) {
    nand::onfi::ParameterPage pp;
    pp.manufacturer = "OPENVSL";
    pp.model = "COSIM-LUN";
    pp.jedec_id = 0x2C;
    pp.data_bytes_per_page = o.page_data_bytes;
    pp.spare_bytes_per_page = static_cast<uint16_t>(o.page_spare_bytes);
    pp.pages_per_block = o.pages_per_block;
    pp.blocks_per_lun = o.blocks;
    pp.luns_per_target = static_cast<uint8_t>(o.luns);
    pp.ecc_bits = 8;
    pp.endurance_cycles = 100000;
    pp.tr_max_us = static_cast<uint16_t>(o.t_r_us);
    pp.tprog_max_us = static_cast<uint16_t>(o.t_prog_us);
    pp.tbers_max_us = static_cast<uint16_t>(o.t_bers_us);
    const auto one = nand::onfi::Encode(pp);
    std::vector<uint8_t> pages;
    for (int copy = 0; copy < 3; ++copy) pages.insert(pages.end(), one.begin(), one.end());
    return pages;
  }

};


struct CosimCard::Impl {
  CosimOptions o;
  sc_clock clk;
  sc_signal<bool> rst_n;
  std::vector<std::unique_ptr<Ctrl>> ctrls;
  std::vector<OnfiTarget*> targets;  // every pipe's, card-wide pipe order
  FstTrace trace;

  explicit Impl(const CosimOptions& opt) : o(opt), clk("clk", sc_time(opt.clock_ns, SC_NS)) {
    for (uint32_t c = 0; c < opt.controllers; ++c) {
      ctrls.push_back(std::make_unique<Ctrl>(c, opt, clk, rst_n));
      for (auto& t : ctrls.back()->targets) targets.push_back(t.get());
    }
  }
  void Cycle(int n = 1) { sc_start(sc_time(o.clock_ns * n, SC_NS)); }
};

// Controller c's registers and memory (CosimCard::port).
class CosimCard::Port final : public hw::RegMemPort {
 public:
  Port(Impl& m, uint32_t c) : m_(m), c_(*m.ctrls.at(c)) {}
  bool Read32(uint32_t offset, uint32_t* value) override {
    return c_.s.Read(offset, value, [this] { m_.Cycle(); });
  }
  bool Write32(uint32_t offset, uint32_t value) override {
    return c_.s.Write(offset, value, [this] { m_.Cycle(); });
  }
  uint64_t mem_base() const override { return kMemBase; }
  uint64_t mem_size() const override { return c_.mem.mem.bytes.size(); }
  void WriteMem(uint64_t addr, const void* src, std::size_t len) override { c_.mem.mem.Write(addr, src, len); }
  void ReadMem(uint64_t addr, void* dst, std::size_t len) override { c_.mem.mem.Read(addr, dst, len); }
  void Advance(int64_t now_ns) override {
    const double now = sc_time_stamp().to_seconds() * 1e9;
    if (static_cast<double>(now_ns) > now) sc_start(sc_time(static_cast<double>(now_ns) - now, SC_NS));
    for (auto& c : m_.ctrls) c->Sense(static_cast<int64_t>(sc_time_stamp().to_seconds() * 1e9));
  }
  bool InterruptPending() override { return c_.irq.read(); }

 private:
  Impl& m_;
  Ctrl& c_;
};

CosimCard::CosimCard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  for (uint32_t c = 0; c < impl_->ctrls.size(); ++c) ports_.push_back(std::make_unique<Port>(*impl_, c));
}
CosimCard::~CosimCard() = default;

std::unique_ptr<CosimCard> CosimCard::Create(const CosimOptions& o) {
  if (o.controllers < 1 || o.controllers > kMaxControllers) return nullptr;
  if (!OncePerProcess()) return nullptr;
  auto impl = std::make_unique<Impl>(o);
  Impl& m = *impl;
  StartSimulation(m.ctrls[0]->top, m.rst_n, [&m](int n) { m.Cycle(n); }, o.trace_fst, &m.trace);
  std::unique_ptr<CosimCard> card(new CosimCard(std::move(impl)));
  // Board set-up, as a host does it (vsl/hw/board.h): each channel's timing for the dies'
  // mode at this clock, and a 20 ms R/B# timeout (a die busy longer is dead).
  hw::ChannelSetup cs;
  cs.onfi_mode = o.onfi_mode;
  cs.clock_ns = o.clock_ns;
  cs.rb_timeout_ns = 20'000'000;
  for (uint32_t c = 0; c < o.controllers; ++c) {
    if (!hw::SetUpChannels(card->port(c), kPipes, cs).ok()) return nullptr;
  }
  return card;
}

uint32_t CosimCard::controllers() const { return static_cast<uint32_t>(ports_.size()); }
hw::RegMemPort& CosimCard::port(uint32_t controller) { return *ports_.at(controller); }

bool CosimCard::Write32(uint32_t offset, uint32_t value) { return ports_[0]->Write32(offset, value); }
bool CosimCard::Read32(uint32_t offset, uint32_t* value) { return ports_[0]->Read32(offset, value); }
uint64_t CosimCard::mem_base() const { return kMemBase; }
uint64_t CosimCard::mem_size() const { return ports_[0]->mem_size(); }
uint64_t CosimCard::region_base(uint32_t pipe) const { return kMemBase + pipe * impl_->o.mem_bytes_per_pipe; }
uint64_t CosimCard::region_bytes() const { return impl_->o.mem_bytes_per_pipe; }
void CosimCard::WriteMem(uint64_t addr, const void* src, std::size_t len) { ports_[0]->WriteMem(addr, src, len); }
void CosimCard::ReadMem(uint64_t addr, void* dst, std::size_t len) { ports_[0]->ReadMem(addr, dst, len); }
void CosimCard::Advance(int64_t now_ns) { ports_[0]->Advance(now_ns); }
bool CosimCard::InterruptPending() { return ports_[0]->InterruptPending(); }

void CosimCard::StickLunOnNextRead(uint32_t pipe, uint32_t lun) {
  impl_->targets.at(pipe)->stuck_read_lun = static_cast<int>(lun);
}
void CosimCard::KillLun(uint32_t pipe, uint32_t lun) { impl_->targets.at(pipe)->dead_luns |= 1u << lun; }
void CosimCard::FailNextProgram(uint32_t pipe, uint32_t lun) {
  impl_->targets.at(pipe)->fail_next_program_lun = static_cast<int>(lun);
}
void CosimCard::FailDma(uint64_t addr, uint64_t len) { impl_->ctrls[0]->mem.mem.failing.emplace_back(addr, len); }
void CosimCard::ClearDmaFailures() { impl_->ctrls[0]->mem.mem.failing.clear(); }

int CosimCard::timing_violations() const {
  int n = 0;
  for (const OnfiTarget* t : impl_->targets) n += t->total_violations();
  return n;
}
std::map<std::string, int> CosimCard::violations() const {
  std::map<std::string, int> all;
  for (const OnfiTarget* t : impl_->targets) {
    for (const auto& [k, v] : t->violations()) all[k] += v;
  }
  return all;
}
uint64_t CosimCard::array_reads(uint32_t pipe) const { return impl_->targets.at(pipe)->reads; }
uint64_t CosimCard::array_programs(uint32_t pipe) const { return impl_->targets.at(pipe)->programs; }
uint64_t CosimCard::array_erases(uint32_t pipe) const { return impl_->targets.at(pipe)->erases; }
void CosimCard::SetAmbient(double ambient_c, double r_c_per_w) {
  for (auto& c : impl_->ctrls) {
    const int64_t now = static_cast<int64_t>(sc_time_stamp().to_seconds() * 1e9);
    c->heat.Advance(now, c->board.r_c_per_w, c->board.heat_capacity_j_per_c);
    c->board.ambient_c = ambient_c;
    c->board.r_c_per_w = r_c_per_w;
  }
}
uint64_t CosimCard::lun_resets(uint32_t pipe) const { return impl_->targets.at(pipe)->lun_resets; }
uint64_t CosimCard::cycles() const {
  return static_cast<uint64_t>(sc_time_stamp().to_seconds() * 1e9 / impl_->o.clock_ns);
}
int64_t CosimCard::now_ns() const { return static_cast<int64_t>(sc_time_stamp().to_seconds() * 1e9); }
const CosimOptions& CosimCard::options() const { return impl_->o; }

}  // namespace vsl::tb
