#include "sdk/src/shm_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <thread>

#include "sdk/src/lun_exec.h"
#include "sdk/src/shm_format.h"
#include "vsl/core/free_list.h"
#include "vsl/core/log.h"
#include "vsl/core/socket.h"
#include "vsl/core/spin.h"
#include "vsl/core/thread_name.h"

namespace vsl::sdk {

using namespace shm;

// A session is its LUN's engine's poller (RealClock::Poller): while the engine's thread
// is awake it takes submissions off the ring itself, so the application need not wake
// this session's thread for each one.
class ShmServer::Session final : public RealClock::Poller {
 public:
  Session(ShmServer& server, int sock) : server_(server), sock_(sock) {}
  ~Session() {
    if (region_ != nullptr) ::munmap(region_, region_bytes_);
    for (int fd : {sock_, memfd_, sq_efd_, cq_efd_}) {
      if (fd >= 0) ::close(fd);
    }
  }

  void Run() {
    if (!Handshake()) return;
    SetThreadName("vsl-sdk-" + lun_->name());
    Logger("sdk")->info("application attached to {} ({} ring entries, {} MiB shared)", lun_->name(), entries_,
                        data_bytes_ >> 20);
    const bool polled = lun_->engine().AddPoller(this);
    Serve();
    if (polled) lun_->engine().RemovePoller(this);
    // Requests still on the engine write into the region: wait for them before it goes.
    std::unique_lock<std::mutex> l(mu_);
    idle_.wait(l, [this] { return inflight_ == 0; });
    Logger("sdk")->info("application detached from {}", lun_->name());
  }

 private:
  bool Reply(int result, const std::string& why) {
    Welcome w{};
    w.result = result;
    w.caps = caps_;
    std::snprintf(w.message, sizeof(w.message), "%s", why.c_str());
    return ::send(sock_, &w, sizeof(w), MSG_NOSIGNAL) == static_cast<ssize_t>(sizeof(w));
  }

  bool Handshake() {
    timeval tv{5, 0};
    ::setsockopt(sock_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    Hello h{};
    iovec iov{&h, sizeof(h)};
    alignas(cmsghdr) char ctrl[CMSG_SPACE(3 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctrl;
    msg.msg_controllen = sizeof(ctrl);
    const ssize_t n = ::recvmsg(sock_, &msg, MSG_CMSG_CLOEXEC);
    int fds[3] = {-1, -1, -1};
    int nfds = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        nfds = static_cast<int>((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
        std::memcpy(fds, CMSG_DATA(c), std::min(nfds, 3) * sizeof(int));
      }
    }
    memfd_ = fds[0];
    sq_efd_ = fds[1];
    cq_efd_ = fds[2];
    if (n != static_cast<ssize_t>(sizeof(h)) || h.magic != kHelloMagic || nfds != 3) {
      Reply(-EPROTO, "malformed hello (expected the hello and three descriptors)");
      return false;
    }
    if (h.version != kVersion) {
      Reply(-EPROTONOSUPPORT, "SDK protocol version " + std::to_string(h.version) + " (vsld speaks " + std::to_string(kVersion) + ")");
      return false;
    }
    h.lun[sizeof(h.lun) - 1] = '\0';
    struct stat st{};
    if (h.entries == 0 || (h.entries & (h.entries - 1)) != 0 || h.entries > kMaxEntries || h.data_bytes == 0 ||
        h.data_bytes > kMaxDataBytes || h.region_bytes != DataOffset(h.entries) + h.data_bytes ||
        ::fstat(memfd_, &st) != 0 || static_cast<uint64_t>(st.st_size) < h.region_bytes) {
      Reply(-EINVAL, "ring or region sizes out of range");
      return false;
    }
    auto l = server_.resolve_(h.lun);
    if (!l.ok()) {
      Reply(l.status().code() == StatusCode::kNotFound ? -ENOENT : l.status().ToErrno(),
            std::string(l.status().message()));
      return false;
    }
    lun_ = *l;
    if (Status s = LunCaps(*lun_, &caps_); !s.ok()) {
      Reply(-EIO, std::string(s.message()));
      return false;
    }
    void* p = ::mmap(nullptr, h.region_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
    if (p == MAP_FAILED) {
      Reply(-ENOMEM, "cannot map the shared region");
      return false;
    }
    region_ = static_cast<uint8_t*>(p);
    region_bytes_ = h.region_bytes;
    entries_ = h.entries;
    data_bytes_ = h.data_bytes;
    hdr_ = reinterpret_cast<Header*>(region_);
    if (hdr_->magic != kRegionMagic || hdr_->entries != entries_ || hdr_->sq_offset != HeaderBytes() ||
        hdr_->cq_offset != HeaderBytes() + SqBytes(entries_) || hdr_->data_offset != DataOffset(entries_) ||
        hdr_->data_bytes != data_bytes_) {
      Reply(-EINVAL, "the shared region's header does not match the hello");
      return false;
    }
    sq_ = reinterpret_cast<Sqe*>(region_ + HeaderBytes());
    cq_ = reinterpret_cast<Cqe*>(region_ + HeaderBytes() + SqBytes(entries_));
    data_ = region_ + DataOffset(entries_);
    sq_head_ = hdr_->sq_head.value.load(std::memory_order_acquire);
    hdr_->sq_need_wakeup.value.store(1, std::memory_order_seq_cst);  // until the engine polls
    return Reply(0, "");
  }

  // A data-area range [off, off + len) checked against the area; null if outside.
  uint8_t* At(uint64_t off, uint64_t len) const {
    if (off > data_bytes_ || len > data_bytes_ - off) return nullptr;
    return data_ + off;
  }

  void Serve() {
    serve_thread_ = std::this_thread::get_id();
    pollfd p[3] = {{sq_efd_, POLLIN, 0}, {sock_, POLLIN, 0}, {server_.wake_[0], POLLIN, 0}};
    while (!server_.stopping_.load()) {
      // The application's next request usually follows within microseconds: poll the
      // ring before sleeping (a sleeping thread's wake-up costs tens of microseconds on
      // a VM). A request seen here is served without the eventfd being read; the count
      // it left makes the next poll() return at once, and is read then.
      // Only while this thread serves its requests itself (they complete inline on an
      // idle engine): when they complete on the engine's thread, that thread is awake
      // for them and a second spinner would only take its core.
      // While this thread serves the ring (spinning, and draining what its spin saw), the
      // engine's thread leaves the ring to it (Take).
      if (inline_last_) {
        self_polling_.store(true, std::memory_order_relaxed);
        if (idle_spin_.Spin([this] {
              return hdr_->sq_tail.value.load(std::memory_order_acquire) !=
                         hdr_->sq_head.value.load(std::memory_order_relaxed) ||
                     server_.stopping_.load();
            })) {
          Drain();
          continue;
        }
      }
      // Dekker with Arm: self_polling_ before the ring here, the arming before
      // self_polling_ there; so a request published unseen by both is seen by its
      // producer armed, and it wakes this thread.
      self_polling_.store(false, std::memory_order_seq_cst);
      if (hdr_->sq_tail.value.load(std::memory_order_seq_cst) != hdr_->sq_head.value.load(std::memory_order_relaxed)) {
        Drain();
        continue;
      }
      const auto t0 = std::chrono::steady_clock::now();
      if (::poll(p, 3, 1000) < 0 && errno != EINTR) return;
      idle_spin_.NoteBlocked(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
      if (p[1].revents != 0) {
        char b;
        if (::recv(sock_, &b, 1, MSG_DONTWAIT) <= 0) return;  // the application went away
      }
      if (p[0].revents & POLLIN) {
        uint64_t v;
        (void)!::read(sq_efd_, &v, sizeof(v));
      }
      Drain();
    }
  }

  void Drain() {
    std::lock_guard<std::mutex> l(drain_mu_);
    served_here_ = 0;
    DrainLocked();
    inline_last_ = served_here_ != 0;
  }
  // Under drain_mu_ (this thread, or the engine's as a poller); true when any was taken.
  bool DrainLocked() {
    const uint32_t tail = hdr_->sq_tail.value.load(std::memory_order_acquire);
    if (sq_head_ == tail) return false;
    while (sq_head_ != tail) {
      const Sqe e = sq_[sq_head_ & (entries_ - 1)];  // a copy: the application may scribble
      ++sq_head_;
      hdr_->sq_head.value.store(sq_head_, std::memory_order_release);
      Submit(e);
    }
    return true;
  }

  // RealClock::Poller, on the engine's thread. The requests are posted to the engine
  // (Submit's RunHere from the engine's own thread), not run inside Take.
  bool Take() override {
    if (self_polling_.load(std::memory_order_relaxed)) return false;
    std::unique_lock<std::mutex> l(drain_mu_, std::try_to_lock);
    return l.owns_lock() && DrainLocked();
  }
  // sq_head in the region is what a drainer last stored (the application may scribble on
  // it: then this is a wrong hint, and Take finds nothing).
  bool Ready() const override {
    return !self_polling_.load(std::memory_order_relaxed) &&
           hdr_->sq_tail.value.load(std::memory_order_acquire) !=
           hdr_->sq_head.value.load(std::memory_order_relaxed);
  }
  // Work the serving thread is about to take itself does not keep the engine awake.
  bool Arm() override {
    hdr_->sq_need_wakeup.value.store(1, std::memory_order_seq_cst);
    if (self_polling_.load(std::memory_order_seq_cst)) return false;
    return hdr_->sq_tail.value.load(std::memory_order_seq_cst) != hdr_->sq_head.value.load(std::memory_order_relaxed);
  }
  void Disarm() override { hdr_->sq_need_wakeup.value.store(0, std::memory_order_relaxed); }

  void Complete(uint64_t tag, int64_t result, uint64_t next = 0, uint64_t runs = 0) {
    {
      std::lock_guard<std::mutex> l(cq_mu_);
      const uint32_t t = hdr_->cq_tail.value.load(std::memory_order_relaxed);
      cq_[t & (entries_ - 1)] = {tag, result, next, runs};
      hdr_->cq_tail.value.store(t + 1, std::memory_order_seq_cst);
    }
    // An application thread spinning on the ring takes it from there (shm_format.h).
    if (hdr_->cq_pollers.value.load(std::memory_order_seq_cst) != 0) return;
    const uint64_t one = 1;
    (void)!::write(cq_efd_, &one, sizeof(one));
  }

  // An op for a request: from the session's free list (guarded by mu_), which grows to
  // the number of requests in flight; a request refused before it runs frees its op.
  std::unique_ptr<Op> TakeOp() {
    std::lock_guard<std::mutex> l(mu_);
    return std::unique_ptr<Op>(free_ops_.Take());
  }

  void Submit(const Sqe& e) {
    auto op = TakeOp();
    const uint32_t sb = caps_.sector_bytes;
    op->lba = e.lba;
    op->count = e.count;
    op->flags = e.flags & VSL_FUA;
    uint8_t* out = nullptr;
    switch (e.opcode) {
      case kRead:
      case kWrite:
        op->kind = e.opcode == kRead ? Op::kRead : Op::kWrite;
        if (e.count == 0 || e.count > caps_.max_io_sectors) return Complete(e.tag, -EINVAL);
        op->buf = At(e.buf, e.count * sb);
        if (op->buf == nullptr) return Complete(e.tag, -EINVAL);
        break;
      case kTrim:
        op->kind = Op::kTrim;
        break;
      case kFlush:
        op->kind = Op::kFlush;
        break;
      case kAtomic: {
        op->kind = Op::kAtomic;
        if (e.count == 0 || e.count > caps_.atomic_max_vectors) return Complete(e.tag, -EINVAL);
        const auto* v = reinterpret_cast<const ShmVec*>(At(e.buf, e.count * sizeof(ShmVec)));
        if (v == nullptr || e.buf % alignof(ShmVec) != 0) return Complete(e.tag, -EINVAL);
        for (uint64_t i = 0; i < e.count; ++i) {
          const ShmVec x = v[i];
          vsl_vec out_vec{x.lba, x.count, nullptr, x.op, 0};
          if (x.op == VSL_VEC_WRITE) {
            if (x.count > caps_.atomic_max_sectors) return Complete(e.tag, -EINVAL);
            out_vec.buf = At(x.buf, x.count * sb);
            if (out_vec.buf == nullptr) return Complete(e.tag, -EINVAL);
          } else if (x.op != VSL_VEC_TRIM) {
            return Complete(e.tag, -EINVAL);
          }
          op->vecs.push_back(out_vec);
        }
        break;
      }
      case kExists:
        op->kind = Op::kExists;
        break;
      case kRuns:
        op->kind = Op::kRuns;
        op->max_runs = static_cast<uint32_t>(std::min<uint64_t>(e.max_runs, 1u << 20));
        out = At(e.out, uint64_t{op->max_runs} * sizeof(vsl_range));
        if (op->max_runs == 0 || out == nullptr) return Complete(e.tag, -EINVAL);
        break;
      case kUsage:
        op->kind = Op::kUsage;
        out = At(e.out, sizeof(vsl_usage));
        if (out == nullptr) return Complete(e.tag, -EINVAL);
        break;
      default:
        return Complete(e.tag, -EINVAL);
    }
    {
      std::lock_guard<std::mutex> l(mu_);
      ++inflight_;
    }
    Op* raw = op.release();
    const uint64_t tag = e.tag;
    // On this session thread when the engine is idle (no hand-off); Complete takes only
    // cq_mu_ and mu_, which are not held here.
    raw->done = [this, raw, tag, out] {
      if (raw->result == 0 && raw->kind == Op::kRuns && !raw->runs.empty()) {
        std::memcpy(out, raw->runs.data(), raw->runs.size() * sizeof(vsl_range));
      } else if (raw->result == 0 && raw->kind == Op::kUsage) {
        std::memcpy(out, &raw->usage, sizeof(vsl_usage));
      }
      if (std::this_thread::get_id() == serve_thread_) ++served_here_;
      Complete(tag, raw->result, raw->next, raw->runs.size());
      std::lock_guard<std::mutex> l(mu_);
      free_ops_.Give(raw);
      if (--inflight_ == 0) idle_.notify_all();
    };
    lun_->engine().RunHere([this, raw] { ExecuteOnLun(*lun_, raw); });
  }

  ShmServer& server_;
  int sock_;
  AdaptiveSpin idle_spin_;
  std::thread::id serve_thread_;
  uint32_t served_here_ = 0;  // completions run on the serving thread (it only)
  bool inline_last_ = true;   // the last drain's requests completed here
  // This thread is spinning on the ring (their requests complete inline on an idle
  // engine): the engine's thread, polling, leaves the ring to it.
  std::atomic<bool> self_polling_{false};
  int memfd_ = -1, sq_efd_ = -1, cq_efd_ = -1;
  uint8_t* region_ = nullptr;
  uint64_t region_bytes_ = 0, data_bytes_ = 0;
  uint32_t entries_ = 0;
  Header* hdr_ = nullptr;
  Sqe* sq_ = nullptr;
  Cqe* cq_ = nullptr;
  uint8_t* data_ = nullptr;
  std::mutex drain_mu_;  // whoever takes from the submission ring: this thread or the engine's
  uint32_t sq_head_ = 0;  // guarded by drain_mu_
  card::Lun* lun_ = nullptr;
  vsl_caps caps_{};
  std::mutex cq_mu_;  // completers: the engine, and this thread for refused requests
  std::mutex mu_;
  std::condition_variable idle_;
  uint64_t inflight_ = 0;  // guarded by mu_
  FreeList<Op> free_ops_;  // guarded by mu_
};

Result<std::unique_ptr<ShmServer>> ShmServer::Start(const std::string& path, uint32_t mode, LunResolver resolve) {
  auto s = std::unique_ptr<ShmServer>(new ShmServer());
  s->path_ = path;
  s->resolve_ = std::move(resolve);
  VSL_ASSIGN_OR_RETURN(s->listen_fd_, ListenUnix(path, mode, "vsld (SDK socket)"));
  if (::pipe2(s->wake_, O_CLOEXEC) != 0) return Status::FromErrno(errno, "pipe");
  s->accept_thread_ = std::thread([p = s.get()] { p->Accept(); });
  return s;
}

ShmServer::~ShmServer() {
  stopping_.store(true);
  if (wake_[1] >= 0) (void)!::write(wake_[1], "x", 1);
  if (accept_thread_.joinable()) accept_thread_.join();
  std::list<std::thread> ts;
  {
    std::lock_guard<std::mutex> l(mu_);
    ts.swap(threads_);
  }
  for (auto& t : ts) t.join();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    ::unlink(path_.c_str());
  }
  for (int fd : wake_) {
    if (fd >= 0) ::close(fd);
  }
}

void ShmServer::Accept() {
  pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
  while (!stopping_.load()) {
    if (::poll(p, 2, -1) < 0 && errno != EINTR) return;
    if (p[1].revents != 0 || stopping_.load()) return;
    if ((p[0].revents & POLLIN) == 0) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++sessions_;
    std::lock_guard<std::mutex> l(mu_);
    // Sessions that ended are joined here, so a long-running vsld keeps no dead threads.
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (std::find(finished_.begin(), finished_.end(), it->get_id()) != finished_.end()) {
        finished_.erase(std::find(finished_.begin(), finished_.end(), it->get_id()));
        it->join();
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
    threads_.emplace_back([this, fd] {
      {
        Session s(*this, fd);
        s.Run();
      }
      --sessions_;
      std::lock_guard<std::mutex> l2(mu_);
      finished_.push_back(std::this_thread::get_id());
    });
  }
}

}  // namespace vsl::sdk
