// The ECC engine's simulation model behind rtl/ecc/vsl_ecc.sv's DPI-C imports: the
// hls/ BCH codec (t = 8, 512-byte codewords) on the byte stream the engine sees, with the
// page layout docs/formats/card-image.md gives (parity fields after the metadata).
// C++17 (testbench).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <vector>

#include "svdpi.h"

#include "hls/bch.h"

namespace {

constexpr int kT = 8;
constexpr uint32_t kCw = 512;
constexpr uint32_t kParity = 13;

struct Engine {
  bool decode = false;
  uint32_t data = 0, meta = 0, spare = 0;
  std::vector<uint8_t> bytes;
  std::vector<uint32_t> fixes;  // {addr << 8 | value}
  uint32_t corrected = 0;
  bool uncorrectable = false;
};

// Each vsl_ecc instance's engine, by the instance's DPI scope (its ID parameter only tells
// a controller's two pipes apart, not the controllers of a card).
Engine& Get(int id) {
  static std::map<const void*, Engine> engines;
  if (id < 0 || id >= 8) {
    std::fprintf(stderr, "vsl_ecc DPI: engine id %d out of range\n", id);
    std::abort();
  }
  return engines[svGetScope()];
}

void Finish(Engine& e) {
  e.fixes.clear();
  e.corrected = 0;
  e.uncorrectable = false;
  const uint32_t n = e.data / kCw;
  const uint32_t parity_at = e.data + e.meta;
  if (e.data % kCw != 0 || parity_at + n * kParity > e.data + e.spare) {
    // A geometry the codec cannot lay out: nothing is protected (the host checks
    // geometries before it formats; docs/rtl.md).
    e.uncorrectable = e.decode;
    return;
  }
  if (!e.decode) {
    if (e.bytes.size() < parity_at) e.bytes.resize(parity_at, 0xFF);
    std::vector<uint8_t> spare(e.spare - e.meta, 0);
    for (uint32_t i = 0; i < n; ++i) {
      const uint32_t len = kCw + (i == n - 1 ? e.meta : 0);
      vslhls::BchEncode(kT, e.bytes.data() + i * kCw, static_cast<int>(len), spare.data() + i * kParity);
    }
    for (uint32_t j = 0; j < spare.size(); ++j) e.fixes.push_back(((parity_at + j) << 8) | spare[j]);
    return;
  }
  if (e.bytes.size() < e.data + e.spare) e.bytes.resize(e.data + e.spare, 0xFF);
  std::vector<uint8_t> page = e.bytes;
  for (uint32_t i = 0; i < n; ++i) {
    const uint32_t len = kCw + (i == n - 1 ? e.meta : 0);
    const vslhls::BchResult r = vslhls::BchDecode(kT, page.data() + i * kCw, static_cast<int>(len),
                                                  page.data() + parity_at + i * kParity);
    if (r.status == vslhls::BchStatus::kUncorrectable) e.uncorrectable = true;
    e.corrected += r.bits;
  }
  for (uint32_t a = 0; a < page.size(); ++a) {
    if (page[a] != e.bytes[a]) e.fixes.push_back((a << 8) | page[a]);
  }
}

}  // namespace

extern "C" {

void vsl_ecc_dpi_begin(int id, int decode, int data_bytes, int meta_bytes, int spare_bytes) {
  Engine& e = Get(id);
  e.decode = decode != 0;
  e.data = static_cast<uint32_t>(data_bytes);
  e.meta = static_cast<uint32_t>(meta_bytes);
  e.spare = static_cast<uint32_t>(spare_bytes);
  e.bytes.clear();
  e.fixes.clear();
}

void vsl_ecc_dpi_push(int id, long long word, int nbytes) {
  Engine& e = Get(id);
  const auto w = static_cast<uint64_t>(word);
  for (int i = 0; i < nbytes && i < 8; ++i) e.bytes.push_back(static_cast<uint8_t>(w >> (8 * i)));
}

int vsl_ecc_dpi_finish(int id) {
  Engine& e = Get(id);
  Finish(e);
  return static_cast<int>(e.fixes.size());
}

int vsl_ecc_dpi_fix(int id, int index) {
  const Engine& e = Get(id);
  if (index < 0 || static_cast<size_t>(index) >= e.fixes.size()) return 0;
  return static_cast<int>(e.fixes[static_cast<size_t>(index)]);
}

int vsl_ecc_dpi_result(int id) {
  const Engine& e = Get(id);
  return static_cast<int>(std::min<uint32_t>(e.corrected, 0xFFFF) | (e.uncorrectable ? 0x10000u : 0u));
}

}  // extern "C"
