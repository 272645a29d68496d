#include "vsl/ublk/ublk.h"

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>

#include <fmt/format.h>

#include "vsl/core/log.h"
#include "vsl/core/thread_name.h"

// Newer than the headers Debian 12 ships (Linux 6.1): commands encoded as ioctl numbers.
#ifndef UBLK_F_CMD_IOCTL_ENCODE
#define UBLK_F_CMD_IOCTL_ENCODE (1ULL << 6)
#endif
// DEL_DEV without waiting for the device's last user (Linux 6.9 and later); older kernels
// answer it with an error and get the waiting DEL_DEV, after vsld has let go of the device.
constexpr uint32_t kCmdDelDevAsyncNr = 0x14;

namespace vsl::ublk {
namespace {

constexpr uint64_t kEventTag = ~0ULL;      // user_data of the eventfd poll
constexpr uint64_t kCancelTag = ~0ULL - 1;  // user_data of a control command's cancel
constexpr std::size_t kCtrlBufBytes = 4096;  // larger than any control payload

__kernel_timespec Ms(uint32_t ms) {
  __kernel_timespec t{};
  t.tv_sec = ms / 1000;
  t.tv_nsec = static_cast<long long>(ms % 1000) * 1000000;
  return t;
}

// Whether the ublk server `pid` (a device's ublksrv_pid) still runs, other than us.
bool ServerAlive(pid_t pid) { return pid > 0 && pid != ::getpid() && (::kill(pid, 0) == 0 || errno == EPERM); }

std::shared_ptr<spdlog::logger> Log() {
  static auto l = Logger("ublk");
  return l;
}

uint8_t Shift(uint32_t v) {
  uint8_t s = 0;
  while ((1u << s) < v) ++s;
  return s;
}

io_uring* Ring(void* p) { return static_cast<io_uring*>(p); }

// A cleared 128-byte entry (the ring is set up with IORING_SETUP_SQE128); submits what is
// queued when the ring is full.
io_uring_sqe* Sqe128(io_uring* r) {
  io_uring_sqe* s = io_uring_get_sqe(r);
  while (s == nullptr) {
    io_uring_submit(r);
    s = io_uring_get_sqe(r);
  }
  auto* bytes = reinterpret_cast<unsigned char*>(s);
  for (std::size_t i = 0; i < 2 * sizeof(io_uring_sqe); ++i) bytes[i] = 0;
  return s;
}

}  // namespace

Status Probe(const std::string& control) {
  if (::access(control.c_str(), F_OK) != 0) {
    return Status::NotSupported(fmt::format(
        "{} is absent: this kernel has no ublk (Linux 6.0 or later with the ublk_drv module)", control));
  }
  const int fd = ::open(control.c_str(), O_RDWR | O_CLOEXEC);
  if (fd < 0) return Status::NotSupported(fmt::format("cannot open {}: {}", control, std::strerror(errno)));
  ::close(fd);
  return Status::Ok();
}

ublk_params MakeParams(const DeviceShape& s) {
  ublk_params p{};
  p.len = sizeof p;
  p.types = UBLK_PARAM_TYPE_BASIC | UBLK_PARAM_TYPE_DISCARD;
  p.basic.attrs = UBLK_ATTR_VOLATILE_CACHE | UBLK_ATTR_FUA | (s.read_only ? UBLK_ATTR_READ_ONLY : 0);
  p.basic.logical_bs_shift = Shift(s.block_bytes);
  p.basic.physical_bs_shift = Shift(std::max<uint32_t>(4096, s.block_bytes));
  p.basic.io_min_shift = Shift(s.block_bytes);
  p.basic.io_opt_shift = Shift(std::max<uint32_t>(4096, s.block_bytes));
  p.basic.max_sectors = s.max_io_bytes >> 9;
  p.basic.dev_sectors = s.size_bytes >> 9;
  p.discard.discard_granularity = s.block_bytes;
  p.discard.max_discard_sectors = (UINT32_MAX >> 9) & ~((s.block_bytes >> 9) - 1);
  p.discard.max_write_zeroes_sectors = p.discard.max_discard_sectors;
  p.discard.max_discard_segments = 1;
  return p;
}

int32_t ErrnoFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return -EINVAL;
    case StatusCode::kNoSpace: return -ENOSPC;
    case StatusCode::kFailedPrecondition: return -EPERM;
    case StatusCode::kNotSupported: return -EOPNOTSUPP;
    default: return -EIO;
  }
}

void Serve(nbd::BlockExport& e, const Request& r, uint8_t* buf, Function<void(int32_t)> done) {
  const uint64_t off = r.start_sector << 9;
  const uint64_t len = uint64_t{r.nr_sectors} << 9;
  const uint32_t bs = e.block_bytes();
  const bool fua = (r.flags & (UBLK_IO_F_FUA >> 8)) != 0;
  auto ranged = [&]() {
    return len > 0 && off % bs == 0 && len % bs == 0 && off <= e.size_bytes() && len <= e.size_bytes() - off;
  };
  const int32_t bytes = static_cast<int32_t>(std::min<uint64_t>(len, INT32_MAX));
  switch (r.op) {
    case UBLK_IO_OP_READ:
      if (!ranged()) return done(-EINVAL);
      return e.Read(off, static_cast<uint32_t>(len), buf,
                    [bytes, done = std::move(done)](Status s) mutable { done(s.ok() ? bytes : ErrnoFor(s)); });
    case UBLK_IO_OP_WRITE:
      if (!ranged()) return done(-EINVAL);
      return e.Write(off, static_cast<uint32_t>(len), buf, fua,
                     [bytes, done = std::move(done)](Status s) mutable { done(s.ok() ? bytes : ErrnoFor(s)); });
    case UBLK_IO_OP_FLUSH:
      return e.Flush([done = std::move(done)](Status s) mutable { done(ErrnoFor(s)); });
    case UBLK_IO_OP_DISCARD:
    case UBLK_IO_OP_WRITE_ZEROES: {
      if (!ranged()) return done(-EINVAL);
      if (r.op == UBLK_IO_OP_WRITE_ZEROES && (r.flags & (UBLK_IO_F_NOUNMAP >> 8)) != 0) {
        return nbd::WriteZeroes(e, off, len, fua, [bytes, done = std::move(done)](Status s) mutable {
          done(s.ok() ? bytes : ErrnoFor(s));
        });
      }
      // A trimmed block reads as zeroes, durably: discard and write-zeroes alike.
      return e.Trim(off, len, [&e, fua, bytes, done = std::move(done)](Status s) mutable {
        if (!s.ok() || !fua) return done(s.ok() ? bytes : ErrnoFor(s));
        e.Flush([bytes, done = std::move(done)](Status f) mutable { done(f.ok() ? bytes : ErrnoFor(f)); });
      });
    }
    default:
      return done(-EOPNOTSUPP);
  }
}

// ---------------------------------------------------------------- device

Status Device::Control(uint32_t op, uint64_t data0, void* buf, uint16_t len) {
  const uint32_t cmd_op = ioctl_encode_ ? static_cast<uint32_t>(_IOWR('u', op, struct ublksrv_ctrl_cmd)) : op;
  return ControlEncoded(cmd_op, op, data0, buf, len);
}

Status Device::ControlEncoded(uint32_t cmd_op, uint32_t nr, uint64_t data0, void* buf, uint16_t len) {
  if (ctrl_wedged_) return Status::Busy("an earlier ublk control command is still held by the kernel");
  if (len > kCtrlBufBytes) return Status::InvalidArgument("ublk control payload too large");
  io_uring* r = Ring(ctrl_ring_);
  if (buf != nullptr && len > 0) std::memcpy(ctrl_buf_, buf, len);
  const uint64_t seq = ++ctrl_seq_;
  io_uring_sqe* sqe = Sqe128(r);
  sqe->opcode = IORING_OP_URING_CMD;
  sqe->fd = ctrl_fd_;
  sqe->cmd_op = cmd_op;
  sqe->user_data = seq;
  auto* c = reinterpret_cast<ublksrv_ctrl_cmd*>(sqe->cmd);
  c->dev_id = static_cast<uint32_t>(id_);
  c->queue_id = 0xFFFF;
  c->addr = buf != nullptr ? reinterpret_cast<uint64_t>(ctrl_buf_) : 0;
  c->len = buf != nullptr ? len : 0;
  c->data[0] = data0;
  if (int rc = io_uring_submit(r); rc < 0) {
    return Status::IOError(fmt::format("ublk control submit: {}", std::strerror(-rc)));
  }
  // Waits for the completion of `seq` (earlier cancelled commands may still complete).
  auto wait_for = [&](uint32_t ms, int* res) -> bool {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      __kernel_timespec ts = Ms(static_cast<uint32_t>(left.count()));
      io_uring_cqe* cqe = nullptr;
      const int rc = io_uring_wait_cqe_timeout(r, &cqe, &ts);
      if (rc == -ETIME) return false;
      if (rc == -EINTR) continue;
      if (rc < 0) {
        *res = rc;
        return true;
      }
      const uint64_t ud = cqe->user_data;
      const int v = cqe->res;
      io_uring_cqe_seen(r, cqe);
      if (ud == seq) {
        *res = v;
        return true;
      }
    }
  };
  int res = 0;
  if (!wait_for(opts_.control_timeout_ms, &res)) {
    Log()->error("{}: ublk control command {:#x} on device {}: no answer from the kernel in {} ms; cancelling it",
                 name_, nr, id_, opts_.control_timeout_ms);
    io_uring_sqe* cs = Sqe128(r);
    io_uring_prep_cancel64(cs, seq, 0);
    io_uring_sqe_set_data64(cs, kCancelTag);
    io_uring_submit(r);
    if (!wait_for(2000, &res)) {
      ctrl_wedged_ = true;  // its buffer is never reused or freed
      Log()->error("{}: ublk control command {:#x} could not be cancelled; the control ring is abandoned", name_, nr);
    }
    return Status::TimedOut(fmt::format("ublk control command {:#x}: no answer in {} ms", nr, opts_.control_timeout_ms));
  }
  if (res < 0) return Status::IOError(fmt::format("ublk control command {:#x}: {}", nr, std::strerror(-res)));
  if (buf != nullptr && len > 0) std::memcpy(buf, ctrl_buf_, len);
  return Status::Ok();
}

Status Device::WaitQuiesced(ublksrv_ctrl_dev_info* info) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.recover_wait_ms);
  bool said = false;
  for (;;) {
    if (info->state == UBLK_S_DEV_QUIESCED) return Status::Ok();
    const pid_t pid = info->ublksrv_pid;
    const bool server_alive = ServerAlive(pid);
    if (info->state != UBLK_S_DEV_LIVE || server_alive) {
      return Status::FailedPrecondition(fmt::format("ublk device {} is {} (server pid {}{})", id_,
                                                    info->state == UBLK_S_DEV_LIVE ? "live" : "stopped", pid,
                                                    server_alive ? ", alive" : ""));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::TimedOut(fmt::format("ublk device {}: its server (pid {}) is gone but the kernel did not "
                                          "quiesce it within {} ms", id_, pid, opts_.recover_wait_ms));
    }
    if (!said) {
      Log()->info("{}: waiting for the kernel to quiesce ublk device {} (its server, pid {}, is gone)", name_, id_, pid);
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (Status s = Control(UBLK_CMD_GET_DEV_INFO, 0, info, sizeof *info); !s.ok()) return s;
  }
}

Status Device::GetDevInfo(ublksrv_ctrl_dev_info* info) {
  Status gi = Control(UBLK_CMD_GET_DEV_INFO, 0, info, sizeof *info);
  if (!gi.ok() && ioctl_encode_ && gi.code() != StatusCode::kTimedOut) {
    ioctl_encode_ = false;  // kernels before 6.3 know only the plain command numbers
    gi = Control(UBLK_CMD_GET_DEV_INFO, 0, info, sizeof *info);
  }
  return gi;
}

Status Device::OpenControl() {
  if (Status s = Probe(opts_.control); !s.ok()) return s;
  ctrl_fd_ = ::open(opts_.control.c_str(), O_RDWR | O_CLOEXEC);
  if (ctrl_fd_ < 0) return Status::IOError(fmt::format("open {}: {}", opts_.control, std::strerror(errno)));
  ctrl_buf_ = static_cast<uint8_t*>(std::aligned_alloc(64, kCtrlBufBytes));
  ctrl_ring_ = new io_uring();
  if (int rc = io_uring_queue_init(8, Ring(ctrl_ring_), IORING_SETUP_SQE128); rc < 0) {
    delete Ring(ctrl_ring_);
    ctrl_ring_ = nullptr;
    return Status::NotSupported(fmt::format("io_uring with 128-byte entries: {}", std::strerror(-rc)));
  }
  return Status::Ok();
}

Status Device::Release(int id, const Options& o) {
  std::unique_ptr<Device> d(new Device());
  d->opts_ = o;
  d->name_ = fmt::format("ublk device {}", id);
  if (Status s = d->OpenControl(); !s.ok()) return s;
  d->id_ = id;
  ublksrv_ctrl_dev_info info{};
  if (Status gi = d->GetDevInfo(&info); !gi.ok()) {
    d->id_ = -1;
    return Status::NotFound(fmt::format("no ublk device {}: {}", id, gi.message()));
  }
  d->ioctl_encode_ = (info.flags & UBLK_F_CMD_IOCTL_ENCODE) != 0;
  const pid_t pid = info.ublksrv_pid;
  if (info.state == UBLK_S_DEV_LIVE && ServerAlive(pid)) {
    d->id_ = -1;
    return Status::Busy(fmt::format("ublk device {} is live, served by pid {}: stop that server instead", id, pid));
  }
  // STOP_DEV of a device without a server fails the I/O it holds (EIO to its users).
  if (Status s = d->Control(UBLK_CMD_STOP_DEV, 0, nullptr, 0); !s.ok()) return s;
  Log()->warn("/dev/ublkb{}: released without a server: the I/O it held failed with EIO", id);
  return Status::Ok();  // the destructor deletes it
}

Result<std::unique_ptr<Device>> Device::Start(std::shared_ptr<nbd::BlockExport> e, const Options& o,
                                              std::string name) {
  std::unique_ptr<Device> d(new Device());
  d->exp_ = std::move(e);
  d->opts_ = o;
  d->name_ = std::move(name);
  if (Status s = d->OpenControl(); !s.ok()) return s;
  const DeviceShape shape{d->exp_->size_bytes(), d->exp_->block_bytes(), false, o.max_io_bytes};
  d->size_bytes_ = shape.size_bytes;
  d->block_bytes_ = shape.block_bytes;

  // A device a vsld that died left waiting for its server: take it over if it matches.
  if (o.recover_id >= 0) {
    d->id_ = o.recover_id;
    ublksrv_ctrl_dev_info info{};
    ublk_params p{};
    p.len = sizeof p;
    Status gi = d->GetDevInfo(&info);
    Status waiting = gi.ok() ? d->WaitQuiesced(&info) : gi;
    const bool same = waiting.ok() && d->Control(UBLK_CMD_GET_PARAMS, 0, &p, sizeof p).ok() &&
                      p.basic.dev_sectors == shape.size_bytes >> 9 &&
                      p.basic.logical_bs_shift == Shift(shape.block_bytes) && info.queue_depth == o.queue_depth;
    if (same && d->Control(UBLK_CMD_START_USER_RECOVERY, 0, nullptr, 0).ok()) {
      d->ioctl_encode_ = (info.flags & UBLK_F_CMD_IOCTL_ENCODE) != 0;
      if (Status s = d->SetUpQueue(); !s.ok()) return s;
      if (Status s = d->Control(UBLK_CMD_END_USER_RECOVERY, static_cast<uint64_t>(::getpid()), nullptr, 0); !s.ok()) {
        return s;
      }
      d->started_ = true;
      d->recovered_ = true;
      Log()->info("{}: {} recovered (it waited while vsld was down)", d->name_, d->block_path());
      return d;
    }
    if (gi.ok() && (waiting.ok() || info.state != UBLK_S_DEV_LIVE)) {
      // Ours (the state file names it) but not a match (the LUN was reformatted), or
      // stopped and never deleted: delete it. A live device another server runs is not
      // touched.
      Log()->info("{}: ublk device {} is not a waiting match (state {}): replacing it", d->name_, d->id_, info.state);
      (void)d->Control(UBLK_CMD_STOP_DEV, 0, nullptr, 0);
      (void)d->Control(UBLK_CMD_DEL_DEV, 0, nullptr, 0);
    } else if (gi.ok()) {
      Log()->warn("{}: not recovering ublk device {}: {}; adding a new one", d->name_, d->id_, waiting.message());
    }
    d->ioctl_encode_ = true;
  }

  ublksrv_ctrl_dev_info info{};
  info.nr_hw_queues = 1;
  info.queue_depth = o.queue_depth;
  info.max_io_buf_bytes = o.max_io_bytes;
  info.dev_id = UINT32_MAX;  // any free id
  info.ublksrv_pid = ::getpid();
  // USER_RECOVERY: the block device outlives a vsld that dies, its I/O held; REISSUE: the
  // requests the dead vsld had taken are handed to the next one instead of failing with
  // EIO, so a filesystem on the device never sees the crash (a write re-issued writes the
  // same data to the same blocks again: idempotent).
  info.flags = UBLK_F_USER_RECOVERY | UBLK_F_USER_RECOVERY_REISSUE | UBLK_F_CMD_IOCTL_ENCODE;
  d->id_ = -1;
  Status add = d->Control(UBLK_CMD_ADD_DEV, 0, &info, sizeof info);
  if (!add.ok()) {  // kernels before 6.3 know only the plain command numbers
    d->ioctl_encode_ = false;
    info.flags &= ~UBLK_F_CMD_IOCTL_ENCODE;
    add = d->Control(UBLK_CMD_ADD_DEV, 0, &info, sizeof info);
  }
  if (!add.ok()) return add;
  d->id_ = static_cast<int>(info.dev_id);
  ublk_params p = MakeParams(shape);
  if (Status s = d->Control(UBLK_CMD_SET_PARAMS, 0, &p, sizeof p); !s.ok()) return s;
  if (Status s = d->SetUpQueue(); !s.ok()) return s;
  if (Status s = d->Control(UBLK_CMD_START_DEV, static_cast<uint64_t>(::getpid()), nullptr, 0); !s.ok()) return s;
  d->started_ = true;
  Log()->info("{}: {} ({} bytes, {}-byte blocks, queue depth {})", d->name_, d->block_path(), shape.size_bytes,
              shape.block_bytes, o.queue_depth);
  return d;
}

Status Device::SetUpQueue() {
  const std::string cdev = "/dev/ublkc" + std::to_string(id_);
  for (int i = 0; i < 100 && cdev_fd_ < 0; ++i) {  // udev may take a moment to create it
    cdev_fd_ = ::open(cdev.c_str(), O_RDWR | O_CLOEXEC);
    if (cdev_fd_ < 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (cdev_fd_ < 0) return Status::IOError(fmt::format("open {}: {}", cdev, std::strerror(errno)));
  const long page = ::sysconf(_SC_PAGESIZE);
  descs_bytes_ = (opts_.queue_depth * sizeof(ublksrv_io_desc) + page - 1) / page * page;
  void* m = ::mmap(nullptr, descs_bytes_, PROT_READ, MAP_SHARED | MAP_POPULATE, cdev_fd_, UBLKSRV_CMD_BUF_OFFSET);
  if (m == MAP_FAILED) return Status::IOError(fmt::format("mmap {}: {}", cdev, std::strerror(errno)));
  descs_ = static_cast<const ublksrv_io_desc*>(m);
  for (uint16_t t = 0; t < opts_.queue_depth; ++t) {
    void* b = nullptr;
    if (::posix_memalign(&b, 4096, opts_.max_io_bytes) != 0) return Status::NoSpace("ublk buffers");
    bufs_.push_back(static_cast<uint8_t*>(b));
  }
  event_fd_ = ::eventfd(0, EFD_CLOEXEC);
  if (event_fd_ < 0) return Status::IOError(fmt::format("eventfd: {}", std::strerror(errno)));
  queue_ring_ = new io_uring();
  if (int rc = io_uring_queue_init(2 * opts_.queue_depth + 8, Ring(queue_ring_), IORING_SETUP_SQE128); rc < 0) {
    delete Ring(queue_ring_);
    queue_ring_ = nullptr;
    return Status::IOError(fmt::format("io_uring for the ublk queue: {}", std::strerror(-rc)));
  }
  // START_DEV / END_USER_RECOVERY wait for every tag's FETCH_REQ: the queue thread posts
  // them all before this returns.
  std::promise<void> posted;
  auto f = posted.get_future();
  queue_thread_ = std::thread([this, &posted] {
    SetThreadName("vsl-ublk");
    io_uring* r = Ring(queue_ring_);
    for (uint16_t t = 0; t < opts_.queue_depth; ++t) {
      io_uring_sqe* sqe = Sqe128(r);
      sqe->opcode = IORING_OP_URING_CMD;
      sqe->fd = cdev_fd_;
      sqe->cmd_op = ioctl_encode_ ? static_cast<uint32_t>(_IOWR('u', UBLK_IO_FETCH_REQ, struct ublksrv_io_cmd))
                                  : UBLK_IO_FETCH_REQ;
      auto* c = reinterpret_cast<ublksrv_io_cmd*>(sqe->cmd);
      c->q_id = 0;
      c->tag = t;
      c->result = -1;
      c->addr = reinterpret_cast<uint64_t>(bufs_[t]);
      sqe->user_data = t;
    }
    io_uring_sqe* ps = Sqe128(r);
    io_uring_prep_poll_add(ps, event_fd_, POLLIN);
    io_uring_sqe_set_data64(ps, kEventTag);
    io_uring_submit(r);
    posted.set_value();
    QueueLoop();
    queue_done_ = true;
  });
  f.wait();
  return Status::Ok();
}

void Device::QueueLoop() {
  io_uring* r = Ring(queue_ring_);
  uint32_t fetching = opts_.queue_depth;  // tags with a FETCH (or COMMIT_AND_FETCH) posted
  uint32_t serving = 0;                   // tags handed to the export
  auto commit = [&](uint16_t tag, int32_t result) {
    io_uring_sqe* sqe = Sqe128(r);
    sqe->opcode = IORING_OP_URING_CMD;
    sqe->fd = cdev_fd_;
    sqe->cmd_op = ioctl_encode_
                      ? static_cast<uint32_t>(_IOWR('u', UBLK_IO_COMMIT_AND_FETCH_REQ, struct ublksrv_io_cmd))
                      : UBLK_IO_COMMIT_AND_FETCH_REQ;
    auto* c = reinterpret_cast<ublksrv_io_cmd*>(sqe->cmd);
    c->q_id = 0;
    c->tag = tag;
    c->result = result;
    c->addr = reinterpret_cast<uint64_t>(bufs_[tag]);
    sqe->user_data = tag;
    ++fetching;
  };
  while ((fetching > 0 && !abandon_fetches_) || serving > 0) {
    io_uring_submit_and_wait(r, 1);
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0, seen = 0;
    io_uring_for_each_cqe(r, head, cqe) {
      ++seen;
      if (cqe->user_data == kEventTag) {
        uint64_t n = 0;
        (void)!::read(event_fd_, &n, sizeof n);
        std::vector<std::pair<uint16_t, int32_t>> done;
        {
          std::lock_guard<std::mutex> l(mu_);
          done.swap(done_);
        }
        for (auto [tag, result] : done) {
          --serving;
          commit(tag, result);
        }
        io_uring_sqe* sqe = Sqe128(r);
        io_uring_prep_poll_add(sqe, event_fd_, POLLIN);
        io_uring_sqe_set_data64(sqe, kEventTag);
        continue;
      }
      const auto tag = static_cast<uint16_t>(cqe->user_data);
      --fetching;
      if (cqe->res == UBLK_IO_RES_OK) {
        const ublksrv_io_desc& iod = descs_[tag];
        Request req{ublksrv_get_op(&iod), ublksrv_get_flags(&iod), iod.start_sector, iod.nr_sectors};
        ++serving;
        Serve(*exp_, req, bufs_[tag], [this, tag](int32_t result) {
          std::lock_guard<std::mutex> l(mu_);
          done_.emplace_back(tag, result);
          const uint64_t one = 1;
          (void)!::write(event_fd_, &one, sizeof one);
        });
      } else if (cqe->res != UBLK_IO_RES_ABORT) {
        Log()->warn("{}: ublk fetch of tag {}: {}", name_, tag, std::strerror(-cqe->res));
      }  // aborted: the device is stopping; the tag is not fetched again
    }
    io_uring_cq_advance(r, seen);
  }
}

std::string Device::InUse() const {
  const int fd = ::open(block_path().c_str(), O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);
  if (fd >= 0) {
    ::close(fd);
    return "";
  }
  if (errno == EBUSY) return fmt::format("{} is mounted or open exclusively", block_path());
  return "";
}

void Device::ReleaseQueue() {
  if (descs_ != nullptr) ::munmap(const_cast<ublksrv_io_desc*>(descs_), descs_bytes_);
  descs_ = nullptr;
  if (queue_ring_ != nullptr) {  // cancels any fetch the kernel still holds
    io_uring_queue_exit(Ring(queue_ring_));
    delete Ring(queue_ring_);
    queue_ring_ = nullptr;
  }
  for (int* fd : {&cdev_fd_, &event_fd_}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

Device::~Device() {
  const auto t0 = std::chrono::steady_clock::now();
  if (started_) {
    if (Status s = Control(UBLK_CMD_STOP_DEV, 0, nullptr, 0); !s.ok()) Log()->warn("{}: stop: {}", name_, s.ToString());
  }
  if (queue_thread_.joinable()) {
    // After STOP_DEV the kernel aborts every fetch and the loop ends; a device that never
    // started has nothing to abort them.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(opts_.control_timeout_ms);
    while (started_ && !queue_done_ && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    if (!queue_done_) {
      if (started_) {
        Log()->warn("{}: the kernel did not abort the queue's commands within {} ms; closing the queue", name_,
                    opts_.control_timeout_ms);
      }
      abandon_fetches_ = true;
      const uint64_t one = 1;
      (void)!::write(event_fd_, &one, sizeof one);
    }
    queue_thread_.join();
  }
  // The char device open or mapped keeps the device from being freed: DEL_DEV would wait
  // on vsld itself.
  ReleaseQueue();
  if (id_ >= 0 && ctrl_ring_ != nullptr && !ctrl_wedged_) {
    Status del = Status::NotSupported("plain DEL_DEV");
    if (ioctl_encode_) {
      del = ControlEncoded(static_cast<uint32_t>(_IOR('u', kCmdDelDevAsyncNr, struct ublksrv_ctrl_cmd)),
                           kCmdDelDevAsyncNr, 0, nullptr, 0);
    }
    if (!del.ok() && del.code() != StatusCode::kTimedOut) del = Control(UBLK_CMD_DEL_DEV, 0, nullptr, 0);
    if (!del.ok() && started_) {
      Log()->warn("{}: delete {}: {} (still open? the kernel frees it when its last user closes it)", name_,
                  block_path(), del.ToString());
    }
  }
  if (started_) {
    Log()->info("{}: {} stopped and deleted in {} ms", name_, block_path(),
                std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
  }
  for (uint8_t* b : bufs_) std::free(b);
  if (ctrl_ring_ != nullptr) {
    io_uring_queue_exit(Ring(ctrl_ring_));
    delete Ring(ctrl_ring_);
  }
  if (!ctrl_wedged_) std::free(ctrl_buf_);
  if (ctrl_fd_ >= 0) ::close(ctrl_fd_);
}

}  // namespace vsl::ublk
