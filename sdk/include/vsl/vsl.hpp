// OpenVSL native SDK: a C++ wrapper over the C API (vsl.h). Header-only, so it adds no
// ABI of its own: everything goes through the vsl_* functions. Results are the C API's
// (0 / count or -errno); no exceptions. Thread-safety as the C API: a Device may be used
// by several threads; async callbacks run in the thread calling Poll.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "vsl/vsl.h"

namespace vsl::sdk {

class Device {
 public:
  // In-process (the application owns the card). Stores the device in *out, or returns
  // -errno and leaves *out empty.
  static int OpenCard(const std::string& card_dir, uint32_t lun, std::unique_ptr<Device>* out) {
    vsl_dev* d = nullptr;
    const int r = vsl_open_card(card_dir.c_str(), lun, &d);
    if (r == 0) out->reset(new Device(d));
    return r;
  }
  // Attached to a running vsld (socket_path empty: the default).
  static int Attach(const std::string& socket_path, const std::string& lun_name,
                    std::unique_ptr<Device>* out) {
    vsl_dev* d = nullptr;
    const int r = vsl_attach(socket_path.empty() ? nullptr : socket_path.c_str(), lun_name.c_str(), &d);
    if (r == 0) out->reset(new Device(d));
    return r;
  }
  // Takes ownership of a handle from the C API.
  explicit Device(vsl_dev* d) : d_(d) { vsl_get_caps(d_, &caps_); }
  ~Device() { vsl_close(d_); }
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;
  // Closes now and returns vsl_close's result (the destructor then does nothing).
  int Close() {
    const int r = vsl_close(d_);
    d_ = nullptr;
    return r;
  }

  vsl_dev* handle() const { return d_; }
  const vsl_caps& caps() const { return caps_; }
  uint32_t sector_bytes() const { return caps_.sector_bytes; }
  uint64_t sectors() const { return caps_.sectors; }
  int Usage(vsl_usage* u) { return vsl_get_usage(d_, u); }

  int Read(uint64_t lba, uint32_t count, void* buf) { return vsl_read(d_, lba, count, buf); }
  int Write(uint64_t lba, uint32_t count, const void* buf, uint32_t flags = 0) {
    return vsl_write(d_, lba, count, buf, flags);
  }
  int Trim(uint64_t lba, uint64_t count) { return vsl_trim(d_, lba, count); }
  int Flush() { return vsl_flush(d_); }

  // An atomic batch under construction: Write / Trim add vectors, Commit applies them all
  // or none. Buffers must stay valid until Commit returns.
  class Batch {
   public:
    explicit Batch(Device& d) : d_(d) {}
    Batch& Write(uint64_t lba, uint64_t count, const void* buf) {
      vecs_.push_back({lba, count, buf, VSL_VEC_WRITE, 0});
      return *this;
    }
    Batch& Trim(uint64_t lba, uint64_t count) {
      vecs_.push_back({lba, count, nullptr, VSL_VEC_TRIM, 0});
      return *this;
    }
    std::size_t size() const { return vecs_.size(); }
    int Commit(uint32_t flags = 0) {
      return vsl_write_atomic(d_.d_, vecs_.data(), static_cast<uint32_t>(vecs_.size()), flags);
    }

   private:
    Device& d_;
    std::vector<vsl_vec> vecs_;
  };
  Batch NewBatch() { return Batch(*this); }
  int WriteAtomic(const std::vector<vsl_vec>& vecs, uint32_t flags = 0) {
    return vsl_write_atomic(d_, vecs.data(), static_cast<uint32_t>(vecs.size()), flags);
  }

  int64_t Exists(uint64_t lba, uint64_t count = 1) { return vsl_exists(d_, lba, count); }
  // Calls fn(lba, count) for every run of mapped sectors in [lba, lba + count), in order;
  // stops early when fn returns false. Returns 0 or -errno.
  int ForEachMappedRange(uint64_t lba, uint64_t count,
                         const std::function<bool(uint64_t, uint64_t)>& fn) {
    const uint64_t end = count > caps_.sectors - std::min(lba, caps_.sectors) ? caps_.sectors : lba + count;
    vsl_range runs[256];
    while (lba < end) {
      uint32_t n = 0;
      uint64_t next = end;
      const int r = vsl_mapped_ranges(d_, lba, end - lba, runs, 256, &n, &next);
      if (r != 0) return r;
      for (uint32_t i = 0; i < n; ++i) {
        if (!fn(runs[i].lba, runs[i].count)) return 0;
      }
      if (next <= lba) break;
      lba = next;
    }
    return 0;
  }

  // Asynchronous I/O with a C++ callable; it runs in the thread calling Poll.
  using Callback = std::function<void(int)>;
  int ReadAsync(uint64_t lba, uint32_t count, void* buf, Callback cb) {
    return Async(std::move(cb), [&](vsl_done_fn fn, void* arg) {
      return vsl_read_async(d_, lba, count, buf, fn, arg);
    });
  }
  int WriteAsync(uint64_t lba, uint32_t count, const void* buf, Callback cb, uint32_t flags = 0) {
    return Async(std::move(cb), [&](vsl_done_fn fn, void* arg) {
      return vsl_write_async(d_, lba, count, buf, flags, fn, arg);
    });
  }
  int WriteAtomicAsync(const std::vector<vsl_vec>& vecs, Callback cb, uint32_t flags = 0) {
    return Async(std::move(cb), [&](vsl_done_fn fn, void* arg) {
      return vsl_write_atomic_async(d_, vecs.data(), static_cast<uint32_t>(vecs.size()), flags, fn, arg);
    });
  }
  int Poll(uint32_t min = 1, uint32_t max = 0, int timeout_ms = -1) {
    return vsl_poll(d_, min, max, timeout_ms);
  }
  uint32_t inflight() const { return vsl_inflight(d_); }

 private:
  template <typename SubmitFn>
  static int Async(Callback cb, SubmitFn submit) {
    auto* heap = new Callback(std::move(cb));
    const int r = submit(
        [](void* arg, int result) {
          std::unique_ptr<Callback> c(static_cast<Callback*>(arg));
          (*c)(result);
        },
        heap);
    if (r != 0) delete heap;
    return r;
  }

  vsl_dev* d_;
  vsl_caps caps_{};
};

}  // namespace vsl::sdk
