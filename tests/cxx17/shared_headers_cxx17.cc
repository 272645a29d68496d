// Compiled as C++17 (the testbench's standard, since Debian's SystemC is C++17): every
// header shared between the host stack and the testbench must build here.
#include "vsl/core/crc.h"
#include "vsl/core/function.h"
#include "vsl/core/random.h"
#include "vsl/core/time.h"
#include "vsl/nand/flash.h"
#include "vsl/nand/geometry.h"
#include "vsl/nand/onfi.h"

static_assert(__cplusplus == 201703L, "this file must be compiled as C++17");

int main() {
  vsl::nand::Geometry g;
  vsl::Rng rng(1);
  vsl::Function<int()> f = [&] { return static_cast<int>(g.dies_per_pipe() + rng.Below(1)); };
  const auto page = vsl::nand::onfi::Encode(vsl::nand::onfi::ParameterPage{});
  return f() == 1 && vsl::Crc16Onfi(page.data(), 254) != 0 ? 0 : 1;
}
