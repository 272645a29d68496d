// Attached backend: requests go to vsld through the shared-memory rings of shm_format.h.
// Buffers inside the shared data area (vsl_buf_alloc) are passed by offset; others are
// copied through bounce space taken from the same area. A completion thread drains the
// completion ring and watches the socket: when vsld dies every request in flight, and
// every one after, completes with -ENOTCONN.
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "sdk/src/device.h"
#include "sdk/src/shm_format.h"

namespace vsl::sdk {
namespace {

using namespace shm;

constexpr uint32_t kEntries = 1024;
constexpr uint64_t kDataBytes = uint64_t{96} << 20;
constexpr uint64_t kGrain = 4096;

// First-fit allocator over the data area, in kGrain units. Thread-safe.
class AreaAllocator {
 public:
  explicit AreaAllocator(uint64_t bytes) { free_[0] = bytes; }
  // Offset of `bytes` (rounded up), or UINT64_MAX when there is no room (`wait`: until
  // there is, or `give_up()` holds).
  uint64_t Alloc(uint64_t bytes, bool wait, const std::function<bool()>& give_up) {
    const uint64_t need = std::max<uint64_t>(kGrain, (bytes + kGrain - 1) / kGrain * kGrain);
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      for (auto it = free_.begin(); it != free_.end(); ++it) {
        if (it->second < need) continue;
        const uint64_t off = it->first;
        const uint64_t left = it->second - need;
        free_.erase(it);
        if (left != 0) free_[off + need] = left;
        used_[off] = need;
        return off;
      }
      if (!wait || give_up()) return UINT64_MAX;
      cv_.wait_for(l, std::chrono::milliseconds(50));
    }
  }
  bool Owns(uint64_t off) {
    std::lock_guard<std::mutex> l(mu_);
    return used_.count(off) != 0;
  }
  void Free(uint64_t off) {
    std::lock_guard<std::mutex> l(mu_);
    auto u = used_.find(off);
    if (u == used_.end()) return;
    uint64_t len = u->second;
    used_.erase(u);
    auto next = free_.lower_bound(off);
    if (next != free_.end() && next->first == off + len) {
      len += next->second;
      next = free_.erase(next);
    }
    if (next != free_.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == off) {
        prev->second += len;
        cv_.notify_all();
        return;
      }
    }
    free_[off] = len;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, uint64_t> free_, used_;
};

class AttachBackend : public Backend {
 public:
  ~AttachBackend() override { Stop(); }

  int Connect(const std::string& path, const std::string& lun) {
    if (lun.empty() || lun.size() >= sizeof(Hello::lun) || path.size() >= sizeof(sockaddr_un::sun_path)) {
      return -EINVAL;
    }
    sock_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path, path.c_str(), path.size());
    if (::connect(sock_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      return errno == ENOENT ? -ENOENT : -errno;
    }
    region_bytes_ = DataOffset(kEntries) + kDataBytes;
    memfd_ = ::memfd_create("openvsl-sdk", MFD_CLOEXEC);
    sq_efd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    cq_efd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    wake_efd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (memfd_ < 0 || sq_efd_ < 0 || cq_efd_ < 0 || wake_efd_ < 0 ||
        ::ftruncate(memfd_, static_cast<off_t>(region_bytes_)) != 0) {
      return -errno;
    }
    void* p = ::mmap(nullptr, region_bytes_, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
    if (p == MAP_FAILED) return -ENOMEM;
    region_ = static_cast<uint8_t*>(p);
    hdr_ = new (region_) Header{};
    hdr_->magic = kRegionMagic;
    hdr_->version = kVersion;
    hdr_->entries = kEntries;
    hdr_->sq_offset = HeaderBytes();
    hdr_->cq_offset = HeaderBytes() + SqBytes(kEntries);
    hdr_->data_offset = DataOffset(kEntries);
    hdr_->data_bytes = kDataBytes;
    sq_ = reinterpret_cast<Sqe*>(region_ + hdr_->sq_offset);
    cq_ = reinterpret_cast<Cqe*>(region_ + hdr_->cq_offset);
    data_ = region_ + hdr_->data_offset;
    alloc_ = std::make_unique<AreaAllocator>(kDataBytes);
    Hello h{};
    h.magic = kHelloMagic;
    h.version = kVersion;
    h.entries = kEntries;
    h.region_bytes = region_bytes_;
    h.data_bytes = kDataBytes;
    std::memcpy(h.lun, lun.c_str(), lun.size());
    if (!SendHello(sock_, h, {memfd_, sq_efd_, cq_efd_})) return -ENOTCONN;
    Welcome w{};
    timeval tv{30, 0};
    ::setsockopt(sock_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (::recv(sock_, &w, sizeof(w), MSG_WAITALL) != static_cast<ssize_t>(sizeof(w))) return -ENOTCONN;
    if (w.result != 0) {
      w.message[sizeof(w.message) - 1] = '\0';
      message_ = w.message;
      return w.result;
    }
    caps_ = w.caps;
    caps_.queue_depth = kEntries;
    slots_.resize(kEntries);
    for (uint32_t i = 0; i < kEntries; ++i) free_slots_.push_back(kEntries - 1 - i);
    cq_head_ = hdr_->cq_head.value.load(std::memory_order_relaxed);
    thread_ = std::thread([this] { CompletionLoop(); });
    return 0;
  }
  const std::string& message() const { return message_; }

  const vsl_caps& caps() const override { return caps_; }

  void* BufAlloc(size_t bytes) override {
    const uint64_t off = alloc_->Alloc(bytes, false, [] { return true; });
    if (off == UINT64_MAX) return Backend::BufAlloc(bytes);  // full: an ordinary (bounced) buffer
    return data_ + off;
  }
  void BufFree(void* p) override {
    auto* b = static_cast<uint8_t*>(p);
    if (b >= data_ && b < data_ + kDataBytes) return alloc_->Free(static_cast<uint64_t>(b - data_));
    Backend::BufFree(p);
  }

  void Run(Op* op, Function<void()> done) override {
    if (dead_.load()) {
      op->result = -ENOTCONN;
      return done();
    }
    uint32_t slot;
    {
      std::unique_lock<std::mutex> l(mu_);
      slot_cv_.wait(l, [this] { return !free_slots_.empty() || dead_.load(); });
      if (dead_.load()) {
        l.unlock();
        op->result = -ENOTCONN;
        return done();
      }
      slot = free_slots_.back();
      free_slots_.pop_back();
      slots_[slot].state = SlotState::kBuilding;
    }
    Pending& p = slots_[slot];
    p.op = op;
    p.done = std::move(done);
    p.bounces.clear();
    p.read_back = UINT64_MAX;
    p.out = UINT64_MAX;
    Sqe e{};
    e.tag = slot;
    e.lba = op->lba;
    e.count = op->count;
    e.flags = op->flags;
    const uint32_t sb = caps_.sector_bytes;
    bool ok = true;
    switch (op->kind) {
      case Op::kRead:
      case Op::kWrite:
        e.opcode = op->kind == Op::kRead ? kRead : kWrite;
        e.buf = Place(p, op->buf, op->count * sb, op->kind == Op::kWrite, &ok);
        if (op->kind == Op::kRead && !InRegion(op->buf, op->count * sb)) p.read_back = e.buf;
        break;
      case Op::kTrim:
        e.opcode = kTrim;
        break;
      case Op::kFlush:
        e.opcode = kFlush;
        break;
      case Op::kAtomic: {
        e.opcode = kAtomic;
        e.count = op->vecs.size();
        const uint64_t voff = Bounce(p, op->vecs.size() * sizeof(ShmVec), &ok);
        for (std::size_t i = 0; ok && i < op->vecs.size(); ++i) {
          const vsl_vec& v = op->vecs[i];
          ShmVec sv{v.lba, v.count, 0, v.op, 0};
          if (v.op == VSL_VEC_WRITE) sv.buf = Place(p, const_cast<void*>(v.buf), v.count * sb, true, &ok);
          std::memcpy(data_ + voff + i * sizeof(ShmVec), &sv, sizeof(sv));
        }
        e.buf = voff;
        break;
      }
      case Op::kExists:
        e.opcode = kExists;
        break;
      case Op::kRuns:
        e.opcode = kRuns;
        e.max_runs = op->max_runs;
        e.out = p.out = Bounce(p, uint64_t{op->max_runs} * sizeof(vsl_range), &ok);
        break;
      case Op::kUsage:
        e.opcode = kUsage;
        e.out = p.out = Bounce(p, sizeof(vsl_usage), &ok);
        break;
    }
    if (!ok) return Finish(slot, dead_.load() ? -ENOTCONN : -ENOMEM, 0, 0);
    bool gone;
    {
      // Marked submitted before it is in the ring, so its completion always finds it so.
      std::lock_guard<std::mutex> l(mu_);
      gone = dead_.load();
      if (!gone) p.state = SlotState::kSubmitted;
    }
    if (gone) return Finish(slot, -ENOTCONN, 0, 0);
    {
      std::lock_guard<std::mutex> l(sq_mu_);
      const uint32_t t = hdr_->sq_tail.value.load(std::memory_order_relaxed);
      sq_[t & (kEntries - 1)] = e;
      hdr_->sq_tail.value.store(t + 1, std::memory_order_seq_cst);
    }
    // vsld's engine thread takes it from the ring while it is awake (shm_format.h).
    if (hdr_->sq_need_wakeup.value.load(std::memory_order_seq_cst) == 0) return;
    const uint64_t one = 1;
    (void)!::write(sq_efd_, &one, sizeof(one));
  }

  int Close() override {
    Stop();
    return 0;
  }

 private:
  // A slot's life: taken by Run (kBuilding), in the ring (kSubmitted), answered (back to
  // kFree by Finish). Only the one who moves it out of kSubmitted finishes it: the
  // completion ring, or the discovery that vsld died.
  enum class SlotState : uint8_t { kFree, kBuilding, kSubmitted };
  struct Pending {
    SlotState state = SlotState::kFree;
    Op* op = nullptr;
    Function<void()> done;
    std::vector<uint64_t> bounces;
    uint64_t read_back = UINT64_MAX;  // bounce offset to copy a read out of
    uint64_t out = UINT64_MAX;        // outputs (runs, usage)
  };

  bool InRegion(const void* p, uint64_t len) const {
    const auto* b = static_cast<const uint8_t*>(p);
    return b >= data_ && b <= data_ + kDataBytes && len <= static_cast<uint64_t>(data_ + kDataBytes - b);
  }
  uint64_t Bounce(Pending& p, uint64_t bytes, bool* ok) {
    if (!*ok) return 0;
    const uint64_t off = alloc_->Alloc(bytes, true, [this] { return dead_.load(); });
    if (off == UINT64_MAX) {
      *ok = false;
      return 0;
    }
    p.bounces.push_back(off);
    return off;
  }
  // The data-area offset of `buf`: itself when in the area (zero copy), else a bounce
  // (filled now for data going to vsld).
  uint64_t Place(Pending& p, void* buf, uint64_t bytes, bool copy_in, bool* ok) {
    if (InRegion(buf, bytes)) return static_cast<uint64_t>(static_cast<uint8_t*>(buf) - data_);
    const uint64_t off = Bounce(p, bytes, ok);
    if (*ok && copy_in) std::memcpy(data_ + off, buf, bytes);
    return off;
  }

  void Finish(uint32_t slot, int64_t result, uint64_t next, uint64_t runs) {
    Pending& p = slots_[slot];
    Op* op = p.op;
    op->result = result;
    if (result >= 0 && p.read_back != UINT64_MAX) {
      std::memcpy(op->buf, data_ + p.read_back, op->count * caps_.sector_bytes);
    }
    if (result == 0 && op->kind == Op::kRuns) {
      op->runs.resize(std::min<uint64_t>(runs, op->max_runs));
      if (!op->runs.empty()) std::memcpy(op->runs.data(), data_ + p.out, op->runs.size() * sizeof(vsl_range));
      op->next = next;
    }
    if (result == 0 && op->kind == Op::kUsage) std::memcpy(&op->usage, data_ + p.out, sizeof(vsl_usage));
    for (uint64_t b : p.bounces) alloc_->Free(b);
    Function<void()> done = std::move(p.done);
    p.op = nullptr;
    {
      std::lock_guard<std::mutex> l(mu_);
      p.state = SlotState::kFree;
      free_slots_.push_back(slot);
      slot_cv_.notify_one();
    }
    done();
  }

  // Takes a submitted slot for finishing; false if it is not (vsld answered a tag twice,
  // or a request already failed).
  bool Claim(uint32_t slot) {
    std::lock_guard<std::mutex> l(mu_);
    if (slots_[slot].state != SlotState::kSubmitted) return false;
    slots_[slot].state = SlotState::kBuilding;
    return true;
  }

  void Poll() override {
    std::unique_lock<std::mutex> l(reap_mu_, std::try_to_lock);
    if (l.owns_lock() && region_ != nullptr) Reap();
  }
  // While a waiter spins, vsld leaves the completion eventfd alone (the waiter reaps);
  // after it stops, one more reap takes what vsld published before it saw the count
  // drop (shm_format.h, cq_pollers).
  void SpinBegin() override {
    if (region_ != nullptr) hdr_->cq_pollers.value.fetch_add(1, std::memory_order_seq_cst);
  }
  void SpinEnd() override {
    if (region_ == nullptr) return;
    hdr_->cq_pollers.value.fetch_sub(1, std::memory_order_seq_cst);
    std::lock_guard<std::mutex> l(reap_mu_);
    if (region_ != nullptr) Reap();
  }

  // Finishes every completion on the ring. Under reap_mu_ (the completion thread and
  // spinning waiters both reap; one at a time, in ring order).
  void Reap() {
    const uint32_t tail = hdr_->cq_tail.value.load(std::memory_order_seq_cst);
    while (cq_head_ != tail) {
      const Cqe c = cq_[cq_head_ & (kEntries - 1)];
      ++cq_head_;
      hdr_->cq_head.value.store(cq_head_, std::memory_order_release);
      if (c.tag < kEntries && Claim(static_cast<uint32_t>(c.tag))) {
        Finish(static_cast<uint32_t>(c.tag), c.result, c.next, c.runs);
      }
    }
  }

  void CompletionLoop() {
    pollfd pf[3] = {{cq_efd_, POLLIN, 0}, {sock_, POLLIN, 0}, {wake_efd_, POLLIN, 0}};
    for (;;) {
      if (::poll(pf, 3, -1) < 0 && errno != EINTR) break;
      if (pf[0].revents & POLLIN) {
        uint64_t v;
        (void)!::read(cq_efd_, &v, sizeof(v));
      }
      {
        std::lock_guard<std::mutex> l(reap_mu_);
        Reap();
      }
      if (pf[2].revents != 0) break;  // Stop
      if (pf[1].revents != 0) {
        char b;
        if (::recv(sock_, &b, 1, MSG_DONTWAIT) <= 0) {
          // vsld is gone: whatever it had not answered never will be.
          std::vector<uint32_t> lost;
          {
            std::lock_guard<std::mutex> l(mu_);
            dead_.store(true);
            for (uint32_t i = 0; i < kEntries; ++i) {
              if (slots_[i].state == SlotState::kSubmitted) {
                slots_[i].state = SlotState::kBuilding;
                lost.push_back(i);
              }
            }
          }
          for (uint32_t i : lost) Finish(i, -ENOTCONN, 0, 0);
          slot_cv_.notify_all();
          pf[1].fd = -1;  // keep serving Stop only
        }
      }
    }
  }

  void Stop() {
    if (thread_.joinable()) {
      const uint64_t one = 1;
      (void)!::write(wake_efd_, &one, sizeof(one));
      thread_.join();
    }
    std::lock_guard<std::mutex> l(reap_mu_);  // no waiter is reaping the ring it unmaps
    if (region_ != nullptr) {
      ::munmap(region_, region_bytes_);
      region_ = nullptr;
    }
    for (int* fd : {&sock_, &memfd_, &sq_efd_, &cq_efd_, &wake_efd_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  int sock_ = -1, memfd_ = -1, sq_efd_ = -1, cq_efd_ = -1, wake_efd_ = -1;
  uint8_t* region_ = nullptr;
  uint64_t region_bytes_ = 0;
  Header* hdr_ = nullptr;
  Sqe* sq_ = nullptr;
  Cqe* cq_ = nullptr;
  uint8_t* data_ = nullptr;
  std::unique_ptr<AreaAllocator> alloc_;
  vsl_caps caps_{};
  std::string message_;
  std::atomic<bool> dead_{false};
  std::mutex mu_;  // free_slots_
  std::condition_variable slot_cv_;
  std::vector<uint32_t> free_slots_;
  std::vector<Pending> slots_;
  std::mutex sq_mu_;  // submitters
  std::mutex reap_mu_;    // the completion ring's consumer side
  uint32_t cq_head_ = 0;  // next completion to take (under reap_mu_)
  std::thread thread_;
};

}  // namespace
}  // namespace vsl::sdk

extern "C" int vsl_attach(const char* socket_path, const char* lun_name, vsl_dev** out) {
  if (out == nullptr) return -EINVAL;
  *out = nullptr;
  if (lun_name == nullptr) return vsl::sdk::SetLastError(-EINVAL, "no LUN name given");
  auto be = std::make_unique<vsl::sdk::AttachBackend>();
  const std::string path = socket_path ? socket_path : "/run/vsld-sdk.sock";
  const int r = be->Connect(path, lun_name);
  if (r != 0) {
    return vsl::sdk::SetLastError(
        r, be->message().empty() ? std::string(vsl_strerror(r)) + " (" + path + ")" : be->message());
  }
  *out = vsl::sdk::NewDevice(std::move(be));
  return vsl::sdk::SetLastError(0, "");
}
