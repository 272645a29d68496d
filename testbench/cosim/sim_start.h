// The start of a co-simulated card's life, shared by the controller card and the Alveo
// kernel: SystemC allows one elaborated simulation per process (OncePerProcess), and a
// Verilated top is elaborated, optionally traced to FST, and held in reset for 9 clocks
// then released for 2 (StartSimulation). C++17 (testbench).
#pragma once

#include <memory>
#include <string>

#include <systemc.h>
#include <verilated_fst_sc.h>

namespace vsl::tb {

// An FST trace that is closed (flushed) when the card goes.
struct FstTrace {
  std::unique_ptr<VerilatedFstSc> fst;
  ~FstTrace() {
    if (fst) fst->close();
  }
};

// True the first time it is called in a process.
inline bool OncePerProcess() {
  static bool created = false;
  if (created) return false;
  created = true;
  return true;
}

// `cycle(n)` runs n clocks. With a non-empty `fst`, every signal of `top` is traced there.
template <class Top, class Cycle>
void StartSimulation(Top& top, sc_signal<bool>& rst_n, Cycle cycle, const std::string& fst, FstTrace* trace) {
  if (!fst.empty()) Verilated::traceEverOn(true);
  rst_n.write(false);
  cycle(1);  // elaborates
  if (!fst.empty()) {
    trace->fst = std::make_unique<VerilatedFstSc>();
    top.trace(trace->fst.get(), 99);
    trace->fst->open(fst.c_str());
  }
  cycle(8);
  rst_n.write(true);
  cycle(2);
}

}  // namespace vsl::tb
