#include "vsl/nbd/transport.h"

#include <gnutls/gnutls.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>

namespace vsl::nbd {

SocketTransport::~SocketTransport() {
  if (session_ != nullptr) TlsContext::Close(session_, !failed_);
  ::close(fd_);
}

ssize_t SocketTransport::Recv(uint8_t* p, std::size_t n) {
  for (;;) {
    ssize_t r;
    if (session_ != nullptr) {
      r = gnutls_record_recv(static_cast<gnutls_session_t>(session_), p, n);
      if (r == GNUTLS_E_INTERRUPTED) continue;
      if (r == GNUTLS_E_AGAIN) return -1;  // receive timeout
    } else {
      r = ::recv(fd_, p, n, 0);
      if (r < 0 && errno == EINTR) continue;
    }
    return r > 0 ? r : -1;
  }
}

bool SocketTransport::Ready() {
  if (rpos_ < rlen_ || failed_.load(std::memory_order_relaxed)) return true;
  if (session_ != nullptr &&
      gnutls_record_check_pending(static_cast<gnutls_session_t>(session_)) > 0) {
    return true;
  }
  char b;
  const ssize_t r = ::recv(fd_, &b, 1, MSG_PEEK | MSG_DONTWAIT);
  return r != 0 ? (r > 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) : true;
}

bool SocketTransport::Read(void* buf, std::size_t n) {
  auto* p = static_cast<uint8_t*>(buf);
  while (n > 0) {
    if (rpos_ < rlen_) {
      const std::size_t take = std::min(n, rlen_ - rpos_);
      std::memcpy(p, rbuf_.get() + rpos_, take);
      rpos_ += take;
      p += take;
      n -= take;
      continue;
    }
    // Large reads (write payloads) go straight to their buffer; small ones (headers) come
    // from a buffer filled by one call, so a burst of requests costs few system calls.
    const bool direct = n >= kReadBuffer;
    if (!direct && !rbuf_) rbuf_.reset(new uint8_t[kReadBuffer]);
    const ssize_t r = direct ? Recv(p, n) : Recv(rbuf_.get(), kReadBuffer);
    if (r <= 0) return failed_ = true, false;
    if (direct) {
      p += r;
      n -= static_cast<std::size_t>(r);
    } else {
      rpos_ = 0;
      rlen_ = static_cast<std::size_t>(r);
    }
  }
  return true;
}

ssize_t SocketTransport::TryRead(void* buf, std::size_t n) {
  if (session_ != nullptr) return -1;
  if (rpos_ < rlen_) {
    const std::size_t take = std::min(n, rlen_ - rpos_);
    std::memcpy(buf, rbuf_.get() + rpos_, take);
    rpos_ += take;
    return static_cast<ssize_t>(take);
  }
  if (failed_.load(std::memory_order_relaxed)) return -1;
  // As Read: large reads straight to their buffer, small ones through the buffer.
  const bool direct = n >= kReadBuffer;
  if (!direct && !rbuf_) rbuf_.reset(new uint8_t[kReadBuffer]);
  ssize_t r;
  do {
    r = ::recv(fd_, direct ? buf : rbuf_.get(), direct ? n : kReadBuffer, MSG_DONTWAIT);
  } while (r < 0 && errno == EINTR);
  if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
  if (r <= 0) {
    failed_ = true;
    return -1;
  }
  if (direct) return r;
  rpos_ = 0;
  rlen_ = static_cast<std::size_t>(r);
  const std::size_t take = std::min(n, rlen_);
  std::memcpy(buf, rbuf_.get(), take);
  rpos_ = take;
  return static_cast<ssize_t>(take);
}

bool SocketTransport::Write(const iovec* iov, int count) {
  if (session_ != nullptr) {
    auto s = static_cast<gnutls_session_t>(session_);
    gnutls_record_cork(s);
    for (int i = 0; i < count; ++i) {
      const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
      std::size_t n = iov[i].iov_len;
      while (n > 0) {
        ssize_t r = gnutls_record_send(s, p, n);
        if (r == GNUTLS_E_INTERRUPTED || r == GNUTLS_E_AGAIN) continue;
        if (r < 0) return failed_ = true, false;
        p += r;
        n -= static_cast<std::size_t>(r);
      }
    }
    int r;
    do {
      r = gnutls_record_uncork(s, GNUTLS_RECORD_WAIT);
    } while (r == GNUTLS_E_INTERRUPTED || r == GNUTLS_E_AGAIN);
    if (r < 0) return failed_ = true, false;
    return true;
  }
  // Sent from the caller's list while whole; copied only after a partial send (the copy
  // is advanced past what went out), so a reply costs no allocation.
  std::size_t total = 0;
  for (int k = 0; k < count; ++k) total += iov[k].iov_len;
  if (total == 0) return true;
  for (;;) {
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = static_cast<std::size_t>(count);
    const ssize_t r = ::sendmsg(fd_, &m, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return failed_ = true, false;
    if (static_cast<std::size_t>(r) == total) return true;
    total = static_cast<std::size_t>(r);  // what went out: skipped below
    break;
  }
  std::vector<iovec> v(iov, iov + count);
  std::size_t i = 0;
  {
    std::size_t left = total;
    while (i < v.size() && left >= v[i].iov_len) left -= v[i++].iov_len;
    if (i < v.size()) {
      v[i].iov_base = static_cast<uint8_t*>(v[i].iov_base) + left;
      v[i].iov_len -= left;
    }
  }
  while (i < v.size()) {
    msghdr m{};
    m.msg_iov = v.data() + i;
    m.msg_iovlen = v.size() - i;
    ssize_t r = ::sendmsg(fd_, &m, MSG_NOSIGNAL);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return failed_ = true, false;
    auto left = static_cast<std::size_t>(r);
    while (i < v.size() && left >= v[i].iov_len) left -= v[i++].iov_len;
    if (i < v.size()) {
      v[i].iov_base = static_cast<uint8_t*>(v[i].iov_base) + left;
      v[i].iov_len -= left;
    }
  }
  return true;
}

ssize_t SocketTransport::TryWrite(const iovec* iov, int count) {
  // A TLS record cannot be sent in part without the stream waiting for the rest.
  if (session_ != nullptr || failed_.load(std::memory_order_relaxed)) return -1;
  msghdr m{};
  m.msg_iov = const_cast<iovec*>(iov);
  m.msg_iovlen = static_cast<std::size_t>(count);
  for (;;) {
    const ssize_t r = ::sendmsg(fd_, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (r >= 0) return r;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
  }
}

Status SocketTransport::StartTls(const TlsContext& ctx) {
  if (rpos_ < rlen_) {
    // The client sent bytes after STARTTLS before the handshake: they cannot be TLS.
    return Status::InvalidArgument("data after NBD_OPT_STARTTLS before the TLS handshake");
  }
  auto s = ctx.Handshake(fd_);
  if (!s.ok()) return s.status();
  session_ = *s;
  return Status::Ok();
}

void SocketTransport::SetReadTimeout(int seconds) {
  timeval tv{};
  tv.tv_sec = seconds;
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
}

void SocketTransport::Shutdown() { ::shutdown(fd_, SHUT_RDWR); }

bool MemoryTransport::Read(void* buf, std::size_t n) {
  if (in_.size() - pos_ < n) return false;
  std::memcpy(buf, in_.data() + pos_, n);
  pos_ += n;
  return true;
}

bool MemoryTransport::Write(const iovec* iov, int count) {
  if (!keep_) return true;
  std::lock_guard<std::mutex> l(mu_);
  for (int i = 0; i < count; ++i) {
    const auto* p = static_cast<const uint8_t*>(iov[i].iov_base);
    out_.insert(out_.end(), p, p + iov[i].iov_len);
  }
  return true;
}

}  // namespace vsl::nbd
