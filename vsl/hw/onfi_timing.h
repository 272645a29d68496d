// ONFI asynchronous (SDR) timing modes 0-5 in ns, and their conversion to the channel
// registers' clock cycles. Values from the ONFI specification's SDR timing table
// (models.md pins the mode 0 and mode 5 figures the tests use). The host programs a
// board's channels with them (vsl/hw/board.h); the testbench's ONFI checker measures them.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace vsl::hw {

struct OnfiTiming {
  double tWC, tWP, tWH, tCLS, tALS, tDS, tCLH, tALH, tDH;  // write side
  double tRC, tRP, tREH, tREA, tRHOH;                      // read side
  double tWHR, tADL, tWB, tRR;                             // turnaround
};

// Minimums (tREA, tWB: maximums) per mode.
inline OnfiTiming OnfiMode(int mode) {
  static const OnfiTiming kModes[6] = {
      // tWC  tWP  tWH  tCLS tALS tDS  tCLH tALH tDH  tRC  tRP  tREH tREA tRHOH tWHR tADL tWB  tRR
      {100, 50, 30, 50, 50, 40, 20, 20, 20, 100, 50, 30, 40, 0, 120, 400, 200, 40},
      {45, 25, 15, 25, 25, 20, 10, 10, 10, 50, 25, 15, 30, 15, 80, 400, 100, 20},
      {35, 17, 15, 15, 15, 15, 10, 10, 5, 35, 17, 15, 25, 15, 80, 400, 100, 20},
      {30, 15, 10, 10, 10, 10, 5, 5, 5, 30, 15, 10, 20, 15, 60, 400, 100, 20},
      {25, 12, 10, 10, 10, 10, 5, 5, 5, 25, 12, 10, 20, 15, 60, 400, 100, 20},
      {20, 10, 7, 10, 10, 7, 5, 5, 5, 20, 10, 7, 16, 15, 60, 400, 100, 20},
  };
  return kModes[mode < 0 ? 0 : (mode > 5 ? 5 : mode)];
}

// The channel's TIMING register fields (docs/register-map.md), in cycles.
struct TimingRegs {
  uint32_t twp, twh, trp, treh, tcls, tals, twhr, tadl, twb, trr, tsample;
};

// Cycles for `t` at a clock of `clk_ns`: the fewest whole cycles covering each minimum,
// then stretched so the cycle times (tWC, tRC) hold too; the DQ sample at tREA (the die
// holds the previous byte until tREA after the next RE# falling edge, so a sample on that
// edge still sees it). On a board, add the pad and trace delays to tREA.
inline TimingRegs RegsFor(const OnfiTiming& t, double clk_ns) {
  auto c = [clk_ns](double ns) { return static_cast<uint32_t>(std::ceil(ns / clk_ns - 1e-9)); };
  TimingRegs r{};
  // WE# low must cover tWP and the setups (CLE/ALE/DQ change as WE# falls).
  r.twp = std::max({c(t.tWP), c(t.tCLS), c(t.tALS), c(t.tDS), 1u});
  r.twh = std::max({c(t.tWH), c(t.tCLH), c(t.tALH), c(t.tDH), 1u});
  if (r.twp + r.twh < c(t.tWC)) r.twh = c(t.tWC) - r.twp;
  r.trp = std::max(c(t.tRP), 1u);
  r.treh = std::max(c(t.tREH), 1u);
  if (r.trp + r.treh < c(t.tRC)) r.treh = c(t.tRC) - r.trp;
  r.tsample = std::max(c(t.tREA), 1u);
  if (r.tsample > r.trp + r.treh) r.treh = r.tsample - r.trp;  // the sample stays in its cycle
  r.tcls = c(t.tCLS);
  r.tals = c(t.tALS);
  r.twhr = c(t.tWHR);
  r.tadl = c(t.tADL);
  r.twb = c(t.tWB);
  r.trr = c(t.tRR);
  return r;
}

}  // namespace vsl::hw
