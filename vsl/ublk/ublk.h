// ublk front end: a LUN as /dev/ublkbN through the kernel's ublk driver (Linux >= 6.0,
// module ublk_drv, /dev/ublk-control), driven with io_uring URING_CMD.
//
// Control path (ADD_DEV, SET_PARAMS, START_DEV, STOP_DEV, DEL_DEV, GET_DEV_INFO, and
// START/END_USER_RECOVERY) runs on the caller's thread; each device has one queue served
// by its own thread: it posts a FETCH_REQ per tag, hands each request the driver delivers
// to the export (the LUN's engine), and commits the result with COMMIT_AND_FETCH_REQ once
// the engine's completion comes back (through an eventfd the queue ring polls).
//
// User recovery: devices are added with UBLK_F_USER_RECOVERY, so when vsld dies the block
// device stays (its I/O held); the next vsld finds it by the id it recorded and takes it
// over (START_USER_RECOVERY, new queue, END_USER_RECOVERY) instead of creating another.
//
// Where the kernel has no ublk, Probe says so and nothing else here is used. The parts
// that need no kernel (parameters, request translation) are pure functions, tested here.
#pragma once

#include <linux/ublk_cmd.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "vsl/core/function.h"
#include "vsl/core/status.h"
#include "vsl/nbd/export.h"

namespace vsl::ublk {

inline constexpr const char* kControlPath = "/dev/ublk-control";

// OK when `control` exists and opens; NotSupported naming why not otherwise.
Status Probe(const std::string& control = kControlPath);

struct DeviceShape {
  uint64_t size_bytes = 0;
  uint32_t block_bytes = 4096;  // logical block size: the LUN's sector size
  bool read_only = false;
  uint32_t max_io_bytes = 512 * 1024;
};
// The SET_PARAMS payload: logical block = the sector size, physical 4 KiB (or the
// sector), a volatile cache with FUA (FLUSH and FUA reach the FTL), discard and
// write-zeroes in whole blocks.
ublk_params MakeParams(const DeviceShape& shape);

// One request as the driver describes it (sectors are always 512 bytes in ublk).
struct Request {
  uint8_t op = 0;
  uint32_t flags = 0;
  uint64_t start_sector = 0;
  uint32_t nr_sectors = 0;
};
// Runs `r` against `e` with data in `buf`; `done` gets the bytes done or -errno
// (EINVAL outside the export or misaligned, EOPNOTSUPP for an unknown op, EIO / ENOSPC /
// EPERM from the export).
void Serve(nbd::BlockExport& e, const Request& r, uint8_t* buf, Function<void(int32_t)> done);
int32_t ErrnoFor(const Status& s);

class Device {
 public:
  struct Options {
    uint16_t queue_depth = 128;
    uint32_t max_io_bytes = 512 * 1024;
    int recover_id = -1;  // a device left by a vsld that died: take it over if it waits
    std::string control = kControlPath;
    // Bound on each control command (ADD/SET_PARAMS/START/STOP/DEL...) and on the queue's
    // drain at stop. A command the kernel does not answer in time is cancelled and logged.
    uint32_t control_timeout_ms = 10000;
    // How long a recovering vsld waits for a device whose old server died to be quiesced
    // by the kernel (it notices the death within a few seconds).
    uint32_t recover_wait_ms = 30000;
  };
  // Creates (or recovers) /dev/ublkbN serving `e`.
  static Result<std::unique_ptr<Device>> Start(std::shared_ptr<nbd::BlockExport> e, const Options& o,
                                               std::string name);
  // Gives up on a device a vsld that died left waiting (user recovery holds its I/O for
  // as long as no server comes): stops and deletes it, so the I/O it holds fails with EIO
  // and its users see the device gone. NotFound when there is no such device; Busy (and
  // nothing done) when a live server still runs it.
  static Status Release(int id, const Options& o);
  // Stops and deletes the block device: STOP_DEV (requests in flight are answered first),
  // the queue drained, the char device closed and unmapped, then DEL_DEV (the
  // asynchronous form where the kernel has it: a device still held open, e.g. mounted, is
  // freed by the kernel when its last user closes it, and vsld does not wait for that).
  // Every step is bounded by Options::control_timeout_ms; a step the kernel does not
  // answer is logged and the rest still run.
  ~Device();
  // Why the block device is held ("" when it is not): mounted, or open exclusively
  // (mkfs, a device mapper, another O_EXCL user). Probed by an exclusive open of its own.
  std::string InUse() const;
  // The shape it was made with.
  uint64_t size_bytes() const { return size_bytes_; }
  uint32_t block_bytes() const { return block_bytes_; }
  int id() const { return id_; }
  bool recovered() const { return recovered_; }
  std::string block_path() const { return "/dev/ublkb" + std::to_string(id_); }

 private:
  Device() = default;
  Status OpenControl();
  // GET_DEV_INFO, falling back to the plain command number (and staying there) for
  // kernels before 6.3.
  Status GetDevInfo(ublksrv_ctrl_dev_info* info);
  // One control command on /dev/ublk-control. `buf` (len bytes) is copied in and out of
  // a buffer the device owns, so a command the kernel holds past the timeout never
  // writes into the caller's memory. TimedOut when the kernel did not answer in time.
  Status Control(uint32_t op, uint64_t data0, void* buf, uint16_t len);
  Status ControlEncoded(uint32_t cmd_op, uint32_t nr, uint64_t data0, void* buf, uint16_t len);
  Status SetUpQueue();
  void QueueLoop();
  void ReleaseQueue();
  // Waits (bounded) for a device whose server was `pid` to reach QUIESCED.
  Status WaitQuiesced(ublksrv_ctrl_dev_info* info);

  std::shared_ptr<nbd::BlockExport> exp_;
  std::string name_;
  Options opts_;
  int ctrl_fd_ = -1;
  int cdev_fd_ = -1;
  int event_fd_ = -1;
  int id_ = -1;
  uint64_t size_bytes_ = 0;
  uint32_t block_bytes_ = 0;
  bool ioctl_encode_ = true;
  bool recovered_ = false;
  bool started_ = false;
  bool ctrl_wedged_ = false;      // a control command is still held by the kernel
  uint64_t ctrl_seq_ = 0;         // user_data of control commands
  uint8_t* ctrl_buf_ = nullptr;   // control payloads (leaked if a command is wedged)
  void* ctrl_ring_ = nullptr;     // io_uring
  void* queue_ring_ = nullptr;    // io_uring
  const ublksrv_io_desc* descs_ = nullptr;
  std::size_t descs_bytes_ = 0;
  std::vector<uint8_t*> bufs_;
  std::mutex mu_;
  std::vector<std::pair<uint16_t, int32_t>> done_;  // (tag, result) from the engines
  std::thread queue_thread_;
  std::atomic<bool> abandon_fetches_{false};  // stop waiting for the kernel to abort fetches
  std::atomic<bool> queue_done_{false};
};

}  // namespace vsl::ublk
