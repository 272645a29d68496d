// A byte stream under one NBD connection: a socket (plain, or TLS after STARTTLS) or, for
// tests and the fuzz target, memory.
//
// Threads: after the handshake one thread reads and another writes at the same time
// (GnuTLS allows one sender and one receiver per session). Shutdown may be called from any
// thread and makes blocked and later calls fail.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "vsl/core/status.h"
#include "vsl/nbd/tls.h"

namespace vsl::nbd {

class Transport {
 public:
  virtual ~Transport() = default;
  // All `n` bytes, or false (end of stream, error, timeout).
  virtual bool Read(void* buf, std::size_t n) = 0;
  // Never blocks (reader thread): true when a Read would find bytes at once (buffered, or
  // waiting on the stream, or the stream has ended). A reader that expects its next
  // request within microseconds polls this before it sleeps in Read. Default: true (no
  // way to tell; the caller just reads).
  virtual bool Ready() { return true; }
  // All of every buffer, or false.
  virtual bool Write(const iovec* iov, int count) = 0;
  // Never blocks: writes what the stream takes now, from the front of the buffers, and
  // returns that many bytes (0 when it would block); -1 when this transport cannot try
  // (TLS, memory, failed): the caller then writes with Write. A thread that must not wait
  // on a peer (an engine) sends this way. Default: -1.
  virtual ssize_t TryWrite(const iovec* iov, int count) {
    (void)iov;
    (void)count;
    return -1;
  }
  // A descriptor that polls readable when Read would find bytes, for a reader that waits
  // on it with others (an engine serving several connections, RealClock::FdSource);
  // -1 when there is none (TLS, memory): such a stream is read by a thread of its own.
  virtual int PollFd() const { return -1; }
  // Never blocks (one reader at a time, like Read): reads up to `n` bytes of what the
  // stream has now. Bytes read (> 0), 0 when there are none yet, -1 at the end of the
  // stream or on an error (then every later call is -1). Only where PollFd() >= 0.
  virtual ssize_t TryRead(void* buf, std::size_t n) {
    (void)buf;
    (void)n;
    return -1;
  }
  // Bytes read from the descriptor and not yet consumed (a poll of it does not show them).
  virtual bool Buffered() const { return false; }
  // Server side of a TLS handshake on the stream.
  virtual Status StartTls(const TlsContext& ctx) = 0;
  virtual bool tls() const = 0;
  // Seconds a Read may wait for data (0: for ever). The handshake is bounded; an idle
  // connection in transmission is not.
  virtual void SetReadTimeout(int seconds) = 0;
  virtual void Shutdown() = 0;
};

class SocketTransport : public Transport {
 public:
  explicit SocketTransport(int fd) : fd_(fd) {}
  ~SocketTransport() override;
  bool Read(void* buf, std::size_t n) override;
  bool Ready() override;
  bool Write(const iovec* iov, int count) override;
  ssize_t TryWrite(const iovec* iov, int count) override;
  int PollFd() const override { return session_ == nullptr ? fd_ : -1; }
  ssize_t TryRead(void* buf, std::size_t n) override;
  bool Buffered() const override { return rpos_ < rlen_; }
  Status StartTls(const TlsContext& ctx) override;
  bool tls() const override { return session_ != nullptr; }
  void SetReadTimeout(int seconds) override;
  void Shutdown() override;

 private:
  static constexpr std::size_t kReadBuffer = 64 * 1024;
  // One receive call: bytes read, or -1 (end, error, timeout).
  ssize_t Recv(uint8_t* p, std::size_t n);

  int fd_;
  void* session_ = nullptr;  // gnutls_session_t once TLS is up
  std::unique_ptr<uint8_t[]> rbuf_;  // read by the reader thread only
  std::size_t rpos_ = 0, rlen_ = 0;
  std::atomic<bool> failed_{false};  // set by either thread
};

// Reads from a fixed input; writes are collected (tests) or dropped.
class MemoryTransport : public Transport {
 public:
  MemoryTransport(const uint8_t* data, std::size_t size, bool keep_output)
      : in_(data, data + size), keep_(keep_output) {}
  bool Read(void* buf, std::size_t n) override;
  bool Write(const iovec* iov, int count) override;
  Status StartTls(const TlsContext&) override { return Status::NotSupported("no TLS over memory"); }
  bool tls() const override { return false; }
  void SetReadTimeout(int) override {}
  void Shutdown() override {}
  std::vector<uint8_t> output() const {
    std::lock_guard<std::mutex> l(mu_);
    return out_;
  }

 private:
  std::vector<uint8_t> in_;
  std::size_t pos_ = 0;
  bool keep_;
  mutable std::mutex mu_;
  std::vector<uint8_t> out_;
};

}  // namespace vsl::nbd
