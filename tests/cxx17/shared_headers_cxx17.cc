// Compiled as C++17 (the testbench's standard, since Debian's SystemC is C++17): every
// header shared between the host stack and the testbench must build here.
#include "hls/bch.h"
#include "hls/crc32c.h"
#include "hls/hls_types.h"
#include "hls/kernels.h"
#include "hls/scrambler.h"
#include "vsl/core/crc.h"
#include "vsl/core/function.h"
#include "vsl/core/random.h"
#include "vsl/core/time.h"
#include "vsl/nand/flash.h"
#include "vsl/nand/card_model.h"
#include "vsl/nand/geometry.h"
#include "vsl/nand/onfi.h"
#include "vsl/hw/board.h"
#include "vsl/hw/descriptor.h"
#include "vsl/hw/onfi_timing.h"
#include "vsl/hw/port.h"
#include "vsl/hw/regmap.h"
#include "vsl/simcard/thermal.h"
#include "vsl/nand/read_retry.h"

static_assert(__cplusplus == 201703L, "this file must be compiled as C++17");

int main() {
  vsl::nand::Geometry g;
  vsl::Rng rng(1);
  vsl::Function<int()> f = [&] { return static_cast<int>(g.dies_per_pipe() + rng.Below(1)); };
  const auto page = vsl::nand::onfi::Encode(vsl::nand::onfi::ParameterPage{});
  // The HLS kernels link into the testbench (DPI-C): one call through each API.
  const uint8_t msg[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  uint8_t parity[vslhls::BchParityBytes(8)] = {};
  const bool encoded = vslhls::BchEncode(8, msg, 8, parity);
  const ap_uint<13> x = 0x1FFF;
  static_assert(vsl::hw::regs::chan::At(1, vsl::hw::regs::chan::kTiming0) == 0x1040, "CHAN 1 TIMING0");
  static_assert(vsl::hw::regs::ctrl::kId == 0x10 && vsl::hw::regs::ctrl::kIdReset == 0x4F56534C, "ID");
  return f() == 1 && vsl::Crc16Onfi(page.data(), 254) != 0 && encoded &&
                 vslhls::Crc32cUpdate(msg, 8) == vsl::Crc32c(msg, 8) && x.to_uint() == 0x1FFF
             ? 0
             : 1;
}
