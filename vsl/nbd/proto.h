// The NBD wire protocol (NetworkBlockDevice/nbd doc/proto.md): the constants OpenVSL's
// server speaks, and big-endian helpers. Everything on the wire is network byte order.
//
// Scope: fixed-newstyle handshake only (no oldstyle), simple and structured replies, no
// extended headers; one meta context, base:allocation, for BLOCK_STATUS.
#pragma once

#include <cstdint>
#include <cstring>

namespace vsl::nbd {

// --- Handshake ---
inline constexpr uint64_t kNbdMagic = 0x4e42444d41474943ULL;   // "NBDMAGIC"
inline constexpr uint64_t kOptMagic = 0x49484156454F5054ULL;   // "IHAVEOPT"
inline constexpr uint64_t kRepMagic = 0x0003e889045565a9ULL;   // option reply magic

// Handshake flags (server) and client flags.
inline constexpr uint16_t kFlagFixedNewstyle = 1 << 0;
inline constexpr uint16_t kFlagNoZeroes = 1 << 1;
inline constexpr uint32_t kClientFixedNewstyle = 1 << 0;
inline constexpr uint32_t kClientNoZeroes = 1 << 1;

// Options.
inline constexpr uint32_t kOptExportName = 1;
inline constexpr uint32_t kOptAbort = 2;
inline constexpr uint32_t kOptList = 3;
inline constexpr uint32_t kOptStartTls = 5;
inline constexpr uint32_t kOptInfo = 6;
inline constexpr uint32_t kOptGo = 7;
inline constexpr uint32_t kOptStructuredReply = 8;
inline constexpr uint32_t kOptListMetaContext = 9;
inline constexpr uint32_t kOptSetMetaContext = 10;

// Option replies.
inline constexpr uint32_t kRepAck = 1;
inline constexpr uint32_t kRepServer = 2;
inline constexpr uint32_t kRepInfo = 3;
inline constexpr uint32_t kRepMetaContext = 4;
inline constexpr uint32_t kRepFlagError = 1u << 31;
inline constexpr uint32_t kRepErrUnsup = kRepFlagError | 1;
inline constexpr uint32_t kRepErrPolicy = kRepFlagError | 2;
inline constexpr uint32_t kRepErrInvalid = kRepFlagError | 3;
inline constexpr uint32_t kRepErrPlatform = kRepFlagError | 4;
inline constexpr uint32_t kRepErrTlsReqd = kRepFlagError | 5;
inline constexpr uint32_t kRepErrUnknown = kRepFlagError | 6;
inline constexpr uint32_t kRepErrShutdown = kRepFlagError | 7;
inline constexpr uint32_t kRepErrBlockSizeReqd = kRepFlagError | 8;
inline constexpr uint32_t kRepErrTooBig = kRepFlagError | 9;

// Info types (NBD_OPT_INFO / NBD_OPT_GO).
inline constexpr uint16_t kInfoExport = 0;
inline constexpr uint16_t kInfoName = 1;
inline constexpr uint16_t kInfoDescription = 2;
inline constexpr uint16_t kInfoBlockSize = 3;

// Transmission flags.
inline constexpr uint16_t kTxHasFlags = 1 << 0;
inline constexpr uint16_t kTxReadOnly = 1 << 1;
inline constexpr uint16_t kTxSendFlush = 1 << 2;
inline constexpr uint16_t kTxSendFua = 1 << 3;
inline constexpr uint16_t kTxSendTrim = 1 << 5;
inline constexpr uint16_t kTxSendWriteZeroes = 1 << 6;
inline constexpr uint16_t kTxSendDf = 1 << 7;
inline constexpr uint16_t kTxCanMultiConn = 1 << 8;
inline constexpr uint16_t kTxSendCache = 1 << 10;
inline constexpr uint16_t kTxSendFastZero = 1 << 11;

// --- Transmission ---
inline constexpr uint32_t kRequestMagic = 0x25609513;
inline constexpr uint32_t kSimpleReplyMagic = 0x67446698;
inline constexpr uint32_t kStructuredReplyMagic = 0x668e33ef;
inline constexpr std::size_t kRequestBytes = 28;

inline constexpr uint16_t kCmdRead = 0;
inline constexpr uint16_t kCmdWrite = 1;
inline constexpr uint16_t kCmdDisc = 2;
inline constexpr uint16_t kCmdFlush = 3;
inline constexpr uint16_t kCmdTrim = 4;
inline constexpr uint16_t kCmdCache = 5;
inline constexpr uint16_t kCmdWriteZeroes = 6;
inline constexpr uint16_t kCmdBlockStatus = 7;

inline constexpr uint16_t kCmdFlagFua = 1 << 0;
inline constexpr uint16_t kCmdFlagNoHole = 1 << 1;
inline constexpr uint16_t kCmdFlagDf = 1 << 2;
inline constexpr uint16_t kCmdFlagReqOne = 1 << 3;
inline constexpr uint16_t kCmdFlagFastZero = 1 << 4;

// Structured reply chunk flags and types.
inline constexpr uint16_t kReplyFlagDone = 1 << 0;
inline constexpr uint16_t kReplyTypeNone = 0;
inline constexpr uint16_t kReplyTypeOffsetData = 1;
inline constexpr uint16_t kReplyTypeBlockStatus = 5;
inline constexpr uint16_t kReplyTypeError = (1 << 15) + 1;
inline constexpr uint16_t kReplyTypeErrorOffset = (1 << 15) + 2;

// The one metadata context served: which blocks are mapped (base:allocation).
inline constexpr const char* kContextAllocation = "base:allocation";
inline constexpr uint32_t kContextAllocationId = 1;
inline constexpr uint32_t kStateHole = 1 << 0;
inline constexpr uint32_t kStateZero = 1 << 1;

// Error values (the protocol's own numbering, equal to Linux errno).
inline constexpr uint32_t kEPERM = 1;
inline constexpr uint32_t kEIO = 5;
inline constexpr uint32_t kENOMEM = 12;
inline constexpr uint32_t kEINVAL = 22;
inline constexpr uint32_t kENOSPC = 28;
inline constexpr uint32_t kEOVERFLOW = 75;
inline constexpr uint32_t kENOTSUP = 95;
inline constexpr uint32_t kESHUTDOWN = 108;

// --- Big-endian helpers ---
inline void Put16(uint8_t* p, uint16_t v) {
  p[0] = static_cast<uint8_t>(v >> 8);
  p[1] = static_cast<uint8_t>(v);
}
inline void Put32(uint8_t* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<uint8_t>(v >> (24 - 8 * i));
}
inline void Put64(uint8_t* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<uint8_t>(v >> (56 - 8 * i));
}
inline uint16_t Get16(const uint8_t* p) { return static_cast<uint16_t>((p[0] << 8) | p[1]); }
inline uint32_t Get32(const uint8_t* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v = (v << 8) | p[i];
  return v;
}
inline uint64_t Get64(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | p[i];
  return v;
}

}  // namespace vsl::nbd
