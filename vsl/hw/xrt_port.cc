#include "vsl/hw/xrt_port.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>

#include <experimental/xrt_ip.h>
#include <experimental/xrt_system.h>
#include <experimental/xrt_xclbin.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <xrt/xrt_bo.h>
#include <xrt/xrt_device.h>

#include "vsl/hw/alveo.h"
#include "vsl/hw/board.h"
#include "vsl/hw/regmap.h"

namespace vsl::hw {

namespace {

bool IsKernelIp(const std::string& name) {
  const std::string k = kAlveoKernelName;
  return name == k || name.rfind(k + ":", 0) == 0;
}

}  // namespace

const KernelImage::Arg* KernelImage::arg(const std::string& name) const {
  for (const auto& a : args) {
    if (a.name == name) return &a;
  }
  return nullptr;
}

Result<std::vector<AlveoCard>> ListAlveoCards() {
  size_t n = 0;
  try {
    n = xrt::system::enumerate_devices();
  } catch (const std::exception& e) {
    return Status::NotSupported(fmt::format("XRT cannot enumerate devices: {}", e.what()));
  }
  std::vector<AlveoCard> cards;
  for (size_t i = 0; i < n; ++i) {
    AlveoCard c;
    c.index = static_cast<uint32_t>(i);
    try {
      xrt::device d(static_cast<unsigned int>(i));
      c.name = d.get_info<xrt::info::device::name>();
      c.bdf = d.get_info<xrt::info::device::bdf>();
      const std::string u = d.get_xclbin_uuid().to_string();
      if (u != "00000000-0000-0000-0000-000000000000") c.xclbin_uuid = u;
    } catch (const std::exception& e) {
      c.name = fmt::format("(cannot open: {})", e.what());
    }
    cards.push_back(std::move(c));
  }
  return cards;
}

std::string NoAlveoCardMessage() {
  return "no Alveo card: XRT sees no device (is the card installed, its shell flashed and the xocl/xclmgmt "
         "drivers loaded? `xbutil examine` lists what XRT sees)";
}

Result<std::vector<std::string>> DescribeAlveoCards(const std::string& xclbin) {
  std::optional<KernelImage> img;
  if (!xclbin.empty()) {
    auto r = InspectXclbin(xclbin);
    if (!r.ok()) return r.status();
    img = *r;
  }
  auto cards = ListAlveoCards();
  if (!cards.ok()) return cards.status();
  if (cards->empty()) return Status::NotFound(NoAlveoCardMessage());
  std::vector<std::string> lines;
  for (const auto& c : *cards) {
    std::string loaded = c.xclbin_uuid.empty() ? "no xclbin loaded" : "xclbin " + c.xclbin_uuid;
    if (img) {
      loaded += c.xclbin_uuid == img->uuid ? " (the given vsl_kernel xclbin)"
                                           : fmt::format(" (not {}: it is loaded on attach)", xclbin);
    }
    lines.push_back(fmt::format("card {}: {} at {}, {}", c.index, c.name, c.bdf.empty() ? "?" : c.bdf, loaded));
  }
  return lines;
}

Result<KernelImage> InspectXclbin(const std::string& path) {
  KernelImage img;
  try {
    xrt::xclbin xb(path);
    img.uuid = xb.get_uuid().to_string();
    std::vector<std::string> names;
    for (const auto& ip : xb.get_ips()) {
      const std::string name = ip.get_name();
      names.push_back(name);
      if (!IsKernelIp(name) || !img.ip_name.empty()) continue;
      img.ip_name = name;
      for (const auto& a : ip.get_args()) {
        KernelImage::Arg arg;
        arg.name = a.get_name();
        arg.offset = a.get_offset();
        const auto mems = a.get_mems();
        if (!mems.empty()) arg.mem_index = mems.front().get_index();
        img.args.push_back(std::move(arg));
      }
    }
    if (img.ip_name.empty()) {
      std::string have;
      for (const auto& n : names) have += (have.empty() ? "" : ", ") + n;
      return Status::NotFound(fmt::format("{}: xclbin has no {} kernel (its IPs: {}); build it from rtl/alveo "
                                          "(docs/alveo.md)",
                                          path, kAlveoKernelName, have.empty() ? "none" : have));
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument(fmt::format("{}: not a readable xclbin: {}", path, e.what()));
  }
  for (const auto& want : regs::kernel::kArgs) {
    const auto* a = img.arg(want.name);
    if (a == nullptr) {
      return Status::FailedPrecondition(fmt::format("{}: {} has no argument {}: the xclbin was built from "
                                                    "another register map than this host's ({}.x)",
                                                    path, img.ip_name, want.name, regs::kRegmapMajor));
    }
    if (a->offset != want.offset) {
      return Status::FailedPrecondition(fmt::format("{}: {} argument {} at {:#x}, this host expects {:#x}: the "
                                                    "xclbin was built from another register map than this "
                                                    "host's ({}.x)",
                                                    path, img.ip_name, want.name, a->offset, want.offset,
                                                    regs::kRegmapMajor));
    }
  }
  return img;
}

struct XrtPort::Impl {
  xrt::device dev;
  xrt::ip ip;
  KernelImage img;
  uint64_t region_bytes = 0;
  struct Buf {
    xrt::bo bo;
    uint64_t addr = 0, size = 0;
  };
  std::vector<Buf> regions, stores;  // per pipe

  Buf* Find(uint64_t addr, std::size_t len) {
    for (auto* v : {&regions, &stores}) {
      for (auto& b : *v) {
        if (addr >= b.addr && addr + len <= b.addr + b.size) return &b;
      }
    }
    return nullptr;
  }
};

XrtPort::XrtPort(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
XrtPort::~XrtPort() = default;

Result<std::unique_ptr<XrtPort>> XrtPort::Open(const XrtOptions& o) {
  auto img = InspectXclbin(o.xclbin);
  if (!img.ok()) return img.status();
  auto cards = ListAlveoCards();
  if (!cards.ok()) return cards.status();
  if (cards->empty()) return Status::NotFound(NoAlveoCardMessage());
  if (o.device >= cards->size()) {
    return Status::NotFound(fmt::format("no Alveo card at index {}: XRT sees {} card(s) (`vslctl alveo-cards`)",
                                        o.device, cards->size()));
  }
  auto impl = std::make_unique<Impl>();
  impl->img = *img;
  impl->region_bytes = o.region_bytes;
  try {
    impl->dev = xrt::device(o.device);
    xrt::uuid uuid = impl->dev.get_xclbin_uuid();
    if (uuid.to_string() != img->uuid) uuid = impl->dev.load_xclbin(o.xclbin);
    impl->ip = xrt::ip(impl->dev, uuid, img->ip_name);
  } catch (const std::exception& e) {
    return Status::IOError(fmt::format("Alveo card {}: loading {}: {}", o.device, o.xclbin, e.what()));
  }
  std::unique_ptr<XrtPort> port(new XrtPort(std::move(impl)));
  uint32_t pipes = 0;
  if (auto s = CheckController(*port, &pipes); !s.ok()) {
    return Status(s.code(), fmt::format("Alveo card {} ({}): {}", o.device, o.xclbin, s.message()));
  }
  Impl& m = *port->impl_;
  for (uint32_t p = 0; p < 2; ++p) {
    auto g = ReadEmulatorGeometry(*port, p);
    if (!g.ok()) return g.status();
    const auto* ring = m.img.arg(fmt::format("pipe{}_ring", p));
    const auto* store = m.img.arg(fmt::format("store{}", p));
    try {
      xrt::bo r(m.dev, o.region_bytes, xrt::bo::flags::normal, static_cast<xrt::memory_group>(ring->mem_index));
      xrt::bo s(m.dev, g->store_bytes(), xrt::bo::flags::normal, static_cast<xrt::memory_group>(store->mem_index));
      m.regions.push_back({r, r.address(), o.region_bytes});
      m.stores.push_back({s, s.address(), g->store_bytes()});
    } catch (const std::exception& e) {
      return Status::NoSpace(fmt::format("Alveo card {}: pipe {}: allocating {} + {} bytes of card memory: {}",
                                         o.device, p, o.region_bytes, g->store_bytes(), e.what()));
    }
  }
  return port;
}

bool XrtPort::Read32(uint32_t offset, uint32_t* value) {
  try {
    *value = impl_->ip.read_register(offset);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

bool XrtPort::Write32(uint32_t offset, uint32_t value) {
  try {
    impl_->ip.write_register(offset, value);
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

uint64_t XrtPort::mem_base() const {
  uint64_t lo = UINT64_MAX;
  for (const auto* v : {&impl_->regions, &impl_->stores}) {
    for (const auto& b : *v) lo = std::min(lo, b.addr);
  }
  return lo == UINT64_MAX ? 0 : lo;
}

uint64_t XrtPort::mem_size() const {
  uint64_t hi = 0;
  for (const auto* v : {&impl_->regions, &impl_->stores}) {
    for (const auto& b : *v) hi = std::max(hi, b.addr + b.size);
  }
  return hi - mem_base();
}

void XrtPort::WriteMem(uint64_t addr, const void* src, std::size_t len) {
  auto* b = impl_->Find(addr, len);
  if (b == nullptr) {
    std::fprintf(stderr, "XrtPort::WriteMem outside the kernel's buffers: %#llx + %zu\n",
                 static_cast<unsigned long long>(addr), len);
    std::abort();
  }
  b->bo.write(src, len, addr - b->addr);
  b->bo.sync(XCL_BO_SYNC_BO_TO_DEVICE, len, addr - b->addr);
}

void XrtPort::ReadMem(uint64_t addr, void* dst, std::size_t len) {
  auto* b = impl_->Find(addr, len);
  if (b == nullptr) {
    std::fprintf(stderr, "XrtPort::ReadMem outside the kernel's buffers: %#llx + %zu\n",
                 static_cast<unsigned long long>(addr), len);
    std::abort();
  }
  b->bo.sync(XCL_BO_SYNC_BO_FROM_DEVICE, len, addr - b->addr);
  b->bo.read(dst, len, addr - b->addr);
}

bool XrtPort::InterruptPending() {
  uint32_t isr = 0;
  return Read32(regs::ctrl::At(regs::ctrl::kIsr), &isr) && isr != 0;
}

void OpenAlveoCard(const XrtOptions& o, const AlveoKernelSetup& setup, Clock& clock,
                   Function<void(Result<AlveoCardPipes>)> done) {
  auto port = XrtPort::Open(o);
  if (!port.ok()) {
    done(port.status());
    return;
  }
  auto card = std::make_shared<AlveoCardPipes>();
  card->port = std::move(port).value();
  XrtPort& p = *card->port;
  AlveoBuffers b;
  for (uint32_t i = 0; i < 2; ++i) {
    b.region_base[i] = p.region_base(i);
    b.store_base[i] = p.store_base(i);
  }
  b.region_bytes = p.region_bytes();
  auto d = std::make_shared<Function<void(Result<AlveoCardPipes>)>>(std::move(done));
  AttachAlveoKernel(p, b, setup, clock, [card, d](Result<AlveoPipes> r) {
    if (!r.ok()) {
      (*d)(r.status());
      return;
    }
    for (uint32_t i = 0; i < 2; ++i) card->pipes[i] = std::move(r->pipes[i]);
    (*d)(std::move(*card));
  });
}

uint64_t XrtPort::region_base(uint32_t pipe) const { return impl_->regions.at(pipe).addr; }
uint64_t XrtPort::region_bytes() const { return impl_->region_bytes; }
uint64_t XrtPort::store_base(uint32_t pipe) const { return impl_->stores.at(pipe).addr; }

namespace {
// XRT reports numbers as strings ("45", "23.104"); some platforms as numbers.
std::optional<double> Number(const nlohmann::json& v) {
  try {
    if (v.is_number()) return v.get<double>();
    if (v.is_string()) return std::stod(v.get<std::string>());
  } catch (...) {
  }
  return std::nullopt;
}
}  // namespace

Result<double> ParseXrtFpgaTemperature(const std::string& thermal_json) {
  const auto j = nlohmann::json::parse(thermal_json, nullptr, false);
  if (j.is_discarded() || !j.contains("thermals") || !j["thermals"].is_array()) {
    return Status::NotFound("XRT's thermal report has no \"thermals\" list");
  }
  std::optional<double> fpga, hottest;
  for (const auto& t : j["thermals"]) {
    if (t.value("is_present", std::string("true")) == "false" || !t.contains("temp_C")) continue;
    const auto c = Number(t["temp_C"]);
    if (!c) continue;
    if (t.value("location_id", std::string()) == "fpga0") fpga = c;
    hottest = hottest ? std::max(*hottest, *c) : *c;
  }
  if (fpga) return *fpga;
  if (hottest) return *hottest;
  return Status::NotFound("XRT's thermal report has no present sensor with a temperature");
}

Result<double> ParseXrtBoardPower(const std::string& electrical_json) {
  const auto j = nlohmann::json::parse(electrical_json, nullptr, false);
  if (j.is_discarded() || !j.contains("power_consumption_watts")) {
    return Status::NotFound("XRT's electrical report has no power_consumption_watts");
  }
  const auto w = Number(j["power_consumption_watts"]);
  if (!w) return Status::NotFound("XRT's power_consumption_watts is not a number");
  return *w;
}

Status XrtPort::ReadBoardSensors(double* temp_c, double* power_w) {
  try {
    VSL_ASSIGN_OR_RETURN(*temp_c, ParseXrtFpgaTemperature(impl_->dev.get_info<xrt::info::device::thermal>()));
    VSL_ASSIGN_OR_RETURN(*power_w, ParseXrtBoardPower(impl_->dev.get_info<xrt::info::device::electrical>()));
  } catch (const std::exception& e) {
    return Status::IOError(fmt::format("XRT device sensors: {}", e.what()));
  }
  return Status::Ok();
}

}  // namespace vsl::hw
