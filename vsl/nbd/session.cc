#include "vsl/nbd/session.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "vsl/core/log.h"
#include "vsl/nbd/proto.h"

namespace vsl::nbd {
namespace {

constexpr uint32_t kMaxOptionBytes = 64 * 1024;    // longer options are refused
constexpr uint32_t kMaxSkipBytes = 1024 * 1024;    // a refused option up to this is skipped
constexpr uint32_t kMaxNameBytes = 4096;           // the protocol's own limit
constexpr uint32_t kMaxErrorText = 1024;           // message in a structured error reply

std::shared_ptr<spdlog::logger> Log() {
  static auto l = Logger("nbd");
  return l;
}

}  // namespace

uint32_t ErrorFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return kEINVAL;
    case StatusCode::kNoSpace: return kENOSPC;
    case StatusCode::kFailedPrecondition: return kEPERM;
    case StatusCode::kNotSupported: return kENOTSUP;
    default: return kEIO;
  }
}

struct Session::Request {
  uint16_t flags = 0;
  uint16_t type = 0;
  uint64_t handle = 0;
  uint64_t offset = 0;
  uint32_t length = 0;
  std::unique_ptr<uint8_t[]> buf;  // read data or write payload
  uint64_t buf_bytes = 0;          // buf's size: kept across reuse (Session::TakeRequest)
  uint64_t charged = 0;            // bytes counted against max_inflight_bytes
  uint32_t error = 0;
  std::string message;
  std::vector<BlockExport::Extent> extents;  // BLOCK_STATUS answer
  // The reply's headers, built by the writer (they live until the batch is sent).
  uint8_t head[28];
  uint8_t err[6];
  std::string text;
  std::vector<uint8_t> status;

  // A buffer of at least `n` bytes (one byte at least), reusing the one it has.
  uint8_t* Buffer(uint64_t n) {
    n = std::max<uint64_t>(n, 1);
    if (buf_bytes < n) {
      buf.reset(new uint8_t[n]);
      buf_bytes = n;
    }
    return buf.get();
  }
  // Back to a fresh request for the session's free list, keeping the vectors' storage and
  // a buffer of an ordinary request's size (a larger one is freed: an idle session keeps
  // at most max_inflight * kKeptBufferBytes).
  void Recycle() {
    std::unique_ptr<uint8_t[]> b = std::move(buf);
    const uint64_t bytes = buf_bytes;
    std::vector<BlockExport::Extent> ex = std::move(extents);
    std::vector<uint8_t> st = std::move(status);
    *this = Request();
    if (bytes <= kKeptBufferBytes) {
      buf = std::move(b);
      buf_bytes = bytes;
    }
    ex.clear();
    st.clear();
    extents = std::move(ex);
    status = std::move(st);
  }
};

Session::Request* Session::TakeRequest() {
  std::lock_guard<std::mutex> l(mu_);
  return free_requests_.Take();
}

Session::Session(std::unique_ptr<Transport> t, ExportCatalog& catalog, SessionOptions opts, std::string peer)
    : t_(std::move(t)),
      catalog_(catalog),
      opts_(std::move(opts)),
      peer_(std::move(peer)),
      free_requests_(opts_.max_inflight) {}

Session::~Session() {
  if (writer_.joinable()) {
    {
      std::lock_guard<std::mutex> l(mu_);
      writer_stop_ = true;
      writer_cv_.notify_one();
    }
    writer_.join();
  }
}

void Session::Stop() {
  stopping_ = true;
  t_->Shutdown();
  std::lock_guard<std::mutex> l(mu_);
  room_cv_.notify_all();  // a polled session's thread waits for the end there
}

void Session::Run() {
  t_->SetReadTimeout(opts_.handshake_timeout_s);
  if (Handshake() && !stopping_) {
    t_->SetReadTimeout(0);
    Log()->debug("{}: serving export '{}'", peer_, export_name_);
    Transmission();
  }
  t_->Shutdown();  // the peer sees the end now, not when the server reaps the session
  finished_ = true;
}

// ---------------------------------------------------------------- handshake

bool Session::SendOptReply(uint32_t opt, uint32_t type, const uint8_t* data, std::size_t len) {
  uint8_t h[20];
  Put64(h, kRepMagic);
  Put32(h + 8, opt);
  Put32(h + 12, type);
  Put32(h + 16, static_cast<uint32_t>(len));
  iovec iov[2] = {{h, sizeof h}, {const_cast<uint8_t*>(data), len}};
  return t_->Write(iov, len > 0 ? 2 : 1);
}

bool Session::SendOptError(uint32_t opt, uint32_t type, const std::string& msg) {
  Log()->debug("{}: option {} refused ({:#x}): {}", peer_, opt, type, msg);
  return SendOptReply(opt, type, reinterpret_cast<const uint8_t*>(msg.data()), msg.size());
}

uint16_t Session::TransmissionFlags() const {
  uint16_t f = kTxHasFlags | kTxSendFlush | kTxSendFua | kTxSendTrim | kTxSendWriteZeroes | kTxSendDf |
               kTxCanMultiConn | kTxSendCache | kTxSendFastZero;
  if (read_only_) f |= kTxReadOnly;
  return f;
}

bool Session::Handshake() {
  uint8_t hello[18];
  Put64(hello, kNbdMagic);
  Put64(hello + 8, kOptMagic);
  Put16(hello + 16, kFlagFixedNewstyle | kFlagNoZeroes);
  iovec iov{hello, sizeof hello};
  if (!t_->Write(&iov, 1)) return false;
  uint8_t cf[4];
  if (!t_->Read(cf, 4)) return false;
  const uint32_t client_flags = Get32(cf);
  if ((client_flags & ~(kClientFixedNewstyle | kClientNoZeroes)) != 0) {
    Log()->info("{}: unknown client flags {:#x}: closing", peer_, client_flags);
    return false;
  }
  fixed_ = (client_flags & kClientFixedNewstyle) != 0;
  no_zeroes_ = (client_flags & kClientNoZeroes) != 0;
  const bool tls_required = opts_.tls && opts_.tls->config().mode == TlsMode::kRequire;

  for (uint32_t n = 0; n < opts_.max_options && !stopping_; ++n) {
    uint8_t h[16];
    if (!t_->Read(h, sizeof h)) return false;
    if (Get64(h) != kOptMagic) {
      Log()->info("{}: bad option magic: closing", peer_);
      return false;
    }
    const uint32_t opt = Get32(h + 8);
    const uint32_t len = Get32(h + 12);
    if (len > kMaxOptionBytes) {
      if (opt == kOptExportName || len > kMaxSkipBytes) {
        Log()->info("{}: option {} of {} bytes is too long: closing", peer_, opt, len);
        return false;
      }
      std::vector<uint8_t> skip(len);
      if (!t_->Read(skip.data(), len)) return false;
      if (!SendOptError(opt, kRepErrTooBig, fmt::format("option of {} bytes: the limit is {}", len, kMaxOptionBytes))) {
        return false;
      }
      continue;
    }
    std::vector<uint8_t> data(len);
    if (len > 0 && !t_->Read(data.data(), len)) return false;

    if (tls_required && !t_->tls() && opt != kOptStartTls && opt != kOptAbort) {
      if (opt == kOptExportName) {
        Log()->info("{}: NBD_OPT_EXPORT_NAME without TLS on a TLS-only server: closing", peer_);
        return false;
      }
      if (opt == kOptGo || opt == kOptInfo) Log()->info("{}: refused: this server requires TLS", peer_);
      if (!SendOptError(opt, kRepErrTlsReqd, "this server requires TLS (NBD_OPT_STARTTLS)")) return false;
      continue;
    }
    switch (opt) {
      case kOptExportName:
        return HandleExportName(data);
      case kOptAbort:
        SendOptReply(opt, kRepAck, nullptr, 0);
        return false;
      case kOptList: {
        if (len != 0) {
          if (!SendOptError(opt, kRepErrInvalid, "NBD_OPT_LIST takes no data")) return false;
          break;
        }
        for (const ExportInfo& e : catalog_.List()) {
          std::vector<uint8_t> d(4 + e.name.size() + e.description.size());
          Put32(d.data(), static_cast<uint32_t>(e.name.size()));
          std::memcpy(d.data() + 4, e.name.data(), e.name.size());
          std::memcpy(d.data() + 4 + e.name.size(), e.description.data(), e.description.size());
          if (!SendOptReply(opt, kRepServer, d.data(), d.size())) return false;
        }
        if (!SendOptReply(opt, kRepAck, nullptr, 0)) return false;
        break;
      }
      case kOptStartTls: {
        if (len != 0) {
          if (!SendOptError(opt, kRepErrInvalid, "NBD_OPT_STARTTLS takes no data")) return false;
          break;
        }
        if (!opts_.tls || opts_.tls->config().mode == TlsMode::kOff) {
          if (!SendOptError(opt, kRepErrUnsup, "TLS is not configured on this server")) return false;
          break;
        }
        if (t_->tls()) {
          if (!SendOptError(opt, kRepErrInvalid, "TLS is already on")) return false;
          break;
        }
        if (!SendOptReply(opt, kRepAck, nullptr, 0)) return false;
        if (Status s = t_->StartTls(*opts_.tls); !s.ok()) {
          Log()->warn("{}: {}", peer_, s.ToString());
          return false;
        }
        structured_ = false;  // state negotiated before TLS is forgotten
        allocation_context_ = false;
        Log()->debug("{}: TLS established", peer_);
        break;
      }
      case kOptInfo:
      case kOptGo:
        if (!HandleInfo(opt, data)) return false;
        if (opt == kOptGo && exp_) return true;
        break;
      case kOptListMetaContext:
      case kOptSetMetaContext:
        if (!HandleMetaContext(opt, data)) return false;
        break;
      case kOptStructuredReply:
        if (len != 0) {
          if (!SendOptError(opt, kRepErrInvalid, "NBD_OPT_STRUCTURED_REPLY takes no data")) return false;
          break;
        }
        if (structured_) {
          if (!SendOptError(opt, kRepErrInvalid, "structured replies are already on")) return false;
          break;
        }
        structured_ = true;
        if (!SendOptReply(opt, kRepAck, nullptr, 0)) return false;
        break;
      default:
        if (!fixed_) return false;  // plain newstyle: the only answer is to close
        if (!SendOptError(opt, kRepErrUnsup, fmt::format("option {} is not supported", opt))) return false;
        break;
    }
  }
  if (!stopping_) Log()->info("{}: more than {} options: closing", peer_, opts_.max_options);
  return false;
}

bool Session::HandleExportName(const std::vector<uint8_t>& data) {
  const std::string name(data.begin(), data.end());
  if (data.size() > kMaxNameBytes) return false;
  auto e = catalog_.Open(name);
  if (!e.ok()) {
    Log()->info("{}: export '{}': {}: closing", peer_, name, e.status().message());
    return false;
  }
  exp_ = std::move(e).value();
  export_name_ = name;
  read_only_ = opts_.read_only;
  uint8_t r[10 + 124] = {};
  Put64(r, exp_->size_bytes());
  Put16(r + 8, TransmissionFlags());
  iovec iov{r, no_zeroes_ ? 10u : sizeof r};
  return t_->Write(&iov, 1);
}

// LIST / SET_META_CONTEXT: export name, then queries; "base:allocation" (or "base:", or
// no query for LIST) selects the one context served.
bool Session::HandleMetaContext(uint32_t opt, const std::vector<uint8_t>& data) {
  if (!structured_) return SendOptError(opt, kRepErrInvalid, "metadata contexts need structured replies");
  std::size_t p = 0;
  auto u32 = [&](uint32_t* v) {
    if (data.size() - p < 4) return false;
    *v = Get32(data.data() + p);
    p += 4;
    return true;
  };
  uint32_t name_len = 0, queries = 0;
  if (!u32(&name_len) || name_len > kMaxNameBytes || data.size() - p < name_len) {
    return SendOptError(opt, kRepErrInvalid, "export name length is invalid");
  }
  const std::string name(data.begin() + static_cast<std::ptrdiff_t>(p),
                         data.begin() + static_cast<std::ptrdiff_t>(p + name_len));
  p += name_len;
  if (!u32(&queries)) return SendOptError(opt, kRepErrInvalid, "query count missing");
  bool match = opt == kOptListMetaContext && queries == 0;
  for (uint32_t i = 0; i < queries; ++i) {
    uint32_t qlen = 0;
    if (!u32(&qlen) || data.size() - p < qlen) return SendOptError(opt, kRepErrInvalid, "query length is invalid");
    const std::string q(data.begin() + static_cast<std::ptrdiff_t>(p),
                        data.begin() + static_cast<std::ptrdiff_t>(p + qlen));
    p += qlen;
    match |= q == kContextAllocation || (opt == kOptListMetaContext && q == "base:");
  }
  if (p != data.size()) return SendOptError(opt, kRepErrInvalid, "trailing bytes after the queries");
  if (auto e = catalog_.Open(name); !e.ok()) {
    return SendOptError(opt, kRepErrUnknown, fmt::format("export '{}': {}", name, e.status().message()));
  }
  if (opt == kOptSetMetaContext) allocation_context_ = match;
  if (match) {
    const std::string ctx = kContextAllocation;
    std::vector<uint8_t> d(4 + ctx.size());
    Put32(d.data(), kContextAllocationId);
    std::memcpy(d.data() + 4, ctx.data(), ctx.size());
    if (!SendOptReply(opt, kRepMetaContext, d.data(), d.size())) return false;
  }
  return SendOptReply(opt, kRepAck, nullptr, 0);
}

bool Session::HandleInfo(uint32_t opt, const std::vector<uint8_t>& data) {
  if (data.size() < 6) return SendOptError(opt, kRepErrInvalid, "option data too short");
  const uint32_t name_len = Get32(data.data());
  if (name_len > kMaxNameBytes || data.size() < 6ull + name_len) {
    return SendOptError(opt, kRepErrInvalid, "export name length is invalid");
  }
  const std::string name(data.begin() + 4, data.begin() + 4 + name_len);
  const uint16_t nreq = Get16(data.data() + 4 + name_len);
  if (data.size() != 6ull + name_len + 2ull * nreq) {
    return SendOptError(opt, kRepErrInvalid, "information request count does not match the option length");
  }
  bool want_name = false, want_desc = false;
  for (uint16_t i = 0; i < nreq; ++i) {
    const uint16_t type = Get16(data.data() + 6 + name_len + 2 * i);
    want_name |= type == kInfoName;
    want_desc |= type == kInfoDescription;
  }
  auto e = catalog_.Open(name);
  if (!e.ok()) {
    const std::string msg = fmt::format("export '{}': {}", name, e.status().message());
    Log()->info("{}: {}", peer_, msg);
    return SendOptError(opt, kRepErrUnknown, msg);
  }
  std::shared_ptr<BlockExport> exp = std::move(e).value();
  read_only_ = opts_.read_only;
  uint8_t ex[12];
  Put16(ex, kInfoExport);
  Put64(ex + 2, exp->size_bytes());
  Put16(ex + 10, TransmissionFlags());
  if (!SendOptReply(opt, kRepInfo, ex, sizeof ex)) return false;
  std::string canonical = name;  // "" is the default export: the first listed
  std::string desc;
  for (const ExportInfo& i : catalog_.List()) {
    if (name.empty() || i.name == name) {
      canonical = i.name;
      desc = i.description;
      break;
    }
  }
  if (want_name) {
    std::vector<uint8_t> d(2 + canonical.size());
    Put16(d.data(), kInfoName);
    std::memcpy(d.data() + 2, canonical.data(), canonical.size());
    if (!SendOptReply(opt, kRepInfo, d.data(), d.size())) return false;
  }
  if (want_desc) {
    std::vector<uint8_t> d(2 + desc.size());
    Put16(d.data(), kInfoDescription);
    std::memcpy(d.data() + 2, desc.data(), desc.size());
    if (!SendOptReply(opt, kRepInfo, d.data(), d.size())) return false;
  }
  // Sent whether asked or not: requests that ignore the minimum get EINVAL.
  uint8_t bs[14];
  Put16(bs, kInfoBlockSize);
  Put32(bs + 2, exp->block_bytes());
  Put32(bs + 6, std::max<uint32_t>(4096, exp->block_bytes()));
  Put32(bs + 10, opts_.max_payload);
  if (!SendOptReply(opt, kRepInfo, bs, sizeof bs)) return false;
  if (!SendOptReply(opt, kRepAck, nullptr, 0)) return false;
  if (opt == kOptGo) {
    exp_ = std::move(exp);
    export_name_ = canonical;
  }
  return true;
}

// ---------------------------------------------------------------- transmission

void Session::Transmission() {
  reader_id_ = std::this_thread::get_id();
  writer_ = std::thread([this] { WriterLoop(); });
  for (bool threaded = !TransmissionPolled(); threaded;) {
    uint8_t h[kRequestBytes];
    // Sleeps in the read only when the spin saw nothing (or is spent).
    // Only while the reader serves its requests itself (inline on an idle engine): when
    // they complete on the engine's thread, that thread is awake for them and another
    // spinner would only take its core.
    const bool blocked = !t_->Ready() && !(inline_last_ && idle_spin_.Spin([this] { return t_->Ready(); }));
    const auto t0 = blocked ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point();
    if (!t_->Read(h, sizeof h)) break;
    if (blocked) {
      idle_spin_.NoteBlocked(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count());
    }
    Request* r = NewRequest(h);
    if (r == nullptr) break;
    const bool go_on = Dispatch(r);
    inline_last_ = !local_replies_.empty();
    if (inline_last_) SendReplies(local_replies_, local_iov_);
    if (!go_on) break;
  }
  // Every accepted request is answered (or dropped by a failed writer) before returning.
  std::unique_lock<std::mutex> l(mu_);
  reader_waiting_ = true;
  room_cv_.wait(l, [this] { return inflight_ == 0; });
  writer_stop_ = true;
  writer_cv_.notify_one();
  l.unlock();
  writer_.join();
}

// ---------------------------------------------------------------- polled transmission

class Session::Source final : public RealClock::FdSource {
 public:
  explicit Source(Session* s) : s_(s) {}
  int fd() const override { return s_->t_->PollFd(); }
  bool Wanted() const override {
    return !s_->poll_ended_.load(std::memory_order_relaxed) && !s_->poll_paused_.load(std::memory_order_relaxed);
  }
  // A request whose header is read and that waits for room is input in hand too.
  bool Buffered() const override {
    return s_->t_->Buffered() || (s_->poll_cur_ != nullptr && !s_->poll_cur_admitted_);
  }
  bool Take() override { return s_->TakePolled(); }
  void Flush() override { s_->FlushPolled(); }

 private:
  Session* const s_;
};

bool Session::TransmissionPolled() {
  Engine* e = exp_->engine();
  if (!opts_.polled || e == nullptr || e->clock().is_virtual() || t_->PollFd() < 0) return false;
  poll_clock_ = &static_cast<RealClock&>(e->clock());
  source_ = std::make_unique<Source>(this);
  if (!poll_clock_->AddFdSource(source_.get())) {
    poll_clock_ = nullptr;
    return false;
  }
  Log()->debug("{}: read by {}'s engine", peer_, e->name());
  {
    std::unique_lock<std::mutex> l(mu_);
    room_cv_.wait(l, [this] { return poll_end_seen_ || stopping_.load(); });
  }
  poll_clock_->RemoveFdSource(source_.get());
  // The engine's thread reads the connection and sends batches no more: what it left is
  // this thread's. A write whose payload was coming fails as in a threaded session.
  if (Request* r = poll_cur_; r != nullptr) {
    poll_cur_ = nullptr;
    if (poll_cur_admitted_) {
      Fail(r, kEIO, "connection ended in the write payload");
    } else {
      std::lock_guard<std::mutex> l(mu_);
      free_requests_.Give(r);
    }
  }
  std::deque<Request*> left;
  {
    std::lock_guard<std::mutex> l(poll_mu_);
    poll_detached_ = true;
    left.swap(poll_replies_);
  }
  SendReplies(left, local_iov_);
  SendReplies(local_replies_, local_iov_);
  return true;
}

bool Session::TakePolled() {
  bool any = false;
  while (!poll_ended_.load(std::memory_order_relaxed)) {
    if (poll_cur_ == nullptr) {
      while (poll_head_got_ < kRequestBytes) {
        const ssize_t n = t_->TryRead(poll_head_ + poll_head_got_, kRequestBytes - poll_head_got_);
        if (n == 0) return any;
        if (n < 0) {
          EndPolled();
          return any;
        }
        poll_head_got_ += static_cast<std::size_t>(n);
      }
      poll_head_got_ = 0;
      const uint8_t* h = poll_head_;
      Request* r = NewRequest(h);
      if (r == nullptr) {
        EndPolled();
        return any;
      }
      Charge(r);
      poll_cur_ = r;
      poll_cur_admitted_ = false;
      poll_payload_got_ = 0;
    }
    Request* r = poll_cur_;
    if (!poll_cur_admitted_) {
      // As the threaded reader's wait, without waiting: the engine reads this connection
      // no more until a reply makes room (ReleaseLocked wakes it).
      std::lock_guard<std::mutex> l(mu_);
      if (inflight_ != 0 && (inflight_ >= opts_.max_inflight ||
                             inflight_bytes_ + r->charged > opts_.max_inflight_bytes)) {
        poll_paused_.store(true, std::memory_order_relaxed);
        ++stats_.polled_pauses;
        return any;
      }
      ++inflight_;
      inflight_bytes_ += r->charged;
      poll_cur_admitted_ = true;
    }
    any = true;
    if (r->type == kCmdWrite) {
      if (poll_payload_got_ == 0 && FailOversizeWrite(r)) {
        poll_cur_ = nullptr;
        EndPolled();
        return any;
      }
      r->Buffer(r->length);
      while (poll_payload_got_ < r->length) {
        const ssize_t n = t_->TryRead(r->buf.get() + poll_payload_got_, r->length - poll_payload_got_);
        if (n == 0) return any;
        if (n < 0) {
          poll_cur_ = nullptr;
          Fail(r, kEIO, "connection ended in the write payload");
          EndPolled();
          return any;
        }
        poll_payload_got_ += static_cast<uint64_t>(n);
      }
    }
    poll_cur_ = nullptr;
    if (!Execute(r)) {
      EndPolled();
      return any;
    }
  }
  return any;
}

void Session::FlushPolled() {
  {
    std::lock_guard<std::mutex> l(poll_mu_);
    if (poll_replies_.empty()) return;
    poll_batch_.swap(poll_replies_);
  }
  // Every reply of the run in one gather write (IOV_MAX apart), without waiting: what the
  // socket does not take goes to the writer thread, behind the tail kept in unsent_.
  std::size_t done = 0;
  bool partial = false;
  {
    std::unique_lock<std::mutex> s(send_mu_, std::try_to_lock);
    while (s.owns_lock() && unsent_.empty() && done < poll_batch_.size()) {
      poll_iov_.clear();
      std::size_t n = done;
      while (n < poll_batch_.size() && poll_iov_.size() + 3 <= 1024) AppendReply(poll_batch_[n++], &poll_iov_);
      const ssize_t sent = t_->TryWrite(poll_iov_.data(), static_cast<int>(poll_iov_.size()));
      if (sent <= 0) break;
      ++stats_.polled_batches;
      KeepUnsent(poll_iov_, static_cast<std::size_t>(sent));
      partial = !unsent_.empty();
      if (partial) ++stats_.replies_split;
      done = n;
    }
  }
  uint64_t bytes = 0;
  for (std::size_t i = 0; i < done; ++i) bytes += poll_batch_[i]->charged;
  RealClock* wake = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    for (std::size_t i = 0; i < done; ++i) free_requests_.Give(poll_batch_[i]);
    for (std::size_t i = done; i < poll_batch_.size(); ++i) replies_.push_back(poll_batch_[i]);
    if (partial) flush_unsent_ = true;
    if ((partial || done < poll_batch_.size()) && writer_waiting_) writer_cv_.notify_one();
    if (done != 0 && ReleaseLocked(static_cast<uint32_t>(done), bytes)) wake = poll_clock_;
  }
  poll_batch_.clear();
  if (wake != nullptr) wake->WakeFdSources();
}

void Session::EndPolled() {
  poll_ended_.store(true, std::memory_order_relaxed);
  std::lock_guard<std::mutex> l(mu_);
  poll_end_seen_ = true;
  room_cv_.notify_all();
}

Session::Request* Session::NewRequest(const uint8_t* h) {
  if (Get32(h) != kRequestMagic) {
    Log()->info("{}: bad request magic {:#x}: closing", peer_, Get32(h));
    return nullptr;
  }
  if (Get16(h + 6) == kCmdDisc) return nullptr;
  Request* r = TakeRequest();
  r->flags = Get16(h + 4);
  r->type = Get16(h + 6);
  r->handle = Get64(h + 8);
  r->offset = Get64(h + 16);
  r->length = Get32(h + 24);
  ++stats_.requests;
  return r;
}

void Session::Fail(Request* r, uint32_t error, std::string msg) {
  r->error = error;
  r->message = std::move(msg);
  Complete(r, Status::Ok());
}

void Session::Charge(Request* r) const {
  const uint64_t buffer = (r->type == kCmdWrite || r->type == kCmdRead) ? r->length : 0;
  r->charged = buffer > opts_.max_payload ? 0 : buffer;  // an oversize one is not buffered
}

bool Session::FailOversizeWrite(Request* r) {
  if (r->type != kCmdWrite || r->length <= opts_.max_payload) return false;
  Fail(r, structured_ ? kEOVERFLOW : kEINVAL,
       fmt::format("write of {} bytes: the maximum is {}", r->length, opts_.max_payload));
  Log()->info("{}: write payload of {} bytes exceeds {}: closing", peer_, r->length, opts_.max_payload);
  return true;
}

bool Session::Dispatch(Request* r) {
  // Admission: wait until this request fits.
  Charge(r);
  {
    std::unique_lock<std::mutex> l(mu_);
    reader_waiting_ = true;
    room_cv_.wait(l, [&] {
      return inflight_ == 0 || (inflight_ < opts_.max_inflight && inflight_bytes_ + r->charged <= opts_.max_inflight_bytes);
    });
    reader_waiting_ = false;
    ++inflight_;
    inflight_bytes_ += r->charged;
  }
  if (r->type == kCmdWrite) {
    if (FailOversizeWrite(r)) return false;
    r->Buffer(r->length);
    if (r->length > 0 && !t_->Read(r->buf.get(), r->length)) {
      Fail(r, kEIO, "connection ended in the write payload");
      return false;
    }
  }
  return Execute(r);
}

bool Session::Execute(Request* r) {
  const uint64_t size = exp_->size_bytes();
  const uint32_t block = exp_->block_bytes();
  const bool in_range = r->offset <= size && r->length <= size - r->offset;
  const bool aligned = r->offset % block == 0 && r->length % block == 0;
  const uint16_t known = kCmdFlagFua | kCmdFlagNoHole | kCmdFlagDf | kCmdFlagReqOne | kCmdFlagFastZero;
  if ((r->flags & ~known) != 0) {
    Fail(r, kEINVAL, fmt::format("unknown command flags {:#x}", r->flags & ~known));
    return true;
  }
  const bool is_write = r->type == kCmdWrite || r->type == kCmdTrim || r->type == kCmdWriteZeroes;
  if (is_write && read_only_) {
    Fail(r, kEPERM, "the export is read-only");
    return true;
  }
  auto range_error = [&](const char* what) {
    if (!in_range) {
      Fail(r, kEINVAL, fmt::format("{} of {} bytes at {} is outside the export's {} bytes", what, r->length,
                                   r->offset, size));
    } else if (!aligned) {
      Fail(r, kEINVAL, fmt::format("{} of {} bytes at {} is not aligned to the {}-byte block", what, r->length,
                                   r->offset, block));
    } else if (r->length == 0) {
      Fail(r, kEINVAL, fmt::format("{} of zero bytes", what));
    } else {
      return false;
    }
    return true;
  };
  const bool fua = (r->flags & kCmdFlagFua) != 0 || opts_.write_through;
  switch (r->type) {
    case kCmdRead: {
      if (r->length > opts_.max_payload) {
        Fail(r, structured_ ? kEOVERFLOW : kEINVAL,
             fmt::format("read of {} bytes: the maximum is {}", r->length, opts_.max_payload));
        return true;
      }
      if ((r->flags & kCmdFlagDf) != 0 && !structured_) {
        Fail(r, kEINVAL, "NBD_CMD_FLAG_DF without structured replies");
        return true;
      }
      if (range_error("read")) return true;
      r->Buffer(r->length);
      exp_->Read(r->offset, r->length, r->buf.get(), [this, r](Status s) { Complete(r, s); });
      return true;
    }
    case kCmdWrite:
      if (range_error("write")) return true;
      exp_->Write(r->offset, r->length, r->buf.get(), fua, [this, r](Status s) { Complete(r, s); });
      return true;
    case kCmdFlush:
      exp_->Flush([this, r](Status s) { Complete(r, s); });
      return true;
    case kCmdTrim: {
      if (!in_range) {
        range_error("trim");
        return true;
      }
      // Trim is advisory: only the whole blocks inside the range are trimmed.
      const uint64_t first = (r->offset + block - 1) / block * block;
      const uint64_t end = (r->offset + r->length) / block * block;
      if (end <= first) {
        Complete(r, Status::Ok());
        return true;
      }
      exp_->Trim(first, end - first, [this, r, fua](Status s) {
        if (!s.ok() || !fua) return Complete(r, s);
        exp_->Flush([this, r](Status f) { Complete(r, f); });
      });
      return true;
    }
    case kCmdWriteZeroes: {
      if (range_error("write-zeroes")) return true;
      if ((r->flags & kCmdFlagNoHole) == 0) {
        // A trimmed block reads as zeroes, durably: the fast way to zero.
        exp_->Trim(r->offset, r->length, [this, r, fua](Status s) {
          if (!s.ok() || !fua) return Complete(r, s);
          exp_->Flush([this, r](Status f) { Complete(r, f); });
        });
        return true;
      }
      if ((r->flags & kCmdFlagFastZero) != 0) {
        Fail(r, kENOTSUP, "zeroes without a hole are written, which is not faster than a write");
        return true;
      }
      WriteZeroes(*exp_, r->offset, r->length, fua, [this, r](Status s) { Complete(r, s); });
      return true;
    }
    case kCmdCache:
      // Nothing to warm: every read goes to flash through the map (no host read cache).
      if (!in_range) {
        range_error("cache");
        return true;
      }
      Complete(r, Status::Ok());
      return true;
    case kCmdBlockStatus: {
      if (!allocation_context_) {
        Fail(r, kEINVAL, "no metadata context was negotiated");
        return true;
      }
      if (range_error("block status")) return true;
      // At most 64 MiB per answer: a client asks again for the rest.
      const uint64_t len = std::min<uint64_t>(r->length, uint64_t{64} << 20);
      exp_->Extents(r->offset, len, [this, r](Status s, std::vector<BlockExport::Extent> ex) {
        r->extents = std::move(ex);
        if ((r->flags & kCmdFlagReqOne) != 0 && r->extents.size() > 1) r->extents.resize(1);
        Complete(r, s);
      });
      return true;
    }
    default:
      Fail(r, kEINVAL, fmt::format("unknown command type {}", r->type));
      return true;
  }
}

void Session::Complete(Request* r, Status s) {
  if (!s.ok() && r->error == 0) {
    r->error = ErrorFor(s);
    r->message = std::string(s.message());
  }
  if (r->error != 0) {
    ++stats_.errors;
    Log()->debug("{}: request type {} at {} +{}: error {}: {}", peer_, r->type, r->offset, r->length, r->error,
                 r->message);
  } else if (r->type == kCmdRead) {
    stats_.bytes_read += r->length;
  } else if (r->type == kCmdWrite) {
    stats_.bytes_written += r->length;
  }
  if (poll_clock_ != nullptr && poll_clock_->OnOwnerThread()) {
    std::lock_guard<std::mutex> l(poll_mu_);
    if (!poll_detached_) {
      poll_replies_.push_back(r);  // sent with the rest of the engine's run (FlushPolled)
      return;
    }
  }
  if (std::this_thread::get_id() == reader_id_) {
    local_replies_.push_back(r);  // sent by the reader once the export call returns
    return;
  }
  if (SendNow(r)) return;
  // Notified under the lock: once it is released this thread (an engine) touches the
  // session no more, and the session may end as soon as the writer has sent the reply.
  std::lock_guard<std::mutex> l(mu_);
  replies_.push_back(r);
  if (writer_waiting_) writer_cv_.notify_one();
}

bool Session::SendNow(Request* r) {
  std::unique_lock<std::mutex> s(send_mu_, std::try_to_lock);
  if (!s.owns_lock() || !unsent_.empty()) return false;
  direct_iov_.clear();
  AppendReply(r, &direct_iov_);
  const ssize_t sent = t_->TryWrite(direct_iov_.data(), static_cast<int>(direct_iov_.size()));
  if (sent <= 0) return false;  // nothing left: the writer sends it (or meets the error)
  // What the socket did not take waits in unsent_, ahead of every later reply.
  KeepUnsent(direct_iov_, static_cast<std::size_t>(sent));
  const bool partial = !unsent_.empty();
  s.unlock();
  ++stats_.replies_direct;
  if (partial) ++stats_.replies_split;
  const uint64_t charged = r->charged;
  // Under the lock, last: once it is released this thread touches the session no more.
  RealClock* wake = nullptr;
  {
    std::lock_guard<std::mutex> l(mu_);
    free_requests_.Give(r);
    if (partial) {
      flush_unsent_ = true;
      if (writer_waiting_) writer_cv_.notify_one();
    }
    if (ReleaseLocked(1, charged)) wake = poll_clock_;
  }
  if (wake != nullptr) wake->WakeFdSources();  // the clock outlives every session
  return true;
}

void Session::KeepUnsent(const std::vector<iovec>& iov, std::size_t sent) {
  for (const iovec& v : iov) {
    const auto* p = static_cast<const uint8_t*>(v.iov_base);
    const std::size_t skip = std::min(sent, v.iov_len);
    sent -= skip;
    unsent_.insert(unsent_.end(), p + skip, p + v.iov_len);
  }
}

bool Session::ReleaseLocked(uint32_t n, uint64_t bytes) {
  inflight_ -= n;
  inflight_bytes_ -= bytes;
  if (reader_waiting_) room_cv_.notify_all();
  if (!poll_paused_.load(std::memory_order_relaxed)) return false;
  poll_paused_.store(false, std::memory_order_relaxed);
  return true;
}

void Session::FlushUnsent() {
  if (unsent_.empty()) return;
  const iovec v{unsent_.data(), unsent_.size()};
  t_->Write(&v, 1);
  unsent_.clear();
}

void Session::WriterLoop() {
  std::deque<Request*> batch;
  std::vector<iovec> iov;
  for (;;) {
    {
      std::unique_lock<std::mutex> l(mu_);
      writer_waiting_ = true;
      writer_cv_.wait(l, [this] { return !replies_.empty() || flush_unsent_ || writer_stop_; });
      writer_waiting_ = false;
      const bool flush = flush_unsent_;
      flush_unsent_ = false;
      if (replies_.empty() && !flush) return;
      batch.swap(replies_);
    }
    if (batch.empty()) {
      std::lock_guard<std::mutex> l(send_mu_);
      FlushUnsent();
    } else {
      SendReplies(batch, iov);
    }
  }
}

void Session::SendReplies(std::deque<Request*>& batch, std::vector<iovec>& iov) {
  // Every reply ready now goes out in one gather write (or a few, IOV_MAX apart).
  while (!batch.empty()) {
    iov.clear();
    std::size_t n = 0;
    while (n < batch.size() && iov.size() + 3 <= 1024) AppendReply(batch[n++], &iov);
    {
      std::lock_guard<std::mutex> l(send_mu_);
      FlushUnsent();
      t_->Write(iov.data(), static_cast<int>(iov.size()));
    }
    uint64_t bytes = 0;
    for (std::size_t i = 0; i < n; ++i) bytes += batch[i]->charged;
    RealClock* wake = nullptr;
    {
      std::lock_guard<std::mutex> l(mu_);
      for (std::size_t i = 0; i < n; ++i) free_requests_.Give(batch[i]);
      batch.erase(batch.begin(), batch.begin() + static_cast<std::ptrdiff_t>(n));
      if (ReleaseLocked(static_cast<uint32_t>(n), bytes)) wake = poll_clock_;
    }
    if (wake != nullptr) wake->WakeFdSources();
  }
}

void Session::AppendReply(Request* r, std::vector<iovec>* iov) {
  const bool data = r->type == kCmdRead && r->error == 0;
  uint8_t* h = r->head;
  if (!structured_) {
    Put32(h, kSimpleReplyMagic);
    Put32(h + 4, r->error);
    Put64(h + 8, r->handle);
    iov->push_back({h, 16});
    if (data) iov->push_back({r->buf.get(), r->length});
    return;
  }
  Put32(h, kStructuredReplyMagic);
  Put16(h + 4, kReplyFlagDone);
  Put64(h + 8, r->handle);
  if (data) {
    Put16(h + 6, kReplyTypeOffsetData);
    Put32(h + 16, 8 + r->length);
    Put64(h + 20, r->offset);
    iov->push_back({h, 28});
    iov->push_back({r->buf.get(), r->length});
  } else if (r->error == 0 && r->type == kCmdBlockStatus) {
    r->status.resize(4 + 8 * r->extents.size());
    uint8_t* d = r->status.data();
    Put32(d, kContextAllocationId);
    for (std::size_t i = 0; i < r->extents.size(); ++i) {
      Put32(d + 4 + 8 * i, static_cast<uint32_t>(r->extents[i].bytes));
      Put32(d + 8 + 8 * i, r->extents[i].mapped ? 0 : kStateHole | kStateZero);
    }
    Put16(h + 6, kReplyTypeBlockStatus);
    Put32(h + 16, static_cast<uint32_t>(r->status.size()));
    iov->push_back({h, 20});
    iov->push_back({r->status.data(), r->status.size()});
  } else if (r->error == 0) {
    Put16(h + 6, kReplyTypeNone);
    Put32(h + 16, 0);
    iov->push_back({h, 20});
  } else {
    r->text = r->message.substr(0, kMaxErrorText);
    Put32(r->err, r->error);
    Put16(r->err + 4, static_cast<uint16_t>(r->text.size()));
    Put16(h + 6, kReplyTypeError);
    Put32(h + 16, static_cast<uint32_t>(6 + r->text.size()));
    iov->push_back({h, 20});
    iov->push_back({r->err, 6});
    if (!r->text.empty()) iov->push_back({r->text.data(), r->text.size()});
  }
}

}  // namespace vsl::nbd
