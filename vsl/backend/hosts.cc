// The boards under ControllerBackend: the co-simulated controller card (rtl:), the
// co-simulated Alveo kernel (kernel:) and an Alveo board through XRT (xrt:).
#include "vsl/backend/hosts.h"

#include <cstdlib>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "vsl/core/log.h"
#include "vsl/hw/board.h"
#include "vsl/hw/regmap.h"
#include "vsl/hw/xrt_port.h"
#include "vsl/simcard/thermal.h"

#if VSL_HAVE_COSIM
#include "testbench/cosim/cosim_card.h"
#include "testbench/cosim/image_store.h"
#include "testbench/cosim/kernel_cosim.h"
#endif

namespace vsl::backend {
namespace {

// SystemC elaborates one simulation per process: the first co-simulated card opened
// stays for the rest of the process, and only it can be opened again.
std::mutex g_mu;
std::string g_dir;
// Never destroyed: the Verilated models must not outlive their context at exit, and a
// board has nothing to say at process exit that the backend's Stop did not write.
BoardHost* g_host = nullptr;

Result<BoardHost*> Reuse(const std::string& kind, const std::string& dir) {
  if (!g_host) return static_cast<BoardHost*>(nullptr);
  if (g_dir == kind + ":" + dir) return g_host;
  return Status::Busy(fmt::format("this process already co-simulates card {}; SystemC runs one simulation per "
                                  "process, so {}:{} needs a process of its own",
                                  g_dir, kind, dir));
}

// The emulator's FAULT.DEAD bit for the die: it stays busy from its next operation.
Status KillEmulatedDie(hw::RegMemPort& port, uint32_t pipe, uint32_t die) {
  VSL_ASSIGN_OR_RETURN(hw::EmulatorFaults f, hw::ReadEmulatorFaults(port, pipe));
  f.dead |= 1u << die;
  return hw::SetEmulatorFaults(port, pipe, f);
}

double ThermalR(const simcard::Profile& p, const model::Environment& env) {
  return p.power.ThermalResistance(env.airflow_lfm);
}

#if VSL_HAVE_COSIM
void QuietSystemC() { ::setenv("SYSTEMC_DISABLE_COPYRIGHT_MESSAGE", "1", 0); }

class RtlHost final : public BoardHost {
 public:
  static Result<std::unique_ptr<RtlHost>> Create(std::vector<simcard::ControllerImage*>& images,
                                                 const simcard::Profile& profile) {
    auto h = std::unique_ptr<RtlHost>(new RtlHost(profile));
    const auto& g = profile.geometry;
    tb::CosimOptions o;
    o.controllers = g.controllers;
    o.clock_ns = 10.0;  // 100 MHz: two clocks per ONFI mode-5 byte, the fewest cycles per byte
    o.onfi_mode = 5;
    o.luns = g.luns_per_channel;
    o.blocks = g.blocks_per_lun;
    o.pages_per_block = g.pages_per_block;
    o.page_data_bytes = g.page_data_bytes;
    o.page_spare_bytes = g.page_spare_bytes;
    o.t_r_us = static_cast<double>(profile.timing.t_read_ns) / 1e3;
    o.t_prog_us = static_cast<double>(profile.timing.t_prog_ns) / 1e3;
    o.t_bers_us = static_cast<double>(profile.timing.t_erase_ns) / 1e3;
    o.board.static_w = profile.power.static_w;
    o.board.read_uj = profile.power.read_uj;
    o.board.program_uj = profile.power.program_uj;
    o.board.erase_uj = profile.power.erase_uj;
    o.board.heat_capacity_j_per_c = profile.power.heat_capacity_j_per_c;
    o.board.r_c_per_w = ThermalR(profile, {});
    if (const char* f = std::getenv("VSL_COSIM_FST")) o.trace_fst = f;
    for (uint32_t c = 0; c < g.controllers; ++c) {
      for (uint32_t q = 0; q < 2; ++q) {
        h->stores_.push_back(std::make_unique<tb::ImageStore>(*images.at(c), profile.reliability,
                                                              q * g.dies_per_pipe(), 1000 + c * 2 + q));
        o.stores[c * 2 + q] = h->stores_.back().get();
      }
    }
    QuietSystemC();
    h->card_ = tb::CosimCard::Create(o);
    if (!h->card_) return Status::Busy("the co-simulation could not be built (one co-simulated card per process)");
    // A die busy four times its erase time (at least 1 ms) is dead, not the board's 20 ms:
    // the co-simulation reaches it in a usable time.
    const double rb_ns = std::max(1e6, 4.0 * static_cast<double>(profile.timing.t_erase_ns));
    for (uint32_t c = 0; c < g.controllers; ++c) {
      for (uint32_t q = 0; q < 2; ++q) {
        h->card_->port(c).Write32(hw::regs::chan::At(q, hw::regs::chan::kRbTimeout),
                                  static_cast<uint32_t>(rb_ns / o.clock_ns));
      }
    }
    return h;
  }
  uint32_t controllers() const override { return card_->controllers(); }
  hw::RegMemPort& port(uint32_t c) override { return card_->port(c); }
  uint64_t region_base(uint32_t, uint32_t pipe) const override { return card_->region_base(pipe); }
  uint64_t region_bytes() const override { return card_->region_bytes(); }
  int64_t device_ns() const override { return card_->now_ns(); }
  uint64_t cycles() const override { return card_->cycles(); }
  Status KillDie(uint32_t pipe, uint32_t die) override {
    card_->KillLun(pipe, die);
    return Status::Ok();
  }
  void SetEnvironment(const model::Environment& env) override {
    card_->SetAmbient(env.ambient_c, ThermalR(profile_, env));
  }
  std::string hardware() const override {
    return fmt::format("Verilated co-simulation: {} controller(s), ONFI die models with the timing checker",
                       card_->controllers());
  }
  std::string ecc() const override { return "rtl-bch-dpi"; }

 private:
  explicit RtlHost(const simcard::Profile& p) : profile_(p) {}
  simcard::Profile profile_;
  std::vector<std::unique_ptr<tb::ImageStore>> stores_;
  std::unique_ptr<tb::CosimCard> card_;
};

// The Alveo kernel: the emulators keep the pages in the kernel's card memory, set up here
// by the same board code a card behind XRT gets (hw::SetUpAlveoKernel). The board's power
// monitor (what XRT reports on a real Alveo) is a model over the emulators' operation
// counters.
class KernelHost final : public BoardHost {
 public:
  static Result<std::unique_ptr<KernelHost>> Create(const std::string& dir, const simcard::Profile& profile) {
    auto h = std::unique_ptr<KernelHost>(new KernelHost(profile));
    tb::KernelCosimOptions o;
    o.store_file = dir + "/kernel-memory.img";  // the emulated NAND's pages and erase state
    if (const char* f = std::getenv("VSL_COSIM_FST")) o.trace_fst = f;
    QuietSystemC();
    h->k_ = tb::KernelCosim::Create(o);
    if (!h->k_) return Status::Busy("the co-simulation could not be built (one co-simulated card per process)");
    return h;
  }
  uint32_t controllers() const override { return 1; }
  hw::RegMemPort& port(uint32_t) override { return *k_; }
  uint64_t region_base(uint32_t, uint32_t pipe) const override { return k_->region_base(pipe); }
  uint64_t region_bytes() const override { return k_->region_bytes(); }
  int64_t device_ns() const override { return k_->now_ns(); }
  uint64_t cycles() const override { return k_->cycles(); }
  Status Prepare(Clock&) override {
    if (prepared_) return Status::Ok();
    const auto& g = profile_.geometry;
    for (uint32_t p = 0; p < 2; ++p) {
      VSL_ASSIGN_OR_RETURN(hw::EmulatorGeometry eg, hw::ReadEmulatorGeometry(*k_, p));
      if (eg.luns != g.luns_per_channel || eg.blocks != g.blocks_per_lun || eg.pages != g.pages_per_block) {
        return Status::InvalidArgument(fmt::format(
            "the kernel's emulators are built with {} LUNs x {} blocks x {} pages, the card is [{}]", eg.luns,
            eg.blocks, eg.pages, g.ToString()));
      }
    }
    hw::AlveoKernelSetup s;
    s.channels.clock_ns = k_->options().clock_ns;
    s.channels.rb_timeout_ns = std::max<int64_t>(1'000'000, 4 * profile_.timing.t_erase_ns);
    s.emulator.clock_ns = k_->options().clock_ns;
    s.emulator.t_r_us = static_cast<double>(profile_.timing.t_read_ns) / 1e3;
    s.emulator.t_prog_us = static_cast<double>(profile_.timing.t_prog_ns) / 1e3;
    s.emulator.t_bers_us = static_cast<double>(profile_.timing.t_erase_ns) / 1e3;
    s.emulator.rber = profile_.reliability.rber_base;
    const uint64_t stores[2] = {k_->store_base(0), k_->store_base(1)};
    VSL_RETURN_IF_ERROR(hw::SetUpAlveoKernel(*k_, stores, s));
    prepared_ = true;
    return Status::Ok();
  }
  Status KillDie(uint32_t pipe, uint32_t die) override { return KillEmulatedDie(*k_, pipe, die); }
  void SetEnvironment(const model::Environment& env) override {
    const int64_t now = k_->now_ns();
    heat_.Advance(now, r_, profile_.power.heat_capacity_j_per_c);
    env_ = env;
    r_ = ThermalR(profile_, env);
  }
  bool BoardSensors(uint32_t, double* temp_c, double* power_w) override {
    double ops_j = 0;
    for (uint32_t p = 0; p < 2; ++p) {
      auto n = hw::ReadEmulatorCounters(*k_, p);
      if (!n.ok()) return false;
      const auto& pw = profile_.power;
      ops_j += 1e-6 * (n->reads * pw.read_uj + n->programs * pw.program_uj + n->erases * pw.erase_uj);
    }
    const int64_t now = k_->now_ns();
    const double c = profile_.power.heat_capacity_j_per_c;
    if (at_ == 0) heat_.SetPower(now, profile_.power.static_w, r_, c);
    if (ops_j > ops_j_) heat_.Deposit(now, ops_j - ops_j_, r_, c);
    const double dt = static_cast<double>(now - at_) / 1e9;
    if (dt > 0 && at_ != 0) w_ = profile_.power.static_w + (ops_j - ops_j_) / dt;
    if (at_ == 0) w_ = profile_.power.static_w;
    ops_j_ = std::max(ops_j_, ops_j);
    at_ = now;
    *temp_c = env_.ambient_c + heat_.Read(now, r_, c).rise_c;
    *power_w = w_;
    return true;
  }
  std::string hardware() const override {
    return "Verilated Alveo kernel (vsl_kernel: controller + synthesizable NAND emulators) co-simulation";
  }
  std::string ecc() const override { return "rtl-bch"; }

 private:
  explicit KernelHost(const simcard::Profile& p) : profile_(p), r_(ThermalR(p, {})) {}
  simcard::Profile profile_;
  std::unique_ptr<tb::KernelCosim> k_;
  bool prepared_ = false;
  simcard::HeatSource heat_;
  model::Environment env_;
  double r_, ops_j_ = 0, w_ = 0;
  int64_t at_ = 0;
};
#endif  // VSL_HAVE_COSIM

// An Alveo board through XRT: the kernel's registers and its card memory (HBM/DDR) over
// PCIe, the emulators set up exactly as in the kernel co-simulation.
class XrtHost final : public BoardHost {
 public:
  static Result<std::unique_ptr<XrtHost>> Create(const std::string& device, const std::string& xclbin,
                                                 const simcard::Profile& profile) {
    hw::XrtOptions o;
    char* end = nullptr;
    o.device = static_cast<uint32_t>(std::strtoul(device.c_str(), &end, 10));
    if (end == device.c_str() || *end != '\0') {
      return Status::InvalidArgument(fmt::format("xrt:{}: the device is an XRT index (0, 1, ...)", device));
    }
    o.xclbin = xclbin;
    auto cards = hw::ListAlveoCards();
    if (!cards.ok() || cards->empty()) {
      return Status::NotFound(fmt::format("no Alveo device for xrt:{}: {}", device,
                                          cards.ok() ? hw::NoAlveoCardMessage() : cards.status().ToString()));
    }
    VSL_ASSIGN_OR_RETURN(auto port, hw::XrtPort::Open(o));
    auto h = std::unique_ptr<XrtHost>(new XrtHost(profile));
    h->port_ = std::move(port);
    return h;
  }
  uint32_t controllers() const override { return 1; }
  hw::RegMemPort& port(uint32_t) override { return *port_; }
  uint64_t region_base(uint32_t, uint32_t pipe) const override { return port_->region_base(pipe); }
  uint64_t region_bytes() const override { return port_->region_bytes(); }
  int64_t device_ns() const override { return 0; }
  uint64_t cycles() const override { return 0; }
  Status Prepare(Clock&) override {
    if (prepared_) return Status::Ok();
    hw::AlveoKernelSetup s;
    s.emulator.t_r_us = static_cast<double>(profile_.timing.t_read_ns) / 1e3;
    s.emulator.t_prog_us = static_cast<double>(profile_.timing.t_prog_ns) / 1e3;
    s.emulator.t_bers_us = static_cast<double>(profile_.timing.t_erase_ns) / 1e3;
    const uint64_t stores[2] = {port_->store_base(0), port_->store_base(1)};
    VSL_RETURN_IF_ERROR(hw::SetUpAlveoKernel(*port_, stores, s));
    prepared_ = true;
    return Status::Ok();
  }
  Status KillDie(uint32_t pipe, uint32_t die) override { return KillEmulatedDie(*port_, pipe, die); }
  void SetEnvironment(const model::Environment&) override {}
  // XRT's device sensors: the FPGA's temperature and the board's power.
  bool BoardSensors(uint32_t, double* temp_c, double* power_w) override {
    return port_->ReadBoardSensors(temp_c, power_w).ok();
  }
  std::string hardware() const override { return "Alveo board through XRT"; }
  std::string ecc() const override { return "rtl-bch"; }

 private:
  explicit XrtHost(const simcard::Profile& p) : profile_(p) {}
  simcard::Profile profile_;
  std::unique_ptr<hw::XrtPort> port_;
  bool prepared_ = false;
};

}  // namespace

bool HaveCosim() { return VSL_HAVE_COSIM != 0; }

Result<BoardHost*> CosimHost(const std::string& kind, const std::string& dir,
                             std::vector<simcard::ControllerImage*>& images, const simcard::Profile& profile) {
  std::lock_guard<std::mutex> l(g_mu);
  VSL_ASSIGN_OR_RETURN(BoardHost * h, Reuse(kind, dir));
  if (h != nullptr) return h;
#if VSL_HAVE_COSIM
  if (kind == "rtl") {
    VSL_ASSIGN_OR_RETURN(auto made, RtlHost::Create(images, profile));
    g_host = made.release();
  } else if (kind == "kernel") {
    VSL_ASSIGN_OR_RETURN(auto made, KernelHost::Create(dir, profile));
    g_host = made.release();
  } else {
    return Status::InvalidArgument(fmt::format("no co-simulated backend '{}'", kind));
  }
  g_dir = kind + ":" + dir;
  Logger("card")->info("{}:{}: {}", kind, dir, g_host->hardware());
  return g_host;
#else
  (void)images, (void)profile;
  return Status::NotSupported(fmt::format(
      "{}:{}: this build has no co-simulation (verilator and libsystemc-dev were missing; scripts/setup installs "
      "them)",
      kind, dir));
#endif
}

Result<BoardHost*> XrtBoard(const std::string& device, const std::string& xclbin, const simcard::Profile& profile) {
  std::lock_guard<std::mutex> l(g_mu);
  static XrtHost* host = nullptr;  // the board stays open for the process (never destroyed)
  static std::string opened;
  if (host) {
    if (opened == device) return static_cast<BoardHost*>(host);
    return Status::Busy(fmt::format("this process already drives xrt:{}", opened));
  }
  VSL_ASSIGN_OR_RETURN(auto made, XrtHost::Create(device, xclbin, profile));
  host = made.release();
  opened = device;
  return static_cast<BoardHost*>(host);
}

}  // namespace vsl::backend
