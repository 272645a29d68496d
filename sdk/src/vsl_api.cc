// The C API over a vsl_dev's backend: argument checks, synchronous calls, the
// asynchronous completion queue drained by vsl_poll.
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

#include "sdk/src/device.h"

namespace vsl::sdk {

void* Backend::BufAlloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  return std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
}
void Backend::BufFree(void* p) { std::free(p); }

namespace {
thread_local std::string g_last_error;
}  // namespace

int SetLastError(int err, const std::string& why) {
  g_last_error = err == 0 ? std::string() : why;
  return err;
}

vsl_dev* NewDevice(std::unique_ptr<Backend> backend) {
  auto* d = new vsl_dev();
  d->caps = backend->caps();
  d->backend = std::move(backend);
  return d;
}

bool ValidDevice(const vsl_dev* dev) {
  return dev != nullptr && dev->magic.load(std::memory_order_acquire) == vsl_dev::kMagic;
}

// Polls for `ready` (the device's adaptive spin) while the backend may leave completions
// to this waiter (Backend::SpinBegin/Poll/SpinEnd); true when it held.
template <typename Ready>
bool SpinForCompletion(vsl_dev* dev, Ready&& ready) {
  dev->backend->SpinBegin();
  const bool seen = dev->spin.Spin([dev, &ready] {
    dev->backend->Poll();
    return ready();
  });
  dev->backend->SpinEnd();
  return seen;
}

int64_t RunSync(vsl_dev* dev, Op* op) {
  struct Waiter {
    std::mutex mu;
    std::condition_variable cv;
    std::atomic<bool> done{false};
  } w;
  dev->backend->Run(op, [&w] {
    std::lock_guard<std::mutex> l(w.mu);
    w.done.store(true, std::memory_order_release);
    w.cv.notify_all();
  });
  dev->backend->WaitUntil(
      [&w] { return w.done.load(std::memory_order_acquire); },
      [&w, dev] {
        if (SpinForCompletion(dev, [&w] { return w.done.load(std::memory_order_acquire); })) return;
        const auto t0 = std::chrono::steady_clock::now();
        std::unique_lock<std::mutex> l(w.mu);
        w.cv.wait(l, [&w] { return w.done.load(std::memory_order_acquire); });
        dev->spin.NoteBlocked(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - t0).count());
      });
  // The completion may still hold w.mu (it notifies under it): w must outlive that.
  std::lock_guard<std::mutex> l(w.mu);
  return op->result;
}

namespace {

// Checks shared by the read and write paths. -EINVAL for a zero or oversize count or a
// missing buffer; range checks against the device are the FTL's.
int CheckIo(const vsl_dev* dev, uint64_t count, const void* buf) {
  if (!ValidDevice(dev)) return -EINVAL;
  if (count == 0 || count > dev->caps.max_io_sectors || buf == nullptr) return -EINVAL;
  return 0;
}

int CheckVecs(const vsl_dev* dev, const vsl_vec* vecs, uint32_t n) {
  if (!ValidDevice(dev) || vecs == nullptr || n == 0) return -EINVAL;
  if (n > dev->caps.atomic_max_vectors) return -EINVAL;
  uint32_t trims = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (vecs[i].op == VSL_VEC_TRIM && ++trims > dev->caps.atomic_max_trims) return -EINVAL;
    if (vecs[i].op != VSL_VEC_WRITE && vecs[i].op != VSL_VEC_TRIM) return -EINVAL;
    if (vecs[i].op == VSL_VEC_WRITE && vecs[i].buf == nullptr) return -EINVAL;
  }
  return 0;
}

// Submits `op` (from NewOp) asynchronously: its completion is queued for vsl_poll and the
// op goes back to the device's free list.
int Submit(vsl_dev* dev, Op* op, vsl_done_fn fn, void* arg) {
  if (fn == nullptr) {
    delete op;
    return -EINVAL;
  }
  if (dev->inflight.fetch_add(1) >= dev->caps.queue_depth) {
    dev->inflight.fetch_sub(1);
    delete op;
    return -EAGAIN;
  }
  dev->backend->Run(op, [dev, op, fn, arg] {
    const int r = static_cast<int>(op->result);
    std::lock_guard<std::mutex> l(dev->mu);
    dev->free_ops.Give(op);
    dev->completed.push_back({fn, arg, r});
    dev->completed_count.fetch_add(1, std::memory_order_release);
    dev->cv.notify_all();
  });
  return 0;
}

// An op for an asynchronous request: from the device's free list, which grows to the
// number of requests in flight, so a submission allocates nothing once it has.
Op* NewOp(vsl_dev* dev, Op::Kind k, uint64_t lba, uint64_t count, void* buf, uint32_t flags) {
  Op* op;
  {
    std::lock_guard<std::mutex> l(dev->mu);
    op = dev->free_ops.Take();
  }
  op->kind = k;
  op->lba = lba;
  op->count = count;
  op->buf = buf;
  op->flags = flags;
  return op;
}

}  // namespace
}  // namespace vsl::sdk

using vsl::sdk::Op;
using vsl::sdk::ValidDevice;

extern "C" {

uint32_t vsl_version(void) { return (VSL_SDK_VERSION_MAJOR << 16) | VSL_SDK_VERSION_MINOR; }

const char* vsl_last_error(void) { return vsl::sdk::g_last_error.c_str(); }

const char* vsl_strerror(int result) {
  switch (-result) {
    case 0: return "success";
    case EINVAL: return "invalid argument (handle, range, length, buffer or batch size)";
    case ENOSPC: return "no space left on the device";
    case EPERM: return "the LUN is read-only";
    case EIO: return "I/O error: data could not be stored or read back intact";
    case EAGAIN: return "too many I/Os in flight on this device";
    case ENOTCONN: return "the daemon went away";
    case EBUSY: return "the card is in use by another process";
    case ENOENT: return "no such card, LUN, key or daemon socket";
    case ENODEV: return "the LUN is not formatted";
    case ENOBUFS: return "buffer too small";
    default: return std::strerror(-result);
  }
}

int vsl_close(vsl_dev* dev) {
  if (dev == nullptr) return 0;
  if (!ValidDevice(dev)) return -EINVAL;
  // Run the callbacks of whatever is still in flight, then stop.
  while (dev->inflight.load() != 0) vsl_poll(dev, 1, 0, 100);
  dev->magic.store(0, std::memory_order_release);
  const int r = dev->backend->Close();
  delete dev;
  return r;
}

int vsl_get_caps(vsl_dev* dev, vsl_caps* caps) {
  if (!ValidDevice(dev) || caps == nullptr) return -EINVAL;
  *caps = dev->caps;
  return 0;
}

int vsl_get_usage(vsl_dev* dev, vsl_usage* usage) {
  if (!ValidDevice(dev) || usage == nullptr) return -EINVAL;
  Op op;
  op.kind = Op::kUsage;
  const auto r = vsl::sdk::RunSync(dev, &op);
  if (r == 0) *usage = op.usage;
  return static_cast<int>(r);
}

void* vsl_buf_alloc(vsl_dev* dev, size_t bytes) {
  if (!ValidDevice(dev)) return nullptr;
  return dev->backend->BufAlloc(bytes);
}

void vsl_buf_free(vsl_dev* dev, void* buf) {
  if (buf == nullptr || !ValidDevice(dev)) return;
  dev->backend->BufFree(buf);
}

int vsl_read(vsl_dev* dev, uint64_t lba, uint32_t count, void* buf) {
  if (int e = vsl::sdk::CheckIo(dev, count, buf)) return e;
  Op op;
  op.kind = Op::kRead;
  op.lba = lba;
  op.count = count;
  op.buf = buf;
  return static_cast<int>(vsl::sdk::RunSync(dev, &op));
}

int vsl_write(vsl_dev* dev, uint64_t lba, uint32_t count, const void* buf, uint32_t flags) {
  if (int e = vsl::sdk::CheckIo(dev, count, buf)) return e;
  if ((flags & ~VSL_FUA) != 0) return -EINVAL;
  Op op;
  op.kind = Op::kWrite;
  op.lba = lba;
  op.count = count;
  op.buf = const_cast<void*>(buf);
  op.flags = flags;
  return static_cast<int>(vsl::sdk::RunSync(dev, &op));
}

int vsl_trim(vsl_dev* dev, uint64_t lba, uint64_t count) {
  if (!ValidDevice(dev) || count == 0) return -EINVAL;
  Op op;
  op.kind = Op::kTrim;
  op.lba = lba;
  op.count = count;
  return static_cast<int>(vsl::sdk::RunSync(dev, &op));
}

int vsl_flush(vsl_dev* dev) {
  if (!ValidDevice(dev)) return -EINVAL;
  Op op;
  op.kind = Op::kFlush;
  return static_cast<int>(vsl::sdk::RunSync(dev, &op));
}

int vsl_write_atomic(vsl_dev* dev, const vsl_vec* vecs, uint32_t n, uint32_t flags) {
  if (int e = vsl::sdk::CheckVecs(dev, vecs, n)) return e;
  if ((flags & ~VSL_FUA) != 0) return -EINVAL;
  Op op;
  op.kind = Op::kAtomic;
  op.vecs.assign(vecs, vecs + n);
  op.flags = flags;
  return static_cast<int>(vsl::sdk::RunSync(dev, &op));
}

int64_t vsl_exists(vsl_dev* dev, uint64_t lba, uint64_t count) {
  if (!ValidDevice(dev) || count == 0) return -EINVAL;
  Op op;
  op.kind = Op::kExists;
  op.lba = lba;
  op.count = count;
  return vsl::sdk::RunSync(dev, &op);
}

int vsl_mapped_ranges(vsl_dev* dev, uint64_t lba, uint64_t count, vsl_range* out, uint32_t max,
                      uint32_t* n, uint64_t* next) {
  if (!ValidDevice(dev) || out == nullptr || max == 0 || n == nullptr || count == 0) return -EINVAL;
  Op op;
  op.kind = Op::kRuns;
  op.lba = lba;
  op.count = count;
  op.max_runs = max;
  const auto r = vsl::sdk::RunSync(dev, &op);
  if (r != 0) return static_cast<int>(r);
  if (!op.runs.empty()) std::memcpy(out, op.runs.data(), op.runs.size() * sizeof(vsl_range));
  *n = static_cast<uint32_t>(op.runs.size());
  if (next != nullptr) *next = op.next;
  return 0;
}

int vsl_read_async(vsl_dev* dev, uint64_t lba, uint32_t count, void* buf, vsl_done_fn fn, void* arg) {
  if (int e = vsl::sdk::CheckIo(dev, count, buf)) return e;
  return vsl::sdk::Submit(dev, vsl::sdk::NewOp(dev, Op::kRead, lba, count, buf, 0), fn, arg);
}

int vsl_write_async(vsl_dev* dev, uint64_t lba, uint32_t count, const void* buf, uint32_t flags,
                    vsl_done_fn fn, void* arg) {
  if (int e = vsl::sdk::CheckIo(dev, count, buf)) return e;
  if ((flags & ~VSL_FUA) != 0) return -EINVAL;
  return vsl::sdk::Submit(dev, vsl::sdk::NewOp(dev, Op::kWrite, lba, count, const_cast<void*>(buf), flags),
                          fn, arg);
}

int vsl_trim_async(vsl_dev* dev, uint64_t lba, uint64_t count, vsl_done_fn fn, void* arg) {
  if (!ValidDevice(dev) || count == 0) return -EINVAL;
  return vsl::sdk::Submit(dev, vsl::sdk::NewOp(dev, Op::kTrim, lba, count, nullptr, 0), fn, arg);
}

int vsl_flush_async(vsl_dev* dev, vsl_done_fn fn, void* arg) {
  if (!ValidDevice(dev)) return -EINVAL;
  return vsl::sdk::Submit(dev, vsl::sdk::NewOp(dev, Op::kFlush, 0, 0, nullptr, 0), fn, arg);
}

int vsl_write_atomic_async(vsl_dev* dev, const vsl_vec* vecs, uint32_t n, uint32_t flags,
                           vsl_done_fn fn, void* arg) {
  if (int e = vsl::sdk::CheckVecs(dev, vecs, n)) return e;
  if ((flags & ~VSL_FUA) != 0) return -EINVAL;
  Op* op = vsl::sdk::NewOp(dev, Op::kAtomic, 0, 0, nullptr, flags);
  op->vecs.assign(vecs, vecs + n);
  return vsl::sdk::Submit(dev, op, fn, arg);
}

int vsl_poll(vsl_dev* dev, uint32_t min, uint32_t max, int timeout_ms) {
  if (!ValidDevice(dev)) return -EINVAL;
  // The waits' state, captured by reference: the callables below stay within
  // std::function's inline storage (no allocation per poll).
  struct Wait {
    vsl_dev* dev;
    uint32_t min;
    int timeout_ms;
    std::chrono::steady_clock::time_point deadline;
    bool Have() const { return dev->completed.size() >= std::max<uint32_t>(min, 1) || min == 0; }  // under mu
  } w{dev, min, timeout_ms, std::chrono::steady_clock::time_point::max()};
  if (min > 0 && timeout_ms != 0) {
    if (timeout_ms > 0) w.deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    dev->backend->WaitUntil(
        [&w] {
          std::lock_guard<std::mutex> l(w.dev->mu);
          return w.Have() || (w.timeout_ms > 0 && std::chrono::steady_clock::now() >= w.deadline);
        },
        [&w] {
          const uint64_t want = std::max<uint32_t>(w.min, 1);
          vsl_dev* d = w.dev;
          if (vsl::sdk::SpinForCompletion(d, [d, want] {
                return d->completed_count.load(std::memory_order_acquire) >= want;
              })) {
            return;
          }
          const auto t0 = std::chrono::steady_clock::now();
          std::unique_lock<std::mutex> l(d->mu);
          if (w.timeout_ms < 0) {
            d->cv.wait(l, [&w] { return w.Have(); });
          } else {
            d->cv.wait_until(l, w.deadline, [&w] { return w.Have(); });
          }
          d->spin.NoteBlocked(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                  std::chrono::steady_clock::now() - t0).count());
        });
  }
  // The completions there now (at most `max`), taken in chunks so the callbacks run
  // without the lock and nothing is allocated; completions that arrive meanwhile wait
  // for the next poll.
  constexpr std::size_t kChunk = 32;
  vsl_dev::Completed run[kChunk];
  std::size_t left = SIZE_MAX, done = 0;
  while (left != 0) {
    std::size_t n;
    {
      std::lock_guard<std::mutex> l(dev->mu);
      if (left == SIZE_MAX) left = max == 0 ? dev->completed.size() : std::min<std::size_t>(max, dev->completed.size());
      n = std::min(left, kChunk);
      for (std::size_t i = 0; i < n; ++i) {
        run[i] = dev->completed.front();
        dev->completed.pop_front();
      }
      dev->completed_count.fetch_sub(n, std::memory_order_relaxed);
    }
    left -= n;
    for (std::size_t i = 0; i < n; ++i) {
      dev->inflight.fetch_sub(1);
      run[i].fn(run[i].arg, run[i].result);
    }
    done += n;
  }
  return static_cast<int>(done);
}

uint32_t vsl_inflight(vsl_dev* dev) { return ValidDevice(dev) ? dev->inflight.load() : 0; }

}  // extern "C"
