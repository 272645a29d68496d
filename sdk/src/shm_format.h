// The attached mode's wire format (docs/sdk.md): an SDK application and vsld share one
// memfd region holding a header, a submission ring (application -> vsld), a completion
// ring (vsld -> application) and a data area; an eventfd each way says "look at the
// ring". The Unix socket carries only the handshake (Hello with the three descriptors,
// Welcome) and then stays open so each side sees the other die.
//
// Rings are single-producer single-consumer: the application serializes its submitters,
// vsld serializes its completers. Offsets in entries are relative to the data area and
// checked by vsld against its size (a bad one answers -EINVAL; vsld never touches memory
// outside the region).
#pragma once

#include <sys/socket.h>
#include <sys/uio.h>

#include <atomic>
#include <cstdint>
#include <cstring>

#include "vsl/vsl.h"

namespace vsl::sdk::shm {

inline constexpr uint64_t kHelloMagic = 0x4F4C4C4548535600ULL;  // "\0VSHELLO"
inline constexpr uint64_t kRegionMagic = 0x4E4F494745525356ULL;  // "VSREGION"
inline constexpr uint32_t kVersion = 3;  // 2: cq_pollers; 3: sq_need_wakeup
inline constexpr uint32_t kMaxEntries = 4096;
inline constexpr uint64_t kMaxDataBytes = uint64_t{1} << 32;

enum Opcode : uint8_t { kRead = 0, kWrite, kTrim, kFlush, kAtomic, kExists, kRuns, kUsage };

struct Hello {
  uint64_t magic;
  uint32_t version;
  uint32_t entries;      // of each ring (power of two, <= kMaxEntries)
  uint64_t region_bytes; // the memfd's size
  uint64_t data_bytes;   // the data area at the region's end
  char lun[64];          // "lun0", "card1/lun2"; NUL-terminated
};
// Sends `h` with the region's memfd and the two eventfds (SCM_RIGHTS), as the
// application's side of the handshake does: true when all of it went.
inline bool SendHello(int sock, const Hello& h, const int (&fds)[3]) {
  iovec iov{const_cast<Hello*>(&h), sizeof(h)};
  alignas(cmsghdr) char ctrl[CMSG_SPACE(sizeof(fds))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = ctrl;
  msg.msg_controllen = sizeof(ctrl);
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(fds));
  std::memcpy(CMSG_DATA(c), fds, sizeof(fds));
  return ::sendmsg(sock, &msg, MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(h));
}

struct Welcome {
  int32_t result;  // 0 or -errno (then the connection closes)
  uint32_t pad;
  vsl_caps caps;
  char message[128];  // why not, for the application's log
};

struct alignas(64) RingIndex {
  std::atomic<uint32_t> value;
};

struct Header {
  uint64_t magic;
  uint32_t version;
  uint32_t entries;
  uint64_t sq_offset, cq_offset, data_offset, data_bytes;
  RingIndex sq_head, sq_tail, cq_head, cq_tail;
  // Application threads spinning on the completion ring right now (they take completions
  // off it themselves). vsld writes the completion eventfd only when it reads 0 here
  // after publishing cq_tail; a poller that stops decrements it and then takes what is on
  // the ring once more (both sides seq_cst: one of them always sees the other).
  RingIndex cq_pollers;
  // Nonzero when no vsld thread is polling the submission ring: the application writes
  // the submission eventfd after publishing sq_tail only when it reads nonzero here.
  // vsld's engine thread polls the ring while it is awake (0 here) and sets it before it
  // sleeps, then looks at the ring once more (both sides seq_cst, as for cq_pollers).
  // vsld sets it before the handshake's Welcome.
  RingIndex sq_need_wakeup;
};

struct Sqe {
  uint8_t opcode;
  uint8_t pad[3];
  uint32_t flags;     // VSL_FUA
  uint64_t tag;
  uint64_t lba;
  uint64_t count;     // sectors; kAtomic: vectors
  uint64_t buf;       // data-area offset of the data (read/write) or of the ShmVec array
  uint64_t out;       // data-area offset of the outputs (kRuns: vsl_range[], kUsage: vsl_usage)
  uint64_t max_runs;  // kRuns
  uint64_t reserved;
};
struct Cqe {
  uint64_t tag;
  int64_t result;
  uint64_t next;  // kRuns: where to go on
  uint64_t runs;  // kRuns: runs stored
};
struct ShmVec {
  uint64_t lba;
  uint64_t count;
  uint64_t buf;  // data-area offset (writes)
  uint32_t op;   // VSL_VEC_*
  uint32_t pad;
};
static_assert(sizeof(Sqe) == 64 && sizeof(Cqe) == 32 && sizeof(ShmVec) == 32, "wire sizes");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "ring indices must be lock-free in shared memory");

constexpr uint64_t HeaderBytes() { return 4096; }
constexpr uint64_t SqBytes(uint32_t entries) { return uint64_t{entries} * sizeof(Sqe); }
constexpr uint64_t CqBytes(uint32_t entries) { return uint64_t{entries} * sizeof(Cqe); }
constexpr uint64_t DataOffset(uint32_t entries) {
  return (HeaderBytes() + SqBytes(entries) + CqBytes(entries) + 4095) / 4096 * 4096;
}

}  // namespace vsl::sdk::shm
