// KernelCosim (kernel_cosim.h): the Verilated Alveo kernel and its card memory.
// C++17 (testbench).
#include "testbench/cosim/kernel_cosim.h"

#include <cstdio>

#include <systemc.h>

#include "Vvsl_kernel.h"
#include "Vvsl_kernel___024root.h"
#include "Vvsl_kernel_vsl_nand_emu__pi2.h"
#include "testbench/cosim/axi_port.h"
#include "testbench/cosim/axil_master.h"
#include "testbench/cosim/sim_start.h"
#include "vsl/hw/regmap.h"

namespace vsl::tb {
namespace {

constexpr uint64_t kMemBase = 0x4'0000'0000ull;
constexpr uint32_t kPipes = 2;
}  // namespace

struct KernelCosim::Impl {
  // One AXI4 master of the kernel and the memory port it reaches.
  struct Master {
    sc_signal<uint64_t> awaddr, wdata, araddr, rdata;
    sc_signal<uint32_t> awlen, awsize, awburst, wstrb, arlen, arsize, arburst, bresp, rresp;
    sc_signal<bool> awvalid, wlast, wvalid, bready, arvalid, rready, awready, wready, bvalid, arready, rlast, rvalid;
  };

  KernelCosimOptions o;
  sc_clock clk;
  sc_signal<bool> rst_n;
  AxiLiteMaster s;
  sc_signal<bool> irq;
  Master m[4];  // pipe0, store0, pipe1, store1
  Vvsl_kernel top{"kernel"};
  DeviceMemory mem;
  std::unique_ptr<AxiPort> ports[4];
  uint64_t store_bytes = 0, store_span = 0;
  FstTrace trace;

  explicit Impl(const KernelCosimOptions& opt) : o(opt), clk("ap_clk", sc_time(opt.clock_ns, SC_NS)) {
    top.ap_clk(clk);
    top.ap_rst_n(rst_n);
    top.s_axi_control_awaddr(s.awaddr), top.s_axi_control_awvalid(s.awvalid);
    top.s_axi_control_awready(s.awready), top.s_axi_control_wdata(s.wdata), top.s_axi_control_wstrb(s.wstrb);
    top.s_axi_control_wvalid(s.wvalid), top.s_axi_control_wready(s.wready), top.s_axi_control_bresp(s.bresp);
    top.s_axi_control_bvalid(s.bvalid), top.s_axi_control_bready(s.bready), top.s_axi_control_araddr(s.araddr);
    top.s_axi_control_arvalid(s.arvalid), top.s_axi_control_arready(s.arready);
    top.s_axi_control_rdata(s.rdata), top.s_axi_control_rresp(s.rresp), top.s_axi_control_rvalid(s.rvalid);
    top.s_axi_control_rready(s.rready);
    top.__SYM__interrupt(irq);  // Verilator's name for the port `interrupt`
// Binds master `i` to the kernel's m_axi_<n>_* ports (each a separately named port, as
// Vitis wants them).
#define VSL_BIND_MASTER(i, n)                                                                              \
  top.m_axi_##n##_awaddr(m[i].awaddr), top.m_axi_##n##_wdata(m[i].wdata), top.m_axi_##n##_araddr(m[i].araddr); \
  top.m_axi_##n##_rdata(m[i].rdata), top.m_axi_##n##_awlen(m[i].awlen), top.m_axi_##n##_awsize(m[i].awsize);   \
  top.m_axi_##n##_awburst(m[i].awburst), top.m_axi_##n##_wstrb(m[i].wstrb), top.m_axi_##n##_arlen(m[i].arlen); \
  top.m_axi_##n##_arsize(m[i].arsize), top.m_axi_##n##_arburst(m[i].arburst), top.m_axi_##n##_bresp(m[i].bresp); \
  top.m_axi_##n##_rresp(m[i].rresp), top.m_axi_##n##_awvalid(m[i].awvalid), top.m_axi_##n##_wlast(m[i].wlast);  \
  top.m_axi_##n##_wvalid(m[i].wvalid), top.m_axi_##n##_bready(m[i].bready), top.m_axi_##n##_arvalid(m[i].arvalid); \
  top.m_axi_##n##_rready(m[i].rready), top.m_axi_##n##_awready(m[i].awready), top.m_axi_##n##_wready(m[i].wready); \
  top.m_axi_##n##_bvalid(m[i].bvalid), top.m_axi_##n##_arready(m[i].arready), top.m_axi_##n##_rlast(m[i].rlast); \
  top.m_axi_##n##_rvalid(m[i].rvalid)
    VSL_BIND_MASTER(0, pipe0);
    VSL_BIND_MASTER(1, store0);
    VSL_BIND_MASTER(2, pipe1);
    VSL_BIND_MASTER(3, store1);
#undef VSL_BIND_MASTER
    mem.base = kMemBase;
    for (int i = 0; i < 4; ++i) {
      auto& p = ports[i] = std::make_unique<AxiPort>(sc_gen_unique_name("hbm_port"));
      Master& x = m[i];
      p->clk(clk);
      p->awaddr(x.awaddr), p->wdata(x.wdata), p->araddr(x.araddr), p->awlen(x.awlen), p->wstrb(x.wstrb);
      p->arlen(x.arlen), p->awvalid(x.awvalid), p->wlast(x.wlast), p->wvalid(x.wvalid), p->bready(x.bready);
      p->arvalid(x.arvalid), p->rready(x.rready), p->awready(x.awready), p->wready(x.wready);
      p->bvalid(x.bvalid), p->arready(x.arready), p->rlast(x.rlast), p->rvalid(x.rvalid), p->bresp(x.bresp);
      p->rresp(x.rresp), p->rdata(x.rdata);
      p->mem = &mem;
      p->latency = opt.mem_latency_cycles;
    }
  }

  void Cycle(int n = 1) {
    sc_start(sc_time(o.clock_ns * n, SC_NS));
    SaveTables();
  }

  // The emulators' next-page tables (on chip, public to the simulation) in the file after
  // the memory: one byte per block, emulator 0 then 1.
  bool persistent = false;
  uint8_t* tables = nullptr;
  static constexpr std::size_t kTableEntries = 64;  // LUNS * BLOCKS of the kernel's build
  void SaveTables() {
    if (tables == nullptr) return;
    auto* r = top.rootp;
    for (std::size_t i = 0; i < kTableEntries; ++i) {
      tables[i] = r->__PVT__vsl_kernel__DOT__emu0->nxt[i];
      tables[kTableEntries + i] = r->__PVT__vsl_kernel__DOT__emu1->nxt[i];
    }
  }
  void LoadTables() {
    auto* r = top.rootp;
    for (std::size_t i = 0; i < kTableEntries; ++i) {
      r->__PVT__vsl_kernel__DOT__emu0->nxt[i] = tables[i];
      r->__PVT__vsl_kernel__DOT__emu1->nxt[i] = tables[kTableEntries + i];
    }
  }
};

KernelCosim::KernelCosim(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelCosim::~KernelCosim() = default;

std::unique_ptr<KernelCosim> KernelCosim::Create(const KernelCosimOptions& o) {
  if (!OncePerProcess()) return nullptr;
  auto impl = std::make_unique<Impl>(o);
  Impl& m = *impl;
  StartSimulation(m.top, m.rst_n, [&m](int n) { m.Cycle(n); }, o.trace_fst, &m.trace);
  std::unique_ptr<KernelCosim> k(new KernelCosim(std::move(impl)));
  // Card memory: the regions, then the page stores (each rounded up to 1 MiB), sized from
  // what the emulators say they were built with.
  namespace em = hw::regs::emu;
  uint32_t g0 = 0, g1 = 0;
  if (!k->Read32(em::At(0, em::kGeometry0), &g0) || !k->Read32(em::At(0, em::kGeometry1), &g1)) {
    std::fprintf(stderr, "KernelCosim: the emulators' GEOMETRY registers do not answer\n");
    return nullptr;
  }
  m.store_bytes = uint64_t{em::kGeometry0Luns.get(g0)} * em::kGeometry0Blocks.get(g0) *
                  em::kGeometry1Pages.get(g1) * em::kGeometry1Stride.get(g1);
  m.store_span = (m.store_bytes + (1u << 20) - 1) & ~uint64_t{(1u << 20) - 1};
  const std::size_t mem_bytes = kPipes * (o.region_bytes + m.store_span);
  if (o.store_file.empty()) {
    m.mem.bytes.assign(mem_bytes, 0);
    return k;
  }
  if (em::kGeometry0Luns.get(g0) * em::kGeometry0Blocks.get(g0) != Impl::kTableEntries) {
    std::fprintf(stderr, "KernelCosim: the emulators' table is not %zu blocks\n", Impl::kTableEntries);
    return nullptr;
  }
  bool fresh = false;
  if (!m.mem.bytes.Map(o.store_file.c_str(), mem_bytes + 2 * Impl::kTableEntries, &fresh)) {
    std::fprintf(stderr, "KernelCosim: cannot map %s\n", o.store_file.c_str());
    return nullptr;
  }
  // The reset's table clear (one block per clock) is long done by now; what the file
  // says replaces it (a new file: every block erased, as the reset left it).
  m.Cycle(Impl::kTableEntries + 8);
  m.tables = m.mem.bytes.data() + mem_bytes;
  if (!fresh) m.LoadTables();
  m.SaveTables();
  m.persistent = true;
  return k;
}

bool KernelCosim::Write32(uint32_t offset, uint32_t value) {
  return impl_->s.Write(offset, value, [this] { impl_->Cycle(); });
}

bool KernelCosim::Read32(uint32_t offset, uint32_t* value) {
  return impl_->s.Read(offset, value, [this] { impl_->Cycle(); });
}

uint64_t KernelCosim::mem_base() const { return kMemBase; }
uint64_t KernelCosim::mem_size() const { return impl_->mem.bytes.size(); }
uint64_t KernelCosim::region_base(uint32_t pipe) const { return kMemBase + pipe * impl_->o.region_bytes; }
uint64_t KernelCosim::region_bytes() const { return impl_->o.region_bytes; }
uint64_t KernelCosim::store_base(uint32_t pipe) const {
  return kMemBase + kPipes * impl_->o.region_bytes + pipe * impl_->store_span;
}
uint64_t KernelCosim::store_bytes() const { return impl_->store_bytes; }

void KernelCosim::WriteMem(uint64_t addr, const void* src, std::size_t len) { impl_->mem.Write(addr, src, len); }
void KernelCosim::ReadMem(uint64_t addr, void* dst, std::size_t len) { impl_->mem.Read(addr, dst, len); }

void KernelCosim::Advance(int64_t now_ns) {
  const double now = sc_time_stamp().to_seconds() * 1e9;
  if (static_cast<double>(now_ns) > now) sc_start(sc_time(static_cast<double>(now_ns) - now, SC_NS));
  impl_->SaveTables();
}

bool KernelCosim::persistent() const { return impl_->persistent; }

bool KernelCosim::InterruptPending() { return impl_->irq.read(); }
void KernelCosim::FailMemory(uint64_t addr, uint64_t len) { impl_->mem.failing.emplace_back(addr, len); }
uint64_t KernelCosim::read_beats(uint32_t master) const { return impl_->ports[master]->read_beats; }
uint64_t KernelCosim::write_beats(uint32_t master) const { return impl_->ports[master]->write_beats; }
uint64_t KernelCosim::cycles() const {
  return static_cast<uint64_t>(sc_time_stamp().to_seconds() * 1e9 / impl_->o.clock_ns);
}
int64_t KernelCosim::now_ns() const { return static_cast<int64_t>(sc_time_stamp().to_seconds() * 1e9); }
const KernelCosimOptions& KernelCosim::options() const { return impl_->o; }

}  // namespace vsl::tb
