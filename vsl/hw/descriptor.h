// The pipes' command and completion formats in device memory (rtl/pipe/vsl_pipe.sv has
// the same numbers; the co-simulation tests drive one with the other). Little-endian.
// Header shared with the testbench: keep it C++17-clean.
#pragma once

#include <cstdint>

namespace vsl::hw {

// A 64-byte submission ring entry.
struct Descriptor {
  uint64_t w[8] = {};

  // w0: [7:0] opcode, [31:16] tag, [39:32] LUN within the pipe.
  // w1: [23:0] ONFI row ({LUN, block, page}), [47:32] column (READ ID / GET / SET
  //     FEATURES: the address byte), [63:48] length of ID / parameter / feature data.
  // w2: data buffer address; w3: metadata buffer address (8-byte aligned).
  // w4: [15:0] page data bytes, [31:16] metadata bytes, [47:32] spare bytes (multiples
  //     of 8; data + spare within the controller's page buffer), [63:48] window bytes.
  // w5: [15:0] window offset, [23:16] accumulator, [25:24] its operation (AccCode),
  //     [26] window on, [27] no metadata out (READ), [63:48] CRC offset (take / peek).
  // Register map 1.2 (CAPS.ACCUMULATORS > 0) has w4[63:48] and w5; 1.1 ignores them.
  static Descriptor Make(uint8_t opcode, uint16_t tag, uint8_t lun) {
    Descriptor d;
    d.w[0] = uint64_t{opcode} | (uint64_t{tag} << 16) | (uint64_t{lun} << 32);
    return d;
  }
  Descriptor& Row(uint32_t row, uint16_t column = 0, uint16_t length = 0) {
    w[1] = uint64_t{row & 0xFFFFFFu} | (uint64_t{column} << 32) | (uint64_t{length} << 48);
    return *this;
  }
  Descriptor& Buffers(uint64_t data, uint64_t meta) {
    w[2] = data;
    w[3] = meta;
    return *this;
  }
  Descriptor& Page(uint16_t data_bytes, uint16_t meta_bytes, uint16_t spare_bytes) {
    w[4] = (w[4] & (uint64_t{0xFFFF} << 48)) | uint64_t{data_bytes} | (uint64_t{meta_bytes} << 16) |
           (uint64_t{spare_bytes} << 32);
    return *this;
  }
  // READ: only `bytes` of the corrected data area from `offset` go to the data address.
  // PROGRAM (offset 0): only the first `bytes` are fetched, the rest of the data area is
  // zeroed (0: all zeros).
  Descriptor& Window(uint16_t offset, uint16_t bytes) {
    w[4] = (w[4] & 0xFFFFFFFFFFFFull) | (uint64_t{bytes} << 48);
    w[5] = (w[5] & ~uint64_t{0xFFFF}) | offset | (uint64_t{1} << 26);
    return *this;
  }
  // The submitting host's claim generation (PIPE.OWNER; 0 before any claim).
  Descriptor& Generation(uint16_t gen) {
    w[5] = (w[5] & ~(uint64_t{0xFFFF} << 32)) | (uint64_t{gen} << 32);
    return *this;
  }
  Descriptor& NoMetaOut() {
    w[5] |= uint64_t{1} << 27;
    return *this;
  }
  // PROGRAM: accumulator `acc` with `op` (see vsl_pipe.sv). A take or peek with
  // meta_len > 0 XORs the accumulator's first meta_len metadata bytes into the page's at
  // meta_at (a multiple of 8) and writes the CRC-32C of the metadata's first crc_at bytes
  // (a multiple of 4) at crc_at; those go in w1's column and length.
  Descriptor& Acc(uint8_t acc, uint8_t op, uint16_t meta_at = 0, uint16_t meta_len = 0, uint16_t crc_at = 0) {
    w[1] = (w[1] & 0xFFFFFFFFull) | (uint64_t{meta_at} << 32) | (uint64_t{meta_len} << 48);
    const uint64_t keep = ~((uint64_t{0xFF} << 16) | (uint64_t{3} << 24) | (uint64_t{0xFFFF} << 48));
    w[5] = (w[5] & keep) | (uint64_t{acc} << 16) |
           (uint64_t{op & 3u} << 24) | (uint64_t{crc_at} << 48);
    return *this;
  }
};
static_assert(sizeof(Descriptor) == 64, "a descriptor is 64 bytes");

namespace opc {
constexpr uint8_t kRead = 1;        // array read, then data + metadata out, ECC-decoded
constexpr uint8_t kProgram = 2;     // data + metadata in, ECC-encoded, programmed
constexpr uint8_t kErase = 3;
constexpr uint8_t kReset = 4;       // FFh: the whole target (every LUN on the channel)
constexpr uint8_t kResetLun = 5;    // FAh: one LUN
constexpr uint8_t kReadId = 6;      // column = address (00h JEDEC, 20h "ONFI")
constexpr uint8_t kReadParam = 7;
constexpr uint8_t kGetFeatures = 8; // column = feature address, length 4
constexpr uint8_t kSetFeatures = 9; // column = feature address, 4 bytes from the data buffer
constexpr uint8_t kStatus = 10;     // READ STATUS ENHANCED until ready
constexpr uint8_t kAccClear = 11;   // zero accumulator w5[23:16] (1.2)
}  // namespace opc

// Accumulator operations of a PROGRAM (w5[25:24]).
namespace acc_code {
constexpr uint8_t kNone = 0, kAdd = 1, kTake = 2, kPeek = 3;
}  // namespace acc_code

// A 16-byte completion ring entry.
struct CompletionEntry {
  uint64_t w[2] = {};
  uint16_t tag() const { return static_cast<uint16_t>(w[0]); }
  uint8_t status() const { return static_cast<uint8_t>(w[0] >> 16); }
  uint8_t nand_status() const { return static_cast<uint8_t>(w[0] >> 24); }
  uint16_t corrected() const { return static_cast<uint16_t>(w[0] >> 32); }
  uint8_t lun() const { return static_cast<uint8_t>(w[0] >> 48); }
  bool phase() const { return (w[0] >> 63) != 0; }
  uint64_t cycle() const { return w[1]; }  // the pipe's clock count when it was posted
};
static_assert(sizeof(CompletionEntry) == 16, "a completion is 16 bytes");

namespace cst {
constexpr uint8_t kOk = 0;
constexpr uint8_t kUncorrectable = 1;
constexpr uint8_t kProgramFail = 2;
constexpr uint8_t kEraseFail = 3;
constexpr uint8_t kTimeout = 4;     // the LUN stayed busy past CHAN.RB_TIMEOUT
constexpr uint8_t kAborted = 5;     // PIPE.LUN_RESET
constexpr uint8_t kInvalid = 6;     // bad opcode, LUN or sizes: nothing done
constexpr uint8_t kDmaError = 7;    // an AXI transfer of the command failed
constexpr uint8_t kFail = 8;        // STATUS / RESET LUN: the LUN reported FAIL
constexpr uint8_t kFenced = 9;      // another host owns the pipe (PIPE.OWNER): nothing done
}  // namespace cst

}  // namespace vsl::hw
