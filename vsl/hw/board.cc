#include "vsl/hw/board.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "vsl/hw/onfi_timing.h"
#include "vsl/hw/regmap.h"

namespace vsl::hw {

namespace cr = regs::ctrl;
namespace ch = regs::chan;
namespace em = regs::emu;

namespace {

uint32_t Cycles(double us, double clock_ns) {
  const double c = std::ceil(us * 1000.0 / clock_ns);
  return static_cast<uint32_t>(std::clamp(c, 1.0, 4294967295.0));
}

Status RegError(const char* what, uint32_t pipe) {
  return Status::IOError(fmt::format("pipe {}: {}: register access failed", pipe, what));
}

}  // namespace

Status SetUpChannels(RegMemPort& port, uint32_t channels, const ChannelSetup& s) {
  if (s.onfi_mode < 0 || s.onfi_mode > 5) {
    return Status::InvalidArgument(fmt::format("ONFI SDR timing mode {} (0-5)", s.onfi_mode));
  }
  if (!(s.clock_ns > 0)) return Status::InvalidArgument("controller clock period must be positive");
  const TimingRegs r = RegsFor(OnfiMode(s.onfi_mode), s.clock_ns);
  uint32_t t0 = 0, t1 = 0, t2 = 0;
  t0 = ch::kTiming0Twp.put(t0, r.twp), t0 = ch::kTiming0Twh.put(t0, r.twh);
  t0 = ch::kTiming0Trp.put(t0, r.trp), t0 = ch::kTiming0Treh.put(t0, r.treh);
  t1 = ch::kTiming1Tcls.put(t1, r.tcls), t1 = ch::kTiming1Tals.put(t1, r.tals);
  t1 = ch::kTiming1Twhr.put(t1, r.twhr), t1 = ch::kTiming1Tadl.put(t1, r.tadl);
  t2 = ch::kTiming2Twb.put(t2, r.twb), t2 = ch::kTiming2Trr.put(t2, r.trr);
  t2 = ch::kTiming2Tsample.put(t2, r.tsample);
  const double rb = static_cast<double>(s.rb_timeout_ns) / s.clock_ns;
  const auto rb_cycles = static_cast<uint32_t>(std::clamp(std::ceil(rb), 0.0, 4294967295.0));
  for (uint32_t c = 0; c < channels; ++c) {
    const bool ok = port.Write32(ch::At(c, ch::kTiming0), t0) && port.Write32(ch::At(c, ch::kTiming1), t1) &&
                    port.Write32(ch::At(c, ch::kTiming2), t2) && port.Write32(ch::At(c, ch::kRbTimeout), rb_cycles) &&
                    port.Write32(ch::At(c, ch::kOnfiMode), static_cast<uint32_t>(s.onfi_mode));
    if (!ok) return Status::IOError(fmt::format("channel {}: timing register access failed", c));
  }
  return Status::Ok();
}

Status CheckController(RegMemPort& port, uint32_t* pipes) {
  uint32_t id = 0, version = 0, caps = 0;
  if (!port.Read32(cr::At(cr::kId), &id) || !port.Read32(cr::At(cr::kVersion), &version) ||
      !port.Read32(cr::At(cr::kCaps), &caps)) {
    return Status::IOError("controller: register access failed");
  }
  if (id != cr::kIdReset) {
    return Status::NotFound(fmt::format("no OpenVSL controller: ID reads {:#010x}, not {:#010x} ('OVSL')", id,
                                        cr::kIdReset));
  }
  if (cr::kVersionMajor.get(version) != regs::kRegmapMajor) {
    return Status::NotSupported(fmt::format("controller register map {}.{}, this host speaks {}.x",
                                            cr::kVersionMajor.get(version), cr::kVersionMinor.get(version),
                                            regs::kRegmapMajor));
  }
  if (pipes != nullptr) *pipes = cr::kCapsPipes.get(caps);
  return Status::Ok();
}

Result<EmulatorGeometry> ReadEmulatorGeometry(RegMemPort& port, uint32_t pipe) {
  if (pipe >= em::kCount) return Status::InvalidArgument(fmt::format("pipe {}: no EMU block", pipe));
  uint32_t g0 = 0, g1 = 0;
  if (!port.Read32(em::At(pipe, em::kGeometry0), &g0) || !port.Read32(em::At(pipe, em::kGeometry1), &g1) ||
      g0 == 0 || g1 == 0) {
    return Status::NotFound(fmt::format("pipe {}: no NAND emulator behind it (a card with NAND?)", pipe));
  }
  EmulatorGeometry g;
  g.luns = em::kGeometry0Luns.get(g0);
  g.blocks = em::kGeometry0Blocks.get(g0);
  g.pages = em::kGeometry1Pages.get(g1);
  g.stride = em::kGeometry1Stride.get(g1);
  return g;
}

Status SetUpEmulator(RegMemPort& port, uint32_t pipe, const EmulatorSetup& s) {
  auto g = ReadEmulatorGeometry(port, pipe);
  if (!g.ok()) return g.status();
  if (s.store_base % 64 != 0) {
    return Status::InvalidArgument(fmt::format("pipe {}: page store at {:#x} is not 64-byte aligned", pipe, s.store_base));
  }
  if (!(s.clock_ns > 0) || s.rber < 0 || s.rber > 1e-2) {
    return Status::InvalidArgument(fmt::format("pipe {}: clock {} ns, raw bit error rate {}", pipe, s.clock_ns, s.rber));
  }
  // One flip per fetched 64-bit word with probability FLIP_RATE / 2^32 ~ 64 x rber.
  const double rate = std::min(64.0 * s.rber * 4294967296.0, 4294967295.0);
  const bool ok = port.Write32(em::At(pipe, em::kStoreBaseLo), static_cast<uint32_t>(s.store_base)) &&
                  port.Write32(em::At(pipe, em::kStoreBaseHi), static_cast<uint32_t>(s.store_base >> 32)) &&
                  port.Write32(em::At(pipe, em::kTR), Cycles(s.t_r_us, s.clock_ns)) &&
                  port.Write32(em::At(pipe, em::kTProg), Cycles(s.t_prog_us, s.clock_ns)) &&
                  port.Write32(em::At(pipe, em::kTBers), Cycles(s.t_bers_us, s.clock_ns)) &&
                  port.Write32(em::At(pipe, em::kTRst), Cycles(s.t_rst_us, s.clock_ns)) &&
                  port.Write32(em::At(pipe, em::kFlipRate), static_cast<uint32_t>(rate)) &&
                  port.Write32(em::At(pipe, em::kSeed), s.seed);
  return ok ? Status::Ok() : RegError("emulator set-up", pipe);
}

Status FormatEmulator(RegMemPort& port, uint32_t pipe) {
  if (!port.Write32(em::At(pipe, em::kCtrl), em::kCtrlFormat.put(0, 1))) return RegError("FORMAT", pipe);
  // The table clears at one block per cycle; a host polls (the register access itself
  // takes cycles on every transport).
  for (int i = 0; i < 1'000'000; ++i) {
    uint32_t v = 0;
    if (!port.Read32(em::At(pipe, em::kCtrl), &v)) return RegError("FORMAT", pipe);
    if (!em::kCtrlFormat.get(v)) return Status::Ok();
  }
  return Status::TimedOut(fmt::format("pipe {}: emulator FORMAT never finished", pipe));
}

Status SetEmulatorFaults(RegMemPort& port, uint32_t pipe, const EmulatorFaults& f) {
  uint32_t v = 0;
  v = em::kFaultDead.put(v, f.dead);
  v = em::kFaultFailProgram.put(v, f.fail_program);
  v = em::kFaultFailErase.put(v, f.fail_erase);
  return port.Write32(em::At(pipe, em::kFault), v) ? Status::Ok() : RegError("FAULT", pipe);
}

Result<EmulatorFaults> ReadEmulatorFaults(RegMemPort& port, uint32_t pipe) {
  uint32_t v = 0;
  if (!port.Read32(em::At(pipe, em::kFault), &v)) return RegError("FAULT", pipe);
  return EmulatorFaults{em::kFaultDead.get(v), em::kFaultFailProgram.get(v), em::kFaultFailErase.get(v)};
}

Result<EmulatorCounters> ReadEmulatorCounters(RegMemPort& port, uint32_t pipe) {
  EmulatorCounters c;
  uint32_t ctrl = 0;
  const bool ok = port.Read32(em::At(pipe, em::kReads), &c.reads) &&
                  port.Read32(em::At(pipe, em::kPrograms), &c.programs) &&
                  port.Read32(em::At(pipe, em::kErases), &c.erases) && port.Read32(em::At(pipe, em::kFlips), &c.flips) &&
                  port.Read32(em::At(pipe, em::kErrors), &c.errors) && port.Read32(em::At(pipe, em::kCtrl), &ctrl);
  if (!ok) return RegError("counters", pipe);
  c.store_error = em::kCtrlStoreError.get(ctrl) != 0;
  c.busy_luns = em::kCtrlBusy.get(ctrl);
  return c;
}

Status SetUpAlveoKernel(RegMemPort& port, const uint64_t (&store_base)[2], const AlveoKernelSetup& s) {
  uint32_t pipes = 0;
  if (auto st = CheckController(port, &pipes); !st.ok()) return st;
  if (pipes != 2) return Status::NotSupported(fmt::format("the controller has {} pipes; the Alveo kernel has 2", pipes));
  if (auto st = SetUpChannels(port, pipes, s.channels); !st.ok()) return st;
  for (uint32_t p = 0; p < pipes; ++p) {
    EmulatorSetup e = s.emulator;
    e.store_base = store_base[p];
    e.seed = s.emulator.seed + p;
    if (auto st = SetUpEmulator(port, p, e); !st.ok()) return st;
  }
  return Status::Ok();
}

}  // namespace vsl::hw
